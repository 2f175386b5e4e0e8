package critpath

import (
	"fmt"
	"io"
)

// cursor reads one sorted run.
type cursor struct {
	r    run
	i    int
	sec  *io.SectionReader
	buf  []byte
	left int64 // bytes of the run not yet in buf
	vr   visitReader
	cur  Visit
}

// cursorBuf is what a cursor reads at once.
const cursorBuf = 32 << 10

func (c *cursor) next() (bool, error) {
	if c.i == c.r.n {
		return false, nil
	}
	if c.r.mem != nil {
		c.cur = c.r.mem[c.i]
		c.i++
		return true, nil
	}
	if c.sec == nil {
		c.sec = io.NewSectionReader(c.r.f, c.r.off, c.r.size)
		c.left = c.r.size
		c.buf = make([]byte, 0, cursorBuf)
	}
	if len(c.vr.b) < maxVisitBytes && c.left > 0 {
		// Keep what is left, read more behind it.
		c.buf = append(c.buf[:0], c.vr.b...)
		n := min(int64(cap(c.buf)-len(c.buf)), c.left)
		k, err := io.ReadFull(c.sec, c.buf[len(c.buf):len(c.buf)+int(n)])
		if err != nil {
			return false, fmt.Errorf("critical path: reading spill %s: %w", c.r.f.Name(), err)
		}
		c.left -= int64(k)
		c.buf = c.buf[:len(c.buf)+k]
		c.vr.b = c.buf
	}
	if err := c.vr.next(&c.cur); err != nil {
		return false, fmt.Errorf("critical path: reading spill %s: %w", c.r.f.Name(), err)
	}
	c.i++
	return true, nil
}

// merge calls fn with every visit of the runs, in the order of their ins
// (then instances, then visitCmp). A binary heap of the cursors, written out: the
// interface calls of container/heap cost 5% of analyze's time.
func merge(runs []run, fn func(v *Visit)) error {
	h := make([]*cursor, 0, len(runs))
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
	less := func(x, y *cursor) bool { return visitBefore(&x.cur, &y.cur) }
	down := func(i int) {
		n := len(h)
		for {
			l := 2*i + 1
			if l >= n {
				return
			}
			m := l
			if r := l + 1; r < n && less(h[r], h[l]) {
				m = r
			}
			if !less(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for len(h) > 0 {
		c := h[0]
		fn(&c.cur) // fn copies it: the cursor moves on
		ok, err := c.next()
		if err != nil {
			return err
		}
		if !ok {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		if len(h) > 0 {
			down(0)
		}
	}
	return nil
}

// mergeInto merges the runs and hands the visits, in order, to fn in
// batches. The runs are split into groups, each merged on a goroutine of
// its own into batches; this goroutine merges the groups' batches (a few
// streams) and walks: merging and decoding, the larger part, run on every
// core while the walk goes on.
func mergeInto(runs []run, groups int, fn func([]Visit)) error {
	const batch = 4096
	groups = max(min(groups, len(runs)), 1)
	type stream struct {
		full, free chan []Visit
		cur        []Visit
		i          int
		done       bool
	}
	stop := make(chan struct{})
	errc := make(chan error, groups)
	ss := make([]*stream, groups)
	for g := range ss {
		st := &stream{full: make(chan []Visit, 4), free: make(chan []Visit, 6)}
		for i := 0; i < 6; i++ {
			st.free <- make([]Visit, 0, batch)
		}
		ss[g] = st
		var mine []run
		for i := g; i < len(runs); i += groups {
			mine = append(mine, runs[i])
		}
		go func() {
			defer close(st.full)
			buf := <-st.free
			send := func() bool {
				select {
				case st.full <- buf:
				case <-stop:
					return false
				}
				select {
				case buf = <-st.free:
				case <-stop:
					return false
				}
				return true
			}
			stopped := false
			err := merge(mine, func(v *Visit) {
				if stopped {
					return
				}
				buf = append(buf, *v)
				if len(buf) == batch && !send() {
					stopped = true
				}
			})
			if err == nil && len(buf) > 0 && !stopped {
				select {
				case st.full <- buf:
				case <-stop:
				}
			}
			errc <- err
		}()
	}
	defer close(stop)
	// Refill a stream's current batch; false when it ended.
	fill := func(st *stream) bool {
		for !st.done && st.i == len(st.cur) {
			if st.cur != nil {
				st.free <- st.cur[:0]
				st.cur = nil
			}
			b, ok := <-st.full
			if !ok {
				st.done = true
				break
			}
			st.cur, st.i = b, 0
		}
		return !st.done
	}
	live := ss[:0:0]
	for _, st := range ss {
		if fill(st) {
			live = append(live, st)
		}
	}
	for len(live) > 0 {
		m := 0
		for k := 1; k < len(live); k++ {
			x, y := &live[k].cur[live[k].i], &live[m].cur[live[m].i]
			if visitBefore(x, y) {
				m = k
			}
		}
		st := live[m]
		if len(live) == 1 {
			// One stream left: its batches as they are.
			fn(st.cur[st.i:])
			st.i = len(st.cur)
		} else {
			// Up to where another stream's next visit comes first.
			j := st.i + 1
			for ; j < len(st.cur); j++ {
				x := &st.cur[j]
				first := true
				for k, o := range live {
					if k != m {
						y := &o.cur[o.i]
						if visitBefore(y, x) {
							first = false
							break
						}
					}
				}
				if !first {
					break
				}
			}
			fn(st.cur[st.i:j])
			st.i = j
		}
		if !fill(st) {
			live = append(live[:m], live[m+1:]...)
		}
	}
	for range ss {
		if err := <-errc; err != nil {
			return err
		}
	}
	return nil
}
