package analyze

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/timeline"
	"cloudprofiler/internal/trace"
)

// The report's aggregates over time (package timeline) and the trace's
// sample (package trace) ride on the join like the other analyses: each
// worker counts its tuples' records per bucket of the run, adds each
// duration to its pair's series (PairStats.series), and offers each tuple
// to its sampler; the workers' parts are merged at the end.

// TimelineBuckets is the number of buckets across the run that the
// report's charts over time draw.
const TimelineBuckets = 120

// DefaultTraceSample is --trace-sample's default.
const DefaultTraceSample = 1000

// A sampled tuple costs about 1.4 KiB until its trace is written (each
// worker's sample holds its records; the writer, its slices with their
// args): --trace-sample 1000000 took 1.38 GB under --mem-mb 256, and wrote
// 441 MB. The sample is capped at what a quarter of --mem-mb holds at
// traceTupleBytes a tuple, and at maxTraceTuples (a trace of about 44 MB:
// Perfetto, which calls JSON traces legacy, opens that in seconds).
const (
	traceTupleBytes = 2 << 10
	maxTraceTuples  = 100_000
)

// TraceSampleCap is the most tuples --trace-sample takes under a budget of
// memBytes.
func TraceSampleCap(memBytes int64) int {
	return int(max(1, min(maxTraceTuples, memBytes/4/traceTupleBytes)))
}

// timelineState is the analysis's part.
type timelineState struct {
	on      bool // the report's aggregates are kept (not --no-report)
	grid    timeline.Grid
	recs    *timeline.Records // the final join's, merged
	sample  *trace.Sampler    // the final join's, merged (nil: no --trace)
	series  atomic.Int64      // series bytes still allowed (an eighth of the budget)
	dropped atomic.Int64      // pairs left without a series past that
	t0      float64           // the grid's time zero (reference cycles)
}

// tupleSpan is the run's first and last tuple record in the reference
// counter (0, 0 without any), from the decoders' smallest and largest TSC
// per channel.
func (a *analysis) tupleSpan() (t0, t1 float64) {
	t0, t1 = math.Inf(1), math.Inf(-1)
	for i, c := range a.chans {
		if c.Role != RoleTuples || a.tscMin[i] > a.tscMax[i] {
			continue
		}
		lo := a.model.PointRelIdx(a.chNode[i], a.tscMin[i]).Est
		hi := a.model.PointRelIdx(a.chNode[i], a.tscMax[i]).Est
		t0, t1 = math.Min(t0, lo), math.Max(t1, hi)
	}
	if math.IsInf(t0, 1) {
		return 0, 0
	}
	return t0, t1
}

// planTimeline lays the buckets over the run once decoding knows its span.
func (a *analysis) planTimeline() {
	a.tl.on = !a.cfg.NoReport
	t0, t1 := a.tupleSpan()
	a.tl.grid = timeline.NewGrid(t0, t1, TimelineBuckets)
	a.tl.t0 = t0
	a.resetSeriesBudget()
}

// resetSeriesBudget gives a join (the second one too, when the channel
// order changed: pipeline.go) the whole eighth of the budget for series.
func (a *analysis) resetSeriesBudget() {
	a.tl.series.Store(a.cfg.MemBytes / 8)
	a.tl.dropped.Store(0)
}

// seriesBytes is what one series takes.
const seriesBytes = TimelineBuckets * (timeline.Bins*4 + 8)

// newSeries is a worker's series for a new pair, or nil past the budget.
func (a *analysis) newSeries() *timeline.Series {
	if !a.tl.on {
		return nil
	}
	if a.tl.series.Add(-seriesBytes) < 0 {
		a.tl.dropped.Add(1)
		return nil
	}
	return timeline.NewSeries(a.tl.grid.N)
}

// newTimelineParts are a worker's record counts and sampler (nil when off).
func (a *analysis) newTimelineParts() (*timeline.Records, *trace.Sampler) {
	var r *timeline.Records
	var s *trace.Sampler
	if a.tl.on {
		r = timeline.NewRecords(len(a.chans), a.tl.grid.N)
	}
	if a.cfg.Trace != "" {
		s = trace.NewSampler(a.cfg.TraceSample)
	}
	return r, s
}

// timelineTuple counts a tuple's records and adds its durations to their
// series, each by the bucket of its start (one bucket a record), and
// offers the tuple to the sampler with its hops' durations and bounds
// (w.hopDur, w.hopErr: per record, from the previous one) and its
// end-to-end duration.
func (w *worker) timelineTuple(hops []event, e2e float64, e2eSeries *timeline.Series) {
	durs, errs := w.hopDur, w.hopErr
	if w.tlRecs != nil {
		g := &w.a.tl.grid
		prev := 0
		for k := range hops {
			b := g.Bucket(hops[k].est)
			w.tlRecs.Add(int(hops[k].ch), b)
			if k == 0 {
				if e2eSeries != nil {
					e2eSeries.Add(b, e2e)
				}
			} else if s := w.hopSeries[k]; s != nil {
				s.Add(prev, durs[k])
			}
			prev = b
		}
	}
	if w.sampler == nil || len(hops) == 0 || !w.sampler.Wants(hops[0].id, e2e) {
		return
	}
	recs := w.traceRecs[:0]
	for k := range hops {
		recs = append(recs, trace.Rec{Ch: int32(hops[k].ch), Est: hops[k].est, Dur: durs[k], Err: errs[k]})
	}
	w.traceRecs = recs
	w.sampler.Add(hops[0].id, e2e, recs)
}

// threads names what a trace's thread and the report's topology box is:
// each channel's operator instance (OPERATOR[#INSTANCE], where the channel
// marks one), else the channel itself, on its node.
func (a *analysis) threads() (ts []trace.Thread, of []int) {
	plan := a.cap.plan
	if plan == nil {
		plan = a.cp.plan
	}
	type key struct {
		node, inst int
		name       string
	}
	seen := map[key]int{}
	for i, c := range a.chans {
		k := key{node: c.node, inst: -1, name: c.Name}
		if plan != nil {
			if inst, r := plan.Role(i); inst >= 0 && r != capacity.RoleNone {
				in := &plan.Instances[inst]
				k = key{node: c.node, inst: inst, name: in.Operator}
				if in.Name != "" {
					k.name += "#" + in.Name
				}
			}
		}
		t, ok := seen[k]
		if !ok {
			t = len(ts)
			seen[k] = t
			ts = append(ts, trace.Thread{Node: c.node, Name: k.name})
		}
		of = append(of, t)
	}
	return ts, of
}

// writeTrace writes --trace's file.
func (a *analysis) writeTrace() error {
	if a.cfg.Trace == "" || a.tl.sample == nil {
		return nil
	}
	tuples, slow := a.tl.sample.Sample()
	threads, of := a.threads()
	l := &trace.Layout{Ref: a.model.Ref(), Hz: a.model.RefHz(), T0: a.tl.t0, Nodes: a.model.Nodes(), Threads: threads, ThreadOf: of,
		Counters: a.traceCounters()}
	for _, c := range a.chans {
		l.Chans = append(l.Chans, c.Label())
	}
	if err := os.MkdirAll(filepath.Dir(a.cfg.Trace), 0o755); err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	var st trace.Stats
	err := writeFile(a.cfg.Trace, func(w io.Writer) error {
		var err error
		write := trace.Write
		if trace.IsProto(a.cfg.Trace) {
			write = trace.WriteProto
		}
		st, err = write(w, l, tuples, slow)
		return err
	})
	if err != nil {
		os.Remove(a.cfg.Trace)
		return fmt.Errorf("--trace: %w", err)
	}
	a.res.Trace = &st
	a.res.Files = append(a.res.Files, a.cfg.Trace)
	return nil
}

// traceCounters are the trace's counter tracks beside each instance's
// slices: its busy share (own work and blocked handing on, over the
// window) and the share of its tuples taken while backlogged, window by
// window, from capacity's rows (the report's charts of the same), and 0
// where the instance had nothing to do: between its windows and after
// its last.
func (a *analysis) traceCounters() []trace.Counter {
	c := a.res.Capacity
	if c == nil {
		return nil
	}
	node := map[string]int{}
	for i, n := range a.model.Nodes() {
		node[n] = i
	}
	byInst := map[string][]*capacity.Row{}
	var insts []string
	for i := range c.Rows {
		r := &c.Rows[i]
		if r.Level != "instance" || r.Window < 0 || r.Method != capacity.MethodInOut || math.IsNaN(r.BusyShare) {
			continue
		}
		if _, ok := node[r.Node]; !ok {
			continue
		}
		k := r.Operator + "\x00" + r.Instance // instances of operators in one process share labels
		if byInst[k] == nil {
			insts = append(insts, k)
		}
		byInst[k] = append(byInst[k], r)
	}
	shift := (c.Windows.T0 - a.tl.t0) / a.res.RefHz // seconds: capacity's time zero on the trace's
	var cs []trace.Counter
	for _, in := range insts {
		rows := byInst[in]
		slices.SortFunc(rows, func(x, y *capacity.Row) int { return cmp.Compare(x.Window, y.Window) })
		name := rows[0].InstanceName()
		busy := trace.Counter{Node: node[rows[0].Node], Name: name + " busy", Arg: "share"}
		backlog := trace.Counter{Node: busy.Node, Name: name + " backlogged", Arg: "share"}
		at := func(s, b, q float64) {
			us := (s + shift) * 1e6
			busy.TS, busy.V = append(busy.TS, us), append(busy.V, b)
			backlog.TS, backlog.V = append(backlog.TS, us), append(backlog.V, q)
		}
		for k, r := range rows {
			b, q := r.BusyShare, 0.0
			if !math.IsNaN(r.BlockedShare) {
				b += r.BlockedShare
			}
			if r.TuplesIn > 0 {
				q = float64(r.Backlogged) / float64(r.TuplesIn)
			}
			at(r.StartS, b, q)
			if k == len(rows)-1 || rows[k+1].Window != r.Window+1 {
				at(r.EndS, 0, 0)
			}
		}
		cs = append(cs, busy, backlog)
	}
	return cs
}
