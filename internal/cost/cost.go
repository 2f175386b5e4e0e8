// Package cost is the cost model that the capacity analysis, Mace and the
// report share: what one tuple costs an operator instance in a window of
// the run, from the marks it logs (docs/capacity.md).
//
// An instance works on a tuple from its in to its out (its own work), then
// hands it on: from its out to its sent where it marks sent, a hand-off
// that either did its own work (a send, a push) or waited for room in a
// full downstream queue; then it takes the next tuple, from its departure
// (sent, else out) to the next in. That last gap is work only while the
// instance is backlogged, when the next tuple was already waiting at its
// departure (its hand-off record no later than the departure); otherwise
// the gap holds waiting for input, which is not the instance's cost. So a
// tuple costs
//
//	own (in to out, every tuple)
//	+ send (out to sent when it did not wait for room downstream)
//	+ take (departure to the next in, while backlogged)
//
// and time blocked by a full downstream is the downstream's, never this
// instance's. An instance's capacity is one over that cost taken over the
// tuples it took while backlogged (their own work and their take: from
// one departure to the next): the tuples it departs per second while it
// has a backlog, which is what the run shows whenever it was saturated
// (tests/capacity holds it to that). The own work of every tuple is not
// the same number on a shared machine: tuples queue when the machine is
// busy, and then they are slower too (by 3-6% at low loads here, with a
// second process spinning). Only a span with too few backlogged tuples
// takes every tuple's own work and the run's take.
//
// The analysis that walks each instance's visits in time order (package
// critpath: it knows each in's previous departure) feeds an Acc; the
// sums are integers of reference cycles, so the result does not depend on
// how tuples were shared out among workers. Windows are cut into cells,
// and the cells are the batches of a jackknife: a cost's interval comes
// from how much the cost moves between batches of the run, not from the
// spread of single tuples, so a few preempted tuples (a heavy tail) and
// cost that drifts with what else runs on the machine widen it honestly.
package cost

import (
	"fmt"
	"math"
	"unsafe"
)

// Grid is a set of consecutive windows of the run, each cut into Sub
// cells: the windows a result is reported in, the cells its intervals'
// batches.
type Grid struct {
	T0    float64 // the first window's start, reference cycles
	Width float64 // one window, reference cycles
	N     int     // windows
	Sub   int     // cells per window, at least 1
}

// Check says what is wrong with g.
func (g Grid) Check() error {
	if !(g.Width > 0) || math.IsInf(g.Width, 0) || math.IsNaN(g.T0) || math.IsInf(g.T0, 0) || g.N < 1 || g.Sub < 1 {
		return fmt.Errorf("cost: a grid of %d windows of %v cycles from %v, %d cells each", g.N, g.Width, g.T0, g.Sub)
	}
	return nil
}

func (g Grid) cells() int { return g.N * g.Sub }

// cellOf is the cell of time t (reference cycles), clamped to the grid.
func (g Grid) cellOf(t int64) int {
	x := (float64(t) - g.T0) / g.Width * float64(g.Sub)
	if !(x > 0) {
		return 0
	}
	if n := g.cells(); x >= float64(n) {
		return n - 1
	}
	return int(x)
}

// Cell holds one instance's sums in one cell of a grid: reference cycles
// and how many they are of. BOwn is the own work of the backlogged visits
// (TakeN of them); Visits counts every visit (a filter's without an out
// too).
type Cell struct {
	Own, BOwn, Send, Blocked, Take       int64
	OwnN, SendN, BlockedN, TakeN, Visits uint32
	// Busy and Served are the backlogged visits by time: a visit's take
	// and own work (its previous departure to its out) shared among the
	// cells it spans by how long it spent in each, Busy the cycles and
	// Served the visits in 1/ServedUnit (a visit preempted across a cell's
	// edge counts in both cells, each its part). Served/Busy is the rate
	// at which the instance served its backlog in the cell. The sums by
	// the cell of the in (Take, BOwn) put a long visit's time in one cell
	// and its successors' in the next: for cells not much longer than a
	// preemption their ratio swings from cell to cell, and one over a mean
	// of swinging costs is too fast (Mace's windows of 10 ms ran 3-7%
	// fast with the other vCPU busy).
	Busy, Served int64
	// Worked: the gaps between a visit's previous departure (or its
	// tuple's hand-off, where that came later: critpath's
	// Visit.workedFrom) and its in that its thread did not give the CPU up
	// in, whether or not its tuple was there by the departure (where the
	// instance notes its thread's waits; AddWorked). With Own and Send, the
	// time it worked: its busy share.
	Worked int64
}

// ServedUnit is one visit in Cell.Served.
const ServedUnit = 1 << 16

// CellBytes is what an Acc keeps per instance and cell.
const CellBytes = int64(unsafe.Sizeof(Cell{}))

func (c *Cell) add(o *Cell) {
	c.Worked += o.Worked
	c.Busy += o.Busy
	c.Served += o.Served
	c.Visits += o.Visits
	c.Own += o.Own
	c.BOwn += o.BOwn
	c.Send += o.Send
	c.Blocked += o.Blocked
	c.Take += o.Take
	c.OwnN += o.OwnN
	c.SendN += o.SendN
	c.BlockedN += o.BlockedN
	c.TakeN += o.TakeN
}

// Acc sums the visits one worker saw, on every grid it was made for.
type Acc struct {
	grids []Grid
	insts int
	cells [][]Cell // per grid: inst*cells + cell
}

// NewAcc makes an empty accumulator for insts instances on the grids.
func NewAcc(insts int, grids ...Grid) (*Acc, error) {
	a := &Acc{grids: grids, insts: insts}
	for _, g := range grids {
		if err := g.Check(); err != nil {
			return nil, err
		}
		a.cells = append(a.cells, make([]Cell, insts*g.cells()))
	}
	return a, nil
}

// Bytes is what NewAcc(insts, grids...) takes.
func Bytes(insts int, grids ...Grid) int64 {
	var b int64
	for _, g := range grids {
		b += int64(insts) * int64(g.cells()) * CellBytes
	}
	return b
}

// Grids are the grids a was made for.
func (a *Acc) Grids() []Grid { return a.grids }

func (a *Acc) at(k, inst int, t int64) *Cell {
	g := &a.grids[k]
	return &a.cells[k][inst*g.cells()+g.cellOf(t)]
}

// Add counts one visit in one pass over the grids (what Visit, Own and
// Take do one by one): its in; its own work, in to out, when own (it
// handed its tuple on); and, when taken (backlogged: its tuple was
// waiting at the instance's previous departure prev), the take prev..in
// and the own work to dep (its out, or its last out without sent marks).
func (a *Acc) Add(inst int, in, out int64, own bool, prev, dep int64, taken bool) {
	if a == nil {
		return
	}
	own = own && out >= in
	taken = taken && in >= prev
	bown := max(dep-in, 0)
	for k := range a.grids {
		g := &a.grids[k]
		cells := a.cells[k][inst*g.cells() : (inst+1)*g.cells()]
		ci := g.cellOf(in)
		c := &cells[ci]
		c.Visits++
		if own {
			c.Own += out - in
			c.OwnN++
		}
		if taken {
			g.take(cells, ci, prev, in, bown)
		}
	}
}

// take adds a backlogged visit to one instance's cells of the grid: the
// take prev..in and its own work bown in the cell of its in (ci), and the
// span prev..in+bown by time (Busy, Served).
func (g *Grid) take(cells []Cell, ci int, prev, in, bown int64) {
	c := &cells[ci]
	c.Take += in - prev
	c.BOwn += bown
	c.TakeN++
	if end := in + bown; g.cellOf(prev) == ci && g.cellOf(end) == ci {
		c.Busy += end - prev // the span in one cell (most visits)
		c.Served += ServedUnit
		return
	}
	g.spread(prev, in+bown, func(i int, cycles, served int64) {
		cells[i].Busy += cycles
		cells[i].Served += served
	})
}

// AddWorked adds a gap prev..in its thread worked through (no wait), in
// the cell of the in.
func (a *Acc) AddWorked(inst int, prev, in int64) {
	if a == nil || in <= prev {
		return
	}
	for k := range a.grids {
		a.at(k, inst, in).Worked += in - prev
	}
}

// Visit counts a visit (in the cell of its in).
func (a *Acc) Visit(inst int, in int64) {
	if a == nil {
		return
	}
	for k := range a.grids {
		a.at(k, inst, in).Visits++
	}
}

// Own adds a visit's own work: its in to its out (in the cell of its in),
// for a visit that handed its tuple on (a filter's other visits have no
// out: their work shows in the take of the next visit, when it waited).
func (a *Acc) Own(inst int, in, out int64) {
	if a == nil || out < in {
		return
	}
	for k := range a.grids {
		c := a.at(k, inst, in)
		c.Own += out - in
		c.OwnN++
	}
}

// Send adds a hand-off that did its own work, out to sent (in the cell of
// the out).
func (a *Acc) Send(inst int, out, sent int64) { a.handOff(inst, out, sent, false) }

// Blocked adds a hand-off that waited for room downstream (out to sent).
func (a *Acc) Blocked(inst int, out, sent int64) { a.handOff(inst, out, sent, true) }

func (a *Acc) handOff(inst int, out, sent int64, blocked bool) {
	if a == nil || sent < out {
		return
	}
	for k := range a.grids {
		c := a.at(k, inst, out)
		if blocked {
			c.Blocked += sent - out
			c.BlockedN++
		} else {
			c.Send += sent - out
			c.SendN++
		}
	}
}

// Take adds a visit taken while backlogged: the gap from the instance's
// previous departure to its in, whose tuple was already waiting at that
// departure, and its own work (in to out: out = in where it has no out
// mark, or did not hand this tuple on); in the cell of the in.
func (a *Acc) Take(inst int, dep, in, out int64) {
	if a == nil || in < dep {
		return
	}
	own := max(out-in, 0)
	for k := range a.grids {
		g := &a.grids[k]
		g.take(a.cells[k][inst*g.cells():(inst+1)*g.cells()], g.cellOf(in), dep, in, own)
	}
}

// spread shares the span a..b among the cells it overlaps (the grid's
// first and last cells take what lies before and after it): each cell's
// cycles and its part of ServedUnit by them; the parts add up to
// ServedUnit exactly (an empty span's all in a's cell).
func (g *Grid) spread(a, b int64, f func(cell int, cycles, served int64)) {
	ca, cb := g.cellOf(a), g.cellOf(b)
	if ca == cb || b <= a {
		f(ca, max(b-a, 0), ServedUnit)
		return
	}
	edge := func(i int) int64 { return int64(math.Ceil(g.T0 + float64(i)*g.Width/float64(g.Sub))) }
	left := int64(ServedUnit)
	lo := a
	for i := ca; i <= cb; i++ {
		hi := b
		if i < cb {
			hi = min(max(edge(i+1), lo), b)
		}
		share := left
		if i < cb {
			share = min(left, (hi-lo)*ServedUnit/(b-a))
		}
		f(i, hi-lo, share)
		left -= share
		lo = hi
	}
}

// Merge adds o's sums into a (made for the same instances and grids).
func (a *Acc) Merge(o *Acc) {
	if a == nil || o == nil {
		return
	}
	for k := range a.cells {
		for i := range o.cells[k] {
			a.cells[k][i].add(&o.cells[k][i])
		}
	}
}

// Cells is instance inst's cells on grid k (window w's are [w*Sub,
// (w+1)*Sub)).
func (a *Acc) Cells(k, inst int) []Cell {
	n := a.grids[k].cells()
	return a.cells[k][inst*n : (inst+1)*n]
}
