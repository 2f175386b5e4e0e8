package analyze

import (
	"math/bits"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/runmerge"
)

// Stage 4 of the pipeline (pipeline.go): the join. A partition's records
// are grouped by tuple id with a radix sort (linear in the records: 11-bit
// digits over only the bits in which the partition's ids differ; stable, so
// a tuple's records keep their arrival order), and each tuple's records go
// to the aggregation (aggregate.go) together.

// radixKey is a record in the sort: its id as an unsigned key, its TSC and
// channel, and its index in the partition (for stability). The sort moves
// the records themselves, so that the join then reads them in order
// rather than gathering each from the partition's arrays (cache misses).
type radixKey struct {
	k   uint64
	tsc uint64
	ch  uint32
	i   uint32
}

// id is the record's tuple id.
func (x *radixKey) id() int64 { return int64(x.k ^ (1 << 63)) }

// event is the record as the join hands it on: its counter, and whether
// it followed a wait of its thread (on a channel that notes them, notes[ch],
// the spill keeps that in the counter's bit 63, decode.go; elsewhere bit 63
// is the counter's own).
func (x *radixKey) event(notes []bool) event {
	if notes[x.ch] {
		return event{id: x.id(), tsc: x.tsc &^ logfile.WaitedBit, ch: x.ch, waited: x.tsc&logfile.WaitedBit != 0}
	}
	return event{id: x.id(), tsc: x.tsc, ch: x.ch}
}

// grouper sorts partitions by id, reusing its arrays.
type grouper struct {
	a, b     []radixKey
	runs     []int      // where each ascending run starts
	cur, end []int      // eachMerged: each run's head and end
	tuple    []radixKey // eachMerged: a tuple's records
}

const radixBits = 11

// sortByID returns the partition's records ordered by tuple id (signed
// order), equal ids in arrival order. A partition is often a few
// ascending runs (a channel's ids in the order it logged them, a block
// after another): then merging the runs pairwise takes fewer passes than
// the radix sort, and it is used instead; both are stable.
func (g *grouper) sortByID(d *partData) []radixKey {
	ids := d.id
	n := len(ids)
	if cap(g.a) < n {
		g.a, g.b = make([]radixKey, n), make([]radixKey, n)
	}
	a, b := g.a[:n], g.b[:n]
	if n == 0 {
		return a
	}
	lo, hi := ^uint64(0), uint64(0)
	g.runs = append(g.runs[:0], 0)
	prev := uint64(0)
	for i, id := range ids {
		k := uint64(id) ^ (1 << 63) // signed order as unsigned
		lo, hi = min(lo, k), max(hi, k)
		if k < prev {
			g.runs = append(g.runs, i)
		}
		prev = k
		a[i] = radixKey{k, d.tsc[i], d.ch[i], uint32(i)}
	}
	if len(g.runs) == 1 {
		return a
	}
	width := bits.Len64(hi - lo)
	radixPasses := (width + radixBits - 1) / radixBits
	if bits.Len(uint(len(g.runs)-1)) <= radixPasses {
		return g.mergeRuns(a, b)
	}
	var counts [1 << radixBits]int
	for shift := 0; shift < width; shift += radixBits {
		clear(counts[:])
		for _, x := range a {
			counts[((x.k-lo)>>shift)&(1<<radixBits-1)]++
		}
		sum := 0
		for d, c := range counts {
			counts[d] = sum
			sum += c
		}
		for _, x := range a {
			d := ((x.k - lo) >> shift) & (1<<radixBits - 1)
			b[counts[d]] = x
			counts[d]++
		}
		a, b = b, a
	}
	return a
}

// RunKey is what a partition's runs ascend in (package runmerge).
func (x radixKey) RunKey() uint64 { return x.k }

// mergeRuns merges the ascending runs of a (starting at g.runs) with
// package runmerge, b the other buffer; ties go to the earlier run.
func (g *grouper) mergeRuns(a, b []radixKey) []radixKey {
	sorted, _ := runmerge.Sort(a, b, g.runs)
	return sorted
}

// joinPartition calls fn with every tuple of the partition: its records in
// arrival order (fn may reorder them; the slice is reused).
func (w *worker) joinPartition(d *partData, fn func([]event) error) error {
	return w.join(d, false, fn)
}

// join hands every tuple of the partition on: with columns, a tuple of a
// shape the columnar core takes goes to the worker's shape batch
// (shape.go), and any other to fn after the batch before it was flushed;
// without, every tuple goes to fn. A partition of few ascending runs (a
// channel's records in the order it logged climbing ids, the common case)
// is merged as it is joined (eachMerged); any other is sorted first.
func (w *worker) join(d *partData, columns bool, fn func([]event) error) error {
	each := w.g.eachSorted
	if w.g.findRuns(d.id) <= maxMergeRuns || w.a.cfg.testMergeAll {
		each = w.g.eachMerged
	}
	if err := each(d, func(recs []radixKey) error { return w.handTuple(recs, columns, fn) }); err != nil {
		return err
	}
	return w.flushShape()
}

// eachSorted calls fn with each tuple's records (equal ids, in arrival
// order) of the partition, in id order, sorting it first (sortByID).
func (g *grouper) eachSorted(d *partData, fn func([]radixKey) error) error {
	order := g.sortByID(d)
	for s := 0; s < len(order); {
		e := s + 1
		for e < len(order) && order[e].k == order[s].k {
			e++
		}
		if err := fn(order[s:e]); err != nil {
			return err
		}
		s = e
	}
	return nil
}

// maxMergeRuns is the most ascending runs eachMerged merges: each tuple
// takes a look at every run's head.
const maxMergeRuns = 16

// findRuns sets g.runs to where each ascending run of ids starts, and
// says how many there are.
func (g *grouper) findRuns(ids []int64) int {
	g.runs = append(g.runs[:0], 0)
	prev := uint64(0)
	for i, id := range ids {
		k := uint64(id) ^ (1 << 63)
		if k < prev {
			g.runs = append(g.runs, i)
		}
		prev = k
	}
	return len(g.runs)
}

// eachMerged is eachSorted by merging the ascending runs findRuns found,
// a tuple at a time, without sorting the partition: each tuple is the
// least id at the runs' heads, its records taken from each run in turn,
// which is the order the stable sort gives (equal ids in arrival order).
func (g *grouper) eachMerged(d *partData, fn func([]radixKey) error) error {
	n := len(d.id)
	cur, end := g.cur[:0], g.end[:0]
	for r, s := range g.runs {
		e := n
		if r+1 < len(g.runs) {
			e = g.runs[r+1]
		}
		if s < e {
			cur, end = append(cur, s), append(end, e)
		}
	}
	g.cur, g.end = cur, end
	ids, tsc, ch := d.id, d.tsc, d.ch
	recs := g.tuple
	for len(cur) > 0 {
		least := ids[cur[0]]
		for r := 1; r < len(cur); r++ {
			least = min(least, ids[cur[r]])
		}
		k := uint64(least) ^ (1 << 63)
		recs = recs[:0]
		for r := 0; r < len(cur); r++ {
			i := cur[r]
			for i < end[r] && ids[i] == least {
				recs = append(recs, radixKey{k, tsc[i], ch[i], uint32(i)})
				i++
			}
			cur[r] = i
			if i == end[r] { // the run is done: the others keep their order
				cur, end = append(cur[:r], cur[r+1:]...), append(end[:r], end[r+1:]...)
				r--
			}
		}
		if err := fn(recs); err != nil {
			return err
		}
	}
	if cap(recs) <= maxTupleEvents { // a reused id's many records are not kept
		g.tuple = recs
	}
	return nil
}

// handTuple hands one tuple's records (equal ids, in arrival order) on, as
// join says; an id with more than maxTupleEvents records is reused.
func (w *worker) handTuple(recs []radixKey, columns bool, fn func([]event) error) error {
	if len(recs) > maxTupleEvents {
		// A reused id: no tuple's way, left out; only its first
		// records vote (as they would), without holding them all.
		w.reusedID(recs)
		return nil
	}
	if columns {
		shaped, err := w.addShaped(recs)
		if err != nil || shaped {
			return err
		}
	}
	w.evs = w.evs[:0]
	for k := range recs {
		w.evs = append(w.evs, recs[k].event(w.a.notesWaits))
	}
	return fn(w.evs)
}
