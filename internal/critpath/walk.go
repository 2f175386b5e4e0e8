package critpath

import (
	"math"
	"sort"

	"cloudprofiler/internal/cost"
)

// state is a path's vector (reference cycles per category) up to time t,
// and its vector at the latest slice boundary it passed (bbIdx).
type state struct {
	vec   []float64
	t     int64
	bb    []float64
	bbIdx int
}

func (s *state) copyFrom(o *state) {
	s.vec = append(s.vec[:0], o.vec...)
	s.bb = append(s.bb[:0], o.bb...)
	s.t, s.bbIdx = o.t, o.bbIdx
}

// Instance modes in pass 2.
const (
	modeGap     = iota // departed at d; the next in says whether it waited
	modeBusy           // in..out: its own work, on the path
	modeBlocked        // out..sent: waiting for room downstream
)

type snap struct {
	t  int64
	st state
	// until: with Config.Fast, the instance worked on its own path from t
	// to until (visits pass 1 left out), at least.
	until int64
}

// ringSize is how many departures an instance remembers for the
// receivers that waited for them (a receiver woken late, like a sink that
// polls its queue every millisecond, looks far back).
const ringSize = 1024

type istate struct {
	st    state
	cat   int
	mode  int
	d     int64
	open  bool
	born  bool  // it had a visit: before its first, it was not running (its first in ends a wait)
	inT   int64 // the open visit's in
	out   int64
	dep   int64
	next  uint16
	waits uint8     // the open visit's notes of its thread's waits (Visit.Waits)
	pend  []int     // boundaries that fell in the current gap
	ring  []snap    // its last departures' states, grown up to ringSize
	rn    int       // snapshots taken
	blk   []blocked // the last blockedSize waits for room downstream
	bn    int       // waits recorded
	bcum  int64
}

// blocked is a wait for room downstream: out..sent, the instance waited
// for (its next + 1), and the cycles of all waits up to this one.
type blocked struct {
	out, sent, cum int64
	next           uint16
}

const blockedSize = 4096

func (s *istate) addBlocked(out, sent int64, next uint16) {
	if s.blk == nil {
		s.blk = make([]blocked, blockedSize)
	}
	s.bcum += sent - out
	s.blk[s.bn%blockedSize] = blocked{out, sent, s.bcum, next}
	s.bn++
}

// blockedIn is how long the instance waited for room downstream within
// [h, e] (what it remembers), and for which instance (next + 1) last.
func (s *istate) blockedIn(h, e int64) (int64, uint16) {
	lo0 := max(0, s.bn-blockedSize)
	at := func(i int) *blocked { return &s.blk[i%blockedSize] }
	// The first wait ending after h, the last starting before e.
	lo := lo0 + sort.Search(s.bn-lo0, func(i int) bool { return at(lo0+i).sent > h })
	hi := lo0 + sort.Search(s.bn-lo0, func(i int) bool { return at(lo0+i).out >= e }) - 1
	if lo > hi {
		return 0, 0
	}
	first, last := at(lo), at(hi)
	sum := last.cum - first.cum + (first.sent - first.out)
	sum -= max(0, h-first.out)
	sum -= max(0, last.sent-e)
	return max(sum, 0), last.next
}

// lookup is the path state at hand-off time h: the departure snapshot at
// h (ok, at h), else false. With ext (Config.Fast), else the latest
// snapshot before h when the instance worked on its own path from it to h
// (its departure at h was left out in pass 1): at its time.
func (s *istate) lookup(h int64, ext bool) (*state, int64, bool) {
	if s.rn == 0 {
		return nil, 0, false
	}
	lo := max(0, s.rn-len(s.ring))
	at := func(i int) *snap { return &s.ring[i%len(s.ring)] }
	i := lo + sort.Search(s.rn-lo, func(i int) bool { return at(lo+i).t >= h })
	if i < s.rn && at(i).t == h {
		return &at(i).st, h, true
	}
	if ext && i > lo && h <= at(i-1).until {
		return &at(i - 1).st, at(i - 1).t, true
	}
	return nil, 0, false
}

// sliceAcc is a slice's candidates: the paths alive at its end.
type sliceAcc struct {
	cands    [][]float64
	ranks    []int
	insts    []int
	idle     map[int]bool // candidates of instances waiting at the end: their last departure, then input
	pending  int
	passed   bool // its end boundary was processed
	done     bool
	overlaps uint64
	misses   uint64
}

type event struct {
	t    int64
	inst int
	kind int // 0: out (blocked begins), 1: departure
}

// eventHeap is a binary heap of events by time (then kind), written out:
// container/heap boxes every event it is given.
type eventHeap []event

func (h eventHeap) less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].kind < h[j].kind
}

func (h *eventHeap) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *eventHeap) pop() event {
	q := *h
	e := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return e
}

// walker is pass 2.
type walker struct {
	a       *Analysis
	cost    *cost.Acc // without Config.Fast: the cost model's sums (nil: none)
	k       int       // categories
	t0      int64
	width   int64
	n       int // slices
	tend    int64
	nextB   int // next boundary to process (1..n)
	insts   []istate
	slices  []sliceAcc
	ev      eventHeap
	bk      buckets
	tmp     state
	tmp2    state
	scratch []float64
	zero    []float64
}

func (w *walker) boundary(k int) int64 {
	if k >= w.n {
		return w.tend
	}
	return w.t0 + int64(k)*w.width
}

// latest is the index of the latest boundary at or before t.
func (w *walker) latest(t int64) int {
	if t >= w.tend {
		return w.n
	}
	if t <= w.t0 {
		return 0
	}
	return min(int((t-w.t0)/w.width), w.n-1)
}

func (w *walker) newState(t int64) state {
	return state{vec: make([]float64, w.k), bb: make([]float64, w.k), t: t}
}

// accrue moves s along category cat up to time to, keeping its vector at
// the latest boundary passed.
func (w *walker) accrue(s *state, cat int, to int64) {
	if to <= s.t {
		return
	}
	if k := w.latest(to); k > s.bbIdx && w.boundary(k) > s.t {
		copy(s.bb, s.vec)
		if cat >= 0 {
			s.bb[cat] += float64(w.boundary(k) - s.t)
		}
		s.bbIdx = k
	}
	if cat >= 0 {
		s.vec[cat] += float64(to - s.t)
	}
	s.t = to
}

// advance processes what happens before time t: slice boundaries first,
// then departures, in time order (a boundary before an event at its time).
func (w *walker) advance(t int64) {
	for {
		hasB, hasE := w.nextB <= w.n, len(w.ev) > 0
		var bt, et int64
		if hasB {
			bt = w.boundary(w.nextB)
		}
		if hasE {
			et = w.ev[0].t
		}
		switch {
		case hasB && (!hasE || bt <= et) && bt <= t:
			w.passBoundary(w.nextB)
			w.nextB++
		case hasE && (!hasB || et < bt) && et <= t:
			e := w.ev.pop()
			w.complete(e)
		default:
			return
		}
	}
}

func (w *walker) passBoundary(k int) {
	sl := &w.slices[k-1]
	b := w.boundary(k)
	for j := range w.insts {
		s := &w.insts[j]
		if !w.a.cfg.Insts[j].HasIn {
			continue // a source that marks only its hand-offs: no activity of its own here
		}
		switch s.mode {
		case modeBusy, modeBlocked:
			// Out..sent counts as its own work here: should it turn out
			// to be blocked on the next instance, that one's candidate,
			// further downstream, is the slice's path.
			prev := append(w.tmp.vec[:0], s.st.bb...)
			ok := s.st.bbIdx == k-1
			w.accrue(&s.st, s.cat, b)
			if s.st.bbIdx != k { // at b exactly
				copy(s.st.bb, s.st.vec)
				s.st.bbIdx = k
			}
			w.tmp.vec = prev
			if !ok {
				sl.misses++
				continue
			}
			sl.add(w, j, s.st.vec, prev)
		case modeGap:
			s.pend = append(s.pend, k)
			sl.pending++
			// Should the gap turn out to be waiting, the path that ends at
			// the instance's last departure, the rest of the slice waiting
			// for input (the pipeline idle): the path through the slice's
			// last output, when this is the furthest downstream.
			w.idleCand(j, k, false)
		}
	}
	sl.passed = true
	w.maybeDone(k - 1)
}

// idleCand is instance j's candidate for slice k-1 should its gap turn
// out to be waiting: its path to its departure s.d, then input. again:
// replace the one it has (s.d moved on: Config.Fast).
func (w *walker) idleCand(j, k int, again bool) {
	s := &w.insts[j]
	sl := &w.slices[k-1]
	b := w.boundary(k)
	in := int(w.a.input)
	end := append([]float64(nil), s.st.vec...)
	end[in] += float64(b - s.d)
	var start []float64
	switch pb := w.boundary(k - 1); {
	case pb >= s.d:
		start = append([]float64(nil), s.st.vec...)
		start[in] += float64(pb - s.d)
	case s.st.bbIdx == k-1:
		start = s.st.bb
	}
	if again {
		for c := len(sl.insts) - 1; c >= 0; c-- {
			if sl.insts[c] == j && sl.idle[c] {
				if start == nil {
					delete(sl.idle, c)
					sl.insts[c] = -1 - j // no longer a candidate
					return
				}
				for i := range end {
					end[i] -= start[i]
				}
				sl.cands[c] = end
				return
			}
		}
	}
	if start != nil {
		sl.add(w, j, end, start)
		sl.idle[len(sl.cands)-1] = true
	}
}

// dropIdle takes instance j's candidate "waiting for input" out of the
// slice: its wait ended with another instance's hand-off.
func (sl *sliceAcc) dropIdle(j int) {
	for c := len(sl.insts) - 1; c >= 0; c-- {
		if sl.insts[c] == j && sl.idle[c] {
			delete(sl.idle, c)
			sl.insts[c] = -1 - j
		}
	}
}

func (sl *sliceAcc) add(w *walker, inst int, vec, start []float64) {
	c := make([]float64, len(vec))
	for i := range c {
		c[i] = vec[i] - start[i]
	}
	if sl.idle == nil {
		sl.idle = map[int]bool{}
	}
	sl.cands = append(sl.cands, c)
	sl.insts = append(sl.insts, inst)
	sl.ranks = append(sl.ranks, w.a.cfg.Insts[inst].Rank)
}

func (w *walker) maybeDone(i int) {
	sl := &w.slices[i]
	if sl.passed && sl.pending == 0 && !sl.done {
		sl.done = true
	}
}

// complete handles an instance's out (blocked begins) or departure.
func (w *walker) complete(e event) {
	s := &w.insts[e.inst]
	if !s.open {
		return
	}
	if e.kind == 0 {
		if s.mode == modeBusy && e.t == s.out {
			w.accrue(&s.st, s.cat, s.out)
			s.mode = modeBlocked
		}
		return
	}
	if e.t != s.dep {
		return // stale (forced earlier)
	}
	w.depart(e.inst, s.dep)
}

// depart ends the open visit at time t.
func (w *walker) depart(j int, t int64) {
	s := &w.insts[j]
	if s.mode == modeBusy {
		w.accrue(&s.st, s.cat, t)
	} else if s.mode == modeBlocked {
		// Out to sent: waiting for room downstream only when the instance
		// it hands to took a tuple meanwhile (its in, or its departure
		// just before taking one, falls in out..sent): the path goes on in
		// that instance's work. Else the hand-off did not wait: its own work.
		followed := false
		if s.next != 0 {
			o := &w.insts[s.next-1]
			switch {
			case o.mode == modeBusy && o.inT >= s.out && o.inT <= t:
				s.st.copyFrom(&o.st)
				w.accrue(&s.st, o.cat, t)
				followed = true
				s.addBlocked(s.out, t, s.next)
			case o.mode == modeGap && o.d >= s.out && o.d <= t:
				// It departed and is taking the next tuple (queued: its
				// input was full): its own work, before its in's record.
				s.st.copyFrom(&o.st)
				w.accrue(&s.st, int(w.a.compute[w.a.opOf[s.next-1]]), t)
				followed = true
				s.addBlocked(s.out, t, s.next)
			}
		}
		// The cost model's send or time blocked: out to sent (without sent
		// marks, the outs of one visit are its own work). Where the
		// instance notes its thread's waits, they say which: a thread that
		// gave the CPU up in out..sent waited for room downstream.
		if !followed {
			w.accrue(&s.st, int(w.a.compute[w.a.opOf[j]]), t)
		}
		if w.a.cfg.Insts[j].HasSent {
			blocked := followed
			if s.waits&visitNotes != 0 {
				blocked = s.waits&visitWaitedSent != 0
			}
			if blocked {
				w.cost.Blocked(j, s.out, t)
			} else {
				w.cost.Send(j, s.out, t)
			}
		}
	}
	s.open = false
	s.mode = modeGap
	s.d = t
	if s.next == 0 && !w.a.cfg.Fast {
		return // no instance downstream looks this departure up
	}
	if s.rn == len(s.ring) && len(s.ring) < ringSize {
		s.ring = append(s.ring, snap{})
	}
	sn := &s.ring[s.rn%len(s.ring)]
	sn.t = t
	if sn.st.vec == nil {
		sn.st = w.newState(t)
	}
	sn.st.copyFrom(&s.st)
	sn.until = math.MaxInt64
	s.rn++
}

// onPath (Config.Fast): the instance worked without a break from its
// departure s.d to t (the visits pass 1 left out): the boundaries pending
// in that stretch get its own path, and its state moves on to t.
func (w *walker) onPath(j int, t int64) {
	s := &w.insts[j]
	if t <= s.d {
		return
	}
	cat := int(w.a.compute[w.a.opOf[j]])
	g := gapPath{base: &s.st, alive: math.MinInt64}
	g.segs[0] = seg{cat, s.st.t, t}
	g.ns = 1
	w.resolve(j, &g, t)
	w.accrue(&s.st, cat, t)
	s.d = t
	s.born = true
	// The boundaries still pending: their candidates should the gap be
	// waiting start at this departure.
	for _, k := range s.pend {
		w.idleCand(j, k, true)
	}
	if s.rn > 0 {
		s.ring[(s.rn-1)%len(s.ring)].until = t
	}
}

// resolve gives the boundaries pending in instance j's gap, up to limit,
// their candidates on the path g.
func (w *walker) resolve(j int, g *gapPath, limit int64) {
	s := &w.insts[j]
	keep := s.pend[:0]
	for _, k := range s.pend {
		b := w.boundary(k)
		if b > limit {
			keep = append(keep, k)
			continue
		}
		sl := &w.slices[k-1]
		sl.pending--
		if g.waiting {
			sl.dropIdle(j)
		}
		if b > g.alive {
			end := g.vecAt(nil, b)
			var start []float64
			pb := w.boundary(k - 1)
			switch {
			case pb >= g.base.t:
				start = g.vecAt(nil, pb)
			case g.base.bbIdx == k-1:
				start = g.base.bb
			}
			if start != nil {
				sl.add(w, j, end, start)
			} else {
				sl.misses++
			}
		}
		w.maybeDone(k - 1)
	}
	s.pend = keep
}

func (w *walker) sliceOf(t int64) int {
	k := w.latest(t)
	return min(max(k, 0), w.n-1)
}

// gapPath is how a gap (d, in) resolved: the path from base along segments.
type gapPath struct {
	base  *state // at base.t
	segs  [2]seg
	ns    int
	alive int64 // the path is alive (a candidate) at boundaries after this time
	// waiting: the gap was a wait for another instance's hand-off, which
	// is never on a critical path (Sager's Def. 3.12): the candidates the
	// instance got as though it waited for input go.
	waiting bool
}

type seg struct {
	cat      int
	from, to int64
}

// vecAt is the path's vector at t >= base.t (into dst).
func (g *gapPath) vecAt(dst []float64, t int64) []float64 {
	dst = append(dst[:0], g.base.vec...)
	for i := 0; i < g.ns; i++ {
		sg := g.segs[i]
		if t > sg.from {
			dst[sg.cat] += float64(min(t, sg.to) - sg.from)
		}
	}
	return dst
}

// arrive handles a visit's in (every earlier event processed).
func (w *walker) arrive(v *Visit) {
	a := w.a
	j := int(v.Inst)
	s := &w.insts[j]
	op := a.opOf[j]
	if s.open {
		w.slices[w.sliceOf(v.In)].overlaps++
		w.depart(j, max(v.In, s.st.t))
	}
	// The breakdown: the hand-off to the in is queueing while the instance
	// was busy with earlier tuples (until its previous departure), and a
	// transfer after. The bound sits on the part that starts at the
	// hand-off, the other node's record.
	if w.a.cfg.Fast {
		// Pass 1 split the hand-off; the instance worked up to its
		// previous departure.
		if v.D != noD {
			w.onPath(j, min(v.D, v.In))
		}
	} else {
		// A visit without its out (a filter's, a cut file's) has no own
		// work to measure: Out is then its in, or its sent. Without sent
		// marks its own work runs to its last out (a 1->N operator's).
		if in := &a.cfg.Insts[j]; in.HasOut {
			out := v.Out
			if !in.HasSent {
				out = v.Dep
			}
			taken := s.born && v.taken(s.d)
			w.cost.Add(j, v.In, out, v.Out != v.In && !(in.HasSent && v.Out == v.Dep), s.d, out, taken)
			if s.born && v.worked() {
				w.cost.AddWorked(j, v.workedFrom(s.d), v.In)
			}
		}
	}
	if !w.a.cfg.Fast && v.Up != noHandOff && v.Bucket != noBucket {
		var q int64
		if s.d > v.H { // queued: up to the in (collect.go's flushPend)
			q = v.In - v.H
		}
		tr := v.In - v.H - q
		b := w.bk.at(v.Bucket)
		// While it waited for room downstream, the tuple queued behind
		// the instance it waited for: that one's queue.
		var bq int64
		var bnext uint16
		if q > 0 && s.bn > 0 {
			bq, bnext = s.blockedIn(v.H, v.H+q)
		}
		qe, be, te := 0.0, 0.0, float64(v.Err)
		switch {
		case q-bq > 0:
			qe, te = te, 0
		case bq > 0:
			be, te = te, 0
		}
		b.add(a.queue[op], q-bq, qe)
		if bq > 0 {
			b.add(a.queue[a.opOf[bnext-1]], bq, be)
		}
		b.add(v.Link, tr, te)
	}
	// The gap (d, in): how the path reached this in.
	d := s.d
	g := gapPath{base: &s.st, alive: math.MinInt64}
	switch {
	case v.Up == noHandOff:
		g.segs[0] = seg{int(a.input), d, v.In}
		g.ns = 1
	case v.H <= d && s.born:
		g.segs[0] = seg{int(a.compute[op]), d, v.In}
		g.ns = 1
	case v.Up == 0:
		// A hand-off logged after the in (its thread preempted between
		// the push and the record) ends the wait at the in.
		h := min(max(v.H, d), v.In)
		g.segs[0] = seg{int(a.input), d, h}
		g.segs[1] = seg{int(v.Link), h, v.In}
		g.ns = 2
	default:
		g.waiting = true
		u := &w.insts[v.Up-1]
		if st, t, ok := u.lookup(v.H, a.cfg.Fast); ok {
			g.base = st
			g.segs[0] = seg{int(v.Link), v.H, v.In}
			g.ns = 1
			if t < v.H { // its own work up to the hand-off (Config.Fast)
				g.segs[1] = g.segs[0]
				g.segs[0] = seg{int(a.compute[a.opOf[v.Up-1]]), t, v.H}
				g.ns = 2
			}
			g.alive = v.H
		} else if u.open && u.dep == v.H && v.H >= v.In && u.st.t <= v.In {
			// The sender logged its hand-off after the receiver logged
			// the in (a race between two threads' records): the path
			// comes from the sender as it was at the in.
			// (Its out..sent was the hand-off itself, a wake-up.)
			if w.tmp2.vec == nil {
				w.tmp2 = w.newState(v.In)
			}
			w.tmp2.copyFrom(&u.st)
			cat := int(v.Link)
			if u.mode == modeBusy {
				cat = u.cat
			}
			g.base = &w.tmp2
			g.segs[0] = seg{cat, u.st.t, max(v.In, u.st.t)}
			g.ns = 1
			g.alive = u.st.t
		} else if u.open && u.dep == v.H && v.H >= v.In {
			// The same race, the sender's path already past the in (it
			// worked on after its push, before its record): the wait is
			// the link's, on the instance's own path.
			g.segs[0] = seg{int(v.Link), d, v.In}
			g.ns = 1
			g.alive = d
		} else {
			// Not followed (property 3.9): the instance's own path, the
			// gap unattributed.
			w.slices[w.sliceOf(v.In)].misses++
			g.segs[0] = seg{int(a.unattrib), d, v.In}
			g.ns = 1
		}
	}
	// Boundaries that fell in the gap: their candidates.
	w.resolve(j, &g, math.MaxInt64)
	// The instance's state at the in: its own path on along the
	// segments, or the one it waited for.
	if g.base == &s.st {
		for i := 0; i < g.ns; i++ {
			w.accrue(&s.st, g.segs[i].cat, g.segs[i].to)
		}
	} else {
		w.jump(s, &g, v.In)
	}
	s.mode, s.cat, s.open, s.inT, s.born = modeBusy, int(a.compute[op]), true, v.In, true
	s.out, s.dep, s.next, s.waits = max(v.Out, v.In), max(v.Dep, v.Out, v.In), v.Next, v.Waits
	if s.dep > s.out {
		w.ev.push(event{s.out, j, 0})
	}
	w.ev.push(event{s.dep, j, 1})
}

// jump makes s's state at time in the path g (from another state).
func (w *walker) jump(s *istate, g *gapPath, in int64) {
	kb := w.latest(in)
	if w.boundary(kb) >= g.base.t && kb > g.base.bbIdx {
		w.scratch = g.vecAt(w.scratch, w.boundary(kb))
		copy(s.st.bb, w.scratch)
		s.st.bbIdx = kb
	} else if g.base != &s.st {
		copy(s.st.bb, g.base.bb)
		s.st.bbIdx = g.base.bbIdx
	}
	w.scratch = g.vecAt(w.scratch, in)
	copy(s.st.vec, w.scratch)
	s.st.t = in
}
