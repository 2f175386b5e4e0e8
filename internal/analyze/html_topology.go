package analyze

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"

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

// topologyHTML draws the operators (an operator instance, or a channel
// outside any) in a lane per node, in the channel order left to right;
// inside each box its compute hops, between boxes the transfers, each with
// its median ± the median bound and its p99, coloured by the share of the
// end-to-end median latency it takes.
func (a *analysis) topologyHTML(b *strings.Builder, rows []Row) {
	esc := html.EscapeString
	threads, of := a.threads()
	if len(threads) == 0 || a.res.Records == 0 {
		b.WriteString(`<p class="missing">No tuple records: no topology to draw.</p>`)
		return
	}
	hops, e2e := hopRows(rows)
	total := 0.0
	for _, i := range e2e {
		total = math.Max(total, rows[i].Median)
	}
	if total <= 0 {
		for _, i := range hops {
			total += math.Max(rows[i].Median, 0)
		}
	}
	share := func(v float64) float64 {
		if total <= 0 {
			return 0
		}
		return math.Max(v, 0) / total
	}
	// Boxes: threads with a tuple channel that holds records; their column
	// by the earliest rank of the operator's channels.
	used := make([]bool, len(threads))
	baseRank := map[string]int{}
	base := func(t int) string { n, _, _ := strings.Cut(threads[t].Name, "#"); return n }
	for ch, c := range a.chans {
		if c.Role != RoleTuples || a.tscMin[ch] > a.tscMax[ch] {
			continue
		}
		t := of[ch]
		used[t] = true
		rk := ch
		if a.rank != nil {
			rk = a.rank[ch]
		}
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
		k := a.res.Pairs[i].Key
		if of[k.From] == of[k.To] {
			inside[of[k.From]] = append(inside[of[k.From]], i)
		} else {
			edges = append(edges, i)
		}
	}
	// Lanes: the nodes with boxes, in the model's order.
	nodes := a.model.Nodes()
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
		lines = max(lines, len(inside[t]))
	}
	const laneLabel, gap, pad = 96, 110, 14
	ncols := max(len(names), 1)
	bw := min(190, (1180-laneLabel-gap*(ncols-1))/ncols)
	bh := 36 + 14*lines
	laneY := make([]int, len(nodes))
	y := 8
	for n := range nodes {
		laneY[n] = y
		if laneRows[n] > 0 {
			y += laneRows[n]*(bh+pad) + pad
		}
	}
	width, height := max(laneLabel+ncols*bw+(ncols-1)*gap+20, 760), y+56
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
		`<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="11" markerHeight="11" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#555"/></marker></defs>`)
	for n, name := range nodes {
		if laneRows[n] == 0 {
			continue
		}
		h := laneRows[n]*(bh+pad) + pad
		fmt.Fprintf(b, `<g class="node" data-name="%s"><rect x="2" y="%d" width="%d" height="%d" rx="6" fill="#f4f6f9" stroke="#c9d1dc"/><text x="10" y="%d" font-weight="bold">node %s</text></g>`,
			esc(name), laneY[n], width-4, h-4, laneY[n]+20, esc(trim(name, 12)))
	}
	val := func(x *Row) string {
		return fmt.Sprintf("%s ± %s, p99 %s", dur(x.Median), dur(x.ErrMedian), dur(x.P99))
	}
	// An arrow's label: two short lines above its middle.
	label := func(x *Row) string {
		return fmt.Sprintf(`<tspan x="%%[1]s" dy="-1.1em">%s ± %s</tspan><tspan x="%%[1]s" dy="1.2em">p99 %s</tspan>`,
			dur(x.Median), dur(x.ErrMedian), dur(x.P99))
	}
	// Edges under the boxes.
	for _, i := range edges {
		x := &rows[i]
		k := a.res.Pairs[i].Key
		ax, ay := box(of[k.From])
		bx, by := box(of[k.To])
		x1, y1 := ax+float64(bw), ay+float64(bh)/2
		x2, y2 := bx, by+float64(bh)/2
		s := share(x.Median)
		c := math.Max(40, math.Abs(x2-x1)/2)
		fmt.Fprintf(b, `<g class="hop" data-from="%s" data-to="%s" data-share="%.4f"><path d="M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="%s" stroke-width="%.1f" marker-end="url(#arrow)"><title>%s %s → %s: median %s ± %s µs, p99 %s µs, max %s µs; %.1f%% of the end-to-end median</title></path>`,
			esc(x.From), esc(x.To), s, x1, y1, x1+c, y1, x2-c, y2, x2, y2, heat(0.15+0.85*s), 2+6*s,
			esc(x.Kind), esc(x.From), esc(x.To), num(x.Median*1e6), num(x.ErrMedian*1e6), num(x.P99*1e6), num(x.Max*1e6), 100*s)
		mx := fmt.Sprintf("%.1f", (x1+x2)/2)
		fmt.Fprintf(b, `<text x="%s" y="%.1f" text-anchor="middle" stroke="#fff" stroke-width="3" paint-order="stroke">%s</text></g>`,
			mx, (y1+y2)/2-4, fmt.Sprintf(label(x), mx))
	}
	for t, th := range threads {
		if !used[t] {
			continue
		}
		x0, y0 := box(t)
		s := 0.0
		for _, i := range inside[t] {
			s += share(rows[i].Median)
		}
		text := "#222"
		if s > 0.6 {
			text = "#fff"
		}
		fmt.Fprintf(b, `<g class="op" data-name="%s" data-share="%.4f"><rect x="%.1f" y="%.1f" width="%d" height="%d" rx="4" fill="%s" stroke="#555"><title>%s on node %s: %.1f%% of the end-to-end median in its own hops</title></rect><text x="%.1f" y="%.1f" font-weight="bold" fill="%s">%s</text>`,
			esc(th.Name), s, x0, y0, bw, bh, heat(s), esc(th.Name), esc(nodes[th.Node]), 100*s, x0+6, y0+15, text, esc(trim(th.Name, bw/7)))
		for k, i := range inside[t] {
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s"><title>%s → %s</title>%s</text>`, x0+6, y0+30+14*float64(k), text, esc(rows[i].From), esc(rows[i].To), esc(val(&rows[i])))
		}
		b.WriteString(`</g>`)
	}
	// The colour scale.
	ly := height - 34
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="200" height="10" fill="url(#heat)" stroke="#999"/><text x="%d" y="%d">0</text><text x="%d" y="%d" >100%% of the end-to-end median latency (%s)</text>`,
		laneLabel, ly, laneLabel, ly+24, laneLabel+210, ly+10, dur(total))
	b.WriteString(`</svg>`)
	b.WriteString(`<p class="note">A lane per node; a box per operator instance (channels named "OPERATOR in/out"), or per channel where none is named; left to right in the channel order. Inside a box: its compute hops; arrows: transfers. Each: median ± the median strict bound, and p99. The colour (and an arrow's width) is its median's share of the end-to-end median.</p>`)
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
func (a *analysis) summaryHTML(b *strings.Builder, rows []Row) {
	esc := html.EscapeString
	r := a.res
	us := func(v float64) string { return num(v * 1e6) }
	if len(rows) == 0 {
		b.WriteString(`<p class="missing">No durations.</p>`)
	} else {
		b.WriteString(`<table><tr><th>kind</th><th>from</th><th>to</th><th>count</th><th>min</th><th>p25</th><th>median</th><th>p75</th><th>p99</th><th>max</th><th>± median</th><th>± max</th><th>paper ±</th><th>baseline ±</th></tr>`)
		for _, x := range rows {
			fmt.Fprintf(b, `<tr><td class="l">%s</td><td class="l">%s</td><td class="l">%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`,
				esc(x.Kind), esc(x.From), esc(x.To), x.Count, us(x.Min), us(x.P25), us(x.Median), us(x.P75), us(x.P99), us(x.Max),
				us(x.ErrMedian), us(x.ErrMax), us(x.PaperMedian), us(x.BaselineMedian))
		}
		b.WriteString("</table>")
	}
	for _, x := range rows {
		if x.Kind == KindReturnRTT {
			fmt.Fprintf(b, "<p>Return-trip method %s → %s overestimates the latency by %s µs (median), %s µs (max); our bound on the same durations is ± %s µs (median).</p>",
				esc(x.From), esc(x.To), us(x.RetErrMedian), us(x.RetErrMax), us(x.OursErrMedian))
		}
	}
	if len(r.Runs) > 0 {
		b.WriteString("<h3>Run duration (FIRSTLAST)</h3><table><tr><th>channel</th><th>seconds</th><th>± µs</th></tr>")
		for _, s := range r.Runs {
			fmt.Fprintf(b, `<tr><td class="l">%s</td><td>%.6f</td><td>%.3f</td></tr>`, esc(s.Channel), s.Duration.Est/r.RefHz, s.Duration.Err/r.RefHz*1e6)
		}
		b.WriteString("</table>")
	}
}
