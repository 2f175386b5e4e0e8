package mace

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"cloudprofiler/internal/cost"
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
	// largest lies within [Mace, bound + the run's smallest latency].
	Tuples       int64
	MeasuredMaxS float64
	MeasuredMinS float64
	Within       bool
}

// Cost is one instance's cost per tuple as Mace used it, from the cost
// model (package cost): its own work (in to out) and its hand-off (the
// send, and taking the next tuple while backlogged); over the run, and the
// least and most of its windows'.
type Cost struct {
	Operator string
	Instance string // node/pid/INSTANCE
	CostS    float64
	ServiceS float64
	HandOffS float64 // NaN: not measured (never backlogged)
	Tuples   uint64  // the tuples it was measured on
	From     string  // "this run", "this run's first N%", "--mace-costs"
	MinS     float64 // the least and the most of its windows' costs (NaN: one cost for the run)
	MaxS     float64
}

// Scenario is a scenario's summary.
type Scenario struct {
	Name string
	// The largest Mace over the windows, its window, and (measured) the
	// largest measured latency. Excess: some window had excess (else the
	// latency is at most the window + one event everywhere + the run's
	// smallest latency, and a relative error says nothing).
	Excess         bool
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
	// The node whose long-run load (its work over the span of the
	// source's records) is the largest, that load in CPUs (above 1: it
	// cannot keep up), and the input rate at which it reaches one: a
	// multiplier of the measured run's, and in tuples per second.
	Bottleneck    string
	Load          float64
	MaxRate       float64
	MaxSourceRate float64
}

// Result is the analysis.
type Result struct {
	WindowS float64
	EpsS    float64 // the cost of one event at every operator
	// MinLatS is the run's smallest latency (a tuple that queued
	// nowhere): what the model leaves out of every latency, transfers and
	// wake-ups; the bound adds it.
	MinLatS float64
	// PerWindow: the measured run's costs are each window's (else one
	// cost per instance for the run: --mace-fit, --mace-costs).
	PerWindow bool
	Rows      []Row
	Scenarios []Scenario
	Costs     []Cost
	Flags     []string // where the run breaks the theorem's assumptions
	Notes     []string // what is missing (no cost for an operator, ...)

	few, busy int       // measured windows with a node busy half of it or more, and of those with few tuples
	offered   []float64 // CostModel.Offered
}

// CostModel is what Mace reads of the cost model (package cost).
type CostModel struct {
	Acc  *cost.Acc      // nil: none (no operator has a cost)
	Grid int            // Mace's grid in Acc: its windows, by the time of each in
	Opts []cost.Options // per instance
	// Offered is, per instance, the copies the source's tuples offered it
	// over those that arrived (more than 1 where copies were lost on the
	// way: they did not load it, but the long-run load counts them; nil:
	// 1 everywhere).
	Offered []float64
}

// minWindowTuples: a window whose instance served fewer backlogged tuples
// takes the run's cost for it.
const minWindowTuples = 10

// windowCosts is instance j's cost in each cell of Mace's cost grid
// (per: the cells a window), and the backlogged tuples it served there;
// with the least and most of its windows' costs. A cost is the run's,
// opCosts is what eps sums: each operator's instances' costs.
type opCosts struct {
	order []string // the operators, as their instances came
	sum   map[string]float64
	n     map[string]int
}

func (o *opCosts) add(op string, kappa float64) {
	if o.sum == nil {
		o.sum, o.n = map[string]float64{}, map[string]int{}
	}
	if o.n[op] == 0 {
		o.order = append(o.order, op)
	}
	o.sum[op] += kappa
	o.n[op]++
}

// eps is one event's cost at each operator (its instances' mean) in w,
// summed in the operators' order: in a map's, which changes from run to
// run, the measured scenario's base (its eps less EpsS) came out 0 or
// 3e-21.
func (o *opCosts) eps(w *WhatIf) float64 {
	e := 0.0
	for _, op := range o.order {
		f := 1.0
		if m, ok := w.Cost[op]; ok {
			f = m
		}
		e += o.sum[op] / float64(o.n[op]) * f
	}
	return e
}

// kappa, times how much longer a backlogged tuple took there than over
// the run, by time (cost.Cell's Busy and Served: a tuple preempted across
// an edge slows both sides by its time in each). A window takes its own
// where it served minWindowTuples or more (else kappa); a cell its own
// where the instance was backlogged for half of it or more (else its
// window's): a preemption of a few milliseconds slows a quarter of a
// 10 ms window, not all of it, and a drain that ends inside the window
// ends where the departures did.
func windowCosts(cm CostModel, j int, kappa float64) (cell, n []float64, per int, minS, maxS float64) {
	g := cm.Acc.Grids()[cm.Grid]
	cells := cm.Acc.Cells(cm.Grid, j)
	var busy, served int64
	for _, c := range cells {
		busy, served = busy+c.Busy, served+c.Served
	}
	minS, maxS = math.NaN(), math.NaN()
	per = g.Sub
	cell, n = make([]float64, len(cells)), make([]float64, len(cells))
	if busy <= 0 || served <= 0 {
		for i := range cell {
			cell[i] = kappa
		}
		return cell, n, per, minS, maxS
	}
	ratio := func(b, s int64) float64 { return kappa * (float64(b) / float64(s)) / (float64(busy) / float64(served)) }
	for p := 0; p < g.N; p++ {
		win := kappa
		var b, s int64
		for _, c := range cells[p*per : (p+1)*per] {
			b, s = b+c.Busy, s+c.Served
		}
		if float64(s)/cost.ServedUnit >= minWindowTuples && b > 0 {
			win = ratio(b, s)
			minS, maxS = minNaN(minS, win), maxNaN(maxS, win)
		}
		for i := p * per; i < (p+1)*per; i++ {
			c := &cells[i]
			cell[i], n[i] = win, float64(c.Served)/cost.ServedUnit
			if c.Served > 0 && float64(c.Busy) >= g.Width/float64(per)/2 {
				cell[i] = ratio(c.Busy, c.Served)
			}
		}
	}
	return cell, n, per, minS, maxS
}

// instCost is an instance's cost: kappa over the run (seconds; NaN:
// none), and per window of the measured run its cost and the backlogged
// tuples it served then (nil: the run's cost everywhere).
type instCost struct {
	kappa float64
	win   []float64 // per cell of Mace's cost grid, per of them a window
	n     []float64
	per   int
}

// Finish makes the rows: the measured run and each what-if. Each
// instance's cost per tuple comes from the cost model (cm): each window's
// own, where the window holds enough of its tuples, else the run's; with
// fit in (0, 1), one cost from the first windows that hold fit of the
// run's tuples; costs, when not nil, are another run's by operator
// (seconds: --mace-costs), one cost each.
//
// A node does its work at the speed the machine gave it in each window:
// its instances' run cost over their cost in that window (a window where
// an operator took twice as long a tuple ran it at half speed). Its
// cumulative excess carries what it could not do into the next window, in
// seconds of work at the run's cost; Mace at a window's end is the time
// the largest excess takes to drain at the speeds of the windows after
// it. With one cost for the run this is the paper's recursion exactly.
func Finish(a *Acc, whatIfs []WhatIf, other map[string]float64, fit float64, cm CostModel) (*Result, error) {
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
	for op := range other {
		if !ops[op] {
			res.Notes = append(res.Notes, fmt.Sprintf("--mace-costs: operator %q is not in this run: its cost is not used", op))
		}
	}
	costs := res.costs(a, other, fit, cm)
	res.offered = cm.Offered
	var oc opCosts
	for j, in := range cfg.Insts {
		if !math.IsNaN(costs[j].kappa) {
			oc.add(in.Operator, costs[j].kappa)
		}
	}
	eps := oc.eps
	res.EpsS = eps(&Measured)
	minLat := math.Inf(1)
	for _, v := range a.latMin {
		minLat = math.Min(minLat, v)
	}
	res.MinLatS = math.NaN()
	if !math.IsInf(minLat, 1) {
		res.MinLatS = math.Max(minLat/cfg.Hz, 0)
	}
	for _, w := range append([]WhatIf{Measured}, whatIfs...) {
		r := rateIndex(cfg, w.Rate)
		if r < 0 {
			return nil, fmt.Errorf("mace: rate x%v was not counted (Config.Rates)", w.Rate)
		}
		base := 0.0
		if !math.IsNaN(res.MinLatS) {
			base = math.Max(res.MinLatS+eps(&w)-res.EpsS, 0)
		}
		res.scenario(a, &w, r, costs, eps(&w), base)
	}
	res.flags(a, costs, cm)
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

// costs is each instance's cost (kappa NaN: none).
func (res *Result) costs(a *Acc, other map[string]float64, fit float64, cm CostModel) []instCost {
	cfg := a.cfg
	out := make([]instCost, len(cfg.Insts))
	from := "this run"
	n := a.n[0]
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
	} else {
		res.PerWindow = cm.Acc != nil && len(other) == 0
	}
	var missing []string
	nan := math.NaN()
	for j, in := range cfg.Insts {
		c := Cost{Operator: in.Operator, Instance: in.Label, From: from, CostS: nan, ServiceS: nan, HandOffS: nan, MinS: nan, MaxS: nan}
		ic := instCost{kappa: nan}
		if cm.Acc != nil && in.HasIn && j < len(cm.Opts) {
			o := cm.Opts[j]
			var e cost.Estimate
			if upto < n {
				sub := cm.Acc.Grids()[cm.Grid].Sub
				gn := cm.Acc.Grids()[cm.Grid].N
				e = o.Estimate(cm.Acc.Cells(cm.Grid, j)[:min(upto, gn)*sub], nan)
			} else {
				e = cm.Acc.Run(cm.Grid, j, o)
			}
			if e.Tuples > 0 {
				ic.kappa, c.CostS, c.ServiceS, c.Tuples = e.CostS, e.CostS, e.OwnS, e.Tuples
				c.HandOffS = e.TakeS
				if !math.IsNaN(e.SendS) {
					c.HandOffS += e.SendS
				}
				if e.TakeFrom == cost.TakeNone {
					c.HandOffS = nan
				}
			}
			if res.PerWindow && e.Tuples > 0 {
				ic.win, ic.n, ic.per, c.MinS, c.MaxS = windowCosts(cm, j, e.CostS)
			}
		}
		if v, ok := other[in.Operator]; ok {
			c.CostS, c.From, c.MinS, c.MaxS = v, "--mace-costs", nan, nan
			ic = instCost{kappa: v}
		}
		if math.IsNaN(c.CostS) && in.HasIn {
			missing = append(missing, in.Operator+" ("+in.Label+")")
		}
		out[j] = ic
		res.Costs = append(res.Costs, c)
	}
	if len(missing) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("no cost per tuple for %s: no tuple with both its in and its out (mark \"OP out\" where it hands a tuple on); its load is left out of Mace",
			strings.Join(missing, ", ")))
	}
	return out
}

func minNaN(a, b float64) float64 {
	if math.IsNaN(a) || b < a {
		return b
	}
	return a
}

func maxNaN(a, b float64) float64 {
	if math.IsNaN(a) || b > a {
		return b
	}
	return a
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
func (res *Result) scenario(a *Acc, w *WhatIf, r int, costs []instCost, eps, base float64) {
	cfg := a.cfg
	n := a.n[r]
	of, names := nodes(cfg, w)
	width := cfg.Width / cfg.Hz
	dt := width / sub
	nf := n * sub
	factor := func(j int) float64 {
		if f, ok := w.Cost[cfg.Insts[j].Operator]; ok {
			return f
		}
		return 1
	}
	// Each node's work per sub-window (seconds at the run's costs), and
	// what it can do in each (seconds of such work: its speed then).
	work := make([][]float64, len(names))
	events := make([]int64, n)
	for i := range work {
		work[i] = make([]float64, nf)
	}
	for j := range cfg.Insts {
		c := costs[j].kappa * factor(j)
		row := a.counts[r][j*nf : (j+1)*nf]
		for q, k := range row {
			events[q/sub] += int64(k)
			if !math.IsNaN(c) {
				work[of[j]][q] += float64(k) * c
			}
		}
	}
	// The measured windows' speeds per node: its instances' run costs over
	// their costs in the window, weighted by the tuples they took.
	// A scenario on the run's own time (rate 1: the measured run, a cost
	// or a colocation changed) follows the speeds the machine gave each
	// window; a rate changed moves the arrivals off the times the machine
	// was busy, so it takes the run's costs (at x0.5 on a shared VM the
	// windows' speeds predicted +194% against a real run at half the
	// rate, the run's costs -9%).
	var speed [][]float64 // per node, per cell of the measured windows (nil: 1 throughout)
	per := 1              // cells a window
	if res.PerWindow && w.Rate == 1 {
		mw := 0
		for j := range costs {
			mw = max(mw, len(costs[j].win))
			per = max(per, costs[j].per)
		}
		speed = make([][]float64, len(names))
		num := make([][]float64, len(names))
		for i := range speed {
			speed[i], num[i] = make([]float64, mw), make([]float64, mw)
		}
		for j, ic := range costs {
			if ic.win == nil || math.IsNaN(ic.kappa) {
				continue
			}
			f := factor(j)
			for p := range ic.win {
				k := ic.n[p]
				num[of[j]][p] += k * ic.kappa * f
				speed[of[j]][p] += k * ic.win[p] * f
			}
		}
		for i := range speed {
			for p := range speed[i] {
				if speed[i][p] > 0 && num[i][p] > 0 {
					speed[i][p] = num[i][p] / speed[i][p]
				} else {
					speed[i][p] = 1
				}
			}
		}
	}
	// can[i][q]: seconds of work node i does in sub-window q; cum its sums.
	can := make([][]float64, len(names))
	cum := make([][]float64, len(names))
	for i := range can {
		can[i] = make([]float64, nf)
		cum[i] = make([]float64, nf+1)
		for q := range can[i] {
			v := 1.0
			if speed != nil {
				if p := q * per / sub; p < len(speed[i]) {
					v = speed[i][p]
				}
			}
			can[i][q] = v * dt
			cum[i][q+1] = cum[i][q] + can[i][q]
		}
	}
	// drain is how long node i takes, from the start of sub-window q, to
	// do x seconds of work (at the speed of 1 past the scenario's end).
	drain := func(i, q int, x float64) float64 {
		if !(x > 0) {
			return 0
		}
		c := cum[i]
		target := c[q] + x
		if target > c[nf] {
			return float64(nf-q)*dt + (target - c[nf])
		}
		e := q + sort.Search(nf-q, func(k int) bool { return c[q+k+1] >= target })
		return float64(e-q)*dt + (target-c[e])/can[i][e]*dt
	}
	ce := make([]float64, len(names))
	sc := Scenario{Name: w.Name, WorstWindow: -1, WorstMeasuredS: math.NaN(), Within: math.NaN()}
	within := 0
	measured := w.Name == Measured.Name
	for p := 0; p < n; p++ {
		// The excess on the sub-windows; the largest latency predicted (the
		// theorem's Lemma 1, with arrivals even within a sub-window): the
		// first tuple of a sub-window waits for the excess before it, the
		// last for that and the sub-window's work, less the sub-window it
		// arrived within.
		pred := 0.0
		busiest := 0.0
		for i := range ce {
			load := 0.0
			for q := p * sub; q < (p+1)*sub; q++ {
				if work[i][q] > 0 {
					pred = math.Max(pred, math.Max(drain(i, q, ce[i]), drain(i, q, ce[i]+work[i][q])-dt))
				}
				load += work[i][q]
				ce[i] = math.Max(0, ce[i]+work[i][q]-can[i][q])
			}
			busiest = math.Max(busiest, load)
		}
		best, node := 0.0, -1
		for i := range ce {
			if d := drain(i, (p+1)*sub, ce[i]); d > best || node < 0 {
				best, node = d, i
			}
		}
		if best > 0 {
			sc.Excess = true
		}
		row := Row{Scenario: w.Name, Window: int64(p), StartS: float64(p) * width, EndS: float64(p+1) * width,
			Events: events[p], MaceS: best, BoundS: best + width + eps, PredictedS: pred + base,
			MeasuredMaxS: math.NaN(), MeasuredMinS: math.NaN()}
		if node >= 0 {
			row.Node = names[node]
		}
		if measured {
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
				// The theorem's interval, and what the model leaves out of
				// every latency (the run's smallest): no slack from the
				// window's own measurement.
				row.Within = row.MeasuredMaxS >= row.MaceS && row.MeasuredMaxS <= row.BoundS+base
				if row.Within {
					within++
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
		sc.Within = float64(within) / float64(sc.Windows)
	}
	sc.BaseS = base
	// Long-run load: each node's work over the span of the source's
	// records at this rate.
	span := (a.stimLast - a.stimFirst) / cfg.Hz / w.Rate
	sc.Load = math.NaN()
	if span > 0 {
		offered := make([]float64, len(names))
		for j := range cfg.Insts {
			c := costs[j].kappa * factor(j)
			if math.IsNaN(c) {
				continue
			}
			f := 1.0
			if j < len(res.offered) && res.offered[j] > 0 {
				f = res.offered[j]
			}
			var k uint64
			for _, v := range a.counts[r][j*nf : (j+1)*nf] {
				k += uint64(v)
			}
			offered[of[j]] += float64(k) * f * c
		}
		for i, sum := range offered {
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

// Assumption checks' thresholds.
const (
	fewTuples     = 10   // a busy window with fewer tuples than this is coarse
	shareBusy     = 0.5  // the others on a machine busy: this share of a window or more
	shareIdle     = 0.1  // and idle: this share or less
	minPaired     = 30   // tuples each side of the sharing check
	sharingFactor = 1.25 // own work longer by this while the others are busy: a shared CPU
	disorder      = 0.01 // share of a sample's neighbours out of stimulus order
	driftShare    = 0.1  // windows whose cost moved beyond its interval: this share or more is drift
)

// flags says where the run breaks the theorem's assumptions.
func (res *Result) flags(a *Acc, costs []instCost, cm CostModel) {
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
	if cm.Acc != nil {
		res.sharedCPU(cfg, cm)
		res.drift(cfg, cm)
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
			res.Flags = append(res.Flags, fmt.Sprintf("missing lineage: %d tuple(s) start at %s's out (%s): ids it made without logging where they came from, so their stimulus is taken there, not at the source; log lineage (CP_LogLineage, docs/critical-path.md)",
				k, in.Operator, in.Label))
		}
	}
}

func sortStrings(l []string) { sort.Strings(l) }

// sharedCPU flags instances that appear to share a CPU: their own work
// per tuple (the cost model's, by the window of each in) grows while the
// others on their machine are busy.
func (res *Result) sharedCPU(cfg *Config, cm CostModel) {
	g := cm.Acc.Grids()[cm.Grid]
	insts := min(len(cm.Opts), len(cfg.Insts))
	width := g.Width
	own := func(j, p int) (sum float64, n uint64) {
		cells := cm.Acc.Cells(cm.Grid, j)[p*g.Sub : (p+1)*g.Sub]
		for _, c := range cells {
			sum += float64(c.Own)
			n += uint64(c.OwnN)
		}
		return sum, n
	}
	// Per machine and window, the own work of all its instances: the
	// others' share is that less the instance's own (once over the
	// instances, not once per pair: 5,000 instances took seconds).
	type machine struct {
		insts int
		work  []float64 // per window
	}
	machines := map[string]*machine{}
	for j := 0; j < insts; j++ {
		in := &cfg.Insts[j]
		if !in.HasIn {
			continue
		}
		m := machines[in.Machine]
		if m == nil {
			m = &machine{work: make([]float64, g.N)}
			machines[in.Machine] = m
		}
		m.insts++
		for p := 0; p < g.N; p++ {
			s, _ := own(j, p)
			m.work[p] += s
		}
	}
	for j := 0; j < insts; j++ {
		in := &cfg.Insts[j]
		if !in.HasIn || machines[in.Machine].insts < 2 {
			continue
		}
		work := machines[in.Machine].work
		var busyS, idleS float64
		var busyN, idleN uint64
		for p := 0; p < g.N; p++ {
			s, n := own(j, p)
			b := (work[p] - s) / width
			switch {
			case b >= shareBusy:
				busyS += s
				busyN += n
			case b <= shareIdle:
				idleS += s
				idleN += n
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
}

// drift flags instances whose cost moved between windows beyond each
// window's interval: the theorem takes a cost per event (a cost per
// subinterval, its A-3 allows); Mace follows each window's cost in the
// run it measured, but a prediction for another run cannot know when the
// machine will be busy.
func (res *Result) drift(cfg *Config, cm CostModel) {
	g := cm.Acc.Grids()[cm.Grid]
	for j := range cm.Opts {
		if j >= len(cfg.Insts) || !cfg.Insts[j].HasIn {
			continue
		}
		in := &cfg.Insts[j]
		o := cm.Opts[j]
		run := cm.Acc.Run(cm.Grid, j, o)
		if run.Tuples == 0 {
			continue
		}
		runTake := cm.Acc.RunTake(cm.Grid, j)
		counted, moved := 0, 0
		lo, hi := math.NaN(), math.NaN()
		for p := 0; p < g.N; p++ {
			e := cm.Acc.Window(cm.Grid, j, p, o, runTake)
			if e.Tuples < minPaired || math.IsNaN(e.CostLowS) {
				continue
			}
			counted++
			if cost.Moved(e, run) {
				moved++
				lo, hi = minNaN(lo, e.CostS), maxNaN(hi, e.CostS)
			}
		}
		if moved > 0 && float64(moved) >= driftShare*float64(counted) {
			costs := fmtUS(lo) + " to " + fmtUS(hi)
			if fmtUS(lo) == fmtUS(hi) { // not "0.125 to 0.125"
				costs = fmtUS(lo)
			}
			windows := "windows, beyond their intervals"
			if moved == 1 {
				windows = "windows, beyond its interval"
			}
			res.Flags = append(res.Flags, fmt.Sprintf("cost drift: %s (%s) cost %s us a tuple in %d of %d %s, against %s us over the run (a CPU shared with other work, a garbage collection, a change of phase): Mace follows each window's cost here, but a what-if or another run's prediction cannot know when the machine will be busy",
				in.Operator, in.Label, costs, moved, counted, windows, fmtUS(run.CostS)))
		}
	}
}
