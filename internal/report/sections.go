package report

import (
	"fmt"
	"html"
	"math"
	"strings"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/chart"
	"cloudprofiler/internal/critpath"
)

// trim keeps the last n-1 runes of a long label, after an ellipsis; room
// for less than one rune (a box narrower than a character) keeps nothing
// (the element's title still names it).
func trim(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	return "…" + string(r[len(r)-n+1:])
}

// num formats a number of microseconds for people: three decimals (to the
// nanosecond), or three significant digits below a nanosecond.
func num(v float64) string {
	if v != 0 && math.Abs(v) < 0.001 {
		return fmt.Sprintf("%.3g", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// capacityHTML writes the capacity section: a bar per operator of the
// highest source rate it sustains (the bottleneck's in red, the target rate
// as a line), and the whole-run rows of operators and instances.
func capacityHTML(b *strings.Builder, r *Input) {
	esc := html.EscapeString
	c := r.Capacity
	if c == nil {
		if r.CapacityNote != "" {
			fmt.Fprintf(b, `<h2>Capacity</h2><p class="note">%s</p>`, strings.ReplaceAll(esc(r.CapacityNote), "\n", "<br>"))
		}
		return
	}
	cfg := c.Config
	f := func(v float64) string {
		switch {
		case math.IsNaN(v):
			return "–"
		case math.IsInf(v, 1):
			return "∞"
		case math.Abs(v) >= 100:
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.3g", v)
	}
	sh := func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.3f", v)
	}
	fmt.Fprintf(b, `<h2>Capacity</h2><p class="note">Operators as the channel names mark them (OPERATOR[#INSTANCE] in, out, sent, count). Cost: what a tuple costs an instance, its own work (in to out) and its hand-off (the send, and taking the next tuple while backlogged); capacity: one over the cost, the tuples it takes a second while backlogged, with its 95%% interval; load: the offered rate over capacity (above 1 it cannot keep up); lost: tuples it handed on that never reached the next operator. Windows of %g s from the run's first tuple record are in capacity.csv; below, the whole run. Fewer than %d tuples: not enough data.</p>`,
		c.Windows.Width/cfg.Hz, cfg.MinTuples)
	if c.Bottleneck != "" {
		fmt.Fprintf(b, "<p>Bottleneck: <b>%s</b>. The highest source rate the topology sustains: <b>%s tuples/s</b>; the run offered %s tuples/s.", esc(c.Bottleneck), rate(c.MaxSource), rate(c.SourceRate))
		if c.Saturated > 0 {
			fmt.Fprintf(b, " While %s was saturated (%d of %d windows) it took %s tuples/s, %s/s at the source.", esc(c.Bottleneck), c.Saturated, c.Windows.N, rate(c.CarriedRate), rate(c.CarriedSource))
		}
		b.WriteString("</p>")
	} else if c.BottleneckDoubt != "" {
		fmt.Fprintf(b, "<p>Bottleneck: not named: %s.</p>", esc(c.BottleneckDoubt))
	} else {
		b.WriteString("<p>No bottleneck found: no operator has both a capacity and arrivals (mark its in and out).</p>")
	}
	for _, s := range append(append([]string{}, c.Moved...), c.Disagree...) {
		fmt.Fprintf(b, `<p class="note">%s</p>`, esc(s))
	}
	// Bars: each operator's max_source_rate.
	type bar struct {
		name string
		v    float64
		bott bool
	}
	var bars []bar
	hi := cfg.TargetRate
	for _, x := range c.Rows {
		if x.Level == "operator" && x.Window == -1 && x.Method == "in/out" && !math.IsNaN(x.MaxSourceRate) && !math.IsInf(x.MaxSourceRate, 0) {
			bars = append(bars, bar{x.Operator, x.MaxSourceRate, x.Bottleneck})
			hi = math.Max(hi, x.MaxSourceRate)
		}
	}
	if len(bars) > 0 && hi > 0 {
		const left, width, rowH = 200, 460, 22
		height := 30 + rowH*len(bars)
		fmt.Fprintf(b, `<svg class="capacity" data-marks="%d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg"><text x="%d" y="14">highest source rate each operator sustains (tuples/s)</text>`, len(bars), left+width+120, height, left)
		for i, x := range bars {
			y := 22 + rowH*i
			color := "#9cc3e6"
			if x.bott {
				color = "#d62728"
			}
			w := x.v / hi * width
			fmt.Fprintf(b, `<text x="4" y="%d">%s</text><rect class="mark" x="%d" y="%d" width="%.1f" height="14" fill="%s"/><text x="%.1f" y="%d" fill="#555">%s</text>`,
				y+11, esc(trim(x.name, 28)), left, y, math.Max(w, 1), color, float64(left)+w+6, y+11, rate(x.v))
		}
		if cfg.TargetRate > 0 {
			x := left + cfg.TargetRate/hi*width
			fmt.Fprintf(b, `<line x1="%.1f" y1="18" x2="%.1f" y2="%d" stroke="#333" stroke-dasharray="4 3"/><text x="%.1f" y="%d" fill="#333">target %s</text>`,
				x, x, height-4, x+4, height-4, rate(cfg.TargetRate))
		}
		b.WriteString("</svg>")
	}
	// The table fits its column at 1,400 px: an instance goes under its
	// operator, the cost and the capacity carry their parts and interval
	// in one cell each, and a row's note takes a row of its own.
	cols := 12
	b.WriteString(`<table class="capacity"><tr><th>operator / instance</th><th>method</th><th>instances</th><th>arrivals/s</th><th>cost µs (own + hand-off)</th><th>capacity/s (95% interval)</th><th>load</th><th>selectivity</th><th>skew</th><th>reach</th><th>lost</th><th>max source/s</th>`)
	if cfg.TargetRate > 0 {
		cols++
		fmt.Fprintf(b, "<th>parallelism for %s/s</th>", rate(cfg.TargetRate))
	}
	b.WriteString("</tr>")
	// Instances are listed when an operator has several.
	several := map[string]bool{}
	for _, x := range c.Rows {
		if x.Level == "operator" && x.Window == -1 && x.Instances > 1 {
			several[x.Operator+"\x00"+x.Method] = true
		}
	}
	for _, x := range c.Rows {
		if x.Window != -1 || (x.Level == "instance" && !several[x.Operator+"\x00"+x.Method]) {
			continue
		}
		name := "<b>" + esc(x.Operator) + "</b>"
		if x.Level == "instance" {
			name = "↳ " + esc(x.Instance)
		}
		capa, lo, hi := x.Capacity, x.CapacityLow, x.CapacityHigh
		if x.Method == capacity.MethodBC {
			capa, lo, hi = x.ServiceRate, x.ServiceRateLow, x.ServiceRateHigh
		}
		capCell := rate(capa)
		if !math.IsNaN(lo) {
			capCell += " (" + rate(lo) + "–" + rate(hi) + ")"
		}
		costCell := f(x.CostUS)
		if !math.IsNaN(x.OwnUS) {
			costCell += " (" + f(x.OwnUS) + " + " + f(x.HandOffUS) + ")"
		}
		style := ""
		if x.Bottleneck {
			style = ` style="background:#fde0e0"`
		}
		lost := "–"
		if x.Level == "operator" && x.Method == capacity.MethodInOut && !math.IsNaN(x.Reach) {
			lost = count(uint64(max(x.Lost, 0)))
		}
		method := x.Method
		if method == capacity.MethodBC {
			method = "B&amp;C"
		}
		fmt.Fprintf(b, `<tr%s><td class="l">%s</td><td class="l">%s</td><td>%d</td><td>%s</td><td class="w">%s</td><td class="w">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>`,
			style, name, method, x.Instances, rate(x.ArrivalsPerS), costCell, capCell,
			sh(x.Load), sh(x.Selectivity), sh(x.Skew), sh(x.Reach), lost, rate(x.MaxSourceRate))
		if cfg.TargetRate > 0 {
			p := "–"
			if x.ParallelismNeeded > 0 {
				p = fmt.Sprint(x.ParallelismNeeded)
			}
			fmt.Fprintf(b, "<td>%s</td>", p)
		}
		b.WriteString("</tr>")
		if x.Note != "" {
			fmt.Fprintf(b, `<tr class="sub"><td></td><td class="l" colspan="%d">%s</td></tr>`, cols-1, esc(x.Note))
		}
	}
	b.WriteString("</table>")
	capacityOverTimeHTML(b, c)
	for _, s := range c.Ignored {
		fmt.Fprintf(b, `<p class="note">Not used: %s</p>`, esc(s))
	}
}

// capacityOverTimeHTML draws each instance's busy share (its own work and
// its time blocked handing on, over the window) and the share of its
// tuples it took while backlogged (a queue waited before it), window by
// window: where a pause or a backlog began.
func capacityOverTimeHTML(b *strings.Builder, c *capacity.Result) {
	type line struct{ busy, backlog chart.Series }
	lines := map[string]*line{}
	var names []string
	for _, x := range c.Rows {
		if x.Level != "instance" || x.Window < 0 || x.Method != capacity.MethodInOut || x.TuplesIn == 0 {
			continue
		}
		name := x.InstanceName()
		k := x.Operator + "\x00" + x.Instance // instances of operators in one process share labels
		l := lines[k]
		if l == nil {
			l = &line{chart.Series{Name: name}, chart.Series{Name: name}}
			lines[k] = l
			names = append(names, k)
		}
		if math.IsNaN(x.BusyShare) {
			continue // no work measured (no out mark)
		}
		t := (x.StartS + x.EndS) / 2
		busy := x.BusyShare
		if !math.IsNaN(x.BlockedShare) {
			busy += x.BlockedShare
		}
		l.busy.X, l.busy.Y = append(l.busy.X, t), append(l.busy.Y, busy)
		l.backlog.X, l.backlog.Y = append(l.backlog.X, t), append(l.backlog.Y, float64(x.Backlogged)/float64(x.TuplesIn))
	}
	if len(names) == 0 {
		return
	}
	busy := chart.Chart{ID: "busy-share", Title: "busy share per instance, window by window (own work and blocked handing on)",
		X: chart.Axis{Label: "window middle, from the run's first tuple record (s)", Min: 0}, Y: chart.Axis{Label: "share of the window", Min: 0, Max: 1}, Width: 470, Height: 170}
	backlog := chart.Chart{ID: "backlog-share", Title: "tuples taken while backlogged, per instance, window by window",
		X: chart.Axis{Label: "window middle, from the run's first tuple record (s)", Min: 0}, Y: chart.Axis{Label: "share of its tuples", Min: 0, Max: 1}, Width: 470, Height: 170}
	for _, n := range names {
		busy.Series = append(busy.Series, lines[n].busy)
		backlog.Series = append(backlog.Series, lines[n].backlog)
	}
	b.WriteString(`<div class="grid">`)
	busy.SVG(b)
	backlog.SVG(b)
	b.WriteString(`</div>`)
}

// critPathHTML writes the section "Where the latency goes": the run's
// critical path (each category's share and critical participation), a
// stacked bar per slice (adjacent slices pooled into one bar when there are
// many), and the p99 and median journeys' latency taken apart. Aggregates
// only: criticalpath.csv and breakdown.csv have the rest.
func critPathHTML(b *strings.Builder, r *Input) {
	esc := html.EscapeString
	c := r.CritPath
	if c == nil {
		if r.CritPathNote != "" {
			fmt.Fprintf(b, `<h2>Where the latency goes</h2><p class="note">%s</p>`, esc(r.CritPathNote))
		}
		return
	}
	b.WriteString(`<h2>Where the latency goes</h2>`)
	pct := func(v float64) string {
		switch {
		case math.IsNaN(v):
			return "–"
		case v > 0 && v < 0.0005:
			return "&lt;0.1%"
		}
		return fmt.Sprintf("%.1f%%", v*100)
	}
	fmt.Fprintf(b, `<p class="note">Critical path (Sager): in each slice of %.4g s from the run's first tuple record, the chain of activities that made the slice as long as it is, back from its end; a category's share is its part of that chain. Critical participation (SnailTrail) spreads the slice over every path that could have been critical. Operators: their own work and the time spent taking queued tuples; links: transfers; input: waiting for input. Every slice is in criticalpath.csv, every group of journeys in breakdown.csv.</p>`,
		c.SliceSeconds())
	if c.Note != "" {
		fmt.Fprintf(b, `<p class="note">%s</p>`, esc(c.Note))
	}
	runRows := c.RunRows()
	if len(runRows) > 0 {
		if c.Inconsistent > 0 {
			fmt.Fprintf(b, `<p>%d slices, <b>%d inconsistent</b> (the first: %s).</p><p class="note">An inconsistent slice is one whose critical path could not be followed through every hand-off: a wait whose hand-off the logs do not hold (a tuple sent before the slice began, a record lost or never marked). That part of the slice counts as "unattributed"; the other slices' shares stand as they are. %s of the run's slices are inconsistent: %s.</p>`,
				c.Slices, c.Inconsistent, esc(c.FirstInconsistency()), percent(float64(c.Inconsistent)/float64(max(c.Slices, 1))), inconsistentVerdict(c.Inconsistent, c.Slices))
		} else {
			fmt.Fprintf(b, `<p>%d slices, all consistent.</p>`, c.Slices)
		}
		// A color per category, in the run's order; past the palette, "the rest".
		palette := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}
		type cat struct{ kind, name string }
		color := map[cat]int{}
		var legend []string
		for _, x := range runRows {
			k := cat{x.Kind, x.Name}
			switch {
			case x.Kind == "input":
				color[k] = len(legend)
				legend = append(legend, "#d9d9d9")
			case x.Kind == "unattributed":
				color[k] = len(legend)
				legend = append(legend, "#7f7f7f")
			case len(legend) < len(palette):
				color[k] = len(legend)
				legend = append(legend, palette[len(legend)])
			}
		}
		rest := len(legend)
		legend = append(legend, "#bbbbbb")
		idx := func(x critpath.PathRow) int {
			if i, ok := color[cat{x.Kind, x.Name}]; ok {
				return i
			}
			return rest
		}
		b.WriteString(`<table><tr><th></th><th>kind</th><th>name</th><th>share of the path</th><th>critical participation</th></tr>`)
		for _, x := range runRows {
			fmt.Fprintf(b, `<tr><td style="background:%s"></td><td class="l">%s</td><td class="l">%s</td><td>%s</td><td>%s</td></tr>`,
				legend[idx(x)], esc(x.Kind), esc(x.Name), pct(x.Share), pct(x.Participation))
		}
		b.WriteString("</table>")
		critPathSVG(b, c, legend, idx)
	}
	critPathBreakdownHTML(b, c, pct)
}

// inconsistentVerdict says what a share of inconsistent slices means for
// the path's shares.
func inconsistentVerdict(bad, all int) string {
	if float64(bad) <= 0.05*float64(all) {
		return "few enough that the shares above hold"
	}
	return "read the shares above with care: the unattributed part holds what could not be followed"
}

// critPathSVG draws a stacked bar per slice (the run's colors; at most
// maxBars bars: adjacent slices pooled, weighted by their lengths), with a
// red mark under a bar that holds an inconsistent slice.
func critPathSVG(b *strings.Builder, c *critpath.Result, colors []string, idx func(critpath.PathRow) int) {
	const maxBars, left, width, height = 120, 50, 700, 160
	n := c.Slices
	if n <= 0 {
		return
	}
	nb := min(n, maxBars)
	shares := make([][]float64, nb)
	lens := make([]float64, nb)
	bad := make([]bool, nb)
	seen := make([]bool, n)
	end := 0.0
	for i := range shares {
		shares[i] = make([]float64, len(colors))
	}
	for _, x := range c.Path {
		if x.Level != "slice" || x.Slice < 0 || x.Slice >= int64(n) {
			continue
		}
		k := int(x.Slice * int64(nb) / int64(n))
		l := x.EndS - x.StartS
		if !seen[x.Slice] {
			seen[x.Slice] = true
			lens[k] += l
		}
		shares[k][idx(x)] += x.Share * l
		bad[k] = bad[k] || !x.Consistent
		end = math.Max(end, x.EndS)
	}
	bw := float64(width) / float64(nb)
	bars := 0
	for _, l := range lens {
		if l > 0 {
			bars++
		}
	}
	fmt.Fprintf(b, `<svg class="critpath" data-marks="%d" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg"><text x="%d" y="12">share of each slice's critical path</text>`, bars, left+width+20, height+44, left)
	fmt.Fprintf(b, `<line x1="%d" y1="20" x2="%d" y2="%d" stroke="#333"/><text x="4" y="26">100%%</text><text x="4" y="%d">0</text>`, left-2, left-2, height+20, height+20)
	for k := range shares {
		if lens[k] <= 0 {
			continue
		}
		x := float64(left) + bw*float64(k)
		y := float64(height + 20)
		b.WriteString(`<g class="mark">`)
		for j, v := range shares[k] {
			h := v / lens[k] * height
			if h < 0.05 { // invisible (or a negative share: none is drawn)
				continue
			}
			y -= h
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x, y, math.Max(bw-1, 0.5), h, colors[j])
		}
		if bad[k] {
			fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="4" fill="#d62728"/>`, x, height+23, math.Max(bw-1, 0.5))
		}
		b.WriteString(`</g>`)
	}
	per := "a bar per slice"
	if nb < n {
		per = fmt.Sprintf("a bar per %.3g slices", float64(n)/float64(nb))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d">0 s</text><text x="%d" y="%d" text-anchor="end">%.3g s (%s; red: inconsistent)</text></svg>`,
		left, height+40, left+width, height+40, end, per)
}

// critPathBreakdownHTML writes the p99 and median journeys' latency taken
// apart, side by side, the parts in the order of their p99 mean.
func critPathBreakdownHTML(b *strings.Builder, c *critpath.Result, pct func(float64) string) {
	esc := html.EscapeString
	type key struct{ part, where string }
	type cell struct{ mean, share, bound float64 }
	var keys []key
	vals := map[key][]*cell{}
	var e2e []*critpath.BreakdownRow
	for g, name := range critpath.TextGroups {
		row, parts := c.GroupRows(name)
		e2e = append(e2e, row)
		for _, x := range parts {
			k := key{x.Part, x.Where}
			if vals[k] == nil {
				keys = append(keys, k)
				vals[k] = make([]*cell, len(critpath.TextGroups))
			}
			vals[k][g] = &cell{x.MeanUS, x.Share, x.BoundUS}
		}
	}
	have := false
	for _, x := range e2e {
		have = have || x != nil
	}
	if !have {
		b.WriteString(`<p class="note">Latency breakdown: no journeys.</p>`)
		return
	}
	val := func(mean, bound float64) string {
		s := dur(mean / 1e6)
		if bound > 0 {
			s += " ± " + dur(bound/1e6)
		}
		return s
	}
	b.WriteString(`<h3>Latency taken apart: p99 vs median journeys (means)</h3><p class="note">Each journey's end-to-end latency, from its first record to its last, taken apart into its operators' own work (compute), waiting behind earlier tuples or blocked handing on (queue), transfers and the rest (other), exactly in reference cycles; p99: the journeys at or above the 99th percentile, median: the 49th to the 51st. ± the mean strict bound where it is not 0.</p><table><tr><th>part</th><th>where</th>`)
	for g, name := range critpath.TextGroups {
		n := int64(0)
		if e2e[g] != nil {
			n = e2e[g].Tuples
		}
		fmt.Fprintf(b, `<th>%s (%d journeys)</th><th>share</th>`, esc(name), n)
	}
	b.WriteString(`</tr><tr><td class="l"><b>end-to-end</b></td><td></td>`)
	for _, x := range e2e {
		if x == nil {
			b.WriteString("<td>–</td><td></td>")
			continue
		}
		fmt.Fprintf(b, `<td><b>%s</b></td><td>100%%</td>`, val(x.E2EMeanUS, x.E2EBoundUS))
	}
	b.WriteString("</tr>")
	for _, k := range keys {
		fmt.Fprintf(b, `<tr><td class="l">%s</td><td class="l">%s</td>`, esc(k.part), esc(k.where))
		for _, v := range vals[k] {
			if v == nil {
				b.WriteString("<td>–</td><td></td>")
				continue
			}
			fmt.Fprintf(b, `<td>%s</td><td>%s</td>`, val(v.mean, v.bound), pct(v.share))
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</table>")
	if c.AddUp {
		b.WriteString(`<p class="note">The parts add up exactly to the end-to-end latency in every group (integer reference cycles).</p>`)
	} else {
		b.WriteString(`<p class="note"><b>The parts do not add up</b> to the end-to-end latency in some group (breakdown.csv, total_cycles).</p>`)
	}
	fmt.Fprintf(b, `<p class="note">%d tuples, %d journeys, %d absorbed by lineage, %d visits.</p>`, c.Tuples, c.Journeys, c.Absorbed, c.Visits)
}

// maceHTML writes the Mace section: a line per window of the measured run
// (Mace, the predicted and the measured largest latency) as an SVG, the
// scenarios' table, the costs and what breaks the theorem's assumptions.
func maceHTML(b *strings.Builder, r *Input) {
	esc := html.EscapeString
	m := r.Mace
	if m == nil {
		if r.MaceNote != "" {
			fmt.Fprintf(b, `<h2>Mace: the largest latency predicted from load</h2><p class="note">%s</p>`, esc(r.MaceNote))
		}
		return
	}
	b.WriteString(`<h2>Mace: the largest latency predicted from load</h2>`)
	fmt.Fprintf(b, `<p class="note">Tuples are grouped by their stimulus (their first record) in windows of %.4g s. Mace (Chandramouli et al.) is how long the work each node (an operator instance's thread) is behind at a window's end takes it to do, from each instance's cost per tuple (the cost model, as capacity's, window by window) and the tuples that reach it; the predicted largest latency is the time a node takes to do its excess before a 32nd of a window and that 32nd's work. Every window is in mace.csv, the costs in mace-costs.csv.</p>`, m.WindowS)
	// The measured run's windows: Mace, predicted and measured, on one
	// scale (microseconds), by the window's start.
	var mc, pr, me chart.Series
	mc.Name, pr.Name, me.Name = "Mace", "predicted largest latency", "measured largest latency"
	mc.Color, pr.Color, me.Color = "#999", "#1f77b4", "#d62728"
	for i := range m.Rows {
		x := &m.Rows[i]
		if x.Scenario != "measured" {
			continue
		}
		mc.X, mc.Y = append(mc.X, x.StartS), append(mc.Y, x.MaceS*1e6)
		pr.X, pr.Y = append(pr.X, x.StartS), append(pr.Y, x.PredictedS*1e6)
		me.X, me.Y = append(me.X, x.StartS), append(me.Y, x.MeasuredMaxS*1e6)
	}
	if len(mc.X) > 0 {
		c := chart.Chart{ID: "mace", Title: "the measured run, per window: Mace, the predicted and the measured largest latency",
			X: chart.Axis{Label: "window start, from the run's first tuple record (s)"},
			Y: chart.Axis{Label: "latency", Format: usFmt}, Series: []chart.Series{mc, pr, me}, Height: 180}
		c.SVG(b)
	}
	b.WriteString(`<table><tr><th>scenario</th><th>worst Mace</th><th>predicted worst</th><th>measured worst</th><th>predicted against measured</th><th>windows within the bounds</th><th>busiest node</th><th>its load</th><th>latency bounded up to</th></tr>`)
	var far []string
	for _, s := range m.Scenarios {
		meas, vs, within := "–", "–", "–"
		switch {
		case !math.IsNaN(s.WorstMeasuredS) && s.Excess:
			meas = dur(s.WorstMeasuredS)
			e := s.WorstLatencyS/s.WorstMeasuredS - 1
			vs = fmt.Sprintf("%+.3g%%", 100*e)
			if math.Abs(e) > 0.25 {
				far = append(far, fmt.Sprintf("%s: predicted %s against %s measured (%s)", s.Name, dur(s.WorstLatencyS), meas, vs))
			}
		case !math.IsNaN(s.WorstMeasuredS):
			meas = dur(s.WorstMeasuredS)
			vs = "no excess: at most w + e = " + dur(m.WindowS+m.EpsS)
		}
		if !math.IsNaN(s.Within) {
			within = fmt.Sprintf("%s of %d", percent(s.Within), s.Windows)
		}
		limit := "–"
		if s.MaxRate > 0 {
			limit = fmt.Sprintf("x%.3g (%s tuples/s)", s.MaxRate, rate(s.MaxSourceRate))
		}
		// Load is NaN when the source's records span no time (one tuple,
		// or every one in the same tick): "–", not "NaN".
		load := "–"
		if !math.IsNaN(s.Load) {
			load = fmt.Sprintf("%.3g", s.Load)
		}
		fmt.Fprintf(b, `<tr><td class="l">%s</td><td>%s</td><td>%s</td><td>%s</td><td class="w">%s</td><td>%s</td><td class="l">%s</td><td>%s</td><td class="w">%s</td></tr>`,
			esc(s.Name), dur(s.WorstMaceS), dur(s.WorstLatencyS), meas, vs, within, esc(s.Bottleneck), load, limit)
	}
	b.WriteString(`</table>`)
	if len(far) > 0 {
		fmt.Fprintf(b, `<p class="note"><b>Where the prediction is far from the run</b> (%s): the predicted worst latency is what the load implies, each node's costs window by window and the tuples that reached it; a machine shared with other work (a CPU taken away mid-tuple), costs that move within a window, or tuples bunched closer than a 32nd of a window make the run's worst differ from it. The assumptions the logs show broken are listed below; the measured worst is the run's own.</p>`,
			esc(strings.Join(far, "; ")))
	}
	if c := r.Capacity; c != nil && c.Bottleneck != "" && len(m.Scenarios) > 0 && m.Scenarios[0].MaxSourceRate > 0 {
		if mr := m.Scenarios[0].MaxSourceRate; math.Abs(mr/c.MaxSource-1) > 0.05 {
			fmt.Fprintf(b, `<p class="note">Mace's limit, %s tuples/s, is not the highest sustainable rate of the verdict, %s tuples/s: Mace's is where the busiest node's work, from its costs window by window and the tuples that reached it, fills its time; capacity's is the bottleneck's capacity over the whole run over its reach (lost tuples included). They part where costs move between windows or tuples were lost before the busiest node.</p>`,
				rate(mr), rate(c.MaxSource))
		}
	}
	if len(m.Flags) == 0 {
		b.WriteString(`<p>Assumptions: none broken that the logs show.</p>`)
	} else {
		b.WriteString(`<p><b>Assumptions broken</b> (the bounds may not hold):</p><ul>`)
		for _, f := range m.Flags {
			fmt.Fprintf(b, `<li>%s</li>`, esc(f))
		}
		b.WriteString(`</ul>`)
	}
	for _, n := range m.Notes {
		fmt.Fprintf(b, `<p class="note">%s</p>`, esc(n))
	}
}
