package analyze

import (
	"encoding/csv"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/simlogs"
	"cloudprofiler/minrtt"
)

// A node of the synthetic cluster: its counter reads off + hz*t for true
// time t in seconds, floored to an integer as a real TSC read is.
type simNode struct {
	name string
	hz   float64
	off  float64
}

func (n simNode) at(t float64) uint64 { return n.sim().At(t) }

// sim is n as simlogs has it.
func (n simNode) sim() simlogs.Node { return simlogs.Node{Name: n.name, Hz: n.hz, Off: n.off} }

// writeASCII writes a channel file in the ASCII_TSC format (simlogs.WriteASCII).
func writeASCII(t testing.TB, dir string, h logfile.Header, lines []string) {
	t.Helper()
	simlogs.WriteASCII(t, dir, h, lines)
}

// simRound measures every pair both ways around true time t0 (simlogs.Round).
func simRound(r *rand.Rand, id int, label string, t0 float64, nodes []simNode) *minrtt.Round {
	sim := make([]simlogs.Node, len(nodes))
	for i, n := range nodes {
		sim[i] = n.sim()
	}
	return simlogs.Round(r, id, label, t0, sim)
}

func TestAnalyzeSyntheticPipeline(t *testing.T) {
	dir := t.TempDir()
	nodes := []simNode{{"a", 2.4e9, 1e9}, {"b", 2.4e9 * 0.9996, 7e10}, {"c", 2.4e9 * 1.00037, 3e9}}
	a, b, c := nodes[0], nodes[1], nodes[2]
	r := rand.New(rand.NewSource(7))
	for i, rd := range []*minrtt.Round{simRound(r, 1, "before", 0, nodes), simRound(r, 2, "after", 60, nodes)} {
		_, err := minrtt.WriteRound(filepath.Join(dir, "rounds"), rd)
		require.NoError(t, err, "round %d", i)
	}
	// A pipeline a -> b (in, out) -> c; tuple i starts at 1 + i ms.
	const n = 5000
	type ev struct {
		node simNode
		t    float64
	}
	truth := map[int64][]ev{}
	var src, bin, bout, sink, rets, counts []string
	for i := int64(0); i < n; i++ {
		t0 := 1 + float64(i)*1e-3
		t1 := t0 + 30e-6 + r.Float64()*50e-6
		t2 := t1 + 2e-6 + r.Float64()*5e-6
		t3 := t2 + 30e-6 + r.Float64()*500e-6
		truth[i] = []ev{{a, t0}, {b, t1}, {b, t2}, {c, t3}}
		src = append(src, fmt.Sprintf("%d,%d", i, a.at(t0)))
		bin = append(bin, fmt.Sprintf("%d,%d", i, b.at(t1)))
		bout = append(bout, fmt.Sprintf("%d,%d", i, b.at(t2)))
		sink = append(sink, fmt.Sprintf("%d,%d", i, c.at(t3)))
		// The sink's ReTACK takes 100 us back to the source.
		rets = append(rets, fmt.Sprintf("%d,%d", i, a.at(t3+100e-6)))
	}
	for s := 1; s <= 6; s++ { // the sink counts per second
		counts = append(counts, fmt.Sprintf("%d,1000,0", c.at(float64(s))))
	}
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	hdr := func(node simNode, pid, ch int, name, handler string) logfile.Header {
		return logfile.Header{Node: node.name, Host: "h", PID: pid, Channel: ch, Name: name, Handler: handler, TSCHz: node.hz}
	}
	writeASCII(t, logs, hdr(a, 10, 1, "source out", "FOX_START"), src)
	ret := hdr(a, 10, 1, "source out", "FOX_START")
	ret.Fox = &logfile.Fox{Role: "return"}
	ret.Channel = 99 // another file name; the same channel in truth
	writeASCII(t, logs, ret, rets)
	writeASCII(t, logs, hdr(b, 20, 1, "relay in", "IDENTITY"), bin)
	writeASCII(t, logs, hdr(b, 20, 2, "relay out", "IDENTITY"), bout)
	writeASCII(t, logs, hdr(c, 30, 1, "sink in", "IDENTITY"), sink)
	writeASCII(t, logs, hdr(c, 30, 2, "sink rate", "PERIODICCOUNTER"), counts)
	writeASCII(t, logs, hdr(a, 10, 2, "source run", "FIRSTLAST"), []string{src[0], src[n-1]})
	// A channel that logs one id over and over: no tuple's way, left out.
	var same []string
	for i := 0; i < maxTupleEvents+1; i++ {
		same = append(same, fmt.Sprintf("99999999,%d", b.at(1+float64(i)*1e-4)))
	}
	writeASCII(t, logs, hdr(b, 20, 3, "constant", "IDENTITY"), same)
	oneFile, err := filepath.Glob(filepath.Join(logs, "b-1-*"))
	require.NoError(t, err)
	require.Len(t, oneFile, 1)

	out := filepath.Join(dir, "out")
	// A small memory budget forces the spill path.
	// A file named twice (in its directory and alone) is read once.
	res, err := Run(Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{logs, oneFile[0]}, Out: out, Ref: "a", MemBytes: 64 << 10, DurationsCSV: true})
	require.NoError(t, err)
	require.Equal(t, "a", res.Ref)
	require.EqualValues(t, 5*n+maxTupleEvents+1, res.Records)
	require.EqualValues(t, n+1, res.Tuples)
	require.EqualValues(t, 1, res.SkippedTuples)
	require.EqualValues(t, maxTupleEvents+1, res.SkippedRecords)
	require.EqualValues(t, 5*n, res.Durations) // 3 hops, end to end and the return trip per tuple
	require.EqualValues(t, 5*n+maxTupleEvents+1, res.Spilled)
	var rt *Row
	for _, row := range res.Rows() {
		if row.Kind == KindReturnRTT {
			rt = &row
		}
	}
	require.NotNil(t, rt)
	require.EqualValues(t, n, rt.Count)
	// ReT overestimates by the ReTACK's 100 us, within our bound.
	require.InDelta(t, 100e-6, rt.RetErrMedian, 6e-6)
	require.Equal(t, "c/sink in", rt.To)
	require.Greater(t, rt.OursErrMedian, 1e-6)

	// Every duration's truth lies within its bound.
	f, err := os.Open(filepath.Join(out, "durations.csv"))
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Equal(t, "tuple_id,from_node,from_channel,to_node,to_channel,kind,start_tsc,end_tsc,cycles,error_cycles,seconds,error_seconds,scenario,paper_error_cycles,baseline_error_cycles", strings.Join(rows[0], ","))
	require.Len(t, rows, 5*n+1)
	step := map[string]int{"source out": 0, "relay in": 1, "relay out": 2, "sink in": 3}
	kinds := map[string]int{}
	worst := 0.0
	for _, row := range rows[1:] {
		id, _ := strconv.ParseInt(row[0], 10, 64)
		from, to := truth[id][step[row[2]]], truth[id][step[row[4]]]
		if row[5] == KindReturnRTT {
			to = ev{a, truth[id][3].t + 100e-6}
		}
		want := (to.t - from.t) * a.hz
		got, _ := strconv.ParseFloat(row[8], 64)
		bound, _ := strconv.ParseFloat(row[9], 64)
		// 2 cycles: both ends' readings are floored.
		require.LessOrEqual(t, math.Abs(got-want), bound+2, "row %v: truth %.1f", row, want)
		worst = math.Max(worst, math.Abs(got-want)/(bound+2))
		kinds[row[5]+":"+row[2]+">"+row[4]]++
	}
	t.Logf("worst |error|/bound = %.3f", worst)
	require.Equal(t, map[string]int{"transfer:source out>relay in": n, "compute:relay in>relay out": n,
		"transfer:relay out>sink in": n, "end_to_end:source out>sink in": n, "return_trip:source out>source out": n}, kinds)

	for _, name := range []string{"summary.csv", "summary.txt", "model.json", "report.html", "runs.csv", "throughput.csv"} {
		_, err := os.Stat(filepath.Join(out, name))
		require.NoError(t, err, name)
	}
	html, _ := os.ReadFile(filepath.Join(out, "report.html"))
	require.Contains(t, string(html), "<svg")
	require.Contains(t, string(html), "relay in")
	tp, _ := os.ReadFile(filepath.Join(out, "throughput.csv"))
	require.Equal(t, 7, strings.Count(string(tp), "\n"), string(tp))
	require.Contains(t, string(tp), ",1000,")
	// The run: source's first to last tuple, 4.999 s on node a.
	require.Len(t, res.Runs, 1)
	require.InDelta(t, 4.999, res.Runs[0].Duration.Est/res.RefHz, 1e-6)
	txt, _ := os.ReadFile(filepath.Join(out, "summary.txt"))
	t.Logf("\n%s", txt)
	_, err = os.Stat(filepath.Join(out, ".spill"))
	require.True(t, os.IsNotExist(err), "spill files removed")
}

func TestAnalyzeErrors(t *testing.T) {
	dir := t.TempDir()
	nodes := []simNode{{"a", 2e9, 0}, {"b", 2e9, 5e9}}
	r := rand.New(rand.NewSource(1))
	for i, label := range []string{"before", "after"} {
		_, err := minrtt.WriteRound(filepath.Join(dir, "rounds"), simRound(r, i+1, label, float64(i*10), nodes))
		require.NoError(t, err)
	}
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	_, err := Run(Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{logs}, Out: filepath.Join(dir, "o")})
	require.ErrorContains(t, err, "no channel files")
	writeASCII(t, logs, logfile.Header{Node: "zz", PID: 1, Channel: 1, Name: "x", Handler: "IDENTITY", TSCHz: 2e9}, []string{"1,5"})
	_, err = Run(Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{logs}, Out: filepath.Join(dir, "o")})
	require.ErrorContains(t, err, `node "zz", which no round measured`)
	_, err = Run(Config{Rounds: filepath.Join(dir, "nope"), Logs: []string{logs}, Out: filepath.Join(dir, "o")})
	require.ErrorContains(t, err, "rounds")
}

// Logs from one node need no rounds: durations are exact in its counter.
// Logs from several nodes without rounds are refused, naming the nodes.
func TestAnalyzeOneNodeWithoutRounds(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	hdr := func(node string, ch int, name string) logfile.Header {
		return logfile.Header{Node: node, Host: "h", PID: 7, Channel: ch, Name: name, Handler: "IDENTITY", TSCHz: 2e9}
	}
	var in, out []string
	for i := 0; i < 1000; i++ {
		t0 := uint64(5_000_000_000_000 + i*100_000)
		in = append(in, fmt.Sprintf("%d,%d", i, t0))
		out = append(out, fmt.Sprintf("%d,%d", i, t0+uint64(2000+i))) // 1 us + i/2 ns at 2 GHz
	}
	writeASCII(t, logs, hdr("mini", 1, "map entry"), in)
	writeASCII(t, logs, hdr("mini", 2, "map exit"), out)
	res, err := Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "o")})
	require.NoError(t, err)
	require.Equal(t, "mini", res.Ref)
	require.Len(t, res.Pairs, 1)
	p := res.Pairs[0]
	require.Equal(t, KindCompute, p.Key.Kind)
	require.EqualValues(t, 1000, p.Dur.N)
	require.InDelta(t, 2000, p.Dur.Min, 1e-6)
	require.InDelta(t, 2999, p.Dur.Max, 1e-6)
	require.Less(t, p.Err.Max, 1e-3, "exact up to float rounding")

	_, err = Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "o"), Ref: "other"})
	require.ErrorContains(t, err, `the logs come from node "mini" only`)
	writeASCII(t, logs, hdr("second", 3, "sink"), in)
	_, err = Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "o")})
	require.ErrorContains(t, err, "the logs come from 2 nodes (mini, second): --rounds")
}

// Damaged and incomplete logs: the analysis goes on with every valid record
// and says, per channel, what is missing, in summary.txt and report.html.
func TestAnalyzeReportsDamagedLogs(t *testing.T) {
	dir := t.TempDir()
	var in, out []string
	for i := 0; i < 100; i++ {
		in = append(in, fmt.Sprintf("%d,%d", i, 1000+10*i))
		out = append(out, fmt.Sprintf("%d,%d", i, 1005+10*i))
	}
	writeASCII(t, dir, logfile.Header{Node: "n", Channel: 1, Name: "in", Handler: "IDENTITY", TSCHz: 1e9}, in)
	writeASCII(t, dir, logfile.Header{Node: "n", Channel: 2, Name: "out", Handler: "IDENTITY", TSCHz: 1e9}, out)
	// Damage the out channel: a line that is not a record, and the trailer
	// says 101 positions were accepted, one more than the file holds.
	p := filepath.Join(dir, "n-2-out.cplog.txt")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	b = []byte(strings.Replace(string(b), "50,1505\n", "50,15#05\n", 1))
	b = []byte(strings.Replace(string(b), `"positions":100`, `"positions":101`, 1))
	require.NoError(t, os.WriteFile(p, b, 0o644))

	res, err := Run(Config{Logs: []string{dir}, Out: filepath.Join(dir, "out")})
	require.NoError(t, err)
	require.Len(t, res.Incomplete(), 1)
	require.Equal(t, "n/out", res.Incomplete()[0].Label())
	require.Equal(t, []string{"1 damaged lines skipped", "1 accepted records are not in the file (damaged, cut off, or never reached it)"}, res.Incomplete()[0].Problems)
	require.Equal(t, uint64(199), res.Records)
	txt, err := os.ReadFile(filepath.Join(dir, "out", "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(txt), "logs: 1 of 2 files DAMAGED OR INCOMPLETE")
	require.Contains(t, string(txt), "1 damaged lines skipped")
	page, err := os.ReadFile(filepath.Join(dir, "out", "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(page), "Log integrity: 1 of 2 files damaged or incomplete")
}
