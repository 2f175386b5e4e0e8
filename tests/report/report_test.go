// Package report tests what `analyze` writes for people to look at, in a
// real headless Chromium (tests/internal/browser): the report of the
// multinode demo, of the Flink example (examples/flink's ProfiledJobTest
// leaves it in target/cp-analysis), and of logs that lack things (one
// channel, one node, no counters, no tuples); and the trace (--trace)
// against the Trace Event Format and against durations.csv for the same
// tuples. Screenshots are saved under build/ (CP_SHOTS).
package report

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cloudprofiler/tests/internal/browser"
	"cloudprofiler/tests/internal/testrun"
)

// sections are the report's sections, in order.
var sections = []string{"verdict", "overview", "topology", "distributions", "over-time", "throughput", "links", "summary", "capacity", "critical-path", "mace", "integrity"}

// env is the test's surroundings: the tool, the build directory, where
// screenshots go, and a Python with Perfetto's definitions (the perfetto
// package) to read a protobuf trace ("" skips that, outside CI).
type env struct{ tool, build, shots, python string }

func needEnv(t *testing.T) env {
	t.Helper()
	e := env{tool: os.Getenv("CP_TOOL"), build: os.Getenv("CP_BUILD"), shots: os.Getenv("CP_SHOTS"), python: os.Getenv("CP_PYTHON")}
	if e.tool == "" || e.build == "" {
		t.Skip("CP_TOOL and CP_BUILD are not set: run `make test-report`")
	}
	if e.shots == "" {
		e.shots = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(e.shots, 0o755))
	return e
}

// startBrowser starts Chromium for one test, closed at its end.
func startBrowser(t *testing.T) *browser.Browser {
	t.Helper()
	if _, err := browser.Find(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	b, err := browser.Start(filepath.Join(t.TempDir(), "chromium"))
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return b
}

// page is what the test reads back from a report's DOM.
type page struct {
	Sections []string `json:"sections"`
	Charts   []struct {
		ID   string `json:"id"`
		Want int    `json:"want"`
		Got  int    `json:"got"`
	} `json:"charts"`
	Ops      []string `json:"ops"`
	Hops     int      `json:"hops"`
	Lanes    []string `json:"lanes"`
	Topology []struct {
		Ops  int `json:"ops"`
		Hops int `json:"hops"`
	} `json:"topology"`
	Links []struct {
		Nodes, Links, GotNodes, GotLinks int
	} `json:"links"`
	Marks []struct {
		Want int `json:"want"`
		Got  int `json:"got"`
	} `json:"marks"`
	Missing     []string `json:"missing"`
	ScrollWidth int      `json:"scrollWidth"`
	// Tables that scroll sideways in their column (their first header).
	WideTables []string `json:"wideTables"`
	Verdict    []struct {
		Topic  string  `json:"topic"`
		Text   string  `json:"text"`
		Bottom float64 `json:"bottom"` // px from the page's top
	} `json:"verdict"`
	External int    `json:"external"`
	Text     string `json:"text"`
}

const readPage = `(() => {
  const q = (s, r) => Array.from((r || document).querySelectorAll(s));
  return {
    sections: q('section[id]').map(s => s.id),
    charts: q('svg.chart').map(c => ({id: c.dataset.chart, want: +c.dataset.series, got: q('.series', c).length})),
    ops: q('svg.topology .op').map(g => g.dataset.name),
    hops: q('svg.topology .hop').length,
    lanes: q('svg.topology .node').map(g => g.dataset.name),
    topology: q('svg.topology').map(s => ({ops: +s.dataset.ops, hops: +s.dataset.hops})),
    links: q('svg.links').map(s => ({Nodes: +s.dataset.nodes, Links: +s.dataset.links, GotNodes: q('.peer', s).length, GotLinks: q('.link', s).length})),
    marks: q('svg[data-marks]').map(s => ({want: +s.dataset.marks, got: q('.mark', s).length})),
    missing: q('#overview li').map(e => e.textContent),
    scrollWidth: document.documentElement.scrollWidth,
    wideTables: q('table').filter(t => t.scrollWidth > t.clientWidth + 1).map(t => t.querySelector('th') ? t.querySelector('th').textContent + ' (' + t.scrollWidth + ' px in ' + t.clientWidth + ')' : '?'),
    verdict: q('#verdict li').map(li => ({topic: li.dataset.topic, text: li.textContent, bottom: li.getBoundingClientRect().bottom + window.scrollY})),
    external: q('img,script,link,iframe,object,embed,use[href^="http"]').length,
    text: document.body.innerText,
  };
})()`

// The window reports are read at: a laptop's.
const windowW, windowH = 1400, 1000

// open loads a report at 1,400 x 1,000 px and checks what every report
// must be: every section, each chart holding the marks it says, nothing
// fetched, no console error, no wider than the window and no table
// scrolling sideways, the verdict first and within the first screen, at
// most 2 MB. It saves a
// screenshot as shot (under the shots directory).
func open(t *testing.T, b *browser.Browser, e env, path, shot string) page {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.LessOrEqual(t, st.Size(), int64(2<<20), "%s: at most 2 MB", path)
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	p, err := b.Open("file://"+abs, windowW, windowH)
	require.NoError(t, err)
	var pg page
	require.NoError(t, p.Eval(readPage, &pg))
	require.Equal(t, sections, pg.Sections, "%s: every section, in order", path)
	for _, c := range pg.Charts {
		require.Equal(t, c.Want, c.Got, "%s: chart %s draws the series it says", path, c.ID)
	}
	for _, m := range pg.Marks {
		require.Equal(t, m.Want, m.Got, "%s: a chart draws the marks it says", path)
	}
	for _, l := range pg.Links {
		require.Equal(t, l.Nodes, l.GotNodes)
		require.Equal(t, l.Links, l.GotLinks)
	}
	for _, tp := range pg.Topology {
		require.Equal(t, tp.Ops, len(pg.Ops))
		require.Equal(t, tp.Hops, pg.Hops)
	}
	require.Zero(t, pg.External, "%s: nothing loaded from elsewhere", path)
	require.LessOrEqual(t, pg.ScrollWidth, windowW, "%s: readable at %d px wide", path, windowW)
	require.Empty(t, pg.WideTables, "%s: every table fits its column at %d px", path, windowW)
	require.NotEmpty(t, pg.Verdict, "%s: a verdict", path)
	for _, v := range pg.Verdict {
		require.LessOrEqual(t, v.Bottom, float64(windowH), "%s: the verdict's %s line on the first screen", path, v.Topic)
	}
	require.NotContains(t, pg.Text, "NaN")
	// The screenshot before the verdict on problems, to look at when it fails.
	out := filepath.Join(e.shots, shot)
	require.NoError(t, p.Screenshot(out, 0))
	t.Logf("%s: %d bytes; screenshot %s", path, st.Size(), out)
	require.Empty(t, p.Problems(), "%s: no console errors, no requests leaving the page", path)
	return pg
}

// summaryRows reads summary.csv: kind, from, to per row.
func summaryRows(t *testing.T, dir string) [][3]string {
	t.Helper()
	rows, err := testrun.ReadCSV(filepath.Join(dir, "summary.csv"), []string{"kind", "from", "to"})
	require.NoError(t, err)
	var out [][3]string
	for _, r := range rows {
		out = append(out, [3]string{r["kind"], r["from"], r["to"]})
	}
	return out
}

func hopsAndE2E(rows [][3]string) (n int) {
	for _, r := range rows {
		if r[0] == "compute" || r[0] == "transfer" || r[0] == "end_to_end" {
			n++
		}
	}
	return n
}

// cdfSeries counts the lines of the CDF charts (hops, end to end).
func cdfSeries(pg page) (n int) {
	for _, c := range pg.Charts {
		if strings.HasPrefix(c.ID, "cdf-") {
			n += c.Want
		}
	}
	return n
}

func chart(pg page, id string) (want int, ok bool) {
	for _, c := range pg.Charts {
		if c.ID == id {
			return c.Want, true
		}
	}
	return 0, false
}

// TestMultinodeReportAndTrace: the multinode demo (three nodes, a relay
// with in and out marks), its report in the browser and its trace.
func TestMultinodeReportAndTrace(t *testing.T) {
	e := needEnv(t)
	b := startBrowser(t)
	dir := t.TempDir()
	r := testrun.Run(3*time.Minute, []string{"CP_DEMO_DIR=" + dir}, "bash", "../../examples/multinode/demo.sh", e.build, "--durations-csv", "--trace-sample", "500")
	require.NoError(t, r.Err, "%s\n%s", r.Stdout, r.Stderr)
	out := filepath.Join(dir, "results")
	require.Contains(t, r.Stdout, "trace: "+filepath.Join(out, "trace.json"))
	pg := open(t, b, e, filepath.Join(out, "report.html"), "report-multinode.png")

	rows := summaryRows(t, out)
	require.Equal(t, hopsAndE2E(rows), cdfSeries(pg), "a CDF per hop and end to end")
	over := 0
	for _, c := range pg.Charts {
		if strings.HasPrefix(c.ID, "over-time-") {
			over++
		}
	}
	require.Equal(t, min(12, hopsAndE2E(rows)), over, "a chart over time per pair")
	want, ok := chart(pg, "throughput-tuples")
	require.True(t, ok)
	require.Equal(t, 3, want, "a line per operator: source, relay, sink")
	require.ElementsMatch(t, []string{"source", "relay", "sink"}, pg.Ops)
	require.Equal(t, 2, pg.Hops, "two transfers between the boxes")
	require.Equal(t, []string{"a", "b", "c"}, pg.Lanes)
	require.Len(t, pg.Links, 1)
	require.Equal(t, 3, pg.Links[0].Nodes)
	require.Equal(t, 3, pg.Links[0].Links)
	require.Len(t, pg.Marks, 2, "the capacity bars and the critical path's slices")
	require.Len(t, pg.Missing, 1, "only the counters are missing: %q", pg.Missing)
	require.Contains(t, pg.Missing[0], "no periodic counter channels")

	jt := checkTrace(t, filepath.Join(out, "trace.json"), filepath.Join(out, "durations.csv"), 500)
	n := checkCounters(t, jt, filepath.Join(out, "capacity.csv"))
	require.Positive(t, n, "the relay's windows as counters")
	t.Logf("counters: %d windows of capacity.csv as the trace's counter values", n)

	// The same logs analysed again, the trace in both formats.
	traceRun(t, e, []string{"--rounds", filepath.Join(dir, "rounds"), "--logs", filepath.Join(dir, "logs"), "--ref", "a"}, t.TempDir(), 500)
}

// TestFlinkReport: the report of examples/flink's ProfiledJobTest (a job
// in Flink's MiniCluster), when that test has run (make test runs it
// first).
func TestFlinkReport(t *testing.T) {
	e := needEnv(t)
	path := os.Getenv("CP_FLINK_REPORT")
	if path == "" {
		t.Skip("CP_FLINK_REPORT is not set: run `make test-report`")
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CP_FLINK_REQUIRED") != "" {
			t.Fatalf("%v: examples/flink's ProfiledJobTest writes it (make test-java)", err)
		}
		t.Skipf("%v: run `make test-java` first (examples/flink's ProfiledJobTest writes it)", err)
	}
	b := startBrowser(t)
	pg := open(t, b, e, path, "report-flink.png")
	rows := summaryRows(t, filepath.Dir(path))
	require.Equal(t, hopsAndE2E(rows), cdfSeries(pg))
	require.NotEmpty(t, pg.Ops)
	require.GreaterOrEqual(t, len(pg.Lanes), 1)

	// Its trace: instances of four operators in one process (their labels
	// alike, vm/PID/0 and vm/PID/1), each with its own counters.
	logs := filepath.Join(filepath.Dir(path), "..", "cp-logs")
	dir := t.TempDir()
	jt, n := traceRun(t, e, []string{"--logs", logs}, dir, 2000)
	tracks := map[string]bool{}
	for _, c := range jt.counters {
		tracks[c.track] = true
	}
	require.Len(t, tracks, 2*len(pg.Ops), "a busy and a backlogged track for each instance (a box of the topology): %v", tracks)
	t.Logf("flink: %d counter tracks, %d windows of capacity.csv in them", len(tracks), n)
}

// traceRun analyses logs (args) with --trace into dir, checks the JSON
// trace against the run's durations.csv and capacity.csv, and, where a
// Python with Perfetto's definitions is at hand, writes the protobuf trace
// of the same analysis and checks it against the JSON. It returns the JSON
// trace and how many of capacity.csv's windows its counters hold.
func traceRun(t *testing.T, e env, args []string, dir string, sample int) (jsonTrace, int) {
	t.Helper()
	js := filepath.Join(dir, "trace.json")
	run := func(out, trace string) {
		a := append([]string{e.tool, "analyze", "--quiet", "--out", out, "--durations-csv", "--no-report", "--trace-sample", fmt.Sprint(sample), "--trace", trace}, args...)
		r := testrun.Run(2*time.Minute, nil, a...)
		require.NoError(t, r.Err, "%s\n%s", r.Stdout, r.Stderr)
		require.Contains(t, r.Stdout, "trace: "+trace)
	}
	out := filepath.Join(dir, "json")
	run(out, js)
	jt := checkTrace(t, js, filepath.Join(out, "durations.csv"), sample)
	n := checkCounters(t, jt, filepath.Join(out, "capacity.csv"))
	if e.python == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CP_PYTHON is not set: the protobuf trace goes unread")
		}
		t.Log("CP_PYTHON is not set (make test-report sets it): the protobuf trace is not read")
		return jt, n
	}
	pf := filepath.Join(dir, "trace.pftrace")
	run(filepath.Join(dir, "proto"), pf)
	checkProtoTrace(t, e.python, pf, jt)
	a, err := os.Stat(js)
	require.NoError(t, err)
	b, err := os.Stat(pf)
	require.NoError(t, err)
	t.Logf("sizes: JSON %d bytes, protobuf %d bytes (%.2fx smaller)", a.Size(), b.Size(), float64(a.Size())/float64(b.Size()))
	return jt, n
}

// TestReportOfLogsThatLackThings: logs of the C demo (one node, 2M tuples
// on two channels, and a periodic counter), analysed whole and in parts: each report is
// whole, and says what its logs lack.
func TestReportOfLogsThatLackThings(t *testing.T) {
	e := needEnv(t)
	b := startBrowser(t)
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	r := testrun.Run(2*time.Minute, []string{"CP_LOG_DIR=" + logs}, filepath.Join(e.build, "demo"))
	require.NoError(t, r.Err, "%s\n%s", r.Stdout, r.Stderr)
	files, err := filepath.Glob(filepath.Join(logs, "*.cplog*")) // the counter's is ASCII: .cplog.txt
	require.NoError(t, err)
	var tuples, counters []string
	for _, f := range files {
		if strings.Contains(f, "throughput") {
			counters = append(counters, f)
		} else {
			tuples = append(tuples, f)
		}
	}
	require.Len(t, tuples, 2, "%v", files)
	require.Len(t, counters, 1, "%v", files)
	for _, c := range []struct {
		name    string
		logs    []string
		missing []string // what the report must say
	}{
		{"whole", files, []string{"one node"}},
		{"no-counters", tuples, []string{"one node", "no periodic counter channels"}},
		{"one-channel", tuples[:1], []string{"no durations", "one node", "no periodic counter channels"}},
		{"no-tuples", counters, []string{"no tuple records", "one node"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name)
			args := append([]string{e.tool, "analyze", "--quiet", "--out", out, "--logs"}, c.logs...)
			r := testrun.Run(time.Minute, nil, args...)
			require.NoError(t, r.Err, "%s\n%s", r.Stdout, r.Stderr)
			require.False(t, testrun.Panicked(r.Stderr))
			pg := open(t, b, e, filepath.Join(out, "report.html"), "report-"+c.name+".png")
			all := strings.Join(pg.Missing, "\n")
			for _, m := range c.missing {
				require.Contains(t, all, m)
			}
			require.Equal(t, slices.Contains(c.logs, counters[0]), slices.ContainsFunc(pg.Charts, func(x struct {
				ID   string `json:"id"`
				Want int    `json:"want"`
				Got  int    `json:"got"`
			}) bool {
				return x.ID == "throughput-counters"
			}), "the counters' chart exactly when there are counters")
		})
	}
}

// TestREADMEScreenshot: the README shows a screenshot of the report, a
// PNG of at most 300 KB committed beside it.
func TestREADMEScreenshot(t *testing.T) {
	png, err := os.ReadFile("../../docs/report.png")
	require.NoError(t, err)
	require.LessOrEqual(t, len(png), 300<<10, "docs/report.png: at most 300 KB")
	require.Equal(t, "\x89PNG\r\n\x1a\n", string(png[:8]), "docs/report.png is a PNG")
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	require.Contains(t, string(readme), "](docs/report.png)")
}
