package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/chart"
)

// The report (report.html): one self-contained page, no script, nothing
// fetched (a Content-Security-Policy forbids it), readable at 1280 px. Its
// sections, in order: what the run was (and what the logs lack), the
// topology, the latency distributions, latency and throughput over time,
// the links between nodes, the summary table, then the capacity, critical
// path and Mace sections of those analyses (sections.go), and the logs'
// integrity. Aggregates only: every chart is drawn from the per-pair
// statistics and the timeline's buckets, so the page stays small however
// many records the run had.

// reportSections are the ids of the page's sections, in order; a test
// reads them back from the page.
var reportSections = []string{"verdict", "overview", "topology", "distributions", "over-time", "throughput", "links", "summary", "capacity", "critical-path", "mace", "integrity"}

// WriteHTML writes report.html.
func WriteHTML(w io.Writer, in *Input) error {
	r := in
	var b strings.Builder
	esc := html.EscapeString
	b.WriteString(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cloudprofiler analysis</title><style>
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;padding:1em 2em;max-width:1240px;color:#222}
h1{font-size:1.5em;margin:.3em 0}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:1em 0;display:block;overflow-x:auto;max-width:100%}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#f3f3f3;white-space:normal}td.l{text-align:left;white-space:normal;min-width:6em;max-width:40em}td.w{white-space:normal;min-width:7em}tr.sub td{border-top:none;color:#555;font-size:13px}td.wide{min-width:26em}svg{display:block;margin:.5em 0;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif}.note{color:#555}.missing{color:#8a4b00}
nav a{margin-right:1em}ul.verdict{list-style:none;padding:.6em 1em;margin:.5em 0 1em;background:#f6f8fb;border:1px solid #d5dce6;border-radius:6px;font-size:15px}
ul.verdict li{margin:.25em 0;padding-left:1.4em;text-indent:-1.4em}ul.verdict li::before{content:"✓";display:inline-block;width:1.4em;text-indent:0;color:#2a7a2a}
ul.verdict li.alarm::before{content:"!";color:#c00;font-weight:bold}ul.verdict a{font-size:13px;margin-left:.4em}.grid{display:flex;flex-wrap:wrap;gap:0 1em}</style></head><body>`)
	fmt.Fprintf(&b, `<h1>Cloudprofiler: where the time goes, in one reference clock</h1>`)
	verdictHTML(&b, Verdict(in))
	fmt.Fprintf(&b, `<section id="overview"><p>Reference node <b>%s</b> (%.6f GHz). %d channels on %d node(s), %d tuple records, %d tuples, %d durations`,
		esc(r.Ref), r.RefHz/1e9, len(r.Channels), len(r.Nodes), r.Records, r.Tuples, r.Durations)
	if span := r.Timeline.Width * float64(r.Timeline.Buckets); r.Timeline.On && r.Records > 0 {
		fmt.Fprintf(&b, ` over %.3f s`, span)
	}
	b.WriteString(`. Every duration comes with its strict error bound (±): the true value, in reference TSC cycles, lies within it; microseconds divide by the reference node's registered TSC frequency.</p>`)
	if len(r.Order) > 0 {
		fmt.Fprintf(&b, `<p class="note">Channel order: %s.</p>`, esc(strings.Join(r.Order, " → ")))
	}
	if miss := missing(in); len(miss) > 0 {
		b.WriteString(`<p class="missing"><b>What these logs cannot show:</b></p><ul class="missing">`)
		for _, m := range miss {
			fmt.Fprintf(&b, `<li>%s</li>`, esc(m))
		}
		b.WriteString(`</ul>`)
	}
	b.WriteString(`<nav>`)
	for _, id := range reportSections[2:] {
		fmt.Fprintf(&b, `<a href="#%s">%s</a>`, id, strings.ReplaceAll(id, "-", " "))
	}
	b.WriteString(`</nav></section>`)

	b.WriteString(`<section id="topology"><h2>Topology</h2>`)
	topologyHTML(&b, in)
	b.WriteString(`</section><section id="distributions"><h2>Latency distributions</h2>`)
	distributionsHTML(&b, in)
	b.WriteString(`</section><section id="over-time"><h2>Latency over time</h2>`)
	latencyOverTimeHTML(&b, in)
	b.WriteString(`</section><section id="throughput"><h2>Throughput over time</h2>`)
	throughputHTML(&b, in)
	b.WriteString(`</section><section id="links"><h2>Links between nodes</h2>`)
	linksHTML(&b, in)
	b.WriteString(`</section><section id="summary"><h2>Summary</h2>`)
	summaryHTML(&b, in)
	b.WriteString(`</section><section id="capacity">`)
	if r.Capacity == nil && r.CapacityNote == "" {
		b.WriteString(`<h2>Capacity</h2><p class="missing">Not analysed.</p>`)
	}
	capacityHTML(&b, in)
	b.WriteString(`</section><section id="critical-path">`)
	if r.CritPath == nil && r.CritPathNote == "" {
		b.WriteString(`<h2>Where the latency goes</h2><p class="missing">Not analysed.</p>`)
	}
	critPathHTML(&b, in)
	b.WriteString(`</section><section id="mace">`)
	if r.Mace == nil && r.MaceNote == "" {
		b.WriteString(`<h2>Mace: the largest latency predicted from load</h2><p class="missing">Not analysed.</p>`)
	}
	maceHTML(&b, in)
	b.WriteString(`</section><section id="integrity">`)
	if bad := r.Incomplete(); len(bad) > 0 {
		fmt.Fprintf(&b, `<h2>Log integrity: %d of %d files damaged or incomplete</h2><p class="note">The results above use every valid record in them; these records are missing or were damaged.</p><table><tr><th>channel</th><th>file</th><th>problems</th></tr>`, len(bad), len(r.Channels))
		for _, c := range bad {
			fmt.Fprintf(&b, `<tr><td class="l">%s</td><td class="l">%s</td><td class="l">%s</td></tr>`, esc(c.Label), esc(c.Path), esc(strings.Join(c.Problems, "; ")))
		}
		b.WriteString("</table>")
	} else {
		fmt.Fprintf(&b, `<h2>Log integrity</h2><p>All %d files complete and undamaged.</p>`, len(r.Channels))
	}
	b.WriteString("</section></body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// missing says what the logs cannot show, for the overview: each item
// names what is absent and what would add it.
func missing(in *Input) []string {
	var m []string
	tupleChans, counters := 0, 0
	for _, c := range in.Channels {
		switch {
		case c.Tuples:
			tupleChans++
		case c.Counter:
			counters++
		}
	}
	switch {
	case in.Records == 0:
		m = append(m, "no tuple records: no latencies (the logs hold no channel that logs tuples, or their files are empty)")
	case len(in.Pairs) == 0:
		m = append(m, fmt.Sprintf("no durations: a tuple needs records on two channels, and %d tuple channel(s) logged no tuple id twice", tupleChans))
	}
	if len(in.Nodes) < 2 {
		m = append(m, fmt.Sprintf("one node (%s): no links between nodes, and every duration is exact within it; logs from several nodes need --rounds (tsc-server --out)", in.Ref))
	}
	if counters == 0 {
		m = append(m, "no periodic counter channels: the throughput chart shows tuple records only (a channel with the periodic-counter handler counts tuples the library does not log one by one)")
	}
	if in.Timeline.Dropped > 0 {
		m = append(m, fmt.Sprintf("%d pairs have no line over time: their aggregates would pass an eighth of --mem-mb", in.Timeline.Dropped))
	}
	return m
}

// usFmt writes microseconds for an axis.
func usFmt(v float64) string { return scaledFmt(v, "s", "ms", "µs") }

// rateFmt writes a rate for an axis.
func rateFmt(v float64) string { return scaledFmt(v, "M", "k", "") }

// scaledFmt writes v with the unit of its scale: mega (v/1e6), kilo (v/1e3)
// or one.
func scaledFmt(v float64, mega, kilo, one string) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%g%s", v/1e6, mega)
	case v >= 1e3:
		return fmt.Sprintf("%g%s", v/1e3, kilo)
	}
	return fmt.Sprintf("%g%s", v, one)
}

// hopPairs are the pairs drawn as hops (compute and transfer) and as end
// to end, apart.
func hopPairs(pairs []Pair) (hops, e2e []int) {
	for i := range pairs {
		switch pairs[i].Kind {
		case KindCompute, KindTransfer:
			hops = append(hops, i)
		case KindEndToEnd:
			e2e = append(e2e, i)
		}
	}
	return hops, e2e
}

func distributionsHTML(b *strings.Builder, in *Input) {
	hops, e2e := hopPairs(in.Pairs)
	if len(hops)+len(e2e) == 0 {
		b.WriteString(`<p class="missing">No durations to draw.</p>`)
		return
	}
	dropped := 0
	cdf := func(id, title string, idx []int) {
		if len(idx) == 0 {
			return
		}
		c := chart.Chart{ID: id, Title: title,
			X: chart.Axis{Label: "latency (log)", Log: true, Format: usFmt},
			Y: chart.Axis{Label: "fraction of tuples at or below", Min: 0, Max: 1}, Height: 240}
		for _, i := range idx {
			p := &in.Pairs[i]
			s := chart.Series{Name: pairName(in, p)}
			add := func(v, q float64) {
				v *= 1e6
				if !(v > 0) {
					return
				}
				s.X, s.Y = append(s.X, v), append(s.Y, q)
			}
			add(p.Min, 0)
			for k, q := range p.CDF {
				add(q, CDFProbs[k])
			}
			add(p.Max, 1)
			if p.Min <= 0 {
				dropped++
			}
			c.Series = append(c.Series, s)
		}
		c.SVG(b)
	}
	cdf("cdf-hops", "CDF of each hop's latency (log axis)", hops)
	cdf("cdf-e2e", "CDF of the end-to-end latency, first channel to last (log axis)", e2e)
	b.WriteString(`<p class="note">A line per pair of channels: compute (within a process) and transfer (between processes) hops, then end to end. Quantiles are exact up to 2^20 durations a pair, within 0.1% past that. The bounds are in the summary table.</p>`)
	if dropped > 0 {
		fmt.Fprintf(b, `<p class="note">%d pair(s) have durations of 0 or less (two records with the same counter value, or an estimate across nodes within its bound): a log axis cannot show those, their lines start above them.</p>`, dropped)
	}
}

// pairName names a pair for a chart: its kind, and its channels (without
// the node when there is one).
func pairName(in *Input, x *Pair) string {
	from, to := x.From, x.To
	if len(in.Nodes) == 1 {
		n := in.Nodes[0] + "/"
		from, to = strings.TrimPrefix(from, n), strings.TrimPrefix(to, n)
	}
	if x.Kind == KindEndToEnd {
		return "end to end: " + from + " → " + to
	}
	return x.Kind + ": " + from + " → " + to
}

// maxOverTime is how many pairs get a chart over time: the end-to-end
// ones first, then the hops with the largest p99.
const maxOverTime = 12

func latencyOverTimeHTML(b *strings.Builder, in *Input) {
	tl := in.Timeline
	if !tl.On || len(in.Pairs) == 0 {
		b.WriteString(`<p class="missing">No durations to draw.</p>`)
		return
	}
	hops, e2e := hopPairs(in.Pairs)
	sort.SliceStable(hops, func(i, j int) bool { return in.Pairs[hops[i]].P99 > in.Pairs[hops[j]].P99 })
	idx := append(append([]int(nil), e2e...), hops...)
	shown := 0
	b.WriteString(`<p class="note">Per bucket of the run (` + fmt.Sprint(tl.Buckets) + ` across it, by each duration's start): the median, the p99 (dashed) and the largest (dotted grey) on a log axis, so that a pause or a backlog shows where it happened. A bucket's quantiles are within 6.25% (a histogram of 8 bins an octave); the run's exact ones are in the summary.</p><div class="grid">`)
	for _, i := range idx {
		if shown == maxOverTime {
			break
		}
		p := &in.Pairs[i]
		if p.OverTime == nil {
			continue
		}
		shown++
		var med, p99, mx chart.Series
		med.Name, p99.Name, mx.Name = "median", "p99", "max"
		p99.Dash, mx.Dash = true, true
		p99.Color, mx.Color = "#d62728", "#999"
		prev := -1
		for _, pt := range p.OverTime {
			t := (float64(pt.Index) + 0.5) * tl.Width
			if prev >= 0 && pt.Index > prev+1 {
				// Empty buckets between: a gap, not a line across them.
				gap := t - tl.Width
				for _, s := range []*chart.Series{&med, &p99, &mx} {
					s.X, s.Y = append(s.X, gap), append(s.Y, math.NaN())
				}
			}
			prev = pt.Index
			med.X, med.Y = append(med.X, t), append(med.Y, pt.P50*1e6)
			p99.X, p99.Y = append(p99.X, t), append(p99.Y, pt.P99*1e6)
			mx.X, mx.Y = append(mx.X, t), append(mx.Y, pt.Max*1e6)
		}
		c := chart.Chart{ID: "over-time-" + fmt.Sprint(shown), Title: pairName(in, p),
			X: chart.Axis{Label: "time from the run's first tuple record (s)", Min: 0, Max: tl.Width * float64(tl.Buckets)},
			Y: chart.Axis{Label: "latency (µs, log)", Log: true, Format: usFmt}, Series: []chart.Series{med, p99, mx}, Width: 470, Height: 150}
		c.SVG(b)
	}
	b.WriteString(`</div>`)
	if len(idx) > shown {
		fmt.Fprintf(b, `<p class="note">%d more pairs are not drawn (the end-to-end ones and the hops with the largest p99 are).</p>`, len(idx)-shown)
	}
}

func throughputHTML(b *strings.Builder, in *Input) {
	tl := in.Timeline
	if tl.On && in.Records > 0 {
		c := chart.Chart{ID: "throughput-tuples", Title: "tuples per second, per operator (what its instances took in; a source: what it sent)",
			X: chart.Axis{Label: "time from the run's first tuple record (s)", Min: 0, Max: tl.Width * float64(tl.Buckets)},
			Y: chart.Axis{Label: "tuples/s", Format: rateFmt}}
		for _, l := range throughputLines(in) {
			var sum []uint64
			for _, ch := range l.chans {
				cnt := in.Channels[ch].TupleCounts
				if cnt == nil {
					continue
				}
				sum = append(sum, make([]uint64, max(0, len(cnt)-len(sum)))...)
				for k, n := range cnt {
					sum[k] += n
				}
			}
			if sum == nil {
				continue
			}
			s := chart.Series{Name: l.name}
			for k, n := range sum {
				s.X, s.Y = append(s.X, (float64(k)+0.5)*tl.Width), append(s.Y, float64(n)/tl.Width)
			}
			c.Series = append(c.Series, s)
		}
		c.SVG(b)
	} else {
		b.WriteString(`<p class="missing">No tuple records to count.</p>`)
	}
	if len(in.Counters) == 0 {
		b.WriteString(`<p class="missing">No periodic counter channels in these logs.</p>`)
		return
	}
	c := chart.Chart{ID: "throughput-counters", Title: "periodic counters: tuples per second",
		X: chart.Axis{Label: "time from the run's first tuple record (s)"}, Y: chart.Axis{Label: "tuples/s", Format: rateFmt}}
	for _, ct := range in.Counters {
		s := chart.Series{Name: in.Channels[ct.Channel].Label}
		for _, p := range ct.Points {
			if p.Period > 0 {
				s.X, s.Y = append(s.X, p.T), append(s.Y, float64(p.Count)/p.Period)
			}
		}
		c.Series = append(c.Series, s)
	}
	c.SVG(b)
}

// throughputLine is a line of the throughput chart: an operator's
// channels that count what it took (its in channels; a source's out), or
// one channel outside any operator.
type throughputLine struct {
	name  string
	chans []int
}

// throughputLines are the throughput chart's lines, in the channel order.
func throughputLines(in *Input) []throughputLine {
	type opRoles struct{ in, out []int }
	ops := map[string]*opRoles{}
	var order []string
	var lines []throughputLine
	for ch, c := range in.Channels {
		if !c.Tuples {
			continue
		}
		if c.Instance == "" || (c.Role != capacity.RoleIn && c.Role != capacity.RoleOut) {
			if c.Instance == "" {
				lines = append(lines, throughputLine{c.Label, []int{ch}})
			}
			continue
		}
		o := ops[c.Operator]
		if o == nil {
			o = &opRoles{}
			ops[c.Operator] = o
			order = append(order, c.Operator)
		}
		if c.Role == capacity.RoleIn {
			o.in = append(o.in, ch)
		} else {
			o.out = append(o.out, ch)
		}
	}
	first := func(chans []int) int {
		r := len(in.Channels)
		for _, ch := range chans {
			r = min(r, in.Channels[ch].Rank)
		}
		return r
	}
	sort.SliceStable(order, func(i, j int) bool {
		x, y := ops[order[i]], ops[order[j]]
		return first(append(x.in, x.out...)) < first(append(y.in, y.out...))
	})
	for _, op := range order {
		chans := ops[op].in
		if len(chans) == 0 {
			chans = ops[op].out
		}
		lines = append(lines, throughputLine{op, chans})
	}
	return lines
}

// scenarioNames say where a duration's two ends were (minrtt.Duration.Scenario).
var scenarioNames = [4]string{"both on the reference node", "both on one other node", "one end on the reference node", "two other nodes"}

func linksHTML(b *strings.Builder, in *Input) {
	esc := html.EscapeString
	r := in
	nodes := in.Nodes
	if len(nodes) < 2 {
		fmt.Fprintf(b, `<p class="missing">All logs come from one node (%s): no links between nodes to measure; durations within one node are exact.</p>`, esc(nodes[0]))
		return
	}
	links := in.Links
	linksSVG(b, nodes, in.Ref, links, r.RefHz)
	b.WriteString(`<p class="note">Translating one node's counter into another's (MinRTT, the paper's method and its strict bounds). Round trips are in their origin's cycles, errors in the receiving node's, all shown in µs at the reference frequency.</p><table><tr><th>from</th><th>into</th><th>rounds</th><th>probes</th><th>min RTT</th><th>min RTT back</th><th>ratio</th><th>error mid-run, paper</th><th>all probes</th><th>used</th></tr>`)
	for _, l := range links {
		probes := fmt.Sprint(l.Probes)
		if l.KernelProbes > 0 {
			// Said where kernel timestamps were had: one number
			// otherwise, as before them.
			probes = fmt.Sprintf("%d, %d timed by the kernels", l.Probes, l.KernelProbes)
		}
		fmt.Fprintf(b, `<tr><td class="l">%s</td><td class="l">%s</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%.9f</td><td>%s</td><td>%s</td><td class="l">%v %s</td></tr>`,
			esc(l.From), esc(l.Into), l.Rounds, probes, dur(l.MinRTT/r.RefHz), dur(l.MinRTTRev/r.RefHz), l.Ratio,
			dur(l.PaperErrMid/r.RefHz), dur(l.AllProbesErrMid/r.RefHz), l.Used, esc(l.Unusable))
	}
	b.WriteString(`</table>`)
	// Which way each hop across nodes was bounded.
	fmt.Fprintf(b, `<h3>How each hop across nodes was bounded</h3><p class="note">Method: %s. Where the hop's ends were, for its durations; its bound against the paper's and a baseline's (medians).</p><table><tr><th>kind</th><th>from</th><th>to</th><th>ends</th><th>± median</th><th>± max</th><th>paper ±</th><th>baseline ±</th></tr>`, esc(in.Method))
	n := 0
	for _, x := range in.Pairs {
		if x.Scenarios[2]+x.Scenarios[3] == 0 || x.Kind == KindReturnRTT {
			continue
		}
		n++
		var ends []string
		for s, c := range x.Scenarios {
			if c > 0 {
				ends = append(ends, fmt.Sprintf("%s (%d)", scenarioNames[s], c))
			}
		}
		fmt.Fprintf(b, `<tr><td class="l">%s</td><td class="l">%s</td><td class="l">%s</td><td class="l">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>`,
			esc(x.Kind), esc(x.From), esc(x.To), esc(strings.Join(ends, ", ")), dur(x.ErrMedian), dur(x.ErrMax), dur(x.PaperMedian), dur(x.BaselineMedian))
	}
	b.WriteString(`</table>`)
	if n == 0 {
		b.WriteString(`<p class="note">No hop crosses nodes.</p>`)
	}
}
