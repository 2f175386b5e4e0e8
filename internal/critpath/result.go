package critpath

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"cloudprofiler/internal/cost"
)

// PathRow is one row of criticalpath.csv: a category's share of a slice's
// critical path (or of the whole run's) and its critical participation.
type PathRow struct {
	Level         string  `parquet:"level"` // slice or run
	Slice         int64   `parquet:"slice"` // -1 for the run
	StartS        float64 `parquet:"start_s"`
	EndS          float64 `parquet:"end_s"`
	Kind          string  `parquet:"kind"` // operator, link, input, unattributed
	Name          string  `parquet:"name"`
	Share         float64 `parquet:"share"`
	Participation float64 `parquet:"participation"`
	Consistent    bool    `parquet:"consistent"`
	Note          string  `parquet:"note"`
}

// BreakdownRow is one row of breakdown.csv: a part of the end-to-end
// latency of a group of journeys.
type BreakdownRow struct {
	Group       string  `parquet:"group"` // p99, median, all
	Tuples      int64   `parquet:"tuples"`
	E2EMeanUS   float64 `parquet:"e2e_mean_us"`
	E2EBoundUS  float64 `parquet:"e2e_bound_us"`
	Part        string  `parquet:"part"` // compute, queue, transfer, other, end-to-end
	Where       string  `parquet:"where"`
	MeanUS      float64 `parquet:"mean_us"`
	Share       float64 `parquet:"share"`
	BoundUS     float64 `parquet:"bound_us"`
	TotalCycles int64   `parquet:"total_cycles"`
}

// Result is the analysis's outcome.
type Result struct {
	Path      []PathRow
	Breakdown []BreakdownRow
	// What was read.
	Tuples, Journeys, Absorbed, Visits uint64
	Cut                                uint64 // journeys cut short: their group "cut"
	// Costs is the cost model's sums over every visit (nil without
	// Config.Costs).
	Costs *cost.Acc
	// Walked is the visits pass 2 walked: all of them, or (Config.Fast)
	// those where an instance waited or departed after its out.
	Walked               uint64
	Negative             uint64 // hops whose later record has the smaller estimate
	Slices, Inconsistent int
	SpilledBytes         int64
	// IndexFileBytes is what the departure indexes (Config.Fast) that
	// outgrew their budget hold in their files, read a window at a time.
	IndexFileBytes int64
	AddUp          bool // every group's parts add up to its end-to-end latency exactly
	Note           string
}

// Abort drops the analysis (a join that runs again): its spill goes.
func (a *Analysis) Abort() {
	for _, c := range a.cols {
		c.close()
	}
}

// Finish merges the collectors' runs, walks them (pass 2) and makes the
// rows, with t0 (reference cycles, the run's first tuple record) the start
// of the first slice. Collectors must not be used after.
func (a *Analysis) Finish(t0 float64) (*Result, error) {
	a.cfg.T0 = t0
	defer func() {
		for _, c := range a.cols {
			c.close()
		}
	}()
	res := &Result{}
	for _, c := range a.cols {
		if err := c.flushPend(); err != nil {
			return nil, err
		}
	}
	var runs []run
	var tend int64
	hasEnd := false
	for _, c := range a.cols {
		res.Tuples += c.tuples
		res.Journeys += c.journeys
		res.Absorbed += c.absorbed
		res.Negative += c.negative
		if c.hasDep && (!hasEnd || c.lastDep > tend) {
			tend, hasEnd = c.lastDep, true
		}
	}
	// The buffers left: in memory as runs when nothing spilled, else spilled.
	spilled := false
	for _, c := range a.cols {
		spilled = spilled || len(c.runs) > 0
	}
	for _, c := range a.cols {
		if spilled {
			if err := c.spill(); err != nil {
				return nil, err
			}
		} else if len(c.buf) > 0 {
			sortVisits(c.buf)
			c.runs = append(c.runs, run{mem: c.buf, n: len(c.buf)})
		}
		runs = append(runs, c.runs...)
		for _, r := range c.runs {
			res.Walked += uint64(r.n)
		}
		res.SpilledBytes += c.off
	}
	for _, c := range a.cols {
		res.Visits += c.visits
		res.Cut += c.cut
	}
	for _, in := range a.cfg.Insts {
		if in.Deps != nil && in.Deps.Spilled() {
			res.IndexFileBytes += in.Deps.fileWords * 8
		}
	}
	parts := a.reg.snapshot()
	w := &walker{a: a, k: len(parts), t0: int64(math.Round(a.cfg.T0)), cost: a.newCostAcc()}
	w.width = max(int64(math.Round(a.cfg.Slice)), 1)
	if hasEnd && tend > w.t0 {
		w.tend = tend
		w.n = int((tend - w.t0 + w.width - 1) / w.width)
		w.slices = make([]sliceAcc, w.n)
		w.insts = make([]istate, len(a.cfg.Insts))
		for j := range w.insts {
			s := &w.insts[j]
			s.st = w.newState(w.t0)
			s.d = w.t0
		}
		w.tmp.vec = make([]float64, w.k)
		w.nextB = 1
		if err := mergeInto(runs, max(a.cfg.Workers, 1), func(vs []Visit) {
			for i := range vs {
				w.advance(vs[i].In)
				w.arrive(&vs[i])
			}
		}); err != nil {
			return nil, err
		}
		w.advance(w.tend)
		w.advance(math.MaxInt64)
		if w.cost != nil {
			for _, c := range a.cols {
				w.cost.Merge(c.cost)
			}
			res.Costs = w.cost
		}
		if a.cfg.Fast {
			// Each instance worked on up to its last departure (visits
			// pass 1 left out).
			for j := range w.insts {
				last := int64(noD)
				for _, c := range a.cols {
					if c.instDep != nil {
						last = max(last, c.instDep[j])
					}
				}
				if last != noD {
					w.onPath(j, last)
				}
			}
		}
		// Gaps still open at the end never ended: waiting, no candidates.
		for j := range w.insts {
			for _, k := range w.insts[j].pend {
				w.slices[k-1].pending--
				w.maybeDone(k - 1)
			}
		}
		res.Path = w.pathRows(parts, res)
	} else {
		res.Note = "critical path: no operator's activity spans any time (no marked in with an out after it)"
	}
	// The breakdown.
	all := map[int32]*bucket{}
	addB := func(k int32, b *bucket) {
		t := all[k]
		if t == nil {
			t = &bucket{}
			all[k] = t
		}
		t.merge(b)
	}
	for _, c := range a.cols {
		for k, b := range c.buckets {
			if b != nil {
				addB(bucketKey(k), b)
			}
		}
	}
	for k, b := range w.bk {
		if b == nil {
			continue
		}
		// Pass 2's split hops: parts only (the journeys were counted in pass 1).
		t := all[bucketKey(k)]
		if t == nil {
			t = &bucket{}
			all[bucketKey(k)] = t
		}
		t.mergeParts(b)
	}
	res.Breakdown, res.AddUp = breakdownRows(all, parts, a.cfg.Hz)
	return res, nil
}

func (w *walker) pathRows(parts []Part, res *Result) []PathRow {
	hz := w.a.cfg.Hz
	var rows []PathRow
	runShare := make([]float64, w.k)
	runPart := make([]float64, w.k)
	var runLen float64
	runConsistent := true
	res.Slices = w.n
	for i := range w.slices {
		sl := &w.slices[i]
		ts, te := w.boundary(i), w.boundary(i+1)
		L := float64(te - ts)
		var notes []string
		share := make([]float64, w.k)
		part := make([]float64, w.k)
		// One path per instance: the one alive at the end, else (it was
		// waiting for input) the one through its last departure. Every
		// path has the slice's length; the one reported ends furthest
		// downstream: the path to the slice's last output. A wait is never
		// on a path (Sager's Def. 3.12): the paths of instances waiting
		// for input at the end count only when every activity was (the
		// pipeline idle, waiting for its source).
		byInst := map[int]int{}
		for c, inst := range sl.insts {
			if inst < 0 {
				continue // replaced (idleCand)
			}
			if o, ok := byInst[inst]; !ok || sl.idle[o] && !sl.idle[c] {
				byInst[inst] = c
			}
		}
		pick := make([]int, 0, len(byInst)) // in instance order: the sums do not depend on the map's
		for _, c := range byInst {
			pick = append(pick, c)
		}
		slices.SortFunc(pick, func(x, y int) int { return sl.insts[x] - sl.insts[y] })
		busy := pick[:0:0]
		for _, c := range pick {
			if !sl.idle[c] {
				busy = append(busy, c)
			}
		}
		if len(busy) > 0 {
			pick = busy
		}
		if len(pick) == 0 {
			notes = append(notes, "no activity in the slice (Sager's property 3.10): the path is unattributed")
			share[w.a.unattrib] = L
			part[w.a.unattrib] = L
		} else {
			best := -1
			for _, c := range pick {
				if best < 0 || sl.ranks[c] > sl.ranks[best] || sl.ranks[c] == sl.ranks[best] && sl.insts[c] < sl.insts[best] {
					best = c
				}
			}
			copy(share, sl.cands[best])
			for _, c := range pick {
				for k, v := range sl.cands[c] {
					part[k] += v / float64(len(pick))
				}
			}
			sum := 0.0
			for _, v := range share {
				sum += v
			}
			if math.Abs(sum-L) > 1e-6*L+1 {
				notes = append(notes, fmt.Sprintf("the path is %.0f cycles long, the slice %.0f", sum, L))
			}
		}
		if sl.overlaps > 0 {
			notes = append(notes, fmt.Sprintf("%d in(s) before the instance's previous departure (a worker's activities overlap: property of Def. 3.2)", sl.overlaps))
		}
		if sl.misses > 0 {
			notes = append(notes, fmt.Sprintf("%d wait(s) whose hand-off could not be followed (property 3.9): unattributed", sl.misses))
		}
		consistent := len(notes) == 0
		if !consistent {
			res.Inconsistent++
			runConsistent = false
		}
		note := strings.Join(notes, "; ")
		for k := range share {
			if share[k] == 0 && part[k] == 0 {
				continue
			}
			kind, name := catName(parts[k])
			rows = append(rows, PathRow{Level: "slice", Slice: int64(i), StartS: float64(ts-w.t0) / hz, EndS: float64(te-w.t0) / hz,
				Kind: kind, Name: name, Share: share[k] / L, Participation: part[k] / L, Consistent: consistent, Note: note})
			runShare[k] += share[k]
			runPart[k] += part[k]
		}
		runLen += L
	}
	note := ""
	if !runConsistent {
		note = fmt.Sprintf("%d of %d slices inconsistent", res.Inconsistent, w.n)
	}
	for k := range runShare {
		if runShare[k] == 0 && runPart[k] == 0 {
			continue
		}
		kind, name := catName(parts[k])
		rows = append(rows, PathRow{Level: "run", Slice: -1, StartS: 0, EndS: runLen / hz, Kind: kind, Name: name,
			Share: runShare[k] / runLen, Participation: runPart[k] / runLen, Consistent: runConsistent, Note: note})
	}
	return rows
}

func catName(p Part) (kind, name string) {
	switch p.Kind {
	case KindCompute:
		return "operator", p.Where
	case KindTransfer:
		return "link", p.Where
	case KindInput:
		return "input", ""
	default:
		return "unattributed", ""
	}
}

// breakdownRows makes the groups' rows: of the complete journeys p99 (the
// buckets from the one that holds p99), median (the buckets from p49's to
// p51's) and all; then the cut ones (lost, or in flight at the end), apart.
func breakdownRows(all map[int32]*bucket, parts []Part, hz float64) ([]BreakdownRow, bool) {
	keys := make([]int32, 0, len(all))
	var cut []int32
	var n uint64
	for k, b := range all {
		switch {
		case b.n == 0:
		case k > posBuckets:
			cut = append(cut, k)
		default:
			keys = append(keys, k)
			n += b.n
		}
	}
	if n == 0 && len(cut) == 0 {
		return nil, true
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	sort.Slice(cut, func(i, j int) bool { return cut[i] < cut[j] })
	at := func(q float64) int32 {
		if len(keys) == 0 {
			return 0
		}
		rank := uint64(math.Ceil(q * float64(n)))
		var c uint64
		for _, k := range keys {
			c += all[k].n
			if c >= max(rank, 1) {
				return k
			}
		}
		return keys[len(keys)-1]
	}
	p99, p49, p51 := at(0.99), at(0.49), at(0.51)
	addUp := true
	var rows []BreakdownRow
	for _, g := range []struct {
		name   string
		lo, hi int32
		keys   []int32
	}{{"p99", p99, math.MaxInt32, keys}, {"median", p49, p51, keys}, {"all", math.MinInt32, math.MaxInt32, keys},
		{"cut", math.MinInt32, math.MaxInt32, cut}} {
		t := &bucket{}
		for _, k := range g.keys {
			if k < g.lo || k > g.hi {
				continue
			}
			t.merge(all[k])
		}
		if t.n == 0 {
			continue
		}
		us := func(v float64) float64 { return v / float64(t.n) / hz * 1e6 }
		base := BreakdownRow{Group: g.name, Tuples: int64(t.n), E2EMeanUS: us(float64(t.e2e)), E2EBoundUS: us(t.e2eErr.float())}
		r := base
		r.Part, r.MeanUS, r.Share, r.BoundUS, r.TotalCycles = "end-to-end", base.E2EMeanUS, 1, base.E2EBoundUS, t.e2e
		rows = append(rows, r)
		var sum int64
		idx := make([]int, 0, len(t.sum))
		for i := range t.sum {
			if t.sum[i] != 0 || !t.err[i].zero() {
				idx = append(idx, i)
			}
		}
		slices.SortStableFunc(idx, func(x, y int) int {
			if parts[x].Kind != parts[y].Kind {
				return int(parts[x].Kind) - int(parts[y].Kind)
			}
			return strings.Compare(parts[x].Where, parts[y].Where)
		})
		for _, i := range idx {
			sum += t.sum[i]
			r := base
			r.Part, r.Where = parts[i].Kind.String(), parts[i].Where
			r.TotalCycles = t.sum[i]
			r.MeanUS = us(float64(t.sum[i]))
			r.BoundUS = us(t.err[i].float())
			if t.e2e != 0 {
				r.Share = float64(t.sum[i]) / float64(t.e2e)
			}
			rows = append(rows, r)
		}
		if sum != t.e2e {
			addUp = false
		}
	}
	return rows, addUp
}
