package capacity

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"cloudprofiler/internal/pad"
)

// Event is one record of a tuple as the analysis hands it over: its
// channel's index and its estimate in the reference counter (cycles,
// relative to the translation model's origin). Records of one process are
// translated by one monotone function, so their differences are exact.
type Event struct {
	Ch  uint32
	Est float64
}

// Windows are the time windows of the run, consecutive from T0 (the run's
// first tuple record), in reference cycles.
type Windows struct {
	T0, T1 float64 // the run's first and last tuple record
	Width  float64 // one window
	N      int     // windows: ceil((T1-T0)/Width), at least 1
}

// NewWindows makes the windows of width cycles that cover [t0, t1].
func NewWindows(t0, t1, width float64) (Windows, error) {
	if !(width > 0) || math.IsInf(width, 0) {
		return Windows{}, fmt.Errorf("capacity: window of %v cycles", width)
	}
	if !(t1 >= t0) || math.IsInf(t0, 0) || math.IsInf(t1, 0) {
		return Windows{}, fmt.Errorf("capacity: the run's first and last records (%v, %v) make no span", t0, t1)
	}
	n := math.Ceil((t1 - t0) / width)
	if n > 1<<40 {
		return Windows{}, fmt.Errorf("capacity: %.3g windows", n)
	}
	return Windows{T0: t0, T1: t1, Width: width, N: max(int(n), 1)}, nil
}

// fixScale: durations are summed as integers of 1/256 reference cycle, so
// that the sums, and the results, do not depend on the order tuples came
// in (how partitions were shared out among workers).
const fixScale = 256

func fix(x float64) uint64 {
	if !(x > 0) {
		return 0
	}
	return uint64(x*fixScale + 0.5)
}

// cell is one instance's counts and sums in one window.
type cell struct {
	in, out  uint64 // records of its in and out channels in the window
	arrivals uint64 // tuples whose previous record (the upstream hand-off) is in the window
	paired   uint64 // tuples with an in in the window and an out after it
	svc      uint64 // their own service time (out - in), fixed point
	sq       u128   // and the sum of its squares
	busy     uint64 // own service time inside the window, fixed point
	blocked  uint64 // out to sent inside the window, fixed point
}

// CellBytes is the memory an Acc takes per instance and window.
const CellBytes = int64(unsafe.Sizeof(cell{}))

// Acc accumulates one worker's tuples. Feed it with Tuple, one tuple at a
// time; Merge the workers' at the end. It allocates nothing per tuple.
type Acc struct {
	p     *Plan
	ch    []chanInfo
	win   Windows
	inv   float64 // 1 / Width
	nf    float64 // float64(N)
	cells []cell  // instance*N + window

	// Per instance, the current tuple's in and out (valid when the
	// sequence number is the tuple's).
	inSeq, outSeq []uint64
	inEst, outEst []float64
	inWin, outWin []int
	// Per operator: the last tuple that reached it, and how many did.
	opSeq   []uint64
	reached []uint64
	counted uint64 // tuples with a marked record
	seq     uint64
	// negative counts tuples whose out came before their in (left out).
	negative uint64
	// The topology's counts (topology.go): per operator its in and out
	// records; per pair of operators (from*ops+to) the tuples that went
	// from one's outs to the other's ins, and the copies lost on the way
	// (outs with no in after them); per operator the outs after which the
	// tuple reached no other operator. And the span of the tuples' first
	// records (the source's).
	topo topoCounts
	seen []opSeen // a tuple's operators (scratch)
	// The tuples' shapes, counted before the topology's counts take them
	// (topology.go): key is the current tuple's (scratch), last the shape
	// the tuple before had.
	shapes   []topoShape
	key      []uint32
	last     int
	srcFirst float64
	srcLast  float64
}

// NewAcc makes an empty accumulator for the plan's instances over win.
func NewAcc(p *Plan, win Windows) *Acc {
	ni, no := len(p.Instances), len(p.Operators)
	return &Acc{p: p, ch: p.ch, win: win, inv: 1 / win.Width, nf: float64(win.N),
		cells: make([]cell, ni*win.N), inSeq: pad.Slice[uint64](ni), outSeq: pad.Slice[uint64](ni),
		inEst: pad.Slice[float64](ni), outEst: pad.Slice[float64](ni), inWin: pad.Slice[int](ni), outWin: pad.Slice[int](ni), opSeq: pad.Slice[uint64](no), reached: pad.Slice[uint64](no),
		seen: pad.Slice[opSeen](max(no, 4))[:0], key: pad.Slice[uint32](16)[:0], topo: newTopoCounts(no), srcFirst: math.Inf(1), srcLast: math.Inf(-1)}
}

// window is the window a reference estimate falls in (clamped to the run).
func (a *Acc) window(est float64) int {
	x := (est - a.win.T0) * a.inv
	if !(x > 0) {
		return 0
	}
	if x >= a.nf {
		return a.win.N - 1
	}
	return int(x)
}

// Tuple takes one tuple's records in hop order (the order of the
// analysis's channel ranking).
func (a *Acc) Tuple(evs []Event) {
	a.seq++
	seq := a.seq
	marked := false
	for i := range evs {
		e := &evs[i]
		c := a.ch[e.Ch]
		if c.inst < 0 || e.Est != e.Est {
			continue
		}
		if !marked {
			marked = true
			a.counted++
			a.srcFirst, a.srcLast = math.Min(a.srcFirst, evs[0].Est), math.Max(a.srcLast, evs[0].Est)
		}
		if a.opSeq[c.op] != seq {
			a.opSeq[c.op] = seq
			a.reached[c.op]++
		}
		inst := int(c.inst)
		row := a.cells[inst*a.win.N : (inst+1)*a.win.N]
		switch c.role {
		case RoleIn:
			w := a.window(e.Est)
			row[w].in++
			// The arrival is the upstream hand-off: the tuple's record
			// before this one; the tuple's first record arrives as it is.
			at := w
			if i > 0 && evs[i-1].Est == evs[i-1].Est {
				at = a.window(evs[i-1].Est)
			}
			row[at].arrivals++
			a.inSeq[inst], a.inEst[inst], a.inWin[inst] = seq, e.Est, w
		case RoleOut:
			w := a.window(e.Est)
			row[w].out++
			if a.inSeq[inst] == seq {
				a.inSeq[inst] = 0
				in := a.inEst[inst]
				if s := e.Est - in; s >= 0 {
					wi := a.inWin[inst]
					cl := &row[wi]
					cl.paired++
					v := fix(s)
					cl.svc += v
					cl.sq.addSquare(v)
					if wi == w {
						cl.busy += v
					} else {
						a.span(row, in, e.Est, wi, w, false)
					}
				} else {
					a.negative++
				}
			}
			a.outSeq[inst], a.outEst[inst], a.outWin[inst] = seq, e.Est, w
		case RoleSent:
			if a.outSeq[inst] == seq {
				a.outSeq[inst] = 0
				if out := a.outEst[inst]; e.Est >= out {
					wo, w := a.outWin[inst], a.window(e.Est)
					if wo == w {
						row[w].blocked += fix(e.Est - out)
					} else {
						a.span(row, out, e.Est, wo, w, true)
					}
				}
			}
		}
	}
	if marked {
		a.countTopology(evs)
	}
}

// span adds the time from..to (from in window w0, to in w1 > w0) to the
// busy or blocked time of the windows it covers, each its own part.
func (a *Acc) span(row []cell, from, to float64, w0, w1 int, blocked bool) {
	add := func(c *cell, v uint64) {
		if blocked {
			c.blocked += v
		} else {
			c.busy += v
		}
	}
	if w1 <= w0 {
		add(&row[w0], fix(to-from))
		return
	}
	add(&row[w0], fix(a.win.T0+float64(w0+1)*a.win.Width-from))
	whole := fix(a.win.Width)
	for w := w0 + 1; w < w1; w++ {
		add(&row[w], whole)
	}
	add(&row[w1], fix(to-(a.win.T0+float64(w1)*a.win.Width)))
}

// Merge adds o's tuples into a (both made for the same plan and windows).
func (a *Acc) Merge(o *Acc) {
	for i := range a.cells {
		c, d := &a.cells[i], &o.cells[i]
		c.in += d.in
		c.out += d.out
		c.arrivals += d.arrivals
		c.paired += d.paired
		c.svc += d.svc
		c.sq.add(d.sq)
		c.busy += d.busy
		c.blocked += d.blocked
	}
	for i := range a.reached {
		a.reached[i] += o.reached[i]
	}
	a.counted += o.counted
	a.negative += o.negative
	a.topo.merge(o.topology())
	a.srcFirst, a.srcLast = math.Min(a.srcFirst, o.srcFirst), math.Max(a.srcLast, o.srcLast)
}

// u128 is an unsigned 128-bit sum.
type u128 struct{ hi, lo uint64 }

func (u *u128) add(v u128) {
	var c uint64
	u.lo, c = bits.Add64(u.lo, v.lo, 0)
	u.hi += v.hi + c
}

func (u *u128) addSquare(v uint64) {
	hi, lo := bits.Mul64(v, v)
	u.add(u128{hi, lo})
}

func (u u128) float() float64 { return float64(u.hi)*0x1p64 + float64(u.lo) }

// AccState is an Acc's sums with every field exported (gob): the analysis
// of an export joins its partitions apart (on Spark) and merges their
// accumulators, as analyze merges its workers'.
type AccState struct {
	Win               Windows // the windows summed over
	Insts, Windows    int
	Cells             []CellState // instance*Windows + window
	Reached           []uint64
	Counted, Negative uint64
	Ins, Outs, Ended  []uint64 // the topology's counts (topoCounts)
	Edge, Sent, Lost  []uint64
	SrcFirst, SrcLast float64
}

// CellState is a cell's sums.
type CellState struct {
	In, Out, Arrivals, Paired, Svc uint64
	SqHi, SqLo                     uint64
	Busy, Blocked                  uint64
}

// State is a's sums (its tuples' shapes counted first).
func (a *Acc) State() *AccState {
	t := a.topology()
	s := &AccState{Win: a.win, Insts: len(a.p.Instances), Windows: a.win.N, Cells: make([]CellState, len(a.cells)),
		Reached: slices.Clone(a.reached), Counted: a.counted, Negative: a.negative,
		Ins: slices.Clone(t.ins), Outs: slices.Clone(t.outs), Ended: slices.Clone(t.ended),
		Edge: slices.Clone(t.edge), Sent: slices.Clone(t.sent), Lost: slices.Clone(t.lost), SrcFirst: a.srcFirst, SrcLast: a.srcLast}
	for i, c := range a.cells {
		s.Cells[i] = CellState{In: c.in, Out: c.out, Arrivals: c.arrivals, Paired: c.paired, Svc: c.svc, SqHi: c.sq.hi, SqLo: c.sq.lo,
			Busy: c.busy, Blocked: c.blocked}
	}
	return s
}

// MergeState adds the sums of s (another Acc's, of the same plan and
// windows) into a.
func (a *Acc) MergeState(s *AccState) error {
	o := NewAcc(a.p, a.win)
	t := &o.topo
	if s.Win != a.win || s.Insts != len(a.p.Instances) || s.Windows != a.win.N || len(s.Cells) != len(o.cells) || len(s.Reached) != len(o.reached) ||
		len(s.Ins) != len(t.ins) || len(s.Outs) != len(t.outs) || len(s.Ended) != len(t.ended) ||
		len(s.Edge) != len(t.edge) || len(s.Sent) != len(t.sent) || len(s.Lost) != len(t.lost) {
		return fmt.Errorf("capacity: a state of %d instances over %d windows of %g cycles from %g, not these sums' %d over %d of %g from %g",
			s.Insts, s.Windows, s.Win.Width, s.Win.T0, len(a.p.Instances), a.win.N, a.win.Width, a.win.T0)
	}
	for i, c := range s.Cells {
		o.cells[i] = cell{in: c.In, out: c.Out, arrivals: c.Arrivals, paired: c.Paired, svc: c.Svc, sq: u128{c.SqHi, c.SqLo}, busy: c.Busy, blocked: c.Blocked}
	}
	copy(o.reached, s.Reached)
	copy(t.ins, s.Ins)
	copy(t.outs, s.Outs)
	copy(t.ended, s.Ended)
	copy(t.edge, s.Edge)
	copy(t.sent, s.Sent)
	copy(t.lost, s.Lost)
	o.counted, o.negative, o.srcFirst, o.srcLast = s.Counted, s.Negative, s.SrcFirst, s.SrcLast
	a.Merge(o)
	return nil
}
