package capacity

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"cloudprofiler/internal/cost"
)

// Row is one row of capacity.parquet and capacity.csv (docs/capacity.md).
// Rates are per second of the reference clock; NaN where a value is not
// measured (no such mark) or not measurable (too few tuples: Note says).
type Row struct {
	Level  string  `parquet:"level,dict"` // "instance" or "operator"
	Window int64   `parquet:"window"`     // window index from t0; -1: the whole run
	StartS float64 `parquet:"start_s"`    // seconds since t0 (the run's first tuple record)
	EndS   float64 `parquet:"end_s"`
	// Operator and instance: node/pid/INSTANCE ("" on operator rows), and
	// the instance's node and pid ("" and 0 on operator rows).
	Operator string `parquet:"operator,dict"`
	Instance string `parquet:"instance,dict"`
	Node     string `parquet:"node,dict"`
	PID      int64  `parquet:"pid"`
	Method   string `parquet:"method,dict"` // "in/out" (marks) or "beard-chamberlain" (CP_SERVICERATE)
	// Records of the in and out channels in the window (beard-chamberlain:
	// tuples_out is the items the counter took).
	TuplesIn  int64 `parquet:"tuples_in"`
	TuplesOut int64 `parquet:"tuples_out"`
	// Arrivals: tuples whose previous record (the upstream hand-off) falls
	// in the window, per second; departures: out records per second.
	ArrivalsPerS   float64 `parquet:"arrivals_per_s"`
	DeparturesPerS float64 `parquet:"departures_per_s"`
	// Own work (in to out) and time blocked (out to sent) inside the
	// window over its length (operator rows: the mean over instances).
	BusyShare    float64 `parquet:"busy_share"`
	BlockedShare float64 `parquet:"blocked_share"`
	// The cost model (package cost), per tuple taken, in microseconds: its
	// own work (in to out), its hand-off (the send where sent is marked,
	// and taking the next tuple while backlogged), their sum and the sum's
	// 95% interval. Operator rows: the instances' mean, weighted by the
	// tuples each took.
	OwnUS      float64 `parquet:"own_us"`
	HandOffUS  float64 `parquet:"handoff_us"`
	CostUS     float64 `parquet:"cost_us"`
	CostLowUS  float64 `parquet:"cost_low_us"`
	CostHighUS float64 `parquet:"cost_high_us"`
	// Backlogged: tuples taken while the instance was backlogged (their
	// take measured).
	Backlogged int64 `parquet:"backlogged"`
	// Service rate: tuples over their own work alone (in to out), and its
	// 95% interval. Operator rows: the instances' sum.
	ServiceRate     float64 `parquet:"service_rate"`
	ServiceRateLow  float64 `parquet:"service_rate_low"`
	ServiceRateHigh float64 `parquet:"service_rate_high"`
	// Capacity: tuples per second taken while backlogged, 1 / cost (what
	// the instance departs per second while it has a backlog), and its
	// interval. Operator rows: the highest arrival rate its instances
	// sustain given how arrivals are shared among them.
	Capacity     float64 `parquet:"capacity"`
	CapacityLow  float64 `parquet:"capacity_low"`
	CapacityHigh float64 `parquet:"capacity_high"`
	// Load: arrivals over capacity (the whole-run operator rows: the
	// source's rate times reach over capacity, the offered load; above 1
	// the operator cannot keep up). Headroom: its inverse.
	Load        float64 `parquet:"load"`
	Headroom    float64 `parquet:"headroom"`
	Selectivity float64 `parquet:"selectivity"` // tuples out / tuples in
	Instances   int64   `parquet:"instances"`   // operator rows: instances with records in the window (instance rows: 1)
	Skew        float64 `parquet:"skew"`        // operator rows: max instance arrivals / mean instance arrivals
	// Topology, on the operators' whole-run in/out rows: the copies of a
	// source tuple that reach the operator (lost ones included; a 1->N
	// operator upstream makes it more than 1), the tuples it handed on
	// that never reached the next operator, the source rate at which it
	// saturates (capacity over reach), whether that is the smallest, and
	// with a target source rate the instances it needs (DS2's rule).
	Reach             float64 `parquet:"reach"`
	Lost              int64   `parquet:"lost"`
	MaxSourceRate     float64 `parquet:"max_source_rate"`
	Bottleneck        bool    `parquet:"bottleneck"`
	ParallelismNeeded int64   `parquet:"parallelism_needed"`
	Note              string  `parquet:"note,dict"`
}

// InstanceName is what the trace and the report call a row's instance:
// OPERATOR#INSTANCE (the label's last part, node/pid/INSTANCE), or the
// operator alone where the instance has no name.
func (r *Row) InstanceName() string {
	if n := r.Instance[strings.LastIndex(r.Instance, "/")+1:]; n != "" {
		return r.Operator + "#" + n
	}
	return r.Operator
}

// Methods.
const (
	MethodInOut = "in/out"
	MethodBC    = "beard-chamberlain"
)

// Config is how the rows are made.
type Config struct {
	Hz         float64 // reference cycles per second
	MinTuples  int     // fewer tuples in a row: no service rate or capacity ("not enough data")
	TargetRate float64 // source tuples per second: parallelism_needed (0: none)
	// Rank is each channel's place in the hop order (nil: none): operators
	// come in the order of their first channel.
	Rank []int
	// MinTake: a window with fewer backlogged tuples takes its hand-off
	// from the whole run (default 10).
	MinTake int
	// NoCostModel says why there is no cost model, when costs is nil
	// ("": the visits were not walked).
	NoCostModel string
	// Notes: per instance of the plan, its records note its thread's waits
	// (logfile.Header.Waits): its cost model told its take from waiting,
	// and its send from time blocked, by them, and needs no reading of
	// its downstream's saturation (nil: none does).
	Notes []bool
}

// workedShare is the share of window w (-1: the run) that instance ii's
// thread worked, where it notes its waits: its own work, its sends, and
// the gaps before its ins it did not wait in (cost.Cell: Own, Send,
// Worked), a dropped tuple's work among them. NaN where it does not note
// its waits or has no cost model. A marked in/out pair alone sees only its
// kept tuples' work (a filter's busy share was half its truth).
func (m *maker) workedShare(ii, w int) float64 {
	if m.costs == nil || !m.noted(ii) {
		return math.NaN()
	}
	cells := m.costs.Cells(0, ii)
	if w >= 0 {
		sub := m.costs.Grids()[0].Sub
		cells = cells[w*sub : (w+1)*sub]
	}
	var t int64
	for i := range cells {
		t += cells[i].Own + cells[i].Send + cells[i].Worked
	}
	start, end := m.span(w)
	if !(end > start) {
		return math.NaN()
	}
	return float64(t) / ((end - start) * m.cfg.Hz)
}

// meanWorkedShare is the mean of instances' worked shares of window w (-1:
// the run), NaN where none has one.
func (m *maker) meanWorkedShare(instances []int, w int) float64 {
	sum, k := 0.0, 0
	for _, ii := range instances {
		if b := m.workedShare(ii, w); !math.IsNaN(b) {
			sum, k = sum+b, k+1
		}
	}
	if k == 0 {
		return math.NaN()
	}
	return sum / float64(k)
}

// noted says whether instance ii notes its waits.
func (m *maker) noted(ii int) bool { return ii < len(m.cfg.Notes) && m.cfg.Notes[ii] }

// notes says whether every instance of operator oi notes its waits.
func (m *maker) notes(oi int) bool {
	ins := m.p.Operators[oi].Instances
	for _, ii := range ins {
		if !m.noted(ii) {
			return false
		}
	}
	return len(ins) > 0
}

// busyOfNoted is the busy share of a row whose instances note their waits:
// their worked share b, or NaN without a cost model (a partition of an
// export: the gaps before their ins are the walk's to tell from waits; the
// order-of-marks reading that stands in for logs without notes would
// say another figure than analyze's). ok is false where the row keeps its
// own (a cost model without the window's figure).
func (m *maker) busyOfNoted(b float64) (share float64, ok bool) {
	if !math.IsNaN(b) {
		return b, true
	}
	return math.NaN(), m.costs == nil
}

// Result is the capacity analysis: the rows and what the summary says.
type Result struct {
	Rows       []Row
	Windows    Windows
	Config     Config
	Ignored    []string
	Negative   uint64 // tuples whose out came before their in (left out)
	Counted    uint64 // tuples with a marked record
	Bottleneck string // the operator with the smallest max_source_rate ("" if none)
	MaxSource  float64
	// SourceRate is the run's source rate: marked tuples over the span of
	// their first records (NaN: a span of 0).
	SourceRate float64
	// Saturated: the bottleneck's windows where at least SaturatedShare of
	// its tuples were taken while backlogged, and what it carried in them
	// (tuples it took a second), and that as a source rate (over reach).
	Saturated     int
	CarriedRate   float64
	CarriedSource float64
	Moved         []string // instances whose cost moved between windows beyond its interval
	Disagree      []string // Beard & Chamberlain against the in/out capacity
	// Contradictions: capacities the run contradicts (contradict.go), and
	// why the bottleneck is not named as one when its capacity is among
	// them ("": it is not).
	Contradictions  []Contradiction
	BottleneckDoubt string
	Lost            uint64 // copies lost between operators, in all
	Losses          []Loss // where they were lost, in the operators' order
	HasCosts        bool   // the cost model was there (else no capacity: said)
	bcByOperator    map[string]float64
	inOutByOperator map[string]float64
	offered         map[string]float64
}

// Loss is the copies one operator handed on that never reached the next:
// Lost of its Sent.
type Loss struct {
	From, To   string
	Lost, Sent uint64
}

// Offered is what the source's tuples offer an operator over what arrived
// at it: 1 without loss upstream, more where copies were lost on the way
// (they did not load it, but were meant to); 1 where unknown.
func (r *Result) Offered(op string) float64 {
	if v, ok := r.offered[op]; ok && v > 0 && !math.IsInf(v, 0) {
		return v
	}
	return 1
}

// SaturatedShare is the share of a window's tuples taken while backlogged
// from which the instance counts as saturated in it.
const SaturatedShare = 0.95

// agg is a sum of cells.
type agg struct {
	in, out, arrivals, paired uint64
	svc, busy, blocked, sq    u128
}

func (g *agg) add(c *cell) {
	g.addAgg(&agg{in: c.in, out: c.out, arrivals: c.arrivals, paired: c.paired, svc: u128{lo: c.svc}, sq: c.sq,
		busy: u128{lo: c.busy}, blocked: u128{lo: c.blocked}})
}

func (g *agg) addAgg(o *agg) {
	g.in += o.in
	g.out += o.out
	g.arrivals += o.arrivals
	g.paired += o.paired
	g.svc.add(o.svc)
	g.sq.add(o.sq)
	g.busy.add(o.busy)
	g.blocked.add(o.blocked)
}

func (c *cell) active() bool {
	return c.in|c.out|c.arrivals|c.paired|c.busy|c.blocked != 0
}

// maker builds the rows.
type maker struct {
	p     *Plan
	acc   *Acc
	costs *cost.Acc // grid 0: the windows (nil: no cost model)
	win   Windows
	cfg   Config
	runS  float64 // the run's length, seconds
	res   *Result
	// Per operator: its whole-run in/out row (-1: none) and its instances'
	// arrivals and capacities over the run.
	opRow []int
	inst  [][]instTotal
	// flows: each operator's topology counts (nil without an Acc);
	// blocked: per operator and cell of the cost grid, where the operator
	// its copies go to held it back (nil: nowhere).
	flows   []Flow
	blocked [][]bool
}

type instTotal struct {
	arrivals uint64
	est      cost.Estimate
	label    string
	windows  []cost.Estimate // per window (nil where the instance has none)
}

// span is window w's start and end, seconds since t0 (w = -1: the run).
func (m *maker) span(w int) (float64, float64) {
	ws := m.win.Width / m.cfg.Hz
	if w < 0 {
		return 0, m.runS
	}
	start, end := float64(w)*ws, float64(w+1)*ws
	if w == m.win.N-1 && m.runS > start {
		end = math.Min(end, m.runS)
	}
	return start, end
}

func nanRow(r *Row) {
	nan := math.NaN()
	r.ArrivalsPerS, r.DeparturesPerS, r.BusyShare, r.BlockedShare = nan, nan, nan, nan
	r.OwnUS, r.HandOffUS, r.CostUS, r.CostLowUS, r.CostHighUS = nan, nan, nan, nan, nan
	r.ServiceRate, r.ServiceRateLow, r.ServiceRateHigh = nan, nan, nan
	r.Capacity, r.CapacityLow, r.CapacityHigh, r.Load, r.Headroom, r.Selectivity = nan, nan, nan, nan, nan, nan
	r.Skew, r.Reach, r.MaxSourceRate = nan, nan, nan
}

// fill sets a row's counts and shares from g over seconds. has: the roles
// the instances have; kb, ks: instances whose busy and blocked time count
// (the shares' denominators).
func (m *maker) fill(r *Row, g *agg, seconds float64, has [5]bool, kb, ks int) {
	r.Method = MethodInOut
	r.TuplesIn, r.TuplesOut = int64(g.in), int64(g.out)
	nanRow(r)
	cyc := seconds * m.cfg.Hz
	if has[RoleIn] {
		r.ArrivalsPerS = float64(g.arrivals) / seconds
	}
	if has[RoleOut] {
		r.DeparturesPerS = float64(g.out) / seconds
	}
	if has[RoleIn] && has[RoleOut] {
		if g.in > 0 {
			r.Selectivity = float64(g.out) / float64(g.in)
		}
		if kb > 0 {
			r.BusyShare = g.busy.float() / fixScale / cyc / float64(kb)
		}
		if ks > 0 && has[RoleSent] {
			r.BlockedShare = g.blocked.float() / fixScale / cyc / float64(ks)
		}
	}
}

// setCost puts an instance's estimate into its row.
func (m *maker) setCost(r *Row, e *cost.Estimate) {
	r.Backlogged = int64(e.Backlogged)
	if e.Tuples == 0 || int(e.Tuples) < m.cfg.MinTuples {
		addNote(r, fmt.Sprintf("not enough data: %d tuples with an in and an out (< %d)", e.Tuples, m.cfg.MinTuples))
		return
	}
	us := func(s float64) float64 { return s * 1e6 }
	r.OwnUS, r.CostUS, r.CostLowUS, r.CostHighUS = us(e.OwnS), us(e.CostS), us(e.CostLowS), us(e.CostHighS)
	r.HandOffUS = us(e.TakeS)
	if !math.IsNaN(e.SendS) {
		r.HandOffUS += us(e.SendS)
	}
	r.ServiceRate, r.ServiceRateLow, r.ServiceRateHigh = e.ServiceRate, e.ServiceLow, e.ServiceHigh
	r.Capacity, r.CapacityLow, r.CapacityHigh = e.Capacity, e.CapacityLow, e.CapacityHigh
	r.Headroom, r.Load = r.Capacity/r.ArrivalsPerS, r.ArrivalsPerS/r.Capacity
	switch e.TakeFrom {
	case cost.TakeRun:
		addNote(r, fmt.Sprintf("hand-off from the whole run (%d backlogged tuples here)", e.Backlogged))
	case cost.TakeNone:
		addNote(r, "taking the next tuple is not measured (never backlogged, or only while its downstream was saturated), so the capacity is an upper bound")
	}
}

// missing says which marks an instance (or operator) lacks for a service rate.
func missing(has [5]bool, op string) string {
	switch {
	case !has[RoleIn] && !has[RoleOut]:
		return fmt.Sprintf("no in and out marks: no service time (mark %q and %q)", op+" in", op+" out")
	case !has[RoleIn]:
		return fmt.Sprintf("no in mark: no arrivals, no service time (mark %q where it takes a tuple)", op+" in")
	case !has[RoleOut]:
		return fmt.Sprintf("no out mark: no departures, no service time (mark %q where it hands a tuple on)", op+" out")
	}
	return ""
}

func addNote(r *Row, s string) {
	if s == "" {
		return
	}
	if r.Note != "" {
		r.Note += "; "
	}
	r.Note += s
}

// Rows makes the result table: for every operator (in hop order), its
// in/out rows (whole run, then each window) and its instances' (each the
// whole run, then its windows), then the Beard & Chamberlain rows of its
// count channels. acc is the workers' merged accumulator (nil when no
// tuple channel marks); costs the cost model summed on the windows (its
// grid 0: win's windows; nil: none, and then no capacity); counts holds
// each instance's count channel (indexed like Plan.Instances; nil entries,
// or nil, where there is none).
func (p *Plan) Rows(acc *Acc, win Windows, counts []*CountSeries, costs *cost.Acc, cfg Config) *Result {
	if cfg.MinTuples < 1 {
		cfg.MinTuples = 1
	}
	if cfg.MinTake < 1 {
		cfg.MinTake = 10
	}
	m := &maker{p: p, acc: acc, costs: costs, win: win, cfg: cfg,
		res:   &Result{Windows: win, Config: cfg, Ignored: p.Ignored, SourceRate: math.NaN(), HasCosts: costs != nil},
		opRow: make([]int, len(p.Operators)), inst: make([][]instTotal, len(p.Operators))}
	for i := range m.opRow {
		m.opRow[i] = -1
	}
	m.runS = (win.T1 - win.T0) / cfg.Hz
	if !(m.runS > 0) {
		m.runS = win.Width / cfg.Hz
	}
	if acc != nil {
		m.res.Negative, m.res.Counted = acc.negative, acc.counted
		if span := (acc.srcLast - acc.srcFirst) / cfg.Hz; span > 0 {
			m.res.SourceRate = float64(acc.counted) / span
		}
	}
	m.res.bcByOperator, m.res.inOutByOperator = map[string]float64{}, map[string]float64{}
	m.downstreamSaturated()
	for _, oi := range m.operatorOrder() {
		m.operator(oi)
		m.beardChamberlain(oi, counts)
	}
	m.topology()
	m.contradictions()
	m.disagreements()
	return m.res
}

// operatorOrder: by the first hop of their channels, then by name.
func (m *maker) operatorOrder() []int {
	key := make([]int, len(m.p.Operators))
	for oi, op := range m.p.Operators {
		key[oi] = math.MaxInt
		for _, ii := range op.Instances {
			for r, ch := range m.p.Instances[ii].Chans {
				if ch >= 0 && Role(r) != RoleCount && Role(r) != RoleLineage && m.cfg.Rank != nil && ch < len(m.cfg.Rank) {
					key[oi] = min(key[oi], m.cfg.Rank[ch])
				}
			}
		}
	}
	order := make([]int, len(key))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(x, y int) bool {
		a, b := order[x], order[y]
		if key[a] != key[b] {
			return key[a] < key[b]
		}
		return m.p.Operators[a].Name < m.p.Operators[b].Name
	})
	return order
}

func tupleRoles(in *Instance) (has [5]bool, any bool) {
	for _, r := range []Role{RoleIn, RoleOut, RoleSent} {
		has[r] = in.Has(r)
		any = any || has[r]
	}
	return has, any
}

// options are the cost model's options for an instance.
func (m *maker) options(in *Instance) cost.Options {
	return cost.Options{Hz: m.cfg.Hz, MinTake: m.cfg.MinTake, HasSend: in.Has(RoleSent)}
}

// operator makes an operator's in/out rows and its instances'.
func (m *maker) operator(oi int) {
	op := &m.p.Operators[oi]
	n := m.win.N
	type instRun struct {
		ii          int
		has         [5]bool
		cells       []cell
		first, last int // active windows (last -1: no records)
		total       agg
		t           instTotal
	}
	var runs []instRun
	var opHas [5]bool
	for _, ii := range op.Instances {
		in := &m.p.Instances[ii]
		has, any := tupleRoles(in)
		if !any {
			continue
		}
		ir := instRun{ii: ii, has: has, first: n, last: -1}
		if m.acc != nil {
			ir.cells = m.acc.cells[ii*n : (ii+1)*n]
		}
		for w := range ir.cells {
			if c := &ir.cells[w]; c.active() {
				ir.first, ir.last = min(ir.first, w), w
				ir.total.add(c)
			}
		}
		ir.t = instTotal{arrivals: ir.total.arrivals, label: in.Label()}
		ir.t.est = cost.Estimate{Capacity: math.NaN(), CapacityLow: math.NaN(), CapacityHigh: math.NaN(), CostS: math.NaN()}
		if m.costs != nil && has[RoleIn] && has[RoleOut] {
			o := m.options(in)
			cells := m.unblockedCells(oi, ii)
			ir.t.est = o.RunOf(cells)
			runTake := cost.TakeOf(cells)
			ir.t.windows = make([]cost.Estimate, n)
			sub := m.costs.Grids()[0].Sub
			for w := range ir.t.windows {
				ir.t.windows[w] = o.Estimate(cells[w*sub:(w+1)*sub], runTake)
			}
		}
		for r := range has {
			opHas[r] = opHas[r] || has[r]
		}
		runs = append(runs, ir)
	}
	if len(runs) == 0 {
		return
	}
	// The operator's instances over the run: those with records (kb, ks:
	// with the marks for busy and blocked time).
	opFirst, opLast := n, -1
	withRecords, kb, ks := 0, 0, 0
	for _, ir := range runs {
		if ir.last < 0 {
			continue
		}
		withRecords++
		opFirst, opLast = min(opFirst, ir.first), max(opLast, ir.last)
		if ir.has[RoleIn] && ir.has[RoleOut] {
			kb++
			if ir.has[RoleSent] {
				ks++
			}
		}
	}
	estOf := func(ir *instRun, w int) *cost.Estimate {
		if w < 0 {
			return &ir.t.est
		}
		if ir.t.windows == nil {
			return nil
		}
		return &ir.t.windows[w]
	}
	opRow := func(w int) Row {
		start, end := m.span(w)
		r := Row{Level: "operator", Window: int64(w), StartS: start, EndS: end, Operator: op.Name}
		var g agg
		var arr []uint64
		var shares []instShare
		active := 0
		for i := range runs {
			ir := &runs[i]
			if ir.last < 0 {
				continue
			}
			x := ir.total
			if w >= 0 {
				x = agg{}
				x.add(&ir.cells[w])
				if ir.cells[w].active() {
					active++
				}
			} else {
				active++
			}
			if ir.has[RoleIn] {
				arr = append(arr, x.arrivals)
			}
			g.addAgg(&x)
			if e := estOf(ir, w); e != nil && e.Tuples > 0 && int(e.Tuples) >= m.cfg.MinTuples {
				shares = append(shares, instShare{x.arrivals, e})
			}
		}
		m.fill(&r, &g, end-start, opHas, kb, ks)
		if m.notes(oi) {
			// Where every instance notes its waits: the mean of their
			// worked shares, as the instance rows say them.
			var marked []int
			for i := range runs {
				if runs[i].last >= 0 && runs[i].has[RoleIn] && runs[i].has[RoleOut] {
					marked = append(marked, runs[i].ii)
				}
			}
			if b, ok := m.busyOfNoted(m.meanWorkedShare(marked, w)); ok {
				r.BusyShare = b
			}
		}
		r.Instances = int64(active)
		r.Skew = skew(arr)
		setOperatorCost(&r, shares)
		return r
	}
	whole := opRow(-1)
	addNote(&whole, missing(opHas, op.Name))
	addNote(&whole, m.blockedNote(oi))
	if withRecords < len(runs) {
		addNote(&whole, fmt.Sprintf("%d of %d instances without records", len(runs)-withRecords, len(runs)))
	}
	if m.costs == nil && opHas[RoleIn] && opHas[RoleOut] {
		why := m.cfg.NoCostModel
		if why == "" {
			why = "the visits were not walked"
		}
		if m.notes(oi) {
			addNote(&whole, "no cost model ("+why+"): no capacity, no busy share")
		} else {
			addNote(&whole, "no cost model ("+why+"): no capacity")
		}
	}
	m.opRow[oi] = len(m.res.Rows)
	m.res.Rows = append(m.res.Rows, whole)
	for w := max(opFirst, 0); w <= opLast; w++ {
		m.res.Rows = append(m.res.Rows, opRow(w))
	}

	for i := range runs {
		ir := &runs[i]
		in := &m.p.Instances[ir.ii]
		ikb, iks := 0, 0
		if ir.has[RoleIn] && ir.has[RoleOut] {
			ikb = 1
			if ir.has[RoleSent] {
				iks = 1
			}
		}
		instRow := func(w int, g *agg) Row {
			start, end := m.span(w)
			r := Row{Level: "instance", Window: int64(w), StartS: start, EndS: end, Operator: op.Name,
				Instance: in.Label(), Node: in.Node, PID: int64(in.PID)}
			m.fill(&r, g, end-start, ir.has, ikb, iks)
			if ir.has[RoleIn] && ir.has[RoleOut] && m.noted(ir.ii) {
				if b, ok := m.busyOfNoted(m.workedShare(ir.ii, w)); ok {
					r.BusyShare = b
				}
			}
			r.Instances = 1
			if e := estOf(ir, w); e != nil {
				m.setCost(&r, e)
			}
			return r
		}
		total := ir.total
		r := instRow(-1, &total)
		addNote(&r, missing(ir.has, op.Name))
		if ir.last < 0 {
			addNote(&r, "no records")
		}
		m.inst[oi] = append(m.inst[oi], ir.t)
		m.res.Rows = append(m.res.Rows, r)
		var moved []int
		for w := max(ir.first, 0); w <= ir.last; w++ {
			var g agg
			g.add(&ir.cells[w])
			wr := instRow(w, &g)
			if e := estOf(ir, w); e != nil && int(e.Tuples) >= m.cfg.MinTuples && cost.Moved(*e, ir.t.est) {
				moved = append(moved, w)
				addNote(&wr, fmt.Sprintf("cost moved: %s a tuple here against %s over the run, beyond this window's interval", fmtUS(e.CostS), fmtUS(ir.t.est.CostS)))
			}
			m.res.Rows = append(m.res.Rows, wr)
		}
		if len(moved) > 0 {
			m.res.Moved = append(m.res.Moved, m.movedText(op.Name, in.Label(), ir.t, moved))
		}
	}
}

// instShare is an instance's arrivals in an operator's row and its cost
// estimate there.
type instShare struct {
	arrivals uint64
	e        *cost.Estimate
}

// setOperatorCost fills an operator row's cost from its instances' (r's
// arrivals already filled): the instances' costs weighted by their
// tuples; rates summed; capacity the arrival rate the instances sustain
// given how arrivals are shared among them.
func setOperatorCost(r *Row, shares []instShare) {
	var tuples, backlogged uint64
	var own, hand, cst, opArr float64
	sr, srLo, srHi := 0.0, 0.0, 0.0
	for _, s := range shares {
		k := float64(s.e.Tuples)
		tuples += s.e.Tuples
		backlogged += s.e.Backlogged
		own += k * s.e.OwnS
		h := s.e.TakeS
		if !math.IsNaN(s.e.SendS) {
			h += s.e.SendS
		}
		hand += k * h
		cst += k * s.e.CostS
		sr += s.e.ServiceRate
		srLo += s.e.ServiceLow
		srHi += s.e.ServiceHigh
		opArr += float64(s.arrivals)
	}
	r.Backlogged = int64(backlogged)
	if tuples > 0 {
		r.OwnUS, r.HandOffUS, r.CostUS = own/float64(tuples)*1e6, hand/float64(tuples)*1e6, cst/float64(tuples)*1e6
		r.ServiceRate, r.ServiceRateLow, r.ServiceRateHigh = sr, srLo, srHi
	}
	if opArr > 0 {
		c, lo, hi := math.Inf(1), math.NaN(), math.NaN()
		for _, s := range shares {
			if s.arrivals == 0 {
				continue
			}
			f := float64(s.arrivals) / opArr
			if v := s.e.Capacity / f; v < c {
				c, lo, hi = v, s.e.CapacityLow/f, s.e.CapacityHigh/f
			}
		}
		if !math.IsInf(c, 1) {
			r.Capacity, r.CapacityLow, r.CapacityHigh = c, lo, hi
			r.Headroom, r.Load = r.Capacity/r.ArrivalsPerS, r.ArrivalsPerS/r.Capacity
		}
	} else if len(shares) == 1 {
		e := shares[0].e
		r.Capacity, r.CapacityLow, r.CapacityHigh = e.Capacity, e.CapacityLow, e.CapacityHigh
	}
}

// fmtUS writes seconds as microseconds for people.
func fmtUS(s float64) string {
	us := s * 1e6
	if math.Abs(us) >= 100 {
		return fmt.Sprintf("%.0f us", us)
	}
	return fmt.Sprintf("%.3g us", us)
}

// movedText says where an instance's cost moved beyond its interval.
func (m *maker) movedText(op, label string, t instTotal, moved []int) string {
	lo, hi := -1, -1
	for _, w := range moved {
		e := t.windows[w]
		if lo < 0 || e.CostS < t.windows[lo].CostS {
			lo = w
		}
		if hi < 0 || e.CostS > t.windows[hi].CostS {
			hi = w
		}
	}
	counted := 0
	for _, e := range t.windows {
		if int(e.Tuples) >= m.cfg.MinTuples && !math.IsNaN(e.CostLowS) {
			counted++
		}
	}
	var ws []string
	for i, w := range moved {
		if i == 8 {
			ws = append(ws, fmt.Sprintf("... (%d more)", len(moved)-i))
			break
		}
		ws = append(ws, fmt.Sprint(w))
	}
	where := fmt.Sprintf("from %s (window %d) to %s (window %d)", fmtUS(t.windows[lo].CostS), lo, fmtUS(t.windows[hi].CostS), hi)
	if lo == hi { // one window: not "from 0.125 us (window 4) to 0.125 us (window 4)"
		where = fmt.Sprintf("%s there", fmtUS(t.windows[lo].CostS))
	}
	return fmt.Sprintf("%s (%s): its cost moved beyond its interval in %d of %d windows (%s): %s, %s over the run; "+
		"a CPU shared with other work, a garbage collection or a change of phase does that, and a capacity from one window does not hold in another",
		op, label, len(moved), counted, strings.Join(ws, ", "), where, fmtUS(t.est.CostS))
}

// skew is the largest over the mean of the instances' arrivals.
func skew(arr []uint64) float64 {
	if len(arr) == 0 {
		return math.NaN()
	}
	var sum, mx uint64
	for _, a := range arr {
		sum += a
		mx = max(mx, a)
	}
	if sum == 0 {
		return math.NaN()
	}
	return float64(mx) / (float64(sum) / float64(len(arr)))
}

// beardChamberlain makes the rows of an operator's count channels: each
// converged estimate in the window of its time, the median of them over
// the whole run, and the operator's instances together.
func (m *maker) beardChamberlain(oi int, counts []*CountSeries) {
	op := &m.p.Operators[oi]
	nan := math.NaN()
	ws := m.win.Width / m.cfg.Hz
	var rows []Row
	var opRate, opCount float64
	opInst, opRated := 0, 0
	opFirst, opLast := math.Inf(1), math.Inf(-1)
	for _, ii := range op.Instances {
		in := &m.p.Instances[ii]
		if !in.Has(RoleCount) {
			continue
		}
		var s *CountSeries
		if ii < len(counts) {
			s = counts[ii]
		}
		if s == nil {
			s = &CountSeries{}
		}
		opInst++
		base := Row{Level: "instance", Operator: op.Name, Instance: in.Label(), Node: in.Node, PID: int64(in.PID),
			Method: MethodBC, Instances: 1}
		nanRow(&base)
		// Items per window (by each period's middle), and over the whole run.
		perWin := map[int64]uint64{}
		var total uint64
		first, last := math.Inf(1), math.Inf(-1)
		for _, pd := range s.Periods {
			perWin[m.windowOf((pd.Start+pd.End)/2)] += pd.Count
			total += pd.Count
			first, last = math.Min(first, pd.Start), math.Max(last, pd.End)
		}
		opFirst, opLast = math.Min(opFirst, first), math.Max(opLast, last)
		whole := base
		whole.Window, whole.StartS, whole.EndS = -1, 0, m.runS
		whole.TuplesOut = int64(total)
		whole.DeparturesPerS = nan
		if last > first {
			whole.DeparturesPerS = float64(total) / ((last - first) / m.cfg.Hz)
		}
		rates := make([]float64, 0, len(s.Estimates))
		for _, e := range s.Estimates {
			rates = append(rates, e.Rate)
		}
		whole.ServiceRate = median(rates)
		whole.Headroom = whole.ServiceRate / whole.DeparturesPerS
		if len(rates) == 0 {
			whole.Note = "no converged estimate (low load, or a run too short for the estimator)"
		} else {
			whole.Note = fmt.Sprintf("median of %d converged estimates; headroom against departures (arrivals are not counted)", len(rates))
			opRate += whole.ServiceRate
			opRated++
		}
		opCount += float64(total)
		rows = append(rows, whole)
		for _, e := range s.Estimates {
			w := m.windowOf(e.Est)
			r := base
			r.Window = w
			r.StartS, r.EndS = float64(w)*ws, float64(w+1)*ws
			if w >= 0 && int(w) < m.win.N {
				r.StartS, r.EndS = m.span(int(w))
			}
			r.TuplesOut = int64(perWin[w])
			r.DeparturesPerS = float64(perWin[w]) / (r.EndS - r.StartS)
			r.ServiceRate = e.Rate
			r.Headroom = r.ServiceRate / r.DeparturesPerS
			r.Note = fmt.Sprintf("converged estimate (sampling period %.3g ms, %d estimates averaged)", float64(e.PeriodNs)/1e6, e.Samples)
			rows = append(rows, r)
		}
	}
	if opInst == 0 {
		return
	}
	r := Row{Level: "operator", Window: -1, StartS: 0, EndS: m.runS, Operator: op.Name, Method: MethodBC,
		Instances: int64(opInst), TuplesOut: int64(opCount)}
	nanRow(&r)
	if opLast > opFirst {
		r.DeparturesPerS = opCount / ((opLast - opFirst) / m.cfg.Hz)
	}
	if opRated > 0 {
		r.ServiceRate = opRate
		r.Headroom = r.ServiceRate / r.DeparturesPerS
		r.Note = "sum of the instances' medians"
		m.res.bcByOperator[op.Name] = opRate
		if opRated < opInst {
			r.Note += fmt.Sprintf(" (%d of %d instances converged)", opRated, opInst)
		}
	} else {
		r.Note = "no converged estimate"
	}
	m.res.Rows = append(m.res.Rows, r)
	m.res.Rows = append(m.res.Rows, rows...)
}

// windowOf is the window of a reference estimate, unclamped (a counter's
// record may lie before t0 or after the tuples' last).
func (m *maker) windowOf(est float64) int64 {
	return int64(math.Floor((est - m.win.T0) / m.win.Width))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// topology fills the operators' whole-run in/out rows: reach, lost,
// capacity, load, max_source_rate, bottleneck, parallelism_needed; and
// what the bottleneck carried while it was saturated.
func (m *maker) topology() {
	if m.acc == nil {
		return
	}
	flows := m.flows
	if flows == nil {
		flows = m.acc.topology().flows()
	}
	reach := m.acc.topology().reach(m.operatorOrder(), m.acc.counted, flows)
	m.res.offered = map[string]float64{}
	best, bestOp := -1, -1
	for oi, ri := range m.opRow {
		if ri < 0 {
			continue
		}
		r := &m.res.Rows[ri]
		f := flows[oi]
		if f.Ins > 0 {
			r.Reach = reach[oi]
			// What was offered against what arrived (lost copies did not
			// load the operator, but were meant to).
			m.res.offered[r.Operator] = r.Reach * float64(m.acc.counted) / float64(f.Ins)
		}
		if f.Lost > 0 {
			r.Lost = int64(f.Lost)
			m.res.Lost += f.Lost
			to := "the next operator"
			if f.LostTo >= 0 {
				to = m.p.Operators[f.LostTo].Name
			}
			m.res.Losses = append(m.res.Losses, Loss{From: r.Operator, To: to, Lost: f.Lost, Sent: f.Outs})
			addNote(r, fmt.Sprintf("%d of the %d tuples it handed on never reached %s: lost (or still in flight when the logs ended), not filtered; reach counts them", f.Lost, f.Outs, to))
		}
		if r.Reach > 0 && !math.IsNaN(r.Capacity) {
			r.MaxSourceRate = r.Capacity / r.Reach
			if !math.IsNaN(m.res.SourceRate) {
				r.Load = m.res.SourceRate * r.Reach / r.Capacity
				r.Headroom = 1 / r.Load
			}
		}
		if m.cfg.TargetRate > 0 && r.Reach > 0 {
			mean, k := 0.0, 0
			for _, it := range m.inst[oi] {
				if !math.IsNaN(it.est.Capacity) && int(it.est.Tuples) >= m.cfg.MinTuples {
					mean += it.est.Capacity
					k++
				}
			}
			if k > 0 {
				r.ParallelismNeeded = int64(math.Ceil(m.cfg.TargetRate * r.Reach / (mean / float64(k))))
			}
		}
		if !math.IsNaN(r.MaxSourceRate) && (best < 0 || r.MaxSourceRate < m.res.Rows[best].MaxSourceRate) {
			best, bestOp = ri, oi
		}
		m.res.inOutByOperator[r.Operator] = r.Capacity
	}
	if best < 0 {
		return
	}
	b := &m.res.Rows[best]
	b.Bottleneck = true
	m.res.Bottleneck, m.res.MaxSource = b.Operator, b.MaxSourceRate
	// What the bottleneck carried while saturated: the windows where every
	// instance of it took SaturatedShare of its tuples backlogged.
	var tuples uint64
	var secs float64
	for w := 0; w < m.win.N; w++ {
		sat, any := true, false
		var k uint64
		for _, it := range m.inst[bestOp] {
			if it.windows == nil {
				continue
			}
			e := it.windows[w]
			if e.Tuples == 0 {
				continue
			}
			any = true
			k += e.Visits
			if float64(e.Backlogged) < SaturatedShare*float64(e.Visits) {
				sat = false
			}
		}
		if any && sat {
			start, end := m.span(w)
			m.res.Saturated++
			tuples += k
			secs += end - start
		}
	}
	if m.res.Saturated > 0 && secs > 0 {
		m.res.CarriedRate = float64(tuples) / secs
		m.res.CarriedSource = m.res.CarriedRate / b.Reach
	}
}

// disagreements says where an operator's Beard & Chamberlain estimate and
// its in/out capacity, from the same run, differ by more than 20%.
func (m *maker) disagreements() {
	for op, bc := range m.res.bcByOperator {
		c, ok := m.res.inOutByOperator[op]
		if !ok || math.IsNaN(c) || !(bc > 0) {
			continue
		}
		if d := bc/c - 1; math.Abs(d) > 0.2 {
			m.res.Disagree = append(m.res.Disagree, fmt.Sprintf("%s: Beard & Chamberlain's %s/s and the in/out capacity %s/s differ by %+.0f%%: "+
				"the estimator counts items over unblocked sampling periods (own work and hand-off, with waits for input inside a period), "+
				"the in/out capacity per tuple taken while backlogged; trust the in/out capacity where the operator marks in and out", op, rate(bc), rate(c), 100*d))
		}
	}
	sort.Strings(m.res.Disagree)
}
