package capacity

import (
	"math"
	"slices"

	"cloudprofiler/internal/pad"
)

// The topology's counts: how many tuples reach each operator, how many an
// operator hands on (its selectivity, a split's K, a filter's share), and
// how many leave one operator and never reach the next (loss: a full
// socket buffer, a dropped message, a crashed task), which must not pass
// for filtering. An operator's reach (the copies of a source tuple that
// arrive at it, lost ones included) turns its capacity into the source
// rate at which it saturates.

// topoCounts are the counts of one worker's tuples (merged at the end).
type topoCounts struct {
	ops   int
	ins   []uint64 // per operator: its in records
	outs  []uint64 // and out records
	edge  []uint64 // from*ops+to: tuples whose copies went from one operator's outs to the other's ins
	sent  []uint64 // from*ops+to: the copies those tuples' outs of `from` were (arrived or lost)
	lost  []uint64 // from*ops+to: copies out of `from` that reached no in of `to` (outs - ins, per tuple)
	ended []uint64 // per operator: outs after which the tuple reached no other operator's in
}

// newTopoCounts makes one worker's counts (padded: every tuple writes
// them, package pad).
func newTopoCounts(ops int) topoCounts {
	return topoCounts{ops: ops, ins: pad.Slice[uint64](ops), outs: pad.Slice[uint64](ops), edge: pad.Slice[uint64](ops * ops),
		sent: pad.Slice[uint64](ops * ops), lost: pad.Slice[uint64](ops * ops), ended: pad.Slice[uint64](ops)}
}

func (t *topoCounts) merge(o *topoCounts) {
	for i := range t.ins {
		t.ins[i] += o.ins[i]
		t.outs[i] += o.outs[i]
		t.ended[i] += o.ended[i]
	}
	for i := range t.edge {
		t.edge[i] += o.edge[i]
		t.sent[i] += o.sent[i]
		t.lost[i] += o.lost[i]
	}
}

// opSeen is an operator a tuple visited: where its first in and first out
// are among the tuple's records, and how many of each it has.
type opSeen struct {
	op                int32
	firstIn, firstOut int
	ins, outs         uint32
}

// topoShape is a shape of tuple: the channels of its records that the
// topology counts (an instance's in or out, translated), in order, and how
// many tuples had it. Counting a shape once, times its tuples, is what
// counting each of them gives, and most tuples share a few shapes: a
// tuple costs a comparison with the one before's instead of the counting.
type topoShape struct {
	chs []uint32
	n   uint64
}

// maxShapes bounds the shapes an Acc remembers; a tuple of another shape
// is counted at once.
const maxShapes = 64

// countTopology counts one tuple: its records in hop order, with the
// records of one process in time order (a 1->N operator's outs, then the
// next operator's ins and outs interleaved).
func (a *Acc) countTopology(evs []Event) {
	key := a.key[:0]
	for i := range evs {
		c := a.ch[evs[i].Ch]
		if c.inst < 0 || evs[i].Est != evs[i].Est || (c.role != RoleIn && c.role != RoleOut) {
			continue
		}
		key = append(key, evs[i].Ch)
	}
	a.key = key
	if a.last < len(a.shapes) && slices.Equal(a.shapes[a.last].chs, key) {
		a.shapes[a.last].n++
		return
	}
	for i := range a.shapes {
		if slices.Equal(a.shapes[i].chs, key) {
			a.shapes[i].n++
			a.last = i
			return
		}
	}
	if len(a.shapes) < maxShapes {
		a.shapes = append(a.shapes, topoShape{chs: slices.Clone(key), n: 1})
		a.last = len(a.shapes) - 1
		return
	}
	a.countShape(key, 1)
}

// topology is the topology's counts, the shapes counted so far in.
func (a *Acc) topology() *topoCounts {
	for i := range a.shapes {
		if s := &a.shapes[i]; s.n > 0 {
			a.countShape(s.chs, s.n)
			s.n = 0
		}
	}
	return &a.topo
}

// countShape counts n tuples whose counted records have the channels chs.
func (a *Acc) countShape(chs []uint32, n uint64) {
	seen := a.seen[:0]
	for i, ch := range chs {
		c := a.ch[ch]
		k := -1
		for j := range seen {
			if seen[j].op == c.op {
				k = j
				break
			}
		}
		if k < 0 {
			seen = append(seen, opSeen{op: c.op, firstIn: -1, firstOut: -1})
			k = len(seen) - 1
		}
		s := &seen[k]
		if c.role == RoleIn {
			if s.firstIn < 0 {
				s.firstIn = i
			}
			s.ins++
		} else {
			if s.firstOut < 0 {
				s.firstOut = i
			}
			s.outs++
		}
	}
	a.seen = seen
	t := &a.topo
	for _, s := range seen {
		t.ins[s.op] += uint64(s.ins) * n
		t.outs[s.op] += uint64(s.outs) * n
	}
	// Each operator that handed copies on: the operator whose first in
	// comes first after its first out takes them.
	for _, x := range seen {
		if x.outs == 0 {
			continue
		}
		next := -1
		for j, y := range seen {
			if y.op != x.op && y.ins > 0 && y.firstIn > x.firstOut && (next < 0 || y.firstIn < seen[next].firstIn) {
				next = j
			}
		}
		if next < 0 {
			t.ended[x.op] += uint64(x.outs) * n
			continue
		}
		y := seen[next]
		t.edge[int(x.op)*t.ops+int(y.op)] += n
		t.sent[int(x.op)*t.ops+int(y.op)] += uint64(x.outs) * n
		if x.outs > y.ins {
			t.lost[int(x.op)*t.ops+int(y.op)] += uint64(x.outs-y.ins) * n
		}
	}
}

// Flow is what the counts say of an operator over the run.
type Flow struct {
	Ins, Outs uint64
	// Lost: copies it handed on that never reached the next operator;
	// LostTo: that operator (-1: none known). An operator whose outs
	// never reach another operator (the end of the topology) loses none.
	Lost   uint64
	LostTo int
	// LostIn: copies handed to it that never arrived.
	LostIn uint64
	// Next: the operator most of its copies go to (-1: none).
	Next int
}

// flows works out every operator's flow from the merged counts.
func (t *topoCounts) flows() []Flow {
	f := make([]Flow, t.ops)
	for x := range f {
		f[x] = Flow{Ins: t.ins[x], Outs: t.outs[x], LostTo: -1, Next: -1}
		var cont, best uint64
		for y := 0; y < t.ops; y++ {
			e := t.edge[x*t.ops+y]
			cont += e
			if e > best {
				best, f[x].Next = e, y
			}
		}
		if cont == 0 {
			continue // the end of the topology: its outs go nowhere marked
		}
		for y := 0; y < t.ops; y++ {
			f[x].Lost += t.lost[x*t.ops+y]
		}
		// A tuple that reached no operator after this one: lost on the
		// way to the one most tuples go to.
		f[x].Lost += t.ended[x]
		f[x].LostTo = f[x].Next
	}
	for x := range f {
		for y := 0; y < t.ops; y++ {
			if y != x {
				f[x].LostIn += t.lost[y*t.ops+x]
			}
		}
	}
	for x := range f {
		if f[x].LostTo >= 0 {
			f[f[x].LostTo].LostIn += t.ended[x]
		}
	}
	return f
}

// order is the operators in the order copies flow between them (a
// topological order of the edges, ties and cycles broken by rank: the
// operators in hop order).
func (t *topoCounts) order(rank []int) []int {
	pos := make([]int, t.ops)
	for i, x := range rank {
		pos[x] = i
	}
	indeg := make([]int, t.ops)
	for x := 0; x < t.ops; x++ {
		for y := 0; y < t.ops; y++ {
			if x != y && t.sent[x*t.ops+y] > 0 {
				indeg[y]++
			}
		}
	}
	done := make([]bool, t.ops)
	out := make([]int, 0, t.ops)
	for len(out) < t.ops {
		// The first in rank order with nothing before it left; on a cycle,
		// the first in rank order.
		next := -1
		for _, x := range rank {
			if !done[x] && indeg[x] == 0 {
				next = x
				break
			}
		}
		if next < 0 {
			for _, x := range rank {
				if !done[x] {
					next = x
					break
				}
			}
		}
		done[next] = true
		out = append(out, next)
		for y := 0; y < t.ops; y++ {
			if y != next && t.sent[next*t.ops+y] > 0 {
				indeg[y]--
			}
		}
	}
	return out
}

// reach is each operator's reach: the copies of a source tuple that
// arrive at it when nothing is lost, propagated along the operators in
// the order copies flow between them (rank: the operators in hop order). An operator with no marked operator before it takes the
// tuples as they come: 1 for a source (no in), its ins over the tuples
// otherwise. Each other operator gets, from every operator X before it,
// X's reach times the copies X hands it per tuple X takes (lost ones
// included: a tuple that reached no operator after X counts for the
// operator most of X's copies go to).
func (t *topoCounts) reach(rank []int, counted uint64, flows []Flow) []float64 {
	order := t.order(rank)
	r := make([]float64, t.ops)
	for i := range r {
		r[i] = math.NaN()
	}
	if counted == 0 {
		return r
	}
	for _, y := range order {
		from := false
		sum := 0.0
		for x := 0; x < t.ops; x++ {
			copies := t.sent[x*t.ops+y]
			if flows[x].LostTo == y {
				copies += t.ended[x]
			}
			if x == y || copies == 0 {
				continue
			}
			from = true
			per := float64(copies) / float64(counted) // a source: per tuple
			if t.ins[x] > 0 {
				if math.IsNaN(r[x]) {
					continue
				}
				per = r[x] * float64(copies) / float64(t.ins[x])
			}
			sum += per
		}
		switch {
		case from:
			r[y] = sum
		case t.ins[y] > 0:
			r[y] = float64(t.ins[y]) / float64(counted)
		}
	}
	return r
}
