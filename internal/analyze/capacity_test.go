package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/results"
	"cloudprofiler/minrtt"
)

// capTopology is a marked pipeline on three nodes with known costs, tuple i
// leaving the source at 1 s + i * 100 us (true time):
//
//	a/10  src out                                  (a source: out only)
//	b/20  parse#0 in/out/sent, parse#1 in/out/sent (two instances in one
//	      process: #0 takes 2 tuples of 3 and spends 45 us on each, #1 30 us;
//	      out to sent 5 us: blocked)
//	b/21  filter in/out                            (8 us; drops i%4 == 3: no out)
//	c/30  sink in/out (36 us), sink count          (CP_SERVICERATE: counter
//	      records every 100 ms, three converged estimates)
//
// Transfers take 20, 15 and 25 us. An unmarked channel "warmup" on a logs
// one record 50 us before the first tuple: the run's first record, so that
// no window boundary falls on a tuple's record.
type capTopology struct {
	dir, logs, rounds string
	n                 int
	nodes             []simNode
	last              float64 // the true time of the run's last record
}

const capGap = 100e-6

func writeCapTopology(t *testing.T, n int) *capTopology {
	t.Helper()
	dir := t.TempDir()
	ct := &capTopology{dir: dir, logs: filepath.Join(dir, "logs"), rounds: filepath.Join(dir, "rounds"), n: n,
		nodes: []simNode{{"a", 2.4e9, 1e9}, {"b", 2.4e9 * 0.9996, 7e10}, {"c", 2.4e9 * 1.00037, 3e9}}}
	a, b, c := ct.nodes[0], ct.nodes[1], ct.nodes[2]
	r := rand.New(rand.NewSource(11))
	for i, rd := range []*minrtt.Round{simRound(r, 1, "before", 0, ct.nodes), simRound(r, 2, "after", 60, ct.nodes)} {
		_, err := minrtt.WriteRound(ct.rounds, rd)
		require.NoError(t, err, "round %d", i)
	}
	require.NoError(t, os.MkdirAll(ct.logs, 0o755))
	lines := map[string][]string{}
	rec := func(ch string, node simNode, id int, at float64) {
		lines[ch] = append(lines[ch], fmt.Sprintf("%d,%d", id, node.at(at)))
		ct.last = math.Max(ct.last, at)
	}
	var sinkIns []float64
	for i := 0; i < n; i++ {
		ts := 1 + float64(i)*capGap
		rec("src out", a, i, ts)
		inst, cost := "parse#0", 45e-6
		if i%3 == 2 {
			inst, cost = "parse#1", 30e-6
		}
		pin := ts + 20e-6
		rec(inst+" in", b, i, pin)
		rec(inst+" out", b, i, pin+cost)
		rec(inst+" sent", b, i, pin+cost+5e-6)
		fin := pin + cost + 5e-6 + 15e-6
		rec("filter in", b, i, fin)
		if i%4 == 3 {
			continue
		}
		rec("filter out", b, i, fin+8e-6)
		sin := fin + 8e-6 + 25e-6
		rec("sink in", c, i, sin)
		rec("sink out", c, i, sin+36e-6)
		sinkIns = append(sinkIns, sin)
	}
	hdr := func(node simNode, pid, ch int, name string) logfile.Header {
		return logfile.Header{Node: node.name, Host: "h", PID: pid, Channel: ch, Name: name, Handler: "IDENTITY", TSCHz: node.hz}
	}
	writeASCII(t, ct.logs, hdr(a, 10, 1, "src out"), lines["src out"])
	writeASCII(t, ct.logs, hdr(a, 10, 2, "warmup"), []string{fmt.Sprintf("-1,%d", a.at(1-50e-6))})
	for k, name := range []string{"parse#0 in", "parse#0 out", "parse#0 sent", "parse#1 in", "parse#1 out", "parse#1 sent"} {
		writeASCII(t, ct.logs, hdr(b, 20, 1+k, name), lines[name])
	}
	writeASCII(t, ct.logs, hdr(b, 21, 1, "filter in"), lines["filter in"])
	writeASCII(t, ct.logs, hdr(b, 21, 2, "filter out"), lines["filter out"])
	writeASCII(t, ct.logs, hdr(c, 30, 1, "sink in"), lines["sink in"])
	writeASCII(t, ct.logs, hdr(c, 30, 2, "sink out"), lines["sink out"])

	// The sink's CP_SERVICERATE channel: items taken per 100 ms from 1 s,
	// and three converged estimates (ASCII: counter lines and #event lines).
	end := 1 + float64(n)*capGap + 0.1
	var body []string
	k := 0
	events := []struct{ at, rate float64 }{{1.5, 27000}, {2.2, 28000}, {2.4, 27500}}
	for p := 1; float64(p)*0.1+1 <= end; p++ {
		pe := 1 + float64(p)*0.1
		cnt := 0
		for k < len(sinkIns) && sinkIns[k] < pe {
			cnt++
			k++
		}
		body = append(body, fmt.Sprintf("%d,%d,0", c.at(pe), cnt))
		for len(events) > 0 && events[0].at < pe { // written after the period it converged in
			e := events[0]
			events = events[1:]
			{
				js, err := json.Marshal(logfile.Event{Event: capacity.EventServiceRate, Sync: &logfile.Sync{TSC: c.at(e.at)},
					Rate: e.rate, PeriodNs: 4e6, Samples: 64})
				require.NoError(t, err)
				body = append(body, "#event "+string(js))
			}
		}
	}
	h := hdr(c, 30, 3, "sink count")
	h.Handler, h.OpenSync = "SERVICERATE", logfile.Sync{TSC: c.at(1)}
	h.Version, h.ByteOrder, h.Format, h.FormatID = logfile.Version, "little", "ASCII_TSC", int32(logfile.ASCIITSC)
	h.RecordSize, h.Columns, h.CounterPeriod = 16, []string{"period_end_tsc", "count", "skipped_periods"}, 1e8
	js, err := json.Marshal(h)
	require.NoError(t, err)
	text := logfile.ASCIIMagic + "\n#header " + string(js) + "\n" + strings.Join(body, "\n") + "\n#trailer {\"reason\":\"close\"}\n"
	require.NoError(t, os.WriteFile(filepath.Join(ct.logs, "c-3-sink_count.cplog.txt"), []byte(text), 0o644))
	return ct
}

func (ct *capTopology) config(out string) Config {
	return Config{Rounds: ct.rounds, Logs: []string{ct.logs}, Out: filepath.Join(ct.dir, out), Ref: "a", NoDurations: true}
}

func capRow(t *testing.T, rows []capacity.Row, level, op, inst string, window int64, method string) capacity.Row {
	t.Helper()
	for _, r := range rows {
		if r.Level == level && r.Operator == op && r.Instance == inst && r.Window == window && r.Method == method {
			return r
		}
	}
	t.Fatalf("no %s row %s %q window %d %s", level, op, inst, window, method)
	return capacity.Row{}
}

func TestCapacityKnownCosts(t *testing.T) {
	const n = 25000
	ct := writeCapTopology(t, n)
	cfg := ct.config("out")
	cfg.TargetRate = 100000
	res, err := Run(cfg)
	require.NoError(t, err)
	require.NotNil(t, res.Capacity)
	rows := res.Capacity.Rows
	const io = capacity.MethodInOut

	// Counts from the construction.
	n1 := 0 // i%3 == 2: parse#1
	for i := 0; i < n; i++ {
		if i%3 == 2 {
			n1++
		}
	}
	n0, kept := n-n1, n-n/4
	runS := ct.last - (1 - 50e-6) // from the warmup record
	require.Equal(t, 3, res.Capacity.Windows.N)

	p0 := capRow(t, rows, "instance", "parse", "b/20/0", -1, io)
	p1 := capRow(t, rows, "instance", "parse", "b/20/1", -1, io)
	require.InEpsilon(t, 1/45e-6, p0.ServiceRate, 1e-4)
	require.InEpsilon(t, 1/30e-6, p1.ServiceRate, 1e-4)
	require.LessOrEqual(t, p0.ServiceRateLow, p0.ServiceRate)
	require.GreaterOrEqual(t, p0.ServiceRateHigh, p0.ServiceRate)
	require.Less(t, (p0.ServiceRateHigh-p0.ServiceRateLow)/p0.ServiceRate, 1e-3, "deterministic costs: a narrow interval")
	require.EqualValues(t, n0, p0.TuplesIn)
	require.EqualValues(t, n0, p0.TuplesOut)
	require.InEpsilon(t, runS, p0.EndS, 1e-5)
	require.InEpsilon(t, float64(n0)/runS, p0.ArrivalsPerS, 1e-4)
	require.InEpsilon(t, float64(n0)*45e-6/runS, p0.BusyShare, 1e-4)
	require.InEpsilon(t, float64(n0)*5e-6/runS, p0.BlockedShare, 1e-3)
	// Never backlogged (a tuple every 100 us): the cost is its own work
	// and its send (out to sent: the next instance took nothing meanwhile,
	// so the hand-off did not wait), an upper bound on the capacity.
	require.InEpsilon(t, 1/50e-6, p0.Capacity, 1e-4)
	require.Contains(t, p0.Note, "never backlogged")
	require.InEpsilon(t, p0.Capacity/p0.ArrivalsPerS, p0.Headroom, 1e-12)
	require.Equal(t, 1.0, p0.Selectivity)
	require.Equal(t, "b", p0.Node)
	require.EqualValues(t, 20, p0.PID)

	parse := capRow(t, rows, "operator", "parse", "", -1, io)
	require.EqualValues(t, 2, parse.Instances)
	require.InEpsilon(t, float64(n0)/(float64(n)/2), parse.Skew, 1e-12)
	// The instances' service rates summed.
	require.InEpsilon(t, 1/45e-6+1/30e-6, parse.ServiceRate, 1e-4)
	require.InEpsilon(t, (float64(n0)*45e-6+float64(n1)*30e-6)/2/runS, parse.BusyShare, 1e-4)
	// Skew-aware: #0 saturates first, at 1/50us over its 2/3 share.
	require.InEpsilon(t, (1/50e-6)/(float64(n0)/float64(n)), parse.Capacity, 1e-4)
	require.Equal(t, 1.0, parse.Reach)
	require.Equal(t, parse.Capacity, parse.MaxSourceRate)
	require.True(t, parse.Bottleneck)
	require.EqualValues(t, 5, parse.ParallelismNeeded) // 1e5 / mean(20000, 28571) = 4.1

	filter := capRow(t, rows, "operator", "filter", "", -1, io)
	require.InEpsilon(t, 1/8e-6, filter.ServiceRate, 1e-3)
	require.Equal(t, float64(kept)/float64(n), filter.Selectivity)
	require.Equal(t, 1.0, filter.Reach)
	require.False(t, filter.Bottleneck)
	require.EqualValues(t, 1, filter.ParallelismNeeded)

	sink := capRow(t, rows, "operator", "sink", "", -1, io)
	require.InEpsilon(t, 1/36e-6, sink.ServiceRate, 1e-4)
	require.Equal(t, float64(kept)/float64(n), sink.Reach)
	require.InEpsilon(t, (1/36e-6)/0.75, sink.MaxSourceRate, 1e-4)
	require.False(t, sink.Bottleneck, "slowest instance, but a quarter of the tuples never reach it")
	require.EqualValues(t, 3, sink.ParallelismNeeded) // 75000 / 27778 = 2.7

	src := capRow(t, rows, "operator", "src", "", -1, io)
	require.True(t, math.IsNaN(src.ServiceRate))
	require.Contains(t, src.Note, "no in mark")
	require.InEpsilon(t, float64(n)/runS, src.DeparturesPerS, 1e-4)
	require.Equal(t, "parse", res.Capacity.Bottleneck)

	// Windows of 1 s from the warmup record: window 0 holds tuples 0..9999.
	w0 := capRow(t, rows, "instance", "parse", "b/20/0", 0, io)
	require.Equal(t, 0.0, w0.StartS)
	require.Equal(t, 1.0, w0.EndS)
	require.EqualValues(t, 6667, w0.TuplesIn)
	require.Equal(t, 6667.0, w0.ArrivalsPerS)
	// Tuple 9999 is served from 50 us before the window's end to 25 us after:
	// its service is split, and its blocked time falls in window 1.
	require.InDelta(t, 6666*45e-6+30e-6, w0.BusyShare, 1e-6)
	require.InDelta(t, 6666*5e-6, w0.BlockedShare, 1e-6)
	w2 := capRow(t, rows, "instance", "parse", "b/20/0", 2, io)
	require.Equal(t, 2.0, w2.StartS)
	require.InEpsilon(t, runS, w2.EndS, 1e-5)
	op0 := capRow(t, rows, "operator", "parse", "", 0, io)
	require.Equal(t, 10000.0, op0.ArrivalsPerS)
	require.EqualValues(t, 2, op0.Instances)
	require.InEpsilon(t, 6667/5000.0, op0.Skew, 1e-12)
	fw1 := capRow(t, rows, "operator", "filter", "", 1, io)
	require.InEpsilon(t, 0.75, fw1.Selectivity, 1e-3)

	// The sink's counters: its estimates in their windows, the median over the run.
	bc := capRow(t, rows, "instance", "sink", "c/30/", -1, capacity.MethodBC)
	require.Equal(t, 27500.0, bc.ServiceRate)
	require.EqualValues(t, kept, bc.TuplesOut)
	var wins []int64
	for _, r := range rows {
		if r.Method == capacity.MethodBC && r.Level == "instance" && r.Window >= 0 {
			wins = append(wins, r.Window)
			require.Contains(t, r.Note, "converged estimate")
		}
	}
	require.Equal(t, []int64{0, 1, 1}, wins)
	bw0 := capRow(t, rows, "instance", "sink", "c/30/", 0, capacity.MethodBC)
	require.Equal(t, 27000.0, bw0.ServiceRate)
	require.InDelta(t, 7500, bw0.DeparturesPerS, 76) // 3 of 4 tuples, 10k/s, give or take the periods at the window's edges

	// The files: capacity.parquet holds the rows of capacity.csv.
	csvb, err := os.ReadFile(filepath.Join(cfg.Out, "capacity.csv"))
	require.NoError(t, err)
	prows, err := results.ReadAll[capacity.Row](filepath.Join(cfg.Out, "capacity.parquet"))
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, writeCapacityCSV(&b, prows))
	require.Equal(t, string(csvb), b.String())
	require.Equal(t, strings.TrimSuffix(capacityCSVHeader, "\n"), strings.SplitN(string(csvb), "\n", 2)[0])
	require.Contains(t, res.Files, filepath.Join(cfg.Out, "capacity.csv"))
	require.Contains(t, res.Files, filepath.Join(cfg.Out, "capacity.parquet"))
	txt, err := os.ReadFile(filepath.Join(cfg.Out, "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(txt), "bottleneck: parse (*)")
	require.Contains(t, string(txt), "parse 5, filter 1, sink 3")
	t.Logf("\n%s", txt)
	page, err := os.ReadFile(filepath.Join(cfg.Out, "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(page), `<section id="capacity"><h2>Capacity</h2>`)
	require.Contains(t, string(page), "Bottleneck: <b>parse</b>")

	// Not enough data: windows below --min-tuples give no rate, the run does.
	cfg2 := ct.config("few")
	cfg2.MinTuples = 10000
	res2, err := Run(cfg2)
	require.NoError(t, err)
	w0 = capRow(t, res2.Capacity.Rows, "instance", "parse", "b/20/0", 0, io)
	require.True(t, math.IsNaN(w0.ServiceRate) && math.IsNaN(w0.Headroom) && math.IsNaN(w0.Capacity))
	require.Equal(t, "not enough data: 6667 tuples with an in and an out (< 10000)", w0.Note)
	p0 = capRow(t, res2.Capacity.Rows, "instance", "parse", "b/20/0", -1, io)
	require.InEpsilon(t, 1/45e-6, p0.ServiceRate, 1e-4)
	p1 = capRow(t, res2.Capacity.Rows, "instance", "parse", "b/20/1", -1, io)
	require.Equal(t, fmt.Sprintf("not enough data: %d tuples with an in and an out (< 10000)", n1), p1.Note)
}

// The results do not depend on the workers, the memory budget (spilled or
// not) or the order partitions were joined in.
func TestCapacitySameWhateverTheWorkers(t *testing.T) {
	ct := writeCapTopology(t, 6000)
	var want []byte
	for _, c := range []struct {
		workers int
		mem     int64
	}{{1, 256 << 20}, {3, 64 << 10}, {2, 64 << 10}} {
		cfg := ct.config(fmt.Sprintf("out-%d-%d", c.workers, c.mem))
		cfg.Workers, cfg.MemBytes = c.workers, c.mem
		res, err := Run(cfg)
		require.NoError(t, err)
		if c.mem < 1<<20 {
			require.NotZero(t, res.Spilled)
		}
		b, err := os.ReadFile(filepath.Join(cfg.Out, "capacity.csv"))
		require.NoError(t, err)
		if want == nil {
			want = b
			continue
		}
		require.Equal(t, string(want), string(b), "%d workers, %d bytes", c.workers, c.mem)
	}
}

// Two channels marking one instance's role: an error naming both, before
// anything is decoded; --no-capacity analyses the rest.
func TestCapacityAmbiguousPairing(t *testing.T) {
	ct := writeCapTopology(t, 300)
	b := ct.nodes[1]
	h := logfile.Header{Node: "b", Host: "h", PID: 20, Channel: 9, Name: "parse#0  in", Handler: "IDENTITY", TSCHz: b.hz}
	writeASCII(t, ct.logs, h, []string{fmt.Sprintf("1,%d", b.at(1.5))})
	cfg := ct.config("out")
	_, err := Run(cfg)
	require.Error(t, err)
	for _, s := range []string{filepath.Join(ct.logs, "b-1-parse#0_in.cplog.txt"), filepath.Join(ct.logs, "b-9-parse#0__in.cplog.txt"),
		"both mark", "--no-capacity", "#INSTANCE"} {
		require.Contains(t, err.Error(), s)
	}
	_, statErr := os.Stat(filepath.Join(cfg.Out, "summary.txt"))
	require.True(t, os.IsNotExist(statErr))

	cfg.NoCapacity = true
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Nil(t, res.Capacity)
	require.NotZero(t, res.Durations+uint64(len(res.Pairs)))
	_, statErr = os.Stat(filepath.Join(cfg.Out, "capacity.csv"))
	require.True(t, os.IsNotExist(statErr))
	txt, err := os.ReadFile(filepath.Join(cfg.Out, "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(txt), "capacity: not analysed (--no-capacity)")
}

// Files cut short (a killed process): the analysis goes on with what is
// whole, and says what is missing; nothing panics.
func TestCapacityPartialLogs(t *testing.T) {
	ct := writeCapTopology(t, 3000)
	for _, name := range []string{"c-2-sink_out.cplog.txt", "c-3-sink_count.cplog.txt", "b-2-parse#0_out.cplog.txt"} {
		p := filepath.Join(ct.logs, name)
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		body := bytes.IndexByte(b, '\n') + 1
		body += bytes.IndexByte(b[body:], '\n') + 1                            // after the header line
		require.NoError(t, os.WriteFile(p, b[:body+(len(b)-body)/2+3], 0o644)) // mid-line, no trailer
	}
	cfg := ct.config("out")
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Len(t, res.Incomplete(), 3)
	rows := res.Capacity.Rows
	p0 := capRow(t, rows, "instance", "parse", "b/20/0", -1, capacity.MethodInOut)
	require.Less(t, p0.TuplesOut, p0.TuplesIn)
	require.InEpsilon(t, 1/45e-6, p0.ServiceRate, 1e-4, "the tuples that have both marks")
	require.NotEmpty(t, capRow(t, rows, "instance", "sink", "c/30/", -1, capacity.MethodBC).Note)
	txt, err := os.ReadFile(filepath.Join(cfg.Out, "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(txt), "DAMAGED OR INCOMPLETE")
	require.Contains(t, string(txt), "bottleneck:")
}

// No channel follows the naming rule: no capacity files, and the summary
// says what to mark; an earlier run's capacity files are removed.
func TestCapacityNoMarks(t *testing.T) {
	dir, logs := writeUnmarked(t)
	outDir := filepath.Join(dir, "out")
	require.NoError(t, os.MkdirAll(outDir, 0o755))
	for _, f := range []string{"capacity.csv", "capacity.parquet"} {
		require.NoError(t, os.WriteFile(filepath.Join(outDir, f), []byte("old"), 0o644))
	}
	res, err := Run(Config{Logs: []string{logs}, Out: outDir})
	require.NoError(t, err)
	require.Nil(t, res.Capacity)
	require.Equal(t, capacity.NoMarks, res.CapacityNote)
	for _, f := range []string{"capacity.csv", "capacity.parquet"} {
		_, err := os.Stat(filepath.Join(outDir, f))
		require.True(t, os.IsNotExist(err), f)
	}
	txt, err := os.ReadFile(filepath.Join(outDir, "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(txt), "no channel marks an operator")
	require.Contains(t, string(txt), `"OPERATOR in"`)
}

// writeUnmarked writes the logs of 100 tuples through "map entry" and "map
// exit" on one node (names that mark no operator) into DIR/logs, DIR a new
// temporary directory.
func writeUnmarked(t *testing.T) (dir, logs string) {
	t.Helper()
	dir = t.TempDir()
	var in, out []string
	for i := 0; i < 100; i++ {
		in = append(in, fmt.Sprintf("%d,%d", i, 1000+100*i))
		out = append(out, fmt.Sprintf("%d,%d", i, 1050+100*i))
	}
	logs = filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	writeASCII(t, logs, logfile.Header{Node: "n", PID: 1, Channel: 1, Name: "map entry", Handler: "IDENTITY", TSCHz: 1e9}, in)
	writeASCII(t, logs, logfile.Header{Node: "n", PID: 1, Channel: 2, Name: "map exit", Handler: "IDENTITY", TSCHz: 1e9}, out)
	return dir, logs
}

func TestCapacityConfigRefused(t *testing.T) {
	ct := writeCapTopology(t, 100)
	for _, c := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Window = -1 }, "--window must be positive"},
		{func(c *Config) { c.MinTuples = -3 }, "--min-tuples must be at least 1"},
		{func(c *Config) { c.TargetRate = math.Inf(1) }, "--target-rate"},
		// A window so short that the accumulators would not fit the budget.
		{func(c *Config) { c.Window = 10; c.MemBytes = 64 << 20 }, "give --window"},
	} {
		cfg := ct.config("out")
		c.mod(&cfg)
		_, err := Run(cfg)
		require.ErrorContains(t, err, c.want)
	}
}
