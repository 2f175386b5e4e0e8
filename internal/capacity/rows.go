package capacity

import (
	"fmt"
	"math"
	"math/big"
	"sort"
)

// Row is one row of capacity.parquet and capacity.csv (README, "Capacity").
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
	// Own service time (in to out) and time blocked (out to sent) inside
	// the window over its length (operator rows: the mean over instances).
	BusyShare    float64 `parquet:"busy_share"`
	BlockedShare float64 `parquet:"blocked_share"`
	// Tuples paired in the window (by their in) over their own service time,
	// and its 95 % confidence interval (the delta method on the mean
	// service time). Operator rows: the instances together (the pooled rate
	// of one instance times the instances that served tuples).
	ServiceRate     float64 `parquet:"service_rate"`
	ServiceRateLow  float64 `parquet:"service_rate_low"`
	ServiceRateHigh float64 `parquet:"service_rate_high"`
	Headroom        float64 `parquet:"headroom"`    // service rate / arrival rate
	Selectivity     float64 `parquet:"selectivity"` // tuples out / tuples in
	Instances       int64   `parquet:"instances"`   // operator rows: instances with records in the window (instance rows: 1)
	Skew            float64 `parquet:"skew"`        // operator rows: max instance arrivals / mean instance arrivals
	// Topology, on the operators' whole-run in/out rows: the share of the
	// tuples that reach the operator, the highest arrival rate its instances
	// sustain given how arrivals are shared among them, that over reach
	// (the source rate at which it saturates), whether it is the smallest,
	// and with a target source rate the instances it needs (DS2's rule).
	Reach             float64 `parquet:"reach"`
	Capacity          float64 `parquet:"capacity"`
	MaxSourceRate     float64 `parquet:"max_source_rate"`
	Bottleneck        bool    `parquet:"bottleneck"`
	ParallelismNeeded int64   `parquet:"parallelism_needed"`
	Note              string  `parquet:"note,dict"`
}

// Methods.
const (
	MethodInOut = "in/out"
	MethodBC    = "beard-chamberlain"
)

// Config is how the rows are made.
type Config struct {
	Hz         float64 // reference cycles per second
	MinTuples  int     // fewer paired tuples in a row: no service rate ("not enough data")
	TargetRate float64 // source tuples per second: parallelism_needed (0: none)
	// Rank is each channel's place in the hop order (nil: none): operators
	// come in the order of their first channel.
	Rank []int
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
}

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

func bigOf(u u128) *big.Int {
	b := new(big.Int).SetUint64(u.hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(u.lo))
}

// serviceRate is k over the mean service time of n tuples (sum svc, sum of
// squares sq, fixed point), with the delta method's 95 % interval.
func serviceRate(n uint64, svc, sq u128, k int, hz float64) (rate, lo, hi float64) {
	mean := svc.float() / fixScale / float64(n) / hz // seconds
	kf := float64(k)
	if n < 2 {
		return kf / mean, 0, math.Inf(1)
	}
	// Variance exactly: (n*SS - S^2) / (n(n-1)), in fixed units squared.
	bn := new(big.Int).SetUint64(n)
	num := new(big.Int).Mul(bn, bigOf(sq))
	s := bigOf(svc)
	num.Sub(num, new(big.Int).Mul(s, s))
	den := new(big.Int).Mul(bn, new(big.Int).SetUint64(n-1))
	v, _ := new(big.Rat).SetFrac(num, den).Float64()
	sd := math.Sqrt(math.Max(v, 0)) / fixScale / hz
	h := 1.96 * sd / math.Sqrt(float64(n))
	rate, lo, hi = kf/mean, kf/(mean+h), math.Inf(1)
	if mean > h {
		hi = kf / (mean - h)
	}
	return rate, lo, hi
}

// maker builds the rows.
type maker struct {
	p    *Plan
	acc  *Acc
	win  Windows
	cfg  Config
	runS float64 // the run's length, seconds
	res  *Result
	// Per operator: its whole-run in/out row (-1: none) and its instances'
	// arrivals and service rates over the run.
	opRow []int
	inst  [][]instTotal
}

type instTotal struct {
	arrivals uint64
	rate     float64
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

// fill sets a row's counts, rates and shares from g over seconds.
// has: the roles the instances have; k: instances that served tuples
// (the service rate's multiple); kb, ks: instances whose busy and blocked
// time count (the shares' denominators).
func (m *maker) fill(r *Row, g *agg, seconds float64, has [5]bool, k, kb, ks int) {
	nan := math.NaN()
	r.Method = MethodInOut
	r.TuplesIn, r.TuplesOut = int64(g.in), int64(g.out)
	r.ArrivalsPerS, r.DeparturesPerS, r.BusyShare, r.BlockedShare = nan, nan, nan, nan
	r.ServiceRate, r.ServiceRateLow, r.ServiceRateHigh, r.Headroom, r.Selectivity = nan, nan, nan, nan, nan
	r.Skew, r.Reach, r.Capacity, r.MaxSourceRate = nan, nan, nan, nan
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
		switch {
		case g.paired == 0 || int(g.paired) < m.cfg.MinTuples:
			r.Note = fmt.Sprintf("not enough data: %d paired tuples (< %d)", g.paired, m.cfg.MinTuples)
		default:
			r.ServiceRate, r.ServiceRateLow, r.ServiceRateHigh = serviceRate(g.paired, g.svc, g.sq, max(k, 1), m.cfg.Hz)
			r.Headroom = r.ServiceRate / r.ArrivalsPerS
		}
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
// tuple channel marks); counts holds each instance's count channel
// (indexed like Plan.Instances; nil entries, or nil, where there is none).
func (p *Plan) Rows(acc *Acc, win Windows, counts []*CountSeries, cfg Config) *Result {
	if cfg.MinTuples < 1 {
		cfg.MinTuples = 1
	}
	m := &maker{p: p, acc: acc, win: win, cfg: cfg, res: &Result{Windows: win, Config: cfg, Ignored: p.Ignored},
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
	}
	for _, oi := range m.operatorOrder() {
		m.operator(oi)
		m.beardChamberlain(oi, counts)
	}
	m.topology()
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
	}
	var runs []instRun
	var opHas [5]bool
	for _, ii := range op.Instances {
		has, any := tupleRoles(&m.p.Instances[ii])
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
		for r := range has {
			opHas[r] = opHas[r] || has[r]
		}
		runs = append(runs, ir)
	}
	if len(runs) == 0 {
		return
	}
	// The operator's instances over the run: those with records (k: that
	// served tuples; kb, ks: with the marks for busy and blocked time).
	opFirst, opLast := n, -1
	withRecords, k, kb, ks := 0, 0, 0, 0
	for _, ir := range runs {
		if ir.last < 0 {
			continue
		}
		withRecords++
		opFirst, opLast = min(opFirst, ir.first), max(opLast, ir.last)
		if ir.total.paired > 0 {
			k++
		}
		if ir.has[RoleIn] && ir.has[RoleOut] {
			kb++
			if ir.has[RoleSent] {
				ks++
			}
		}
	}
	opRow := func(w int) Row {
		start, end := m.span(w)
		r := Row{Level: "operator", Window: int64(w), StartS: start, EndS: end, Operator: op.Name}
		var g agg
		var arr []uint64
		active := 0
		for _, ir := range runs {
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
		}
		m.fill(&r, &g, end-start, opHas, k, kb, ks)
		r.Instances = int64(active)
		r.Skew = skew(arr)
		return r
	}
	whole := opRow(-1)
	addNote(&whole, missing(opHas, op.Name))
	if withRecords < len(runs) {
		addNote(&whole, fmt.Sprintf("%d of %d instances without records", len(runs)-withRecords, len(runs)))
	}
	m.opRow[oi] = len(m.res.Rows)
	m.res.Rows = append(m.res.Rows, whole)
	for w := max(opFirst, 0); w <= opLast; w++ {
		m.res.Rows = append(m.res.Rows, opRow(w))
	}

	for _, ir := range runs {
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
			m.fill(&r, g, end-start, ir.has, 1, ikb, iks)
			r.Instances = 1
			return r
		}
		total := ir.total
		r := instRow(-1, &total)
		addNote(&r, missing(ir.has, op.Name))
		if ir.last < 0 {
			addNote(&r, "no records")
		}
		m.inst[oi] = append(m.inst[oi], instTotal{arrivals: total.arrivals, rate: r.ServiceRate})
		m.res.Rows = append(m.res.Rows, r)
		for w := max(ir.first, 0); w <= ir.last; w++ {
			var g agg
			g.add(&ir.cells[w])
			m.res.Rows = append(m.res.Rows, instRow(w, &g))
		}
	}
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
			Method: MethodBC, Instances: 1, ArrivalsPerS: nan, BusyShare: nan, BlockedShare: nan,
			ServiceRateLow: nan, ServiceRateHigh: nan, Selectivity: nan, Skew: nan, Reach: nan, Capacity: nan, MaxSourceRate: nan}
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
		Instances: int64(opInst), TuplesOut: int64(opCount), ArrivalsPerS: nan, DeparturesPerS: nan, BusyShare: nan,
		BlockedShare: nan, ServiceRate: nan, ServiceRateLow: nan, ServiceRateHigh: nan, Headroom: nan, Selectivity: nan,
		Skew: nan, Reach: nan, Capacity: nan, MaxSourceRate: nan}
	if opLast > opFirst {
		r.DeparturesPerS = opCount / ((opLast - opFirst) / m.cfg.Hz)
	}
	if opRated > 0 {
		r.ServiceRate = opRate
		r.Headroom = r.ServiceRate / r.DeparturesPerS
		r.Note = "sum of the instances' medians"
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

// topology fills the operators' whole-run in/out rows: reach, capacity,
// max_source_rate, bottleneck, parallelism_needed.
func (m *maker) topology() {
	if m.acc == nil {
		return
	}
	best := -1
	for oi, ri := range m.opRow {
		if ri < 0 {
			continue
		}
		r := &m.res.Rows[ri]
		if m.acc.counted > 0 {
			r.Reach = float64(m.acc.reached[oi]) / float64(m.acc.counted)
		}
		// capacity: min over instances of rate_i / share_i, share_i being
		// the instance's share of the operator's arrivals.
		var opArr uint64
		var rates []float64
		for _, it := range m.inst[oi] {
			opArr += it.arrivals
			if !math.IsNaN(it.rate) {
				rates = append(rates, it.rate)
			}
		}
		if opArr > 0 && len(rates) > 0 {
			c := math.Inf(1)
			for _, it := range m.inst[oi] {
				if it.arrivals > 0 && !math.IsNaN(it.rate) {
					c = math.Min(c, it.rate/(float64(it.arrivals)/float64(opArr)))
				}
			}
			if !math.IsInf(c, 1) {
				r.Capacity = c
			}
		}
		if r.Reach > 0 {
			r.MaxSourceRate = r.Capacity / r.Reach
		}
		if len(rates) > 0 && m.cfg.TargetRate > 0 && r.Reach > 0 {
			mean := 0.0
			for _, x := range rates {
				mean += x
			}
			mean /= float64(len(rates))
			r.ParallelismNeeded = int64(math.Ceil(m.cfg.TargetRate * r.Reach / mean))
		}
		if !math.IsNaN(r.MaxSourceRate) && (best < 0 || r.MaxSourceRate < m.res.Rows[best].MaxSourceRate) {
			best = ri
		}
	}
	if best >= 0 {
		b := &m.res.Rows[best]
		b.Bottleneck = true
		m.res.Bottleneck, m.res.MaxSource = b.Operator, b.MaxSourceRate
	}
}
