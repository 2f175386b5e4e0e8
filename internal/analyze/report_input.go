package analyze

import (
	"io"
	"sort"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/report"
)

// The pipeline hands its results to the report (internal/report) here:
// what a Result holds for summary.txt, and what the analysis still has
// in memory for report.html's drawings (the clock model's links, the
// topology's boxes, the aggregates over time).

// WriteText writes the summary as a table for people, in microseconds
// (summary.txt), with the verdict first.
func (r *Result) WriteText(w io.Writer) error {
	return report.WriteText(w, r.reportInput(r.Rows()))
}

// reportInput is the Result as the report reads it (rows: r.Rows()).
func (r *Result) reportInput(rows []Row) *report.Input {
	in := &report.Input{Ref: r.Ref, RefHz: r.RefHz, Records: r.Records, Tuples: r.Tuples, Durations: r.Durations,
		SkippedTuples: r.SkippedTuples, SkippedRecords: r.SkippedRecords, MaxTupleRecords: maxTupleEvents,
		SkippedFiles: r.SkippedFiles, LineageChannels: r.LineageChannels, LineagePairs: r.LineagePairs,
		LineageOutputs: r.LineageOutputs, Order: r.Order,
		Capacity: r.Capacity, CapacityNote: r.CapacityNote, CritPath: r.CritPath, CritPathNote: r.CritPathNote,
		Mace: r.Mace, MaceNote: r.MaceNote}
	for i, c := range r.Channels {
		in.Channels = append(in.Channels, report.Channel{Label: c.Label(), Path: c.Path, Problems: c.Problems,
			Tuples: c.Role == RoleTuples, Counter: c.Role == RoleCounter, Rank: i, Thread: i, Role: capacity.RoleNone})
	}
	for i, p := range r.Pairs {
		in.Pairs = append(in.Pairs, report.Pair{Row: rows[i], FromChannel: p.Key.From, ToChannel: p.Key.To})
	}
	for _, s := range r.Runs {
		in.Runs = append(in.Runs, report.Run{Channel: s.Channel, FirstID: s.FirstID, LastID: s.LastID,
			Seconds: s.Duration.Est / r.RefHz, Bound: s.Duration.Err / r.RefHz})
	}
	return in
}

// addPage adds to the Result's Input (reportInput) what report.html
// draws: the nodes and their links, the topology's boxes and the operator
// each channel marks, each pair's distribution and its line over time,
// the tuple records and the counters' periods over time.
func (a *analysis) addPage(in *report.Input) *report.Input {
	r := a.res
	in.Nodes, in.Links, in.Method = a.model.Nodes(), a.model.Links(), a.cfg.Method.String()
	threads, of := a.threads()
	for _, t := range threads {
		in.Threads = append(in.Threads, report.Thread{Name: t.Name, Node: t.Node})
	}
	plan := a.cap.plan
	if plan == nil {
		plan = a.cp.plan
	}
	g := a.tl.grid
	in.Timeline = report.Timeline{On: a.tl.on, Buckets: g.N, Width: g.Width / r.RefHz, Dropped: a.tl.dropped.Load()}
	for ch := range in.Channels {
		c := &in.Channels[ch]
		c.Thread = of[ch]
		c.HasRecords = a.tscMin[ch] <= a.tscMax[ch]
		if a.rank != nil {
			c.Rank = a.rank[ch]
		}
		if plan != nil {
			if inst, role := plan.Role(ch); inst >= 0 && role != capacity.RoleNone {
				c.Operator, c.Instance, c.Role = plan.Instances[inst].Operator, plan.Instances[inst].Label(), role
			}
		}
		if a.tl.on && a.tl.recs != nil {
			if cnt, ok := a.tl.recs.Channel(ch); ok {
				c.TupleCounts = cnt
			}
		}
	}
	for i, p := range r.Pairs {
		x := &in.Pairs[i]
		switch p.Key.Kind {
		case KindCompute, KindTransfer, KindEndToEnd:
			for _, q := range p.Dur.Quantiles(report.CDFProbs...) {
				x.CDF = append(x.CDF, q/r.RefHz)
			}
		}
		if p.series != nil {
			for _, pt := range p.series.Points() {
				x.OverTime = append(x.OverTime, report.Bucket{Index: pt.Bucket, P50: pt.P50 / r.RefHz, P99: pt.P99 / r.RefHz, Max: pt.Max / r.RefHz})
			}
		}
	}
	// Counters' periods end at times measured from a.t0, which counters
	// can move before the first tuple record: the page's axis starts at
	// that record.
	shift := (a.tl.t0 - a.t0) / r.RefHz
	if r.Records == 0 {
		shift = 0
	}
	var counters []int
	for ch := range a.throughput {
		counters = append(counters, ch)
	}
	sort.Ints(counters)
	for _, ch := range counters {
		ct := report.Counter{Channel: ch}
		for _, p := range a.throughput[ch] {
			ct.Points = append(ct.Points, report.CounterPoint{T: p.T - shift, Period: p.Period, Count: p.Count})
		}
		in.Counters = append(in.Counters, ct)
	}
	return in
}
