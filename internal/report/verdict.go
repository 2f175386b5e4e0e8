package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/critpath"
)

// The verdict: the answers an engineer opens the report for, in
// sentences with their numbers, before any table or chart: what limits
// throughput, the highest rate the topology sustains against what the run
// offered and carried, where the p99 goes, whether the clock error lets
// hops be compared, what was lost, and whether the logs are whole. It is
// worked out once from the analyses' results and written, word for word,
// at the top of summary.txt and of report.html: one number per quantity.

// VerdictLine is one answer: its topic ("bottleneck", "rate", "p99",
// "clock", "lost", "logs"), the report section holding its evidence, its
// sentence, and whether it is bad news.
type VerdictLine struct {
	Topic, Section, Text string
	Alarm                bool
}

// Clock thresholds: the median strict bound over the median hop up to
// which hops compare freely, and past which they cannot be compared.
const (
	clockFine = 0.1
	clockPoor = 0.5
)

// Verdict is the report's first answers.
func Verdict(r *Input) []VerdictLine {
	var v []VerdictLine
	add := func(topic, section, text string, alarm bool) {
		v = append(v, VerdictLine{topic, section, text, alarm})
	}
	if c := r.Capacity; c != nil {
		switch {
		case c.BottleneckDoubt != "":
			// A capacity the run contradicts is no finding: not named, and
			// no rate predicted from it.
			add("bottleneck", "capacity", "Bottleneck: not named: "+c.BottleneckDoubt+".", true)
		default:
			add("bottleneck", "capacity", bottleneckSentence(c), c.Bottleneck != "" && wholeRow(c, c.Bottleneck).Load >= 1)
			if c.Bottleneck != "" {
				add("rate", "capacity", rateSentence(c), c.SourceRate > c.MaxSource)
			}
		}
		if s, worst := lossSentence(c.Losses); s != "" {
			add("lost", "capacity", s, worst >= 0.01)
		}
	} else if r.CapacityNote != "" {
		add("bottleneck", "capacity", "Bottleneck: not analysed. "+firstSentence(r.CapacityNote), false)
	}
	if s := p99Sentence(r.CritPath); s != "" {
		add("p99", "critical-path", s, false)
	}
	if s, alarm := clockSentence(r.Pairs); s != "" {
		add("clock", "links", s, alarm)
	}
	bad := r.Incomplete()
	switch {
	case len(bad) == 0:
		add("logs", "integrity", fmt.Sprintf("Logs: all %d files complete and undamaged.", len(r.Channels)), false)
	default:
		add("logs", "integrity", fmt.Sprintf("Logs: %d of %d files damaged or incomplete (%s: %s); the numbers use every valid record.",
			len(bad), len(r.Channels), bad[0].Label, bad[0].Problems[0]), true)
	}
	if r.SkippedTuples > 0 {
		add("logs", "summary", fmt.Sprintf("Left out: %s tuple ids with more than %d records each (ids reused?).", count(r.SkippedTuples), r.MaxTupleRecords), true)
	}
	return v
}

// lossSentence says where tuples were lost, the largest share first, and
// that share.
func lossSentence(losses []capacity.Loss) (string, float64) {
	if len(losses) == 0 {
		return "", 0
	}
	ls := append([]capacity.Loss(nil), losses...)
	share := func(l capacity.Loss) float64 { return float64(l.Lost) / float64(max(l.Sent, 1)) }
	sort.SliceStable(ls, func(i, j int) bool { return share(ls[i]) > share(ls[j]) })
	var parts []string
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s of the %s tuples %s handed on never reached %s (%s)", count(l.Lost), count(l.Sent), l.From, l.To, percent(share(l))))
	}
	return "Tuples lost: " + strings.Join(parts, "; ") + ".", share(ls[0])
}

// wholeRow is an operator's whole-run in/out row (a zero row with NaN
// load if it has none).
func wholeRow(c *capacity.Result, op string) capacity.Row {
	for _, x := range c.Rows {
		if x.Level == "operator" && x.Window == -1 && x.Method == capacity.MethodInOut && x.Operator == op {
			return x
		}
	}
	return capacity.Row{Load: math.NaN(), Capacity: math.NaN(), ArrivalsPerS: math.NaN()}
}

func bottleneckSentence(c *capacity.Result) string {
	if c.Bottleneck == "" {
		return "Bottleneck: none found: no operator has both a capacity and arrivals (mark each operator's in and out)."
	}
	x := wholeRow(c, c.Bottleneck)
	inst := "1 instance"
	if x.Instances != 1 {
		inst = fmt.Sprintf("%d instances", x.Instances)
	}
	s := fmt.Sprintf("Bottleneck: %s (%s), capacity %s tuples/s", c.Bottleneck, inst, rate(x.Capacity))
	switch {
	case math.IsNaN(x.Load):
	case x.Load >= 1:
		s += fmt.Sprintf(", load %.2f: the run offered it more than it can take", x.Load)
	default:
		s += fmt.Sprintf(", load %.2f: it needs %s of its time for what the run offered", x.Load, percent(x.Load))
	}
	switch {
	case c.Saturated > 0 && x.Load < 0.9:
		// Backlogged without the load for it: tuples come in bursts.
		s += fmt.Sprintf("; it took 95%% or more of its tuples from a queue in %d of %d windows: they arrive in bursts", c.Saturated, c.Windows.N)
	case c.Saturated > 0:
		s += fmt.Sprintf("; saturated in %d of %d windows", c.Saturated, c.Windows.N)
	}
	return s + "."
}

func rateSentence(c *capacity.Result) string {
	s := fmt.Sprintf("Highest sustainable source rate: %s tuples/s", rate(c.MaxSource))
	if !math.IsNaN(c.SourceRate) {
		s += fmt.Sprintf("; the run offered %s/s", rate(c.SourceRate))
	}
	if cr := carriedRate(c); !math.IsNaN(cr.rate) {
		s += fmt.Sprintf(" and carried %s/s to %s", rate(cr.rate), cr.op)
	}
	if c.Saturated == 0 {
		s += fmt.Sprintf(" (%s was never saturated: the highest rate is predicted from its cost, not seen)", c.Bottleneck)
	}
	return s + "."
}

type carried struct {
	op   string
	rate float64
}

// carriedRate is the rate the last operator with arrivals took them at,
// as a source rate (over its reach: the copies of a source tuple meant
// for it).
func carriedRate(c *capacity.Result) (out carried) {
	out.rate = math.NaN()
	for _, x := range c.Rows {
		if x.Level == "operator" && x.Window == -1 && x.Method == capacity.MethodInOut && x.ArrivalsPerS > 0 && x.Reach > 0 {
			out = carried{x.Operator, x.ArrivalsPerS / x.Reach}
		}
	}
	return out
}

// p99Sentence names the largest part of the p99 journeys' latency and
// where it happens.
func p99Sentence(c *critpath.Result) string {
	if c == nil {
		return ""
	}
	e2e, parts := c.GroupRows("p99")
	if e2e == nil || len(parts) == 0 {
		return ""
	}
	top := parts[0]
	for _, p := range parts[1:] {
		if p.Share > top.Share {
			top = p
		}
	}
	s := fmt.Sprintf("Where the p99 goes: %s, %s of the p99 journeys' %s", partName(top.Part, top.Where), percent(top.Share), dur(e2e.E2EMeanUS/1e6))
	if med := journeyMeanUS(c, "median"); med > 0 {
		s += fmt.Sprintf(" (the median journey: %s)", dur(med/1e6))
	}
	return s + "."
}

// journeyMeanUS is the mean end-to-end latency of a group of the critical
// path's breakdown ("median", "p99"), µs; 0 without one.
func journeyMeanUS(c *critpath.Result, group string) float64 {
	if c == nil {
		return 0
	}
	if row, _ := c.GroupRows(group); row != nil {
		return row.E2EMeanUS
	}
	return 0
}

// partName says where a part of a journey's latency happens, in words.
func partName(part, where string) string {
	switch part {
	case "queue":
		return "queueing before " + where
	case "compute":
		return "work in " + where
	case "transfer":
		return "transfer " + where
	}
	if where == "" {
		return part
	}
	return part + " (" + where + ")"
}

// clockSentence sets the median strict bound of the hops across nodes
// against their median (hops within a node are exact: they compare
// freely).
func clockSentence(rows []Pair) (string, bool) {
	var hops, bounds []float64
	n := 0
	for _, x := range rows {
		if x.Kind != KindCompute && x.Kind != KindTransfer {
			continue
		}
		n++
		if x.Scenarios[2]+x.Scenarios[3] > 0 {
			hops, bounds = append(hops, x.Median), append(bounds, x.ErrMedian)
		}
	}
	if n == 0 {
		return "", false
	}
	if len(bounds) == 0 {
		return "Clock: every hop is within one node: its durations are exact (no bound to add).", false
	}
	b, h := median(bounds), median(hops)
	ratio := percent(b / h)
	if !(h > 0) {
		ratio = "no ratio: the median hop is not above zero" // b/h would print +Inf% (a fuzzed topology of zero delays)
	}
	s := fmt.Sprintf("Clock: the median strict bound of the hops across nodes is ±%s against a median hop of %s (%s)", dur(b), dur(h), ratio)
	switch {
	case b <= clockFine*h:
		return s + ": small enough to compare hops.", false
	case b <= clockPoor*h:
		return s + fmt.Sprintf(": compare hops only where they differ by more than %s (twice the bound).", dur(2*b)), true
	}
	return s + ": too large to compare hops; more tsc-client rounds, or a reference node nearer the others, narrow it.", true
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rate writes a rate of tuples per second in whole tuples, thousands
// grouped ("37,239").
func rate(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case math.IsInf(v, 1):
		return "∞"
	case v < 100:
		return fmt.Sprintf("%.3g", v)
	}
	return count(uint64(math.Round(v)))
}

// count writes a count with its thousands grouped.
func count(n uint64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// percent writes a share in percent, three significant digits at most.
func percent(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "–"
	case v > 0 && v < 0.001:
		return "<0.1%"
	case v >= 0.995:
		return fmt.Sprintf("%.0f%%", 100*v)
	}
	return fmt.Sprintf("%.3g%%", 100*v)
}

func firstSentence(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// writeVerdictText writes the verdict for summary.txt.
func writeVerdictText(b *strings.Builder, v []VerdictLine) {
	b.WriteString("verdict:\n")
	for _, x := range v {
		mark := " "
		if x.Alarm {
			mark = "!"
		}
		fmt.Fprintf(b, " %s %s\n", mark, x.Text)
	}
}

// verdictHTML writes the verdict for report.html: each line links to the
// section with its evidence.
func verdictHTML(b *strings.Builder, v []VerdictLine) {
	b.WriteString(`<section id="verdict"><ul class="verdict">`)
	for _, x := range v {
		class := ""
		if x.Alarm {
			class = ` class="alarm"`
		}
		fmt.Fprintf(b, `<li%s data-topic="%s">%s <a href="#%s">%s</a></li>`, class, x.Topic, html.EscapeString(x.Text), x.Section, strings.ReplaceAll(x.Section, "-", " "))
	}
	b.WriteString(`</ul></section>`)
}
