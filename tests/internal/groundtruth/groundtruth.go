// Package groundtruth is what tests that play several nodes on one machine
// know exactly. Every network namespace reads the same hardware TSC; a
// node's counter is fake = floor(raw * q / 2^32) + off (tsc.Fake, set by
// CP_FAKE_TSC). So a value a node logged gives back the hardware TSC it was
// read at, to within one raw cycle, and any duration's true length is known
// exactly: the truth an analysis's strict bounds must hold.
package groundtruth

import (
	"fmt"
	"math/bits"

	"cloudprofiler/tsc"
)

// RawOf returns the hardware TSC values [lo, hi] that f maps to v: every raw
// with floor(raw*q/2^32) == v - off. For rates near 1 the range holds one or
// two values; for rates above 1 some v are never produced, and then hi is
// lo - 1 (v lies between raw values hi and lo).
func RawOf(f tsc.Fake, v uint64) (lo, hi uint64) {
	x := v - uint64(f.Offset) // floor(raw*q/2^32), two's complement like Apply
	// lo = ceil(x*2^32 / q), hi = ceil((x+1)*2^32 / q) - 1.
	ceilDiv := func(x uint64) uint64 {
		q, r := bits.Div64(x>>32, x<<32, f.RateQ32)
		if r != 0 {
			q++
		}
		return q
	}
	return ceilDiv(x), ceilDiv(x+1) - 1
}

// RawMid is the midpoint of RawOf, as a float (exact for values below 2^53).
func RawMid(f tsc.Fake, v uint64) float64 {
	lo, hi := RawOf(f, v)
	return float64(lo) + (float64(hi)-float64(lo))/2
}

// SlackCycles is the quantization slack of a check, in reference cycles:
// each end's raw TSC is known to within one cycle (RawOf), so a truth taken
// at the midpoints is off by at most about 1 cycle, plus float rounding of
// the analyzer's values. Three cycles (about 1 ns) covers it with room.
const SlackCycles = 3.0

// Cycles is the true length, in the reference node's cycles, from start
// logged on node from to end logged on node to.
func Cycles(fakes map[string]tsc.Fake, ref, from, to string, start, end uint64) (float64, error) {
	ff, ok1 := fakes[from]
	tf, ok2 := fakes[to]
	rf, ok3 := fakes[ref]
	if !ok1 || !ok2 || !ok3 {
		return 0, fmt.Errorf("unknown node %q, %q or %q", from, to, ref)
	}
	return (RawMid(tf, end) - RawMid(ff, start)) * rf.Rate(), nil
}
