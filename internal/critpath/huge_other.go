//go:build !linux

package critpath

import "sync/atomic"

// hugeWords: elsewhere than Linux the index grows on the heap.
func hugeWords(*atomic.Int64) []uint64 { return nil }

// unmapWords: nothing was mapped.
func unmapWords([]uint64) {}
