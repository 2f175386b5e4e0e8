package critpath

import (
	"sync/atomic"
	"syscall"
	"unsafe"
)

// hugeWords is an empty slice over an anonymous mapping as large as the
// budget, in huge pages where the kernel gives them (a lookup in a large
// index is a random access: with 4 KiB pages most are a TLB miss too).
// The pages take memory only as they are written; a cleanup on the index
// unmaps them. Nil when mapping fails (the heap then).
func hugeWords(budget *atomic.Int64) []uint64 {
	if budget == nil {
		return nil
	}
	size := int(budget.Load())
	if size < 4<<20 {
		return nil
	}
	size = (size + 2<<20 - 1) &^ (2<<20 - 1)
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	syscall.Madvise(b, syscall.MADV_HUGEPAGE) // a hint: no error to act on
	w := unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), size/8)[:0]
	return w
}

// unmapWords releases a mapping of hugeWords (its full capacity).
func unmapWords(w []uint64) {
	if cap(w) == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w[:1]))), cap(w)*8)
	syscall.Munmap(b)
}
