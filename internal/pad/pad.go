// Package pad makes the small slices each analysis worker writes for
// every tuple (counters, per-window maxima) with a cache line free on
// either side. Allocated apart, a few bytes each, the workers' slices share
// cache lines, and two cores writing one line for every tuple pass it back
// and forth: on 100M records that false sharing cost 2.3 s of CPU in the
// capacity analysis's topology counts alone.
package pad

import "unsafe"

// line is a cache line, bytes.
const line = 64

// Slice makes a slice of n zero values whose backing array has a cache
// line of padding before and after it (its capacity is n: an append past
// it moves the slice, unpadded).
func Slice[T any](n int) []T {
	var z T
	p := max(1, (line+int(unsafe.Sizeof(z))-1)/max(int(unsafe.Sizeof(z)), 1))
	return make([]T, n+2*p)[p : p+n : p+n]
}
