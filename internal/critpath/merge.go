package critpath

import (
	"bufio"
	"container/heap"
	"fmt"
	"io"
	"unsafe"
)

// cursor reads one sorted run.
type cursor struct {
	r   run
	i   int
	rd  *bufio.Reader
	cur Visit
}

func (c *cursor) next() (bool, error) {
	if c.i == c.r.n {
		return false, nil
	}
	if c.r.mem != nil {
		c.cur = c.r.mem[c.i]
	} else {
		if c.rd == nil {
			c.rd = bufio.NewReaderSize(io.NewSectionReader(c.r.f, c.r.off, int64(c.r.n*visitSize)), 64<<10)
		}
		b := unsafe.Slice((*byte)(unsafe.Pointer(&c.cur)), visitSize)
		if _, err := io.ReadFull(c.rd, b); err != nil {
			return false, fmt.Errorf("critical path: reading spill %s: %w", c.r.f.Name(), err)
		}
	}
	c.i++
	return true, nil
}

type cursorHeap []*cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	x, y := &h[i].cur, &h[j].cur
	if x.In != y.In {
		return x.In < y.In
	}
	return x.Inst < y.Inst
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// merge calls fn with every visit of the runs, in the order of their ins.
func merge(runs []run, fn func(v *Visit)) error {
	h := make(cursorHeap, 0, len(runs))
	for _, r := range runs {
		c := &cursor{r: r}
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			h = append(h, c)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		c := h[0]
		v := c.cur
		ok, err := c.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
		fn(&v)
	}
	return nil
}
