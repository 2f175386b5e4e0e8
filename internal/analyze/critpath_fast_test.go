package analyze

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"cloudprofiler/internal/critpath"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"

	"github.com/stretchr/testify/require"
)

// The departure indexes (critpath.Config.Fast) give what pass 2 over every
// visit gives: a pipeline with queueing (bursts into a FIFO operator),
// across two nodes, a sink that marks only its in; the critical path's
// shares and the breakdown's parts agree up to the translation of the
// previous departure (a few cycles a tuple).
func TestCritPathFastMatchesSlow(t *testing.T) {
	dir := t.TempDir()
	logs, rounds := filepath.Join(dir, "logs"), filepath.Join(dir, "rounds")
	nodes := []simNode{{"a", 2.4e9, 1e9}, {"b", 2.4e9 * 0.9996, 7e10}}
	a, b := nodes[0], nodes[1]
	r := rand.New(rand.NewSource(5))
	for i, rd := range []*minrtt.Round{simRound(r, 1, "before", 0, nodes), simRound(r, 2, "after", 60, nodes)} {
		_, err := minrtt.WriteRound(rounds, rd)
		require.NoError(t, err, "round %d", i)
	}
	require.NoError(t, os.MkdirAll(logs, 0o755))
	lines := map[string][]string{}
	rec := func(ch string, node simNode, id int, at float64) {
		lines[ch] = append(lines[ch], fmt.Sprintf("%d,%d", id, node.at(at)))
	}
	const n = 20000
	ts, free, sinkFree := 1.0, 0.0, 0.0
	for i := 0; i < n; i++ {
		// Bursts: 50 tuples 10 us apart, then a pause.
		if i%50 == 0 {
			ts += 2e-3 * r.Float64()
		} else {
			ts += 10e-6
		}
		rec("src out", a, i, ts)
		in := math.Max(ts+20e-6, free+1e-6)
		cost := 15e-6 + 10e-6*r.Float64()
		rec("op in", b, i, in)
		rec("op out", b, i, in+cost)
		free = in + cost
		sin := math.Max(free+3e-6, sinkFree+2e-6)
		rec("sink in", b, i, sin)
		sinkFree = sin
	}
	hdr := func(node simNode, pid, ch int, name string) logfile.Header {
		return logfile.Header{Node: node.name, Host: "h", PID: pid, Channel: ch, Name: name, Handler: "IDENTITY", TSCHz: node.hz}
	}
	writeASCII(t, logs, hdr(a, 10, 1, "src out"), lines["src out"])
	writeASCII(t, logs, hdr(b, 20, 1, "op in"), lines["op in"])
	writeASCII(t, logs, hdr(b, 20, 2, "op out"), lines["op out"])
	writeASCII(t, logs, hdr(b, 21, 1, "sink in"), lines["sink in"])

	run := func(out string, slow bool, mem int64) *critpath.Result {
		cfg := Config{Rounds: rounds, Logs: []string{logs}, Out: filepath.Join(dir, out), Ref: "a", NoDurations: true,
			Slice: 10e6, noFastCritPath: slow, MemBytes: mem}
		res, err := Run(cfg)
		require.NoError(t, err)
		require.NotNil(t, res.CritPath)
		require.True(t, res.CritPath.AddUp)
		return res.CritPath
	}
	slow, fast := run("slow", true, 0), run("fast", false, 0)
	require.Zero(t, fast.IndexFileBytes)
	// With 64 KiB the indexes outgrow their quarter and are read from
	// their files: the same lookups, the same results as in memory.
	spilled := run("fast-spilled", false, 64<<10)
	require.Positive(t, spilled.IndexFileBytes)
	require.Equal(t, fast.Walked, spilled.Walked)
	require.Equal(t, fast.Path, spilled.Path)
	require.Equal(t, fast.Breakdown, spilled.Breakdown)
	require.Equal(t, fast.Costs, spilled.Costs)
	txt, err := os.ReadFile(filepath.Join(dir, "fast-spilled", "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(txt), "read from a file beside the spill")
	require.Equal(t, slow.Tuples, fast.Tuples)
	require.Equal(t, slow.Visits, fast.Visits)
	// The fast path was taken: pass 2 walked only the visits that waited.
	require.Equal(t, slow.Visits, slow.Walked)
	require.Less(t, fast.Walked, fast.Visits*3/4) // the sink waits for every tuple, the operator for the first of a burst
	t.Logf("visits %d; walked in pass 2: %d without the indexes, %d with them", slow.Visits, slow.Walked, fast.Walked)
	require.Equal(t, slow.Slices, fast.Slices)
	require.Equal(t, slow.Inconsistent, fast.Inconsistent)
	require.Equal(t, len(slow.Path), len(fast.Path))
	for i := range slow.Path {
		s, f := slow.Path[i], fast.Path[i]
		require.Equal(t, s.Kind+s.Name, f.Kind+f.Name, "row %d", i)
		if math.Abs(s.Share-f.Share) > 1e-6 || math.Abs(s.Participation-f.Participation) > 1e-6 {
			for k := max(0, i-4); k < min(len(slow.Path), i+5); k++ {
				t.Logf("%d slow %+v\n   fast %+v", k, slow.Path[k], fast.Path[k])
			}
		}
		require.InDelta(t, s.Share, f.Share, 1e-6, "row %d: %+v %+v", i, s, f)
		require.InDelta(t, s.Participation, f.Participation, 1e-6, "row %d", i)
	}
	require.Equal(t, len(slow.Breakdown), len(fast.Breakdown))
	for i := range slow.Breakdown {
		s, f := slow.Breakdown[i], fast.Breakdown[i]
		require.Equal(t, s.Group+s.Part+s.Where, f.Group+f.Part+f.Where, "row %d", i)
		require.Equal(t, s.Tuples, f.Tuples)
		require.InDelta(t, s.TotalCycles, f.TotalCycles, float64(s.Tuples)*4, "row %d: %+v %+v", i, s, f)
	}
	t.Logf("queue share of the p99: %v", func() float64 {
		for _, r := range fast.Breakdown {
			if r.Group == "p99" && r.Part == "queue" {
				return r.Share
			}
		}
		return 0
	}())
}
