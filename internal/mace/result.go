package mace

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Row is one window of one scenario (mace.csv). Seconds; NaN where there
// is nothing to say (no tuple in the window; a what-if's measurement).
type Row struct {
	Scenario string
	Window   int64
	// The window, seconds from the first tuple record in the scenario's
	// time (rate=x2: stimuli from the start are half as far).
	StartS, EndS float64
	// Input events of instances whose stimulus is in the window.
	Events int64
	// Mace: the largest cumulative excess over the nodes, and its node.
	MaceS float64
	Node  string
	// The theorem's upper bound: Mace + the window + the cost of one event
	// at every operator.
	BoundS float64
	// The largest latency predicted for the window's tuples: its node's
	// excess before a sub-window plus the sub-window's load (the theorem's
	// Lemma 1, on 32nds of the window: within a 32nd of a window of
	// the truth where its assumptions hold), plus the scenario's smallest
	// latency (a tuple that queued nowhere).
	PredictedS float64
	// Measured (the run as it was): tuples whose stimulus is in the window
	// and their largest and smallest end-to-end latency; whether the
	// largest lies within [Mace, bound + the largest latency of the
	// windows without excess] (Result.FreeS).
	Tuples       int64
	MeasuredMaxS float64
	MeasuredMinS float64
	Within       bool
}

// Cost is one instance's cost per tuple as Mace used it: its own service
// time (in to out) and the overhead per tuple while it had a backlog
// (from its previous departure to its next in).
type Cost struct {
	Operator  string
	Instance  string // node/pid/INSTANCE
	CostS     float64
	ServiceS  float64
	OverheadS float64 // NaN: not measured (no critical-path analysis, or never backlogged)
	Tuples    uint64  // the paired tuples it was measured on
	From      string  // "this run", "this run's first N%", "--mace-costs"
}

// Scenario is a scenario's summary.
type Scenario struct {
	Name string
	// The largest Mace over the windows, its window, and (measured) the
	// largest measured latency.
	WorstMaceS     float64
	WorstWindow    int64
	WorstMeasuredS float64
	// The run's smallest latency (a tuple that queued nowhere) changed by
	// the scenario's costs (cost:B=0.5 takes half of B's cost off), and
	// the largest of the windows' predicted latencies (Row.PredictedS).
	BaseS         float64
	WorstLatencyS float64
	// Measured: windows with tuples, and the share whose largest latency
	// lies within the theorem's bounds.
	Windows int
	Within  float64
	// The node whose long-run load (its work over the run's span) is the
	// largest, that load in CPUs, and the input rate at which it reaches
	// one: a multiplier of the measured run's, and in tuples per second.
	Bottleneck    string
	Load          float64
	MaxRate       float64
	MaxSourceRate float64
}

// Result is the analysis.
type Result struct {
	WindowS float64
	EpsS    float64 // the cost of one event at every operator
	// FreeS is the largest latency measured in windows without excess
	// (nor excess before them): what the model leaves out, transfers and
	// wake-ups; the bounds' slack.
	FreeS     float64
	Rows      []Row
	Scenarios []Scenario
	Costs     []Cost
	Flags     []string // where the run breaks the theorem's assumptions
	Notes     []string // what is missing (no cost for an operator, ...)

	few, busy int // measured windows with a node busy half of it or more, and of those with few tuples
}

// Finish makes the rows: the measured run and each what-if. Each
// instance's cost per tuple is its mean own service time over the tuples
// of the first windows that hold fit of the run's tuples (0 or 1: all of
// them); costs, when not nil, are another run's by operator (seconds:
// --mace-costs), used instead.
//
// overhead, when not nil, is each instance's time per tuple outside its own
// service time while it had a backlog (seconds; NaN: unknown): the
// critical-path analysis measures it. The paper counts it in the cost
// ("scheduling overhead is incorporated into the operator cost").
func Finish(a *Acc, whatIfs []WhatIf, costs map[string]float64, fit float64, overhead []float64) (*Result, error) {
	cfg := a.cfg
	res := &Result{WindowS: cfg.Width / cfg.Hz}
	ops := map[string]bool{}
	for _, in := range cfg.Insts {
		ops[in.Operator] = true
	}
	for i := range whatIfs {
		if err := whatIfs[i].check(ops); err != nil {
			return nil, err
		}
	}
	for op := range costs {
		if !ops[op] {
			res.Notes = append(res.Notes, fmt.Sprintf("--mace-costs: operator %q is not in this run: its cost is not used", op))
		}
	}
	cost := res.costs(a, costs, fit, overhead)
	// eps: one event's cost at each operator (its instances' mean).
	opCost, opN := map[string]float64{}, map[string]int{}
	for j, in := range cfg.Insts {
		if !math.IsNaN(cost[j]) {
			opCost[in.Operator] += cost[j]
			opN[in.Operator]++
		}
	}
	eps := func(w *WhatIf) float64 {
		e := 0.0
		for op, c := range opCost {
			f := 1.0
			if m, ok := w.Cost[op]; ok {
				f = m
			}
			e += c / float64(opN[op]) * f
		}
		return e
	}
	res.EpsS = eps(&Measured)
	minLat := math.Inf(1)
	for _, v := range a.latMin {
		minLat = math.Min(minLat, v)
	}
	for _, w := range append([]WhatIf{Measured}, whatIfs...) {
		r := rateIndex(cfg, w.Rate)
		if r < 0 {
			return nil, fmt.Errorf("mace: rate x%v was not counted (Config.Rates)", w.Rate)
		}
		res.scenario(a, &w, r, cost, eps(&w), minLat, minLat/cfg.Hz+eps(&w)-res.EpsS)
	}
	res.flags(a, cost)
	return res, nil
}

func rateIndex(cfg *Config, r float64) int {
	for i, x := range cfg.Rates {
		if x == r {
			return i
		}
	}
	return -1
}

// costs is each instance's cost per tuple in seconds (NaN: none).
func (res *Result) costs(a *Acc, other map[string]float64, fit float64, overhead []float64) []float64 {
	cfg := a.cfg
	n := a.n[0]
	cost := make([]float64, len(cfg.Insts))
	from := "this run"
	// The first windows that hold fit of the tuples.
	upto := n
	if fit > 0 && fit < 1 {
		var total, sum uint64
		for _, k := range a.tuples {
			total += k
		}
		for p, k := range a.tuples {
			sum += k
			if float64(sum) >= fit*float64(total) {
				upto = p + 1
				break
			}
		}
		from = fmt.Sprintf("this run's first %.4g%% of tuples (%d windows)", 100*fit, upto)
	}
	var missing []string
	for j, in := range cfg.Insts {
		var s float64
		var k uint64
		for p := 0; p < upto; p++ {
			s += a.svc[j*n+p]
			k += uint64(a.svcN[j*n+p])
		}
		c := Cost{Operator: in.Operator, Instance: in.Label, Tuples: k, From: from, CostS: math.NaN(), ServiceS: math.NaN(), OverheadS: math.NaN()}
		if k > 0 {
			c.ServiceS = s / float64(k) / cfg.Hz
			c.CostS = c.ServiceS
			if j < len(overhead) && !math.IsNaN(overhead[j]) {
				c.OverheadS = overhead[j]
				c.CostS += overhead[j]
			}
		}
		if v, ok := other[in.Operator]; ok {
			c.CostS, c.From = v, "--mace-costs"
		}
		cost[j] = c.CostS
		if math.IsNaN(c.CostS) && in.HasIn {
			missing = append(missing, in.Operator+" ("+in.Label+")")
		}
		res.Costs = append(res.Costs, c)
	}
	if len(missing) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("no cost per tuple for %s: no tuple with both its in and its out (mark \"OP out\" where it hands a tuple on); its load is left out of Mace",
			strings.Join(missing, ", ")))
	}
	return cost
}

// nodes groups the instances into nodes: each its own, colocated
// operators' instances together. It returns each instance's node and the
// nodes' names.
func nodes(cfg *Config, w *WhatIf) ([]int, []string) {
	parent := make([]int, len(cfg.Insts))
	for j := range parent {
		parent[j] = j
	}
	var find func(int) int
	find = func(j int) int {
		for parent[j] != j {
			parent[j] = parent[parent[j]]
			j = parent[j]
		}
		return j
	}
	for _, g := range w.Colocate {
		first := -1
		for j, in := range cfg.Insts {
			for _, op := range g {
				if in.Operator == op {
					if first < 0 {
						first = j
					} else {
						parent[find(j)] = find(first)
					}
				}
			}
		}
	}
	of := make([]int, len(cfg.Insts))
	ids := map[int]int{}
	var names [][]string
	for j := range cfg.Insts {
		root := find(j)
		id, ok := ids[root]
		if !ok {
			id = len(names)
			ids[root] = id
			names = append(names, nil)
		}
		of[j] = id
		names[id] = append(names[id], cfg.Insts[j].Operator+"@"+cfg.Insts[j].Label)
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.Join(n, "+")
	}
	return of, out
}

// scenario adds one scenario's rows and summary.
func (res *Result) scenario(a *Acc, w *WhatIf, r int, cost []float64, eps, minLat, base float64) {
	cfg := a.cfg
	n := a.n[r]
	of, names := nodes(cfg, w)
	width := cfg.Width / cfg.Hz
	// Each node's load per window (seconds of CPU), and the run's.
	load := make([][]float64, len(names)) // per window
	fine := make([][]float64, len(names)) // per sub-window
	for i := range load {
		load[i] = make([]float64, n)
		fine[i] = make([]float64, n*sub)
	}
	events := make([]int64, n)
	for j, in := range cfg.Insts {
		c := cost[j]
		if f, ok := w.Cost[in.Operator]; ok {
			c *= f
		}
		row := a.counts[r][j*n*sub : (j+1)*n*sub]
		for q, k := range row {
			events[q/sub] += int64(k)
			if !math.IsNaN(c) {
				load[of[j]][q/sub] += float64(k) * c
				fine[of[j]][q] += float64(k) * c
			}
		}
	}
	ce := make([]float64, len(names))
	sc := Scenario{Name: w.Name, WorstWindow: -1, WorstMeasuredS: math.NaN(), Within: math.NaN()}
	within := 0
	measured := w.Name == Measured.Name
	for p := 0; p < n; p++ {
		// The excess on the sub-windows; Mace at the window's end; the
		// largest latency: a node's excess before a sub-window plus the
		// sub-window's load.
		pred := 0.0
		for q := p * sub; q < (p+1)*sub; q++ {
			for i := range ce {
				if fine[i][q] > 0 {
					pred = math.Max(pred, ce[i]+fine[i][q])
				}
				ce[i] = math.Max(0, ce[i]+fine[i][q]-width/sub)
			}
		}
		best, node := 0.0, -1
		for i := range ce {
			if ce[i] > best || node < 0 {
				best, node = ce[i], i
			}
		}
		row := Row{Scenario: w.Name, Window: int64(p), StartS: float64(p) * width, EndS: float64(p+1) * width,
			Events: events[p], MaceS: best, BoundS: best + width + eps, PredictedS: pred + base,
			MeasuredMaxS: math.NaN(), MeasuredMinS: math.NaN()}
		if node >= 0 {
			row.Node = names[node]
		}
		if measured {
			busiest := 0.0
			for i := range load {
				busiest = math.Max(busiest, load[i][p])
			}
			if busiest >= width/2 && a.tuples[p] > 0 {
				res.busy++
				if a.tuples[p] < fewTuples {
					res.few++
				}
			}
			row.Tuples = int64(a.tuples[p])
			if a.tuples[p] > 0 {
				row.MeasuredMaxS = a.latMax[p] / cfg.Hz
				row.MeasuredMinS = a.latMin[p] / cfg.Hz
				sc.Windows++
				if !(row.MeasuredMaxS <= sc.WorstMeasuredS) {
					sc.WorstMeasuredS = row.MeasuredMaxS
				}
			}
		}
		if sc.WorstWindow < 0 || best > sc.WorstMaceS {
			sc.WorstMaceS, sc.WorstWindow = best, int64(p)
		}
		sc.WorstLatencyS = math.Max(sc.WorstLatencyS, row.PredictedS)
		res.Rows = append(res.Rows, row)
	}
	if measured && sc.Windows > 0 {
		// What the model leaves out (transfers, wake-ups, a little
		// queueing within a window): the largest latency of the windows
		// with no excess before or after them; the smallest latency when
		// every window had some.
		rows := res.Rows[len(res.Rows)-n:]
		free := math.Inf(-1)
		for p := range rows {
			if rows[p].Tuples > 0 && rows[p].MaceS == 0 && (p == 0 || rows[p-1].MaceS == 0) {
				free = math.Max(free, rows[p].MeasuredMaxS)
			}
		}
		if math.IsInf(free, -1) {
			free = minLat / cfg.Hz
		}
		res.FreeS = free
		for p := range rows {
			r := &rows[p]
			if r.Tuples > 0 {
				r.Within = r.MeasuredMaxS >= r.MaceS && r.MeasuredMaxS <= r.BoundS+free+costSpread*r.MaceS
				if r.Within {
					within++
				}
			}
		}
		sc.Within = float64(within) / float64(sc.Windows)
	}
	sc.BaseS = base
	// Long-run load: each node's work over the run's span at this rate.
	span := (cfg.T1 - cfg.T0) / cfg.Hz / w.Rate
	sc.Load = math.NaN()
	if span > 0 {
		for i := range load {
			sum := 0.0
			for _, v := range load[i] {
				sum += v
			}
			if l := sum / span; !(l <= sc.Load) {
				sc.Load, sc.Bottleneck = l, names[i]
			}
		}
		if sc.Load > 0 {
			sc.MaxRate = w.Rate / sc.Load
			sc.MaxSourceRate = float64(a.seen) / (span * w.Rate) * sc.MaxRate
		}
	}
	res.Scenarios = append(res.Scenarios, sc)
}

// costSpread is the share of Mace the bound check allows on top: Mace is
// a backlog of thousands of tuples counted at their mean cost, and a
// machine that runs an operator 1% slower in a backlog than on average
// (caches, interrupts) makes the backlog 1% longer.
const costSpread = 0.01

// Assumption checks' thresholds.
const (
	fewTuples     = 10   // a busy window with fewer tuples than this is coarse
	shareBusy     = 0.5  // the others on a machine busy: this share of a window or more
	shareIdle     = 0.1  // and idle: this share or less
	minPaired     = 30   // tuples each side of the sharing check
	sharingFactor = 1.25 // service time longer by this while the others are busy: a shared CPU
	disorder      = 0.01 // share of a sample's neighbours out of stimulus order
)

// flags says where the run breaks the theorem's assumptions.
func (res *Result) flags(a *Acc, cost []float64) {
	cfg := a.cfg
	// Streams merging into one instance.
	for j, in := range cfg.Insts {
		k := 0
		for _, up := range a.ups[j] {
			if up >= 0 {
				k++
			}
		}
		if a.many[j] || k > 1 {
			what := fmt.Sprint(k)
			if a.many[j] {
				what = fmt.Sprintf("more than %d", maxUps)
			}
			res.Flags = append(res.Flags, fmt.Sprintf("fan-in: %s (%s) takes tuples from %s upstream channels: a FIFO over merged streams is not stimulus-time order, which the bound assumes", in.Operator, in.Label, what))
		}
	}
	// Instances that appear to share a CPU: their service time grows
	// while the others on their machine are busy.
	n := a.n[0]
	width := cfg.Width
	for j, in := range cfg.Insts {
		var busyS, idleS float64
		var busyN, idleN uint64
		var others []int
		for k, o := range cfg.Insts {
			if k != j && o.Machine == in.Machine {
				others = append(others, k)
			}
		}
		if len(others) == 0 {
			continue
		}
		for p := 0; p < n; p++ {
			b := 0.0
			for _, k := range others {
				b += a.svc[k*n+p] / width
			}
			switch {
			case b >= shareBusy:
				busyS += a.svc[j*n+p]
				busyN += uint64(a.svcN[j*n+p])
			case b <= shareIdle:
				idleS += a.svc[j*n+p]
				idleN += uint64(a.svcN[j*n+p])
			}
		}
		if busyN >= minPaired && idleN >= minPaired {
			f := (busyS / float64(busyN)) / (idleS / float64(idleN))
			if f >= sharingFactor {
				res.Flags = append(res.Flags, fmt.Sprintf("shared CPU: %s (%s) takes %.2fx as long per tuple while other operators on %s are busy: it appears to share a CPU with them; Mace counts one CPU per instance (model it with --what-if colocate:...)",
					in.Operator, in.Label, f, in.Machine))
			}
		}
	}
	// Out of stimulus order.
	for j, in := range cfg.Insts {
		s := a.sample[j]
		if len(s) < 100 {
			continue
		}
		sort.Slice(s, func(x, y int) bool { return s[x].in < s[y].in })
		inv := 0
		for k := 1; k < len(s); k++ {
			if s[k].stim < s[k-1].stim {
				inv++
			}
		}
		if f := float64(inv) / float64(len(s)-1); f > disorder {
			res.Flags = append(res.Flags, fmt.Sprintf("out of order: %s (%s) took %.1f%% of a sample of its tuples after a later stimulus: its scheduling is not stimulus-time order, which the bound assumes",
				in.Operator, in.Label, 100*f))
		}
	}
	// Too few events in busy windows (scenario counts them).
	if res.few > 0 {
		res.Flags = append(res.Flags, fmt.Sprintf("few events: %d of %d windows where a node was busy half the window or more have fewer than %d tuples: one event is a large part of their load, far from the theorem's even spread of arrivals; a wider --mace-window helps",
			res.few, res.busy, fewTuples))
	}
	// Ids made by an operator without lineage: their stimulus is that
	// operator's out, not the source's entry.
	for j, in := range cfg.Insts {
		if k := a.orphans[j]; k > 0 {
			res.Flags = append(res.Flags, fmt.Sprintf("missing lineage: %d tuple(s) start at %s's out (%s): ids it made without logging where they came from, so their stimulus is taken there, not at the source; log lineage (CP_LogLineage, README \"Where the latency goes\")",
				k, in.Operator, in.Label))
		}
	}
	if a.negative > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d in-to-out pair(s) with a negative difference were left out of the costs", a.negative))
	}
}

func sortStrings(l []string) { sort.Strings(l) }
