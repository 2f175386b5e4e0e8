package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/critpath"
	"cloudprofiler/minrtt"
)

// heat is the colour of a share of the end-to-end latency: pale at 0,
// orange at a half, dark red at all of it.
func heat(s float64) string {
	s = math.Max(0, math.Min(1, s))
	stops := [3][3]float64{{255, 245, 235}, {253, 141, 60}, {127, 0, 0}}
	k, f := 0, s*2
	if s > 0.5 {
		k, f = 1, (s-0.5)*2
	}
	c := [3]int{}
	for i := range c {
		c[i] = int(math.Round(stops[k][i] + (stops[k+1][i]-stops[k][i])*f))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

// blue is the colour of a transfer's share of the median journey: pale
// blue at 0, dark blue at all of it (apart from the boxes' heat).
func blue(s float64) string {
	s = math.Max(0, math.Min(1, s))
	from, to := [3]float64{198, 219, 239}, [3]float64{8, 48, 107}
	c := [3]int{}
	for i := range c {
		c[i] = int(math.Round(from[i] + (to[i]-from[i])*s))
	}
	return fmt.Sprintf("#%02x%02x%02x", c[0], c[1], c[2])
}

// Thresholds of the topology's marks: an instance is saturated from this
// load, backpressured from this share of its time blocked handing on.
const (
	saturatedLoad     = 0.95
	backpressureShare = 0.1
)

// opState is what the topology says of an operator instance: its
// whole-run capacity row (nil: not marked), its offered load (what the
// source's tuples offered it, lost ones included, over its capacity: the
// verdict's load, instance by instance), and its operator's queueing (the
// median and p99 journeys' mean wait before it, µs; NaN: unknown).
type opState struct {
	row                *capacity.Row
	load               float64
	queueMed, queueP99 float64
}

// opStates finds each thread's capacity row and queueing.
func opStates(in *Input) []opState {
	threads := in.Threads
	st := make([]opState, len(threads))
	for t := range st {
		st[t].load, st[t].queueMed, st[t].queueP99 = math.NaN(), math.NaN(), math.NaN()
	}
	// By operator and instance: the instances of several operators in one
	// process share their label (node/pid/INSTANCE: every Flink operator's
	// subtask 0 in one TaskManager, the tour's three threads).
	type key struct{ op, inst string }
	inst := map[key]*capacity.Row{}
	if c := in.Capacity; c != nil {
		for i := range c.Rows {
			x := &c.Rows[i]
			if x.Level == "instance" && x.Window == -1 && x.Method == capacity.MethodInOut {
				inst[key{x.Operator, x.Instance}] = x
			}
		}
	}
	for _, c := range in.Channels {
		if c.Instance != "" && c.Role != capacity.RoleNone {
			if x := inst[key{c.Operator, c.Instance}]; x != nil {
				st[c.Thread].row, st[c.Thread].load = x, x.Load*in.Capacity.Offered(x.Operator)
			}
		}
	}
	if queue := breakdownMeans(in.CritPath, "queue"); queue != nil {
		for t, th := range threads {
			op, _, _ := strings.Cut(th.Name, "#")
			if q, ok := queue[op]; ok || (st[t].row != nil && st[t].row.TuplesIn > 0) {
				st[t].queueMed, st[t].queueP99 = q[0], q[1]
			}
		}
	}
	return st
}

// breakdownMeans is the critical path's breakdown of one part (queue,
// transfer) by where it happens: the median and the p99 journeys' means,
// in µs (nil without the analysis). A part a group leaves out took none
// of its journeys' time: 0.
func breakdownMeans(c *critpath.Result, part string) map[string][2]float64 {
	if c == nil {
		return nil
	}
	m := map[string][2]float64{}
	for g, name := range []string{"median", "p99"} {
		_, parts := c.GroupRows(name)
		for _, x := range parts {
			if x.Part == part {
				v := m[x.Where]
				v[g] = x.MeanUS
				m[x.Where] = v
			}
		}
	}
	return m
}

// topologyHTML draws the operators (an operator instance, or a channel
// outside any) in a lane per node, in the channel order left to right, as
// an engine's job graph does: each instance coloured by its load (what
// limits throughput), the saturated and the backpressured marked, its
// own work and the queueing before it inside its box; between boxes the
// transfers, coloured by the transfer time alone (the critical path's
// breakdown takes the queueing out of it; without that analysis, the hop
// whole, queueing included, says so).
func topologyHTML(b *strings.Builder, in *Input) {
	esc := html.EscapeString
	threads := in.Threads
	if len(threads) == 0 || in.Records == 0 {
		b.WriteString(`<p class="missing">No tuple records: no topology to draw.</p>`)
		return
	}
	hops, e2e := hopPairs(in.Pairs)
	total := 0.0
	for _, i := range e2e {
		total = math.Max(total, in.Pairs[i].Median)
	}
	if total <= 0 {
		for _, i := range hops {
			total += math.Max(in.Pairs[i].Median, 0)
		}
	}
	if med := journeyMeanUS(in.CritPath, "median"); med > 0 {
		total = med / 1e6
	}
	share := func(v float64) float64 {
		if total <= 0 || math.IsNaN(v) {
			return 0
		}
		return math.Min(1, math.Max(v, 0)/total)
	}
	states := opStates(in)
	transfers := breakdownMeans(in.CritPath, "transfer")
	// Boxes: threads with a tuple channel that holds records; their column
	// by the earliest rank of the operator's channels.
	used := make([]bool, len(threads))
	baseRank := map[string]int{}
	base := func(t int) string { n, _, _ := strings.Cut(threads[t].Name, "#"); return n }
	for _, c := range in.Channels {
		if !c.Tuples || !c.HasRecords {
			continue
		}
		t := c.Thread
		used[t] = true
		rk := c.Rank
		if r, ok := baseRank[base(t)]; !ok || rk < r {
			baseRank[base(t)] = rk
		}
	}
	var names []string
	for n := range baseRank {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return baseRank[names[i]] < baseRank[names[j]] })
	col := map[string]int{}
	for i, n := range names {
		col[n] = i
	}
	inside := make([][]int, len(threads)) // compute hops within a box
	var edges []int
	for _, i := range hops {
		from, to := in.Channels[in.Pairs[i].FromChannel].Thread, in.Channels[in.Pairs[i].ToChannel].Thread
		if from == to {
			inside[from] = append(inside[from], i)
		} else {
			edges = append(edges, i)
		}
	}
	// A box's lines: its name, its load and capacity, its compute hops,
	// the queueing before it.
	boxLines := func(t int) []string {
		var l []string
		if x := states[t].row; x != nil && !math.IsNaN(states[t].load) {
			// A capacity from its own work alone (it never took a queued
			// tuple: an operator chained behind its source) is an upper
			// bound, and the load from it a lower one.
			atLeast, atMost := "", ""
			if strings.Contains(x.Note, "capacity is an upper bound") {
				atLeast, atMost = "≥", "≤"
			}
			s := fmt.Sprintf("load %s%.2f", atLeast, states[t].load)
			if !math.IsNaN(x.Capacity) {
				s += " · " + atMost + rate3(x.Capacity) + "/s"
			}
			l = append(l, s)
			if x.BlockedShare >= backpressureShare {
				l = append(l, fmt.Sprintf("blocked handing on %.0f%%", 100*x.BlockedShare))
			}
		}
		for _, i := range inside[t] {
			l = append(l, fmt.Sprintf("%s %s, p99 %s", hopWord(&in.Pairs[i].Row), dur(in.Pairs[i].Median), dur(in.Pairs[i].P99)))
		}
		if q := states[t]; !math.IsNaN(q.queueMed) {
			l = append(l, fmt.Sprintf("queue %s, p99 %s", dur(q.queueMed/1e6), dur(q.queueP99/1e6)))
		}
		return l
	}
	// Lanes: the nodes with boxes, in the model's order.
	nodes := in.Nodes
	stack := map[[2]int]int{} // (node, column) -> boxes so far
	pos := make([][2]int, len(threads))
	laneRows := make([]int, len(nodes))
	lines := 0
	for t := range threads {
		if !used[t] {
			continue
		}
		k := [2]int{threads[t].Node, col[base(t)]}
		pos[t] = [2]int{stack[k], k[1]}
		stack[k]++
		laneRows[k[0]] = max(laneRows[k[0]], stack[k])
		lines = max(lines, len(boxLines(t)))
	}
	const laneLabel, gap, pad, charW, boldW = 84, 110, 14, 6.2, 7.0
	ncols := max(len(names), 1)
	// Boxes as wide as their longest line (a name in bold, marked
	// saturated; a figure line), from 100 to 260 px: a Flink job's six
	// operators' boxes at their share of 1,180 px cut every line short. A
	// wide drawing the page scales down to its column.
	widest := 0.0
	for t := range threads {
		if !used[t] {
			continue
		}
		widest = max(widest, boldW*float64(len([]rune(threads[t].Name+" · saturated"))))
		for _, l := range boxLines(t) {
			widest = max(widest, charW*float64(len([]rune(l))))
		}
	}
	bw := max(100, min(260, int(math.Ceil(widest))+12))
	// A label too long for its box keeps its start (what it is); its
	// title has it whole.
	fit := func(s string, w float64) string {
		n := int(float64(bw-12) / w)
		if r := []rune(s); len(r) > n && n > 1 {
			return string(r[:n-1]) + "…"
		}
		return s
	}
	bh := 24 + 14*lines
	laneY := make([]int, len(nodes))
	y := 8
	for n := range nodes {
		laneY[n] = y
		if laneRows[n] > 0 {
			y += laneRows[n]*(bh+pad) + pad
		}
	}
	const legendH = 64
	width, height := max(laneLabel+ncols*bw+(ncols-1)*gap+20, 1150), y+legendH // the legend's width at least
	box := func(t int) (x, y float64) {
		return float64(laneLabel + pos[t][1]*(bw+gap)), float64(laneY[threads[t].Node] + pad + pos[t][0]*(bh+pad))
	}
	nops := 0
	for t := range threads {
		if used[t] {
			nops++
		}
	}
	fmt.Fprintf(b, `<svg class="topology" data-ops="%d" data-hops="%d" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="topology">`,
		nops, len(edges), width, height, width, height)
	b.WriteString(`<defs><linearGradient id="heat"><stop offset="0" stop-color="#fff5eb"/><stop offset="0.5" stop-color="#fd8d3c"/><stop offset="1" stop-color="#7f0000"/></linearGradient>` +
		`<linearGradient id="blue"><stop offset="0" stop-color="#c6dbef"/><stop offset="1" stop-color="#08306b"/></linearGradient>` +
		`<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="11" markerHeight="11" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#555"/></marker></defs>`)
	for n, name := range nodes {
		if laneRows[n] == 0 {
			continue
		}
		h := laneRows[n]*(bh+pad) + pad
		fmt.Fprintf(b, `<g class="node" data-name="%s"><rect x="2" y="%d" width="%d" height="%d" rx="6" fill="#f4f6f9" stroke="#c9d1dc"/><text x="10" y="%d" font-weight="bold">node %s</text></g>`,
			esc(name), laneY[n], width-4, h-4, laneY[n]+20, esc(trim(name, 12)))
	}
	// Labels go where they collide with no box and no label already
	// placed; one that would is left to its arrow's title.
	var taken [][4]float64 // x0, y0, x1, y1
	for t := range threads {
		if used[t] {
			x0, y0 := box(t)
			taken = append(taken, [4]float64{x0, y0, x0 + float64(bw), y0 + float64(bh)})
		}
	}
	place := func(r [4]float64) bool {
		for _, o := range taken {
			if r[0] < o[2] && o[0] < r[2] && r[1] < o[3] && o[1] < r[3] {
				return false
			}
		}
		taken = append(taken, r)
		return true
	}
	// Edges under the boxes: the transfer alone where the breakdown has
	// it, else the hop (queueing included).
	for _, i := range edges {
		x := &in.Pairs[i]
		from, to := in.Channels[x.FromChannel].Thread, in.Channels[x.ToChannel].Thread
		ax, ay := box(from)
		bx, by := box(to)
		x1, y1 := ax+float64(bw), ay+float64(bh)/2
		x2, y2 := bx, by+float64(bh)/2
		med, p99, what := x.Median, x.P99, "hop, queueing included"
		if transfers != nil && states[from].row != nil && states[to].row != nil {
			tr := transfers[base(from)+" -> "+base(to)]
			med, p99, what = tr[0]/1e6, tr[1]/1e6, "transfer"
		}
		s := share(med)
		c := math.Max(40, math.Abs(x2-x1)/2)
		fmt.Fprintf(b, `<g class="hop" data-from="%s" data-to="%s" data-share="%.4f"><path d="M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="%s" stroke-width="%.1f" marker-end="url(#arrow)"><title>%s %s → %s: median %s ± %s, p99 %s, max %s (queueing at %s included); %s: %s in the median journey, %s in the p99 journeys, %.1f%% of the median journey</title></path>`,
			esc(x.From), esc(x.To), s, x1, y1, x1+c, y1, x2-c, y2, x2, y2, blue(0.2+0.8*s), 2+6*s,
			esc(x.Kind), esc(x.From), esc(x.To), dur(x.Median), dur(x.ErrMedian), dur(x.P99), dur(x.Max), esc(base(to)), what, dur(med), dur(p99), 100*s)
		// The label above the arrow's middle, clear of its stroke (beside
		// it where the arrow runs down to another lane).
		mx, my, anchor := (x1+x2)/2, math.Min(y1, y2)-6-3*s, "middle"
		if math.Abs(y2-y1) > 30 {
			mx, my, anchor = (x1+x2)/2+10, (y1+y2)/2, "start"
		}
		l1 := what + " " + dur(med)
		if what != "transfer" {
			l1 = dur(med) + " (with queue)"
		}
		l2 := "p99 " + dur(p99)
		w := charW * float64(max(len([]rune(l1)), len([]rune(l2))))
		left := mx - w/2
		if anchor == "start" {
			left = mx
		}
		if place([4]float64{left, my - 24, left + w, my + 4}) {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="%s" stroke="#fff" stroke-width="3" paint-order="stroke"><tspan x="%.1f" dy="-1.2em">%s</tspan><tspan x="%.1f" dy="1.2em">%s</tspan></text>`,
				mx, my, anchor, mx, esc(l1), mx, esc(l2))
		}
		b.WriteString(`</g>`)
	}
	for t, th := range threads {
		if !used[t] {
			continue
		}
		x0, y0 := box(t)
		st := states[t]
		load, fill, stroke, sw, dash, text := math.NaN(), "#ffffff", "#555", 1.0, "", "#222"
		what := "not marked: no load (mark its in and out)"
		name := th.Name
		if st.row != nil && !math.IsNaN(st.load) {
			load = st.load
			fill = heat(load)
			what = fmt.Sprintf("load %.3f (offered over capacity)", load)
			if !math.IsNaN(st.row.BlockedShare) {
				what += fmt.Sprintf(", blocked handing on %.1f%% of its time", 100*st.row.BlockedShare)
			}
			if load > 0.6 {
				text = "#fff"
			}
			if load >= saturatedLoad {
				stroke, sw, name = "#000", 4, name+" · saturated"
			}
			if st.row.BlockedShare >= backpressureShare {
				dash = ` stroke-dasharray="6 3"`
				sw = math.Max(sw, 2)
			}
		}
		loadAttr := ""
		if !math.IsNaN(load) {
			loadAttr = fmt.Sprintf("%.4f", load)
		}
		fmt.Fprintf(b, `<g class="op" data-name="%s" data-load="%s"><rect x="%.1f" y="%.1f" width="%d" height="%d" rx="4" fill="%s" stroke="%s" stroke-width="%.0f"%s><title>%s on node %s: %s</title></rect><text x="%.1f" y="%.1f" font-weight="bold" fill="%s">%s</text>`,
			esc(th.Name), loadAttr, x0, y0, bw, bh, fill, stroke, sw, dash, esc(th.Name), esc(nodes[th.Node]), what, x0+6, y0+15, text, esc(fit(name, boldW)))
		for k, l := range boxLines(t) {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s"><title>%s</title>%s</text>`, x0+6, y0+30+14*float64(k), text, esc(l), esc(fit(l, charW)))
		}
		b.WriteString(`</g>`)
	}
	// The legend.
	ly := height - legendH + 12
	fmt.Fprintf(b, `<g class="legend"><rect x="%d" y="%d" width="160" height="10" fill="url(#heat)" stroke="#999"/><text x="%d" y="%d">0</text><text x="%d" y="%d" text-anchor="end">1</text><text x="%d" y="%d">box: load, offered over capacity (white: not marked)</text>`,
		laneLabel, ly, laneLabel, ly+22, laneLabel+160, ly+22, laneLabel+170, ly+9)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="24" height="12" fill="#fff" stroke="#000" stroke-width="4"/><text x="%d" y="%d">load ≥ %.2f (saturated)</text><rect x="%d" y="%d" width="24" height="12" fill="#fff" stroke="#555" stroke-width="2" stroke-dasharray="6 3"/><text x="%d" y="%d">blocked handing on ≥ %.0f%% of its time (backpressured)</text>`,
		laneLabel+470, ly-1, laneLabel+500, ly+9, saturatedLoad, laneLabel+650, ly-1, laneLabel+680, ly+9, 100*backpressureShare)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="160" height="8" fill="url(#blue)" stroke="#999"/><text x="%d" y="%d">arrow: transfer time, its share of the median journey (%s)</text></g>`,
		laneLabel, ly+30, laneLabel+170, ly+38, dur(total))
	b.WriteString(`</svg>`)
	b.WriteString(`<p class="note">A lane per node; a box per operator instance (channels named "OPERATOR in/out"), or per channel where none is named; left to right in the channel order. In a box: its load and capacity (the capacity section), its own work (median and p99 of its compute hop) and the queueing before it (the mean wait of the median and of the p99 journeys, from the critical path's breakdown). An arrow: the transfer between two boxes, the queueing at its end taken out where the breakdown has it. Hover for each hop's median ± its strict bound.</p>`)
}

// hopWord names a compute hop in its box: "work" from in to out, else its
// two marks ("out→sent").
func hopWord(x *Row) string {
	last := func(s string) string { return s[strings.LastIndex(s, " ")+1:] }
	from, to := last(x.From), last(x.To)
	if from == "in" && to == "out" {
		return "work"
	}
	return from + "→" + to
}

// rate3 writes a rate with three significant digits ("37.2k").
func rate3(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

// dur writes a duration in seconds for people: three significant digits
// in s, ms, µs or ns.
func dur(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsNaN(v):
		return "–"
	case a >= 1:
		return short(v) + " s"
	case a >= 1e-3:
		return short(v*1e3) + " ms"
	case a >= 1e-6 || a == 0:
		return short(v*1e6) + " µs"
	}
	return short(v*1e9) + " ns"
}

// short writes microseconds with three significant digits.
func short(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// linksSVG draws the nodes on a circle, the reference node filled, and a
// line per pair of nodes that probed each other, labelled with its min
// round trip; solid where the translation's paths use it, dashed if not.
func linksSVG(b *strings.Builder, nodes []string, ref string, links []minrtt.Link, hz float64) {
	esc := html.EscapeString
	const w, h, r = 620, 330, 115
	cx, cy := float64(w)/2, float64(h)/2
	at := map[string][2]float64{}
	for i, n := range nodes {
		ang := -math.Pi/2 + 2*math.Pi*float64(i)/float64(len(nodes))
		at[n] = [2]float64{cx + r*math.Cos(ang), cy + r*math.Sin(ang)}
	}
	type pair struct{ a, b string }
	drawn := map[pair]bool{}
	nl := 0
	var body strings.Builder
	for _, l := range links {
		p := pair{min(l.From, l.Into), max(l.From, l.Into)}
		if drawn[p] {
			continue
		}
		drawn[p] = true
		nl++
		u, v := at[l.From], at[l.Into]
		dash := ` stroke-dasharray="5 4"`
		if l.Used {
			dash = ""
		}
		rtt := l.MinRTT
		if math.IsNaN(rtt) {
			rtt = l.MinRTTRev
		}
		fmt.Fprintf(&body, `<g class="link"><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#4a6fa5" stroke-width="2"%s><title>%s ↔ %s: min RTT %s µs, %d probes in %d rounds</title></line><text x="%.1f" y="%.1f" text-anchor="middle" stroke="#fff" stroke-width="3" paint-order="stroke">%s µs</text></g>`,
			u[0], u[1], v[0], v[1], dash, esc(l.From), esc(l.Into), num(rtt/hz*1e6), l.Probes, l.Rounds, (u[0]+v[0])/2, (u[1]+v[1])/2-4, short(rtt/hz*1e6))
	}
	fmt.Fprintf(b, `<svg class="links" data-nodes="%d" data-links="%d" width="%d" height="%d" viewBox="0 0 %d %d" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="links between nodes">`, len(nodes), nl, w, h, w, h)
	b.WriteString(body.String())
	for _, n := range nodes {
		p := at[n]
		fill := "#fff"
		label := n
		if n == ref {
			fill, label = "#cfe0f5", n+" (reference)"
		}
		ty := p[1] + 30
		if p[1] < cy {
			ty = p[1] - 22
		}
		fmt.Fprintf(b, `<g class="peer"><circle cx="%.1f" cy="%.1f" r="12" fill="%s" stroke="#4a6fa5" stroke-width="2"/><text x="%.1f" y="%.1f" text-anchor="middle" font-weight="bold">%s</text></g>`,
			p[0], p[1], fill, p[0], ty, esc(trim(label, 24)))
	}
	b.WriteString(`<text x="8" y="322" fill="#555">min round trip per pair of nodes; dashed: measured, not on a path the translation uses</text></svg>`)
}

// summaryHTML is the table of every pair, the return-trip comparisons and
// the run durations.
func summaryHTML(b *strings.Builder, in *Input) {
	esc := html.EscapeString
	r := in
	rows := in.Rows()
	if len(rows) == 0 {
		b.WriteString(`<p class="missing">No durations.</p>`)
	} else {
		b.WriteString(`<table><tr><th>kind</th><th>from</th><th>to</th><th>count</th><th>min</th><th>p25</th><th>median</th><th>p75</th><th>p99</th><th>max</th><th>± median</th><th>± max</th><th>paper ±</th><th>baseline ±</th></tr>`)
		for _, x := range rows {
			fmt.Fprintf(b, `<tr><td class="l">%s</td><td class="l">%s</td><td class="l">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`,
				esc(x.Kind), esc(x.From), esc(x.To), count(x.Count), dur(x.Min), dur(x.P25), dur(x.Median), dur(x.P75), dur(x.P99), dur(x.Max),
				dur(x.ErrMedian), dur(x.ErrMax), dur(x.PaperMedian), dur(x.BaselineMedian))
		}
		b.WriteString("</table>")
	}
	// Several end-to-end pairs: journeys that end early (lost, filtered,
	// or in flight when the logs ended) make pairs of their own.
	if _, e2e := hopPairs(in.Pairs); len(e2e) > 1 {
		var ends []string
		for _, i := range e2e {
			ends = append(ends, fmt.Sprintf("%s tuples' last record is %s", count(rows[i].Count), esc(rows[i].To)))
		}
		fmt.Fprintf(b, `<p class="note">Several end-to-end pairs: journeys end at different channels (%s). Those that end before the last channel were lost after their last record, filtered, or in flight when the logs ended; the verdict and the capacity section say where tuples were lost.</p>`,
			strings.Join(ends, "; "))
	}
	for _, x := range rows {
		if x.Kind == KindReturnRTT {
			fmt.Fprintf(b, "<p>Return-trip method %s → %s overestimates the latency by %s (median), %s (max); our bound on the same durations is ± %s (median).</p>",
				esc(x.From), esc(x.To), dur(x.RetErrMedian), dur(x.RetErrMax), dur(x.OursErrMedian))
		}
	}
	if len(r.Runs) > 0 {
		b.WriteString("<h3>Run duration (FIRSTLAST)</h3><table><tr><th>channel</th><th>duration</th><th>±</th></tr>")
		for _, s := range r.Runs {
			fmt.Fprintf(b, `<tr><td class="l">%s</td><td>%s</td><td>%s</td></tr>`, esc(s.Channel), dur(s.Seconds), dur(s.Bound))
		}
		b.WriteString("</table>")
	}
}
