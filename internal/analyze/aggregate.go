package analyze

import (
	"math"
	"slices"
	"sync/atomic"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/critpath"
	"cloudprofiler/internal/mace"
	"cloudprofiler/internal/timeline"
	"cloudprofiler/internal/trace"
	"cloudprofiler/minrtt"
)

// Stage 5 of the pipeline (pipeline.go): aggregation. A worker takes whole
// partitions; for each tuple it votes on the channel order (order.go) and,
// given an order, turns the tuple's records into durations: into the
// worker's own per-pair statistics and, when durations are written, into
// rows for the writer (write.go). Workers share nothing while they run;
// their statistics and votes are merged at the end.

// worker is one join-and-aggregate goroutine's state.
type worker struct {
	a     *analysis
	rank  []int // channel -> place in the hop order; nil: vote only
	votes orderVotes
	pairs map[PairKey]*PairStats
	rows  *rowBatcher         // nil: no durations written
	cap   *capacity.Acc       // nil: no capacity analysis (capacity.go)
	cpc   *critpath.Collector // nil: no critical-path analysis (critpath.go)
	mace  *mace.Acc           // nil: no Mace analysis (mace.go)

	tuples, durations             uint64
	skippedTuples, skippedRecords uint64
	t0                            float64

	vcache voteCache
	pcache [16]struct {
		key PairKey
		p   *PairStats
	}
	g          grouper
	part       partData
	evs        []event
	sorted     []event   // a tuple's records in order (translate)
	idx        [16]uint8 // and their order
	hops, rets []event
	anaHops    []event   // hops with each process's records in time order (repeats)
	anaErrs    []float64 // and their bounds
	capEvs     []capacity.Event
	ops        opBatch    // tuples for the operator analyses (opbatch.go)
	shape      shapeBatch // tuples of one shape, in columns (shape.go)
	// columnTuples counts the tuples the columnar core took.
	columnTuples uint64
	hopErr       []float64        // per hop of the tuple, its bound (critpath.go)
	hopDur       []float64        // and its estimate (timeline.go)
	lastErr      float64          // the bound of the last duration computed
	lastDur      float64          // and its estimate
	lastSeries   *timeline.Series // and its pair's series (timeline.go)
	hopSeries    []*timeline.Series
	// the report's record counts over time and the trace's sample (timeline.go)
	tlRecs    *timeline.Records
	sampler   *trace.Sampler
	traceRecs []trace.Rec
}

func (a *analysis) newWorker(rank []int, rows *rowBatcher) *worker {
	w := &worker{a: a, rank: rank, votes: orderVotes{}, pairs: map[PairKey]*PairStats{}, rows: rows, t0: math.Inf(1)}
	if rank != nil {
		w.cap = a.newCapacityAcc()
		w.mace = a.newMaceAcc()
		if a.cpCur != nil {
			w.cpc = a.cpCur.NewCollector()
		}
		w.tlRecs, w.sampler = a.newTimelineParts()
	}
	return w
}

// partition joins and aggregates partition k.
func (w *worker) partition(ps *partitions, k int) error {
	if err := ps.read(k, &w.part); err != nil {
		return err
	}
	return w.joinAndAggregate(&w.part)
}

// joinAndAggregate joins the records of d and aggregates its tuples: each
// votes, and with an order, becomes durations.
func (w *worker) joinAndAggregate(d *partData) error {
	if err := w.join(d, true, w.perTuple); err != nil {
		return err
	}
	return w.ops.flush(w)
}

// perTuple aggregates one tuple the columnar core did not take (shape.go):
// it votes, and with an order, becomes durations.
func (w *worker) perTuple(evs []event) error {
	evs = w.translate(evs)
	w.a.voteCached(w.votes, &w.vcache, evs)
	if w.rank == nil {
		return nil
	}
	w.tuples++
	return w.tuple(evs)
}

// tuple turns one tuple's events into durations: every hop between
// consecutive channels in the channel order (events of one channel by
// their estimate), first to last when the tuple crossed three or more
// channels, and the return trip when a FOX_START channel heard the tuple's
// ReTACK.
func (w *worker) tuple(evs []event) error {
	a := w.a
	if len(evs) > maxTupleEvents {
		// A reused id (a channel logging a constant, say) is no tuple's way.
		w.skippedTuples++
		w.skippedRecords += uint64(len(evs))
		return nil
	}
	hops, rets := w.hops[:0], w.rets[:0]
	for _, e := range evs {
		if a.isReturn[e.ch] {
			rets = append(rets, e)
		} else {
			hops = append(hops, e)
		}
	}
	w.hops, w.rets = hops, rets
	// evs are sorted by estimate: a stable sort by rank keeps that within
	// a channel.
	inRank := true
	for i := 1; i < len(hops) && inRank; i++ {
		inRank = w.rank[hops[i-1].ch] <= w.rank[hops[i].ch]
	}
	if !inRank {
		slices.SortStableFunc(hops, func(x, y event) int { return w.rank[x.ch] - w.rank[y.ch] })
	}
	repeats := false
	for i := 1; i < len(hops) && !repeats; i++ {
		repeats = hops[i-1].ch == hops[i].ch
	}
	// The operator analyses take a process's records in time order: where
	// a channel repeats (a 1->N operator upstream, the same id handed on
	// several times), rank order would put all of an instance's ins before
	// its outs.
	ana := hops
	if repeats {
		ana = w.timeOrdered(hops)
	}
	errs, durs, sers := append(w.hopErr[:0], 0), append(w.hopDur[:0], 0), append(w.hopSeries[:0], nil)
	for i := 1; i < len(hops); i++ {
		x, y := &hops[i-1], &hops[i]
		kind := KindTransfer
		if a.procOf[x.ch] == a.procOf[y.ch] {
			kind = KindCompute
		}
		if err := w.duration(kind, x, y, nil, -1); err != nil {
			return err
		}
		errs, durs, sers = append(errs, w.lastErr), append(durs, w.lastDur), append(sers, w.lastSeries)
	}
	w.hopErr, w.hopDur, w.hopSeries = errs, durs, sers
	e2e := 0.0 // the end-to-end duration's estimate, and its series
	var e2eSeries *timeline.Series
	if len(hops) == 2 {
		e2e = durs[1]
	}
	if len(hops) >= 3 {
		if err := w.duration(KindEndToEnd, &hops[0], &hops[len(hops)-1], nil, -1); err != nil {
			return err
		}
		e2e, e2eSeries = w.lastDur, w.lastSeries
	}
	if w.tlRecs != nil || w.sampler != nil {
		w.timelineTuple(hops, e2e, e2eSeries)
	}
	if (w.cap != nil || w.cpc != nil) && len(hops) > 0 {
		e2eErr := 0.0
		switch {
		case len(hops) >= 3:
			e2eErr = w.lastErr
		case len(hops) == 2:
			e2eErr = errs[1]
		}
		if repeats {
			errs = w.timeOrderedErrs(hops, errs)
		}
		if err := w.ops.add(w, ana, errs, e2eErr); err != nil {
			return err
		}
	}
	for _, r := range rets {
		start, ok := a.retOf[int(r.ch)]
		if !ok {
			continue
		}
		// The return trip runs from the tuple's start on the FOX_START
		// channel to the ReTACK's arrival there; the method takes it for the
		// tuple's latency to its last channel, which it overestimates by
		// the ReTACK's transfer time. Ours is the start-to-end duration.
		var s *event
		for k := range hops {
			if int(hops[k].ch) == start && s == nil {
				s = &hops[k]
			}
		}
		if s == nil || len(hops) < 2 {
			continue
		}
		end := &hops[len(hops)-1]
		ours := a.model.DurationTranslated(&s.tr, &end.tr)
		if err := w.duration(KindReturnRTT, s, &r, &ours, int(end.ch)); err != nil {
			return err
		}
	}
	return nil
}

// timeOrdered is the tuple's records in hop order with each run of
// consecutive records of one process sorted by time (a copy).
func (w *worker) timeOrdered(hops []event) []event {
	out := append(w.anaHops[:0], hops...)
	w.a.procRuns(out, func(i, j int) {
		slices.SortStableFunc(out[i:j], func(x, y event) int {
			switch {
			case x.est < y.est:
				return -1
			case x.est > y.est:
				return 1
			}
			return 0
		})
	})
	w.anaHops = out
	return out
}

// procRuns calls f with each run [i, j) of consecutive records of one
// process.
func (a *analysis) procRuns(hops []event, f func(i, j int)) {
	for i := 0; i < len(hops); {
		j := i + 1
		for j < len(hops) && a.procOf[hops[j].ch] == a.procOf[hops[i].ch] {
			j++
		}
		f(i, j)
		i = j
	}
}

// timeOrderedErrs is the hops' bounds for timeOrdered's records: a run of
// one process keeps the bound of the hop into it on its first record, and
// its hops within are exact (one clock).
func (w *worker) timeOrderedErrs(hops []event, errs []float64) []float64 {
	out := append(w.anaErrs[:0], errs...)
	w.a.procRuns(hops, func(i, j int) {
		for k := i + 1; k < j; k++ {
			out[k] = 0
		}
	})
	w.anaErrs = out
	return out
}

// duration computes and records one duration from x to y. For a return
// trip, ours is the start-to-end duration the ReT method estimates and keyTo
// the end's channel, under which the pair is summarised.
func (w *worker) duration(kind string, x, y *event, ours *minrtt.Duration, keyTo int) error {
	a := w.a
	d := a.model.DurationTranslated(&x.tr, &y.tr)
	key := PairKey{kind, int(x.ch), int(y.ch)}
	if keyTo >= 0 {
		key.To = keyTo
	}
	p := w.pairOf(key, ours != nil)
	p.Dur.Add(d.Est)
	if p.kept != nil && p.Dur.exact != nil && p.kept.Add(1) > ExactLimit {
		// Together the workers have more than the exact limit of this
		// pair: none keeps exact values any longer.
		p.Dur.forgetExact()
		if p.RetErr != nil {
			p.RetErr.forgetExact()
		}
	}
	p.Err.Add(d.Err)
	w.lastErr, w.lastDur, w.lastSeries = d.Err, d.Est, p.series
	p.Paper.Add(d.Paper)
	p.Baseline.Add(d.Baseline)
	if d.Scenario >= 0 && d.Scenario < 4 {
		p.Scenarios[d.Scenario]++
	}
	if ours != nil {
		p.RetErr.Add(d.Est - ours.Est)
		p.OursErr.Add(ours.Err)
	}
	w.durations++
	if w.rows != nil {
		return w.rows.add(kind, x, y, &d)
	}
	return nil
}

// pairOf is the worker's statistics of the pair key (ret: a return trip's,
// which keep its error against the method's as well).
func (w *worker) pairOf(key PairKey, ret bool) *PairStats {
	// The same few pairs come again and again: a small cache before the map.
	slot := &w.pcache[(uint(key.From)*7+uint(key.To)+uint(len(key.Kind)))&15]
	p := slot.p
	if p == nil || slot.key != key {
		p = w.pairs[key]
		if p == nil {
			p = newPairStats(key, ret)
			p.kept = w.a.keptOf(key)
			if key.Kind != KindReturnRTT {
				p.series = w.a.newSeries()
			}
			w.pairs[key] = p
		}
		slot.key, slot.p = key, p
	}
	return p
}

// newPairStats makes a pair's statistics. Only the durations get exact
// quantiles: the bounds are reported by min, median and max, and 0.1 % is
// plenty there.
func newPairStats(key PairKey, ret bool) *PairStats {
	p := &PairStats{Key: key, Dur: newStats(), Err: newStatsLimit(0), Paper: newStatsLimit(0), Baseline: newStatsLimit(0)}
	if ret {
		p.RetErr, p.OursErr = newStats(), newStatsLimit(0)
	}
	return p
}

// merge adds o's statistics and votes into w's.
func (w *worker) merge(o *worker) {
	for k, op := range o.pairs {
		p := w.pairs[k]
		if p == nil {
			w.pairs[k] = op
			continue
		}
		p.Dur.Merge(op.Dur)
		p.Err.Merge(op.Err)
		p.Paper.Merge(op.Paper)
		p.Baseline.Merge(op.Baseline)
		for i := range p.Scenarios {
			p.Scenarios[i] += op.Scenarios[i]
		}
		if p.RetErr != nil && op.RetErr != nil {
			p.RetErr.Merge(op.RetErr)
			p.OursErr.Merge(op.OursErr)
		}
		switch {
		case p.series == nil:
			p.series = op.series
		case op.series != nil:
			p.series.Merge(op.series)
		}
	}
	for k, ov := range o.votes {
		v := w.votes[k]
		if v == nil {
			v = &votes{}
			w.votes[k] = v
		}
		for i := 0; i < 2; i++ {
			v.sure[i] += ov.sure[i]
			v.likely[i] += ov.likely[i]
		}
	}
	w.tuples += o.tuples
	w.durations += o.durations
	w.skippedTuples += o.skippedTuples
	w.skippedRecords += o.skippedRecords
	w.t0 = math.Min(w.t0, o.t0)
	if w.mace != nil && o.mace != nil {
		w.mace.Merge(o.mace)
	}
	if w.cap != nil && o.cap != nil {
		w.cap.Merge(o.cap)
	}
	if w.tlRecs != nil && o.tlRecs != nil {
		w.tlRecs.Merge(o.tlRecs)
	}
	if w.sampler != nil && o.sampler != nil {
		w.sampler.Merge(o.sampler)
	}
}

// keptOf is the count, shared by the workers, of a pair's durations kept
// for exact quantiles (Stats.forgetExact).
func (a *analysis) keptOf(key PairKey) *atomic.Uint64 {
	a.keptMu.Lock()
	defer a.keptMu.Unlock()
	if a.kept == nil {
		a.kept = map[PairKey]*atomic.Uint64{}
	}
	c := a.kept[key]
	if c == nil {
		c = new(atomic.Uint64)
		if a.keptFrom != nil {
			c.Store(a.keptFrom(key))
		}
		a.kept[key] = c
	}
	return c
}

// reusedID takes an id with more than maxTupleEvents records: it is left
// out (counted), and its first maxVoteEvents records in estimate order vote,
// as any tuple's do; they are kept while the records stream past, so memory
// does not grow with the id's records.
func (w *worker) reusedID(order []radixKey) {
	first := w.sorted[:0]
	var e event
	for k := range order {
		e = order[k].event(w.a.notesWaits)
		w.a.model.TranslateInto(&e.tr, w.a.chNode[e.ch], e.tsc)
		v := e.tr.Value(w.a.model)
		e.est, e.err = v.Est, v.Err
		if v.Est < w.t0 {
			w.t0 = v.Est
		}
		if len(first) == maxVoteEvents && !eventLess(&e, &first[len(first)-1]) {
			continue
		}
		if len(first) < maxVoteEvents {
			first = append(first, e)
		} else {
			first[len(first)-1] = e
		}
		for j := len(first) - 1; j > 0 && eventLess(&first[j], &first[j-1]); j-- {
			first[j], first[j-1] = first[j-1], first[j]
		}
	}
	w.sorted = first
	w.a.voteCached(w.votes, &w.vcache, first)
	if w.rank != nil {
		w.tuples++
		w.skippedTuples++
		w.skippedRecords += uint64(len(order))
	}
}
