package pad

import (
	"testing"
	"unsafe"
)

// The slice has its length and capacity, zero values, and a cache line's
// worth of its backing array on either side that nothing else uses.
func TestSlice(t *testing.T) {
	type opSeen struct {
		op   int32
		a, b int
	}
	for _, n := range []int{0, 1, 3, 100} {
		s := Slice[uint64](n)
		if len(s) != n || cap(s) != n {
			t.Fatalf("n %d: len %d cap %d", n, len(s), cap(s))
		}
		o := Slice[opSeen](n)
		if len(o) != n || cap(o) != n {
			t.Fatalf("n %d: len %d cap %d", n, len(o), cap(o))
		}
	}
	// Two slices made one after the other are at least a line apart.
	a, b := Slice[uint64](2), Slice[uint64](2)
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	d := pa - pb
	if pb > pa {
		d = pb - pa
	}
	if d < 2*line {
		t.Fatalf("two padded slices %d bytes apart", d)
	}
}
