package report

import (
	"fmt"
	"math"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/minrtt"
)

// The report imports none of the pipeline: it is fed an Input.
func TestImportsNoPipeline(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "cloudprofiler/internal/report").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "cloudprofiler/internal/capacity", "go list -deps lists the analyses the report shows")
	for _, d := range deps {
		require.NotEqual(t, "cloudprofiler/internal/analyze", d, "the report imports the pipeline")
	}
}

// handInput is a run written by hand, not by the pipeline: a source on
// node a hands tuples to map on node b (its in and out marked), whose
// capacity analysis names it the bottleneck; the source's file is
// damaged; one counter channel.
func handInput() *Input {
	nan := math.NaN()
	row := func(kind, from, to string, median, p99, bound float64, scen [4]uint64) Row {
		return Row{Kind: kind, From: from, To: to, Count: 1000, Min: median / 2, P25: median * 0.8, Median: median, P75: median * 1.2,
			P99: p99, Max: p99 * 2, ErrMin: bound, ErrMedian: bound, ErrMax: bound * 1.5, PaperMedian: bound * 3, BaselineMedian: bound * 9,
			Scenarios: scen, Exact: true}
	}
	cdf := func(median float64) []float64 {
		q := make([]float64, len(CDFProbs))
		for i, p := range CDFProbs {
			q[i] = median * 2 * p
		}
		return q
	}
	over := []Bucket{{0, 10e-6, 40e-6, 50e-6}, {1, 11e-6, 41e-6, 60e-6}, {3, 12e-6, 42e-6, 70e-6}}
	capRow := capacity.Row{Level: "instance", Window: -1, Method: capacity.MethodInOut, Operator: "map", Instance: "b/20/",
		Node: "b", PID: 20, TuplesIn: 1000, TuplesOut: 1000, ArrivalsPerS: 9000, Capacity: 10000, Load: 0.97, BlockedShare: 0.2,
		BusyShare: 0.9, OwnUS: 90, HandOffUS: 10, CostUS: 100, CostLowUS: 95, CostHighUS: 105, ServiceRate: 11000,
		CapacityLow: 9500, CapacityHigh: 10500, Headroom: 1 / 0.97, Selectivity: 1, Instances: 1, Skew: 1, Reach: 1,
		MaxSourceRate: 10000, Bottleneck: true, ServiceRateLow: nan, ServiceRateHigh: nan}
	opRow := capRow
	opRow.Level, opRow.Instance, opRow.Node, opRow.PID = "operator", "", "", 0
	return &Input{
		Ref: "a", RefHz: 2.4e9, Records: 3000, Tuples: 1000, Durations: 3000, MaxTupleRecords: 4096,
		Order: []string{"a/src out", "b/map in", "b/map out"},
		Channels: []Channel{
			{Label: "a/src out", Path: "/logs/a-1.cplog", Problems: []string{"the file ends inside a block"}, Tuples: true,
				HasRecords: true, Rank: 0, Thread: 0, Operator: "src", Instance: "a/10/", Role: capacity.RoleOut, TupleCounts: []uint64{500, 500}},
			{Label: "b/map in", Path: "/logs/b-1.cplog", Tuples: true, HasRecords: true, Rank: 1, Thread: 1, Operator: "map",
				Instance: "b/20/", Role: capacity.RoleIn, TupleCounts: []uint64{400, 600}},
			{Label: "b/map out", Path: "/logs/b-2.cplog", Tuples: true, HasRecords: true, Rank: 2, Thread: 1, Operator: "map",
				Instance: "b/20/", Role: capacity.RoleOut, TupleCounts: []uint64{400, 600}},
			{Label: "b/throughput", Path: "/logs/b-3.cplog.txt", Counter: true, Rank: 3, Thread: 2, Role: capacity.RoleNone},
		},
		Pairs: []Pair{
			{Row: row(KindTransfer, "a/src out", "b/map in", 80e-6, 300e-6, 5e-6, [4]uint64{0, 0, 1000, 0}), FromChannel: 0, ToChannel: 1, CDF: cdf(80e-6), OverTime: over},
			{Row: row(KindCompute, "b/map in", "b/map out", 100e-6, 200e-6, 0, [4]uint64{0, 1000, 0, 0}), FromChannel: 1, ToChannel: 2, CDF: cdf(100e-6), OverTime: over},
			{Row: row(KindEndToEnd, "a/src out", "b/map out", 180e-6, 500e-6, 5e-6, [4]uint64{0, 0, 1000, 0}), FromChannel: 0, ToChannel: 2, CDF: cdf(180e-6)},
		},
		Runs: []Run{{Channel: "a/run", FirstID: 1, LastID: 1000, Seconds: 0.5, Bound: 2e-6}},
		Capacity: &capacity.Result{Rows: []capacity.Row{capRow, opRow}, Bottleneck: "map", MaxSource: 10000, SourceRate: 9000,
			Config: capacity.Config{Hz: 2.4e9, MinTuples: 100}, Windows: capacity.Windows{Width: 2.4e9, N: 1}},
		CritPathNote: "Critical path: not analysed: the run marks no sent.",
		MaceNote:     "Mace: not analysed: --no-mace.",
		Nodes:        []string{"a", "b"},
		Links:        []minrtt.Link{{From: "b", Into: "a", Rounds: 2, Probes: 100, MinRTT: 120e3, MinRTTRev: 121e3, Ratio: 1, Used: true}},
		Method:       "paper",
		Threads:      []Thread{{"src", 0}, {"map", 1}, {"b/throughput", 1}},
		Timeline:     Timeline{On: true, Buckets: 4, Width: 0.125},
		Counters:     []Counter{{Channel: 3, Points: []CounterPoint{{T: 0.25, Period: 0.25, Count: 2000}, {T: 0.5, Period: 0.25, Count: 2500}}}},
	}
}

// A page from an Input alone: its sections in order, the verdict from the
// Input's results, the topology's boxes and arrow, each chart's lines.
func TestPageFromInput(t *testing.T) {
	in := handInput()
	var b strings.Builder
	require.NoError(t, WriteHTML(&b, in))
	page := b.String()
	require.True(t, strings.HasPrefix(page, "<!doctype html>"))
	require.True(t, strings.HasSuffix(page, "</html>\n"))
	var at []int
	for _, id := range reportSections {
		i := strings.Index(page, `<section id="`+id+`"`)
		require.GreaterOrEqual(t, i, 0, "section %s", id)
		at = append(at, i)
	}
	require.IsIncreasing(t, at, "sections in the order of reportSections")

	// The verdict: map the bottleneck at 10,000/s against 9,000/s offered,
	// the damaged file named, the clock bound against the hop.
	v := Verdict(in)
	topics := map[string]VerdictLine{}
	for _, x := range v {
		topics[x.Topic] = x
		require.Contains(t, page, x.Text[:min(len(x.Text), 40)], "the page holds the verdict line %q", x.Text)
	}
	require.Contains(t, topics["bottleneck"].Text, "map")
	require.Contains(t, topics["rate"].Text, "10,000")
	require.True(t, topics["logs"].Alarm)
	require.Contains(t, topics["logs"].Text, "a/src out")
	require.Contains(t, topics["clock"].Text, "±5.00 µs")

	// The topology: two boxes with records (the counter has none), one
	// arrow between nodes; map's box coloured by its load.
	require.Regexp(t, `<svg class="topology" data-ops="2" data-hops="1"`, page)
	require.Regexp(t, `<g class="op" data-name="map" data-load="0.9700">`, page)
	require.Contains(t, page, "map · saturated")
	// Charts: two hop lines and one end-to-end line; two lines over time
	// (the end-to-end pair has none); two operators' throughput and one
	// counter.
	for _, c := range []struct {
		chart string
		n     int
	}{{"cdf-hops", 2}, {"cdf-e2e", 1}, {"throughput-tuples", 2}, {"throughput-counters", 1}} {
		require.Contains(t, page, fmt.Sprintf(`data-chart="%s" data-series="%d"`, c.chart, c.n))
	}
	require.Equal(t, 2, strings.Count(page, `data-chart="over-time-`))
	require.Regexp(t, `<svg class="links" data-nodes="2" data-links="1"`, page)
	require.Contains(t, page, "Critical path: not analysed: the run marks no sent.")
	require.Contains(t, page, "Log integrity: 1 of 4 files damaged or incomplete")
}

// summary.txt from the same Input: the verdict word for word, a line per
// pair, the run, the damaged file's problem, the notes of the analyses
// that did not run.
func TestTextFromInput(t *testing.T) {
	in := handInput()
	var b strings.Builder
	require.NoError(t, WriteText(&b, in))
	text := b.String()
	for _, x := range Verdict(in) {
		require.Contains(t, text, x.Text)
	}
	require.Contains(t, text, "! Logs: 1 of 4 files damaged or incomplete")
	require.Regexp(t, `(?m)^\s*transfer\s+a/src out\s+b/map in\s+1000\s+40\.000\s+64\.000\s+80\.000\s`, text)
	require.Contains(t, text, "run a/run: 0.500000 s ± 2.000 us (tuples 1 .. 1000)")
	require.Contains(t, text, "    the file ends inside a block")
	require.Contains(t, text, "Mace: not analysed: --no-mace.")
}

// Nothing to show makes a page that says so, not a panic.
func TestPageOfNothing(t *testing.T) {
	in := &Input{Ref: "a", RefHz: 1e9, Nodes: []string{"a"}}
	var b strings.Builder
	require.NoError(t, WriteHTML(&b, in))
	require.Contains(t, b.String(), "no tuple records: no latencies")
	require.Contains(t, b.String(), "No tuple records: no topology to draw.")
	b.Reset()
	require.NoError(t, WriteText(&b, in))
	require.Contains(t, b.String(), "logs: all 0 files complete and undamaged")
}

func TestTrim(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"}, {"abcdef", 3, "…ef"}, {"abcdef", 1, "…"}, {"abcdef", 0, ""}, {"abcdef", -4, ""}, {"", -1, ""},
		{"αβγδ", 2, "…δ"},
	} {
		require.Equal(t, c.want, trim(c.s, c.n), "trim(%q, %d)", c.s, c.n)
	}
}

// Operators whose instances share a label (one process, no instance names,
// as the tour's threads, or every Flink operator's subtask 0 in one
// TaskManager) each get their own row: map's box holds map's load, sink's
// sink's, and each has its own line of capacity over time.
func TestInstancesOfOperatorsInOneProcess(t *testing.T) {
	in := handInput()
	sink := in.Capacity.Rows[0]
	sink.Operator, sink.Load, sink.Bottleneck, sink.Capacity = "sink", 0.25, false, 36000
	sinkOp := sink
	sinkOp.Level, sinkOp.Instance, sinkOp.Node, sinkOp.PID = "operator", "", "", 0
	win := func(x capacity.Row, op string, busy float64) capacity.Row {
		x.Operator, x.Window, x.StartS, x.EndS, x.BusyShare = op, 0, 0, 1, busy
		return x
	}
	in.Capacity.Rows = append(in.Capacity.Rows, sink, sinkOp, win(in.Capacity.Rows[0], "map", 0.9), win(sink, "sink", 0.2))
	in.Channels = append(in.Channels, Channel{Label: "b/sink in", Path: "/logs/b-4.cplog", Tuples: true, HasRecords: true, Rank: 4,
		Thread: 3, Operator: "sink", Instance: "b/20/", Role: capacity.RoleIn, TupleCounts: []uint64{400, 600}})
	in.Order = append(in.Order, "b/sink in")
	in.Threads = append(in.Threads, Thread{"sink", 1})
	var b strings.Builder
	require.NoError(t, WriteHTML(&b, in))
	page := b.String()
	// Every box's lines whole (a box as wide as its longest line).
	topo := page[strings.Index(page, `<svg class="topology"`):]
	topo = topo[:strings.Index(topo, "</svg>")]
	require.False(t, strings.Contains(topo, "…"), "a box's line cut short")
	// (Looked for with strings.Contains, so that a failure does not print the page.)
	for _, want := range []string{`<g class="op" data-name="map" data-load="0.9700">`, `<g class="op" data-name="sink" data-load="0.2500">`,
		`data-chart="busy-share" data-series="2"`, `<polyline class="series" data-name="sink"`} {
		require.True(t, strings.Contains(page, want), "the page has %s", want)
	}
}

// A capacity from its own work alone is an upper bound: its box says the
// capacity is at most that and the load at least.
func TestUpperBoundCapacityInItsBox(t *testing.T) {
	in := handInput()
	in.Capacity.Rows[0].Note = "taking the next tuple is not measured (never backlogged), so the capacity is an upper bound"
	var b strings.Builder
	require.NoError(t, WriteHTML(&b, in))
	topo := b.String()[strings.Index(b.String(), `<svg class="topology"`):]
	topo = topo[:strings.Index(topo, "</svg>")]
	require.True(t, strings.Contains(topo, "load ≥0.97 · ≤"), "the bound's box line")
	require.False(t, strings.Contains(topo, "load ≤"), "a load at most")
}
