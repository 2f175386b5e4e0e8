package analyze

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The pipeline that turns tuple records into durations, a stage a file:
//
//  1. decode     (decode.go)    workers decode the channel files, largest first
//  2. translate  (translate.go) each record into the reference clock, once, at the join
//  3. partition  (partition.go) records by a hash of the tuple id, in memory or spilled
//  4. join       (join.go)      a partition at a time: a radix sort groups it by tuple id
//  5. aggregate  (aggregate.go) per tuple: the channel-order votes, the hops, per-pair statistics,
//                               and the capacity analysis's accumulators (capacity.go)
//  6. write      (write.go)     durations.parquet (and .csv), in partition order
//
// Decoding and the join each run on every core (Config.Workers); the
// partitions are sized so that the join's working set fits the budget.
//
// A tuple's hops follow one channel order, which the votes of all tuples
// decide (order.go). Rather than join everything twice (once to vote, once
// for the durations), the order is first decided from a sample of the
// partitions (at least 1/64 of the records), then every partition is
// joined once with it while the votes of all tuples are counted; when all
// the votes decide another order (never seen on consistent data), the
// durations are computed again with it. Either way the result is what the
// order of all votes gives.
//
// Memory (Config.MemBytes, --mem-mb): a quarter for the join's partitions
// (one per worker), half for the decoders' open blocks (before the join
// starts), an eighth for the index of spilled blocks, and the records
// themselves in memory only when all of them fit in a quarter (else in
// spill files, column-encoded: at most 20 bytes a record, about 4 for
// climbing ids and counters); during the join, the report's aggregates
// over time take at most an eighth (timeline.go: the decoders' half is
// free by then). Not in the budget: the per-pair statistics
// (exact quantiles of up to 2^20 durations a pair, 8 MiB, shared by the
// workers; a 0.1 % histogram past that) and the Parquet writer's row group.

// progressEvery is how long a run goes before its first progress line, and
// between two: a person waiting more than 2 s wants to know it is moving.
const progressEvery = 2 * time.Second

// progress counts what the pipeline did, for the progress line.
type progress struct {
	stage   atomic.Value // string
	records atomic.Uint64
	parts   atomic.Int64
	total   uint64
	nparts  int
	start   time.Time
}

// report writes a progress line every interval to w once the run is longer
// than after, until stop is closed.
func (p *progress) report(w io.Writer, after, interval time.Duration, stop chan struct{}) {
	t := time.NewTimer(after)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		el := time.Since(p.start).Seconds()
		rec := p.records.Load()
		stage, _ := p.stage.Load().(string)
		line := fmt.Sprintf("analyze: %5.1f s  %s  records %d of %d (%.1fM/s)", el, stage, rec, p.total, float64(rec)/el/1e6)
		if stage == "join" {
			line += fmt.Sprintf("  partitions %d of %d", p.parts.Load(), p.nparts)
		}
		fmt.Fprintln(w, line)
		t.Reset(interval)
	}
}

// joinTuples runs the stages above on the tuple and return channels.
func (a *analysis) joinTuples() error {
	workers := a.cfg.Workers
	total, files := a.tupleFiles()
	spillDir := a.cfg.SpillDir
	if spillDir == "" {
		spillDir = filepath.Join(a.cfg.Out, ".spill")
	}
	ps, err := partitionPlan(total, files, workers, a.cfg.MemBytes, spillDir)
	if err != nil {
		return err
	}
	ps.removeDir = a.cfg.SpillDir == ""
	if a.cfg.testIDGroup > 0 {
		ps.group = a.cfg.testIDGroup
	}
	defer ps.close()
	a.progress.total, a.progress.nparts = total, ps.n

	a.progress.stage.Store("decode")
	a.planDepIndexes()
	if err := a.decodeAll(ps, workers); err != nil {
		return err
	}
	a.doneDepIndexes()
	if err := a.checkRecords(); err != nil {
		return err
	}
	a.planTimeline()
	a.res.Spilled = ps.spilled
	if err := a.capacityWindows(); err != nil {
		return err
	}
	if err := a.planMace(); err != nil {
		return err
	}
	a.progress.stage.Store("join")

	// The channel order from a sample of the partitions: the first ones
	// that hold 1/64 of the records, joined on every worker, votes only.
	sampled, seen := 0, uint64(0)
	for sampled < ps.n && (seen == 0 || seen < a.res.Records/64) {
		seen += ps.events[sampled]
		sampled++
	}
	sample, err := a.joinAll(ps, sampled, workers, nil)
	if err != nil {
		return err
	}
	a.progress.parts.Store(0)
	rank, err := a.rankChannels(sample.votes)
	if err != nil {
		return err
	}
	if a.cfg.testWrongSample { // a test of the second attempt
		slices.Reverse(rank)
	}
	for attempt := 0; ; attempt++ {
		a.resetSeriesBudget()
		all, err := a.joinAll(ps, ps.n, workers, rank)
		if err != nil {
			return err
		}
		final, err := a.rankChannels(all.votes)
		if err != nil {
			return err
		}
		if slices.Equal(final, rank) || attempt > 0 {
			a.finishJoin(all, rank)
			return nil
		}
		// The sample's order was not the order of all tuples: again.
		rank = final
		a.progress.parts.Store(0)
	}
}

// tupleFiles counts the tuple and return channels' files and the most
// records they can hold: what the partitions are planned for.
func (a *analysis) tupleFiles() (total uint64, files int) {
	for _, c := range a.chans {
		if c.Role == RoleTuples || c.Role == RoleReturn {
			total += c.maxRecords
			files++
		}
	}
	return total, files
}

// joinAll joins and aggregates the first parts partitions with the given
// channel order (nil: votes only, no durations), on workers goroutines, and
// returns their merged results.
func (a *analysis) joinAll(ps *partitions, parts, workers int, rank []int) (*worker, error) {
	var dw *durationWriter
	if rank != nil {
		sinks, err := a.durationSinks()
		if err != nil {
			return nil, err
		}
		if len(sinks) > 0 {
			dw = newDurationWriter(ps.n, sinks)
		}
	}
	a.kept = nil // counts of this attempt only
	if a.cpCur != nil {
		a.cpCur.Abort() // an attempt before: its spill goes
		a.cpCur = nil
	}
	if rank != nil {
		an, err := a.newCritPath(rank)
		if err != nil {
			return nil, err
		}
		a.cpCur = an
	}
	ws := make([]*worker, workers)
	errs := make([]error, workers)
	ended := make([]atomic.Bool, ps.n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for i := range ws {
		var rows *rowBatcher
		if dw != nil {
			rows = dw.batcher(a)
		}
		ws[i] = a.newWorker(rank, rows)
		wg.Add(1)
		go func(w *worker, i int) {
			defer wg.Done()
			for !failed.Load() {
				k := int(next.Add(1)) - 1
				if k >= parts {
					return
				}
				if w.rows != nil {
					w.rows.begin(k)
				}
				err := w.partition(ps, k)
				if w.rows != nil {
					if eerr := w.rows.end(); err == nil {
						err = eerr
					}
					ended[k].Store(true)
				}
				a.progress.parts.Add(1)
				if err != nil {
					errs[i] = err
					failed.Store(true)
					return
				}
			}
		}(ws[i], i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			if dw != nil {
				dw.abandon(func(k int) bool { return ended[k].Load() })
			}
			return nil, err
		}
	}
	if dw != nil {
		if err := dw.finish(); err != nil {
			return nil, err
		}
	}
	for _, w := range ws[1:] {
		ws[0].merge(w)
	}
	return ws[0], nil
}

// finishJoin keeps the merged results.
func (a *analysis) finishJoin(w *worker, rank []int) {
	a.rank = rank
	a.pairs = w.pairs
	a.res.Tuples, a.res.Durations = w.tuples, w.durations
	a.res.SkippedTuples, a.res.SkippedRecords = w.skippedTuples, w.skippedRecords
	a.t0 = math.Min(a.t0, w.t0)
	a.cap.acc = w.cap
	a.mace.acc = w.mace
	a.tl.recs, a.tl.sample = w.tlRecs, w.sampler
	a.cp.an, a.cpCur = a.cpCur, nil
	byRank := make([]int, len(a.chans))
	for i, r := range rank {
		byRank[r] = i
	}
	for _, i := range byRank {
		if a.chans[i].Role == RoleTuples {
			a.res.Order = append(a.res.Order, a.chans[i].Label())
		}
	}
	for _, name := range []string{"durations.parquet", "durations.csv"} {
		if a.writes(name) {
			a.res.Files = append(a.res.Files, filepath.Join(a.cfg.Out, name))
		}
	}
}

// writes says whether this analysis writes the named durations file.
func (a *analysis) writes(name string) bool {
	switch name {
	case "durations.csv":
		return !a.cfg.NoDurations && a.cfg.DurationsCSV
	case "durations.parquet":
		return !a.cfg.NoDurations
	}
	return false
}

// durationSinks opens the durations files this analysis writes.
func (a *analysis) durationSinks() ([]rowSink, error) {
	var sinks []rowSink
	if a.writes("durations.parquet") {
		s, err := newParquetSink(filepath.Join(a.cfg.Out, "durations.parquet"), a.cfg.Workers)
		if err != nil {
			return nil, err
		}
		sinks = append(sinks, s)
	}
	if a.writes("durations.csv") {
		s, err := newCSVSink(filepath.Join(a.cfg.Out, "durations.csv"))
		if err != nil {
			for _, s := range sinks {
				s.abort()
			}
			return nil, err
		}
		sinks = append(sinks, s)
	}
	return sinks, nil
}
