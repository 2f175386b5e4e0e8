package analyze

import (
	"cloudprofiler/internal/critpath"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/timeline"
	"cloudprofiler/internal/trace"
	"cloudprofiler/minrtt"
)

// The columnar core of stages 2 and 5 (pipeline.go). Most tuples of a run
// have one shape: one record on each of the same few channels (a record
// per operator the tuple passed). The join collects consecutive tuples of
// one shape into a shapeBatch, a column per channel (ids, counters), and
// each stage then works a column at a time over the batch instead of a
// tuple at a time: the translation of a channel's column, the votes of a
// channel pair, the durations of a hop and their per-pair statistics, with
// every lookup (the pair's statistics, its votes, the hop's kind) made once
// per batch rather than once per record.
//
// A tuple of another shape (a channel twice, a return channel, more than
// maxShape records, a node that does not translate) takes the per-tuple
// path (aggregate.go), after the batch before it is flushed: every
// accumulator (statistics, rows, the report's timeline, the operator
// analyses) sees the tuples in the order the per-tuple path would give it,
// so the results are the same to the bit (TestPipelineMatchesReference).

// maxShape is the most records a tuple of a shape has (a Flink job's
// tuples log 9 to 10: in and out of each operator); a batch holds
// shapeBatchRecords records, 512 tuples of 4: its columns, about 160
// bytes a record with the translations and durations (330 KiB a worker),
// stay in the core's cache.
const (
	maxShape          = 16
	shapeBatchRecords = 2048
)

// shapeBatch is consecutive tuples of one shape, column k holding each
// tuple's record on channel chs[k] (channels ascending, so that the order
// records arrived in does not matter: the per-tuple path orders them too).
type shapeBatch struct {
	n    int              // records a tuple; 0: no shape yet
	chs  [maxShape]uint32 // column k's channel
	ok   bool             // the shape takes the columnar path
	hops [maxShape]int    // the columns in hop (rank) order
	ids  []int64
	tsc  [maxShape][]uint64
	wait [maxShape][]bool // the thread waited before the record (channels that note it)
	// filled by flush
	tr       [maxShape][]minrtt.Translated
	est, err [maxShape][]float64
	dur      [maxShape][]minrtt.Duration // dur[h]: hop h (hops[h-1] to hops[h]); dur[0]: first to last
	pair     [maxShape]*PairStats        // and their statistics
	vals     [4][]float64                // a hop's durations' fields, a column each (durationColumn)
	kind     [maxShape]string
	recs     [maxShape]radixKey // the tuple being added, by channel
}

// addShaped takes one tuple's records (joined, in arrival order) into the
// shape batch and says true, or says false when the tuple has no shape the
// batch takes; then the batch was flushed and the tuple is the caller's.
func (w *worker) addShaped(recs []radixKey) (bool, error) {
	b := &w.shape
	n := len(recs)
	if n > maxShape {
		return false, w.flushShape()
	}
	// The records by channel (insertion sort: a handful).
	r := b.recs[:n]
	copy(r, recs)
	for i := 1; i < n; i++ {
		for j := i; j > 0 && r[j].ch < r[j-1].ch; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
	same := n == b.n
	for k := 0; k < n && same; k++ {
		same = r[k].ch == b.chs[k]
	}
	if !same {
		if err := w.flushShape(); err != nil {
			return false, err
		}
		b.n = n
		for k := range r {
			b.chs[k] = r[k].ch
		}
		b.ok = w.shapeTakes()
	}
	if !b.ok {
		return false, nil
	}
	b.ids = append(b.ids, r[0].id())
	notes := w.a.notesWaits
	for k := range r {
		c := r[k].tsc
		waited := false
		if notes[r[k].ch] {
			c, waited = c&^logfile.WaitedBit, c&logfile.WaitedBit != 0
		}
		b.tsc[k] = append(b.tsc[k], c)
		b.wait[k] = append(b.wait[k], waited)
	}
	if len(b.ids)*n >= shapeBatchRecords {
		return true, w.flushShape()
	}
	return true, nil
}

// shapeTakes says whether the batch's (new) shape takes the columnar path,
// and orders its columns into hops: its channels are distinct, none logs
// returns, each node translates, and (with an order) no two share a rank.
func (w *worker) shapeTakes() bool {
	b, a := &w.shape, w.a
	for k := 0; k < b.n; k++ {
		ch := b.chs[k]
		if (k > 0 && ch == b.chs[k-1]) || a.isReturn[ch] || !a.model.Reaches(a.chNode[ch]) {
			return false
		}
	}
	if w.rank == nil {
		return true
	}
	h := b.hops[:b.n]
	for k := range h {
		h[k] = k
		for j := k; j > 0 && w.rank[b.chs[h[j]]] < w.rank[b.chs[h[j-1]]]; j-- {
			h[j], h[j-1] = h[j-1], h[j]
		}
	}
	for k := 1; k < len(h); k++ {
		if w.rank[b.chs[h[k]]] == w.rank[b.chs[h[k-1]]] {
			return false
		}
	}
	for k := 1; k < len(h); k++ {
		b.kind[k] = KindTransfer
		if a.procOf[b.chs[h[k-1]]] == a.procOf[b.chs[h[k]]] {
			b.kind[k] = KindCompute
		}
	}
	b.kind[0] = KindEndToEnd
	return true
}

// flushShape runs the batch's tuples through translation, the votes and
// (with an order) the aggregation, and empties it.
func (w *worker) flushShape() error {
	b := &w.shape
	m := len(b.ids)
	if m == 0 {
		return nil
	}
	defer func() {
		b.ids = b.ids[:0]
		for k := range b.tsc {
			b.tsc[k], b.wait[k] = b.tsc[k][:0], b.wait[k][:0]
		}
	}()
	w.columnTuples += uint64(m)
	w.translateColumns(m)
	w.voteColumns(m)
	if w.rank == nil {
		return nil
	}
	w.tuples += uint64(m)
	return w.aggregateColumns(m)
}

// translateColumns translates each column into the reference clock.
func (w *worker) translateColumns(m int) {
	b, model := &w.shape, w.a.model
	for k := 0; k < b.n; k++ {
		node := w.a.chNode[b.chs[k]]
		b.tr[k] = grow(b.tr[k], m, b.n)
		b.est[k], b.err[k] = grow(b.est[k], m, b.n), grow(b.err[k], m, b.n)
		tr, est, er := b.tr[k], b.est[k], b.err[k]
		for i, c := range b.tsc[k][:m] {
			model.TranslateInto(&tr[i], node, c)
			v := tr[i].Value(model)
			est[i], er[i] = v.Est, v.Err
			if v.Est < w.t0 {
				w.t0 = v.Est
			}
		}
	}
}

// grow returns s with length m, reusing its array when it is large enough,
// else making one for the most tuples a batch of n records a tuple holds:
// a batch's columns take shapeBatchRecords records in all, whatever n.
func grow[T any](s []T, m, n int) []T {
	if cap(s) < m {
		return make([]T, m, max(m, shapeBatchRecords/n))
	}
	return s[:m]
}

// voteColumns counts the batch's votes on the order of each pair of its
// channels, as voteCached counts each tuple's: of two records, the one
// with the lower estimate (then channel) is x; records of one process are
// ordered by their counter for sure, others for sure when their bounds do
// not overlap, else likely by their estimates.
func (w *worker) voteColumns(m int) {
	b, a := &w.shape, w.a
	for k1 := 0; k1 < b.n; k1++ {
		for k2 := k1 + 1; k2 < b.n; k2++ {
			// chs[k1] < chs[k2]: side 0 is k1's record first.
			e1, e2 := b.est[k1][:m], b.est[k2][:m]
			var sure, likely [2]uint64
			if a.procOf[b.chs[k1]] == a.procOf[b.chs[k2]] {
				t1, t2 := b.tsc[k1][:m], b.tsc[k2][:m]
				for i := range t1 {
					// x is k2's record when its estimate is lower; the
					// first is y when y's counter is lower.
					var first2 bool
					if e2[i] < e1[i] {
						first2 = !(t1[i] < t2[i])
					} else {
						first2 = t2[i] < t1[i]
					}
					sure[b2i(first2)]++
				}
			} else {
				r1, r2 := b.err[k1][:m], b.err[k2][:m]
				for i := range e1 {
					if e2[i] < e1[i] { // k2's record is x
						if e1[i]-r1[i] > e2[i]+r2[i] {
							sure[1]++
						} else {
							likely[1]++
						}
					} else if e2[i]-r2[i] > e1[i]+r1[i] {
						sure[0]++
					} else {
						likely[0]++
					}
				}
			}
			key := [2]uint32{b.chs[k1], b.chs[k2]}
			v := w.votes[key]
			if v == nil {
				v = &votes{}
				w.votes[key] = v
			}
			for s := range sure {
				v.sure[s] += sure[s]
				v.likely[s] += likely[s]
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// aggregateColumns turns the batch into durations hop by hop, each hop's
// into its pair's statistics at once, then hands each tuple, in order, to
// the writer, the report's timeline and the operator analyses.
func (w *worker) aggregateColumns(m int) error {
	b := &w.shape
	n, hops := b.n, b.hops[:b.n]
	for h := 1; h < n; h++ {
		w.durationColumn(h, hops[h-1], hops[h], m)
	}
	if n >= 3 {
		w.durationColumn(0, hops[0], hops[n-1], m)
	}
	for i := 0; i < m; i++ {
		id := b.ids[i]
		if w.rows != nil {
			for h := 1; h < n; h++ {
				x, y := hops[h-1], hops[h]
				if err := w.rows.addRecord(b.kind[h], id, b.chs[x], b.chs[y], b.tsc[x][i], b.tsc[y][i], &b.dur[h][i]); err != nil {
					return err
				}
			}
			if n >= 3 {
				x, y := hops[0], hops[n-1]
				if err := w.rows.addRecord(KindEndToEnd, id, b.chs[x], b.chs[y], b.tsc[x][i], b.tsc[y][i], &b.dur[0][i]); err != nil {
					return err
				}
			}
		}
		// The end-to-end duration (estimate, bound, series) as the
		// per-tuple path takes it: the only hop's for two records.
		e2e, e2eErr := 0.0, 0.0
		var e2eSeries *timeline.Series
		switch {
		case n >= 3:
			e2e, e2eErr, e2eSeries = b.dur[0][i].Est, b.dur[0][i].Err, b.pair[0].series
		case n == 2:
			e2e, e2eErr = b.dur[1][i].Est, b.dur[1][i].Err
		}
		if w.tlRecs != nil || w.sampler != nil {
			w.timelineColumns(i, e2e, e2eSeries)
		}
		if w.cap != nil || w.cpc != nil {
			o := &w.ops
			for h, c := range hops {
				herr := 0.0
				if h > 0 {
					herr = b.dur[h][i].Err
				}
				o.evs = append(o.evs, critpath.Event{Ch: b.chs[c], Waited: b.wait[c][i], Est: b.est[c][i], Err: herr, Raw: b.tsc[c][i]})
			}
			if err := o.endTuple(w, id, e2eErr); err != nil {
				return err
			}
		}
	}
	return nil
}

// durationColumn computes the durations of hop h (dur[h]) from column x to
// column y for the batch and adds them to the pair's statistics, a
// statistic at a time.
func (w *worker) durationColumn(h, x, y, m int) {
	b, model := &w.shape, w.a.model
	b.dur[h] = grow(b.dur[h], m, b.n)
	ds, tx, ty := b.dur[h], b.tr[x][:m], b.tr[y][:m]
	var vals [4][]float64 // estimates, bounds, the paper's and the baseline's bounds
	for k := range vals {
		b.vals[k] = grow(b.vals[k], m, b.n)
		vals[k] = b.vals[k]
	}
	p := w.pairOf(PairKey{b.kind[h], int(b.chs[x]), int(b.chs[y])}, false)
	b.pair[h] = p
	for i := range ds {
		d := &ds[i]
		model.DurationInto(d, &tx[i], &ty[i])
		vals[0][i], vals[1][i], vals[2][i], vals[3][i] = d.Est, d.Err, d.Paper, d.Baseline
		if d.Scenario >= 0 && d.Scenario < 4 {
			p.Scenarios[d.Scenario]++
		}
	}
	p.Dur.AddColumn(vals[0])
	if p.kept != nil && p.Dur.exact != nil && p.kept.Add(uint64(m)) > ExactLimit {
		// As duration does, a batch at a time.
		p.Dur.forgetExact()
	}
	p.Err.AddColumn(vals[1])
	p.Paper.AddColumn(vals[2])
	p.Baseline.AddColumn(vals[3])
	w.durations += uint64(m)
}

// timelineColumns is timelineTuple for tuple i of the batch.
func (w *worker) timelineColumns(i int, e2e float64, e2eSeries *timeline.Series) {
	b := &w.shape
	hops := b.hops[:b.n]
	if w.tlRecs != nil {
		g := &w.a.tl.grid
		prev := 0
		for h, c := range hops {
			bk := g.Bucket(b.est[c][i])
			w.tlRecs.Add(int(b.chs[c]), bk)
			if h == 0 {
				if e2eSeries != nil {
					e2eSeries.Add(bk, e2e)
				}
			} else if s := b.pair[h].series; s != nil {
				s.Add(prev, b.dur[h][i].Est)
			}
			prev = bk
		}
	}
	if w.sampler == nil || !w.sampler.Wants(b.ids[i], e2e) {
		return
	}
	recs := w.traceRecs[:0]
	for h, c := range hops {
		r := trace.Rec{Ch: int32(b.chs[c]), Est: b.est[c][i]}
		if h > 0 {
			r.Dur, r.Err = b.dur[h][i].Est, b.dur[h][i].Err
		}
		recs = append(recs, r)
	}
	w.traceRecs = recs
	w.sampler.Add(b.ids[i], e2e, recs)
}
