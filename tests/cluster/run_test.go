package cluster

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/results"
	"cloudprofiler/tests/internal/groundtruth"
	"cloudprofiler/tests/internal/netns"
	"cloudprofiler/tests/internal/testrun"
	"cloudprofiler/tsc"
)

// clocks are what gives the nodes one reference clock: a TSC server in the
// hub, a TSC client on every node (with the node's CP_NODE and
// CP_FAKE_TSC), and rounds of probes into dir/rounds.
type clocks struct {
	t      *testing.T
	l      *netns.Lab
	tool   string
	server string
	nodes  int
	Rounds string
	procs  []*netns.Proc
}

func startClocks(t *testing.T, l *netns.Lab, tool, dir string, nodes []string, env func(node string) []string) *clocks {
	t.Helper()
	c := &clocks{t: t, l: l, tool: tool, server: l.HubIP + ":7400", nodes: len(nodes), Rounds: filepath.Join(dir, "rounds")}
	srv := l.Start("tsc-server", l.Hub, nil, tool, "tsc-server", "--listen", c.server, "--out", c.Rounds, "--probes", "300")
	srv.WaitOutput(t, "listening on", 10*time.Second)
	for _, n := range nodes {
		c.procs = append(c.procs, l.Start("tsc-client-"+n, l.NS[n], env(n), tool, "tsc-client", "--server", c.server, "--node", n))
	}
	c.procs = append(c.procs, srv)
	return c
}

// round runs a round of probes between every pair of nodes.
func (c *clocks) round(label string) {
	c.t.Helper()
	out, err := c.l.Run(60*time.Second, c.l.Hub, nil, c.tool, "tsc-round", "--server", c.server, "--label", label,
		"--wait-nodes", fmt.Sprint(c.nodes), "--wait-timeout", "20s")
	if err != nil {
		c.t.Fatalf("tsc-round %s: %v", label, err)
	}
	c.t.Logf("round %s: %s", label, strings.TrimSpace(out))
}

func (c *clocks) stop() {
	for _, p := range c.procs {
		p.Stop(5 * time.Second)
	}
}

// checkFinished analyzes a run that ended (every tuple through) with the
// rounds, and holds it to what is known: every file complete, every tuple,
// both workers' nodes logging, every tuple id once at each of the marks
// (ids first.., n of them), every duration within its strict bound of the
// ground truth (fakes, reference node ref).
func checkFinished(t *testing.T, tool, rounds, logs, out, ref string, workerNodes []string, first int64, n, marks int, fakes map[string]string) {
	t.Helper()
	a := testrun.Run(2*time.Minute, nil, tool, "analyze", "--rounds", rounds, "--logs", logs, "--out", out, "--ref", ref, "--strict", "--quiet")
	if a.Err != nil {
		t.Fatalf("analyze %s: %v\n%s%s", logs, a.Err, a.Stdout, a.Stderr)
	}
	t.Logf("%s: %s", filepath.Base(logs), a.Stdout[:strings.Index(a.Stdout, "logs:")])
	if !strings.Contains(a.Stdout, "files complete and undamaged") || !strings.Contains(a.Stdout, fmt.Sprintf("%d tuples", n)) {
		t.Fatalf("analyze %s: want every file complete and %d tuples:\n%s", logs, n, a.Stdout)
	}
	for _, node := range workerNodes {
		if files, _ := filepath.Glob(filepath.Join(logs, node, "*.cplog*")); len(files) == 0 {
			t.Errorf("%s wrote no channel files: the job's parallelism should use every worker node", node)
		}
	}
	checkStagesOnce(t, logs, first, n, marks)
	checkTruth(t, out, fakes, ref)
}

// checkStagesOnce reads every channel file of a finished run and checks
// that each of the marks (operator and role, over its instances) holds
// every tuple id first..first+n-1 exactly once: nothing lost, nothing twice.
func checkStagesOnce(t *testing.T, dir string, first int64, n, marks int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.cplog*"))
	seen := map[string][]uint8{} // "operator role" -> times each id was seen
	for _, path := range files {
		f, err := logfile.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := capacity.ParseName(f.Header.Name)
		if !ok || f.Header.Counter() {
			f.Close()
			continue
		}
		k := m.Operator + " " + m.Role.String()
		if seen[k] == nil {
			seen[k] = make([]uint8, n)
		}
		err = f.Records(func(r logfile.Record) error {
			if r.TupleID < first || r.TupleID-first >= int64(n) {
				return fmt.Errorf("tuple id %d, want %d..%d", r.TupleID, first, first+int64(n)-1)
			}
			seen[k][r.TupleID-first]++
			return nil
		})
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if len(seen) != marks {
		t.Errorf("%d marks (operator, role) in the files, want %d: %v", len(seen), marks, slices.Sorted(maps.Keys(seen)))
	}
	for k, ids := range seen {
		lost, twice := 0, 0
		for _, c := range ids {
			switch {
			case c == 0:
				lost++
			case c > 1:
				twice++
			}
		}
		if lost > 0 || twice > 0 {
			t.Errorf("%s: %d of %d tuple ids missing, %d seen more than once", k, lost, n, twice)
		}
	}
}

// checkTruth holds every duration of durations.parquet to the ground
// truth (package groundtruth): each node's counter is a known function of
// the one hardware TSC, so the true length of every duration is known;
// the reported one must be within its strict bound of it.
func checkTruth(t *testing.T, out string, fakes map[string]string, ref string) {
	t.Helper()
	fk := map[string]tsc.Fake{}
	for n, s := range fakes {
		f, err := tsc.ParseFake(s)
		must(t, err)
		fk[n] = f
	}
	rows, err := results.ReadAll[analyze.DurationRow](filepath.Join(out, "durations.parquet"))
	must(t, err)
	kinds := map[string]int{}
	worst := 0.0 // largest |truth - reported| / bound, cross-node
	bad := 0
	for i, r := range rows {
		truth, err := groundtruth.Cycles(fk, ref, r.FromNode, r.ToNode, r.StartTSC, r.EndTSC)
		must(t, err)
		miss := math.Abs(truth - r.Cycles)
		if !(miss <= r.ErrorCycles+groundtruth.SlackCycles) {
			if bad++; bad <= 10 {
				t.Errorf("row %d: tuple %d %s/%q -> %s/%q: truth %.1f cycles, reported %.1f ± %.1f",
					i+2, r.TupleID, r.FromNode, r.FromChannel, r.ToNode, r.ToChannel, truth, r.Cycles, r.ErrorCycles)
			}
		}
		kinds[r.Kind]++
		if r.FromNode != r.ToNode {
			kinds["cross-node"]++
			worst = max(worst, miss/(r.ErrorCycles+groundtruth.SlackCycles))
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d durations off the truth by more than their bound", bad, len(rows))
	}
	if kinds["cross-node"] == 0 {
		t.Errorf("no duration crosses nodes: %v", kinds)
	}
	t.Logf("ground truth: %d durations (%v) each within its bound; cross-node, the truth needed at most %.2f of its bound", len(rows), kinds, worst)
}

// collect moves every node's files out of logs into <logs>/../name/<node>/:
// one run's logs, as they are collected from the machines after it (a
// worker's CP_LOG_DIR belongs to its node: the next run writes there too).
func collect(t *testing.T, logs, name string) string {
	t.Helper()
	to := filepath.Join(filepath.Dir(logs), name)
	nodes, err := os.ReadDir(logs)
	must(t, err)
	for _, n := range nodes {
		files, err := os.ReadDir(filepath.Join(logs, n.Name()))
		must(t, err)
		must(t, os.MkdirAll(filepath.Join(to, n.Name()), 0o755))
		for _, f := range files {
			must(t, os.Rename(filepath.Join(logs, n.Name(), f.Name()), filepath.Join(to, n.Name(), f.Name())))
		}
	}
	return to
}

// checkBottleneck reads capacity.parquet of an analysis: each of the
// operators named has its whole-run row (marks in and out), with a
// capacity, and exactly one of them is named the bottleneck: the one whose
// capacity saturates at the smallest source rate.
func checkBottleneck(t *testing.T, out string, operators ...string) {
	t.Helper()
	rows, err := results.ReadAll[capacity.Row](filepath.Join(out, "capacity.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	byOp := map[string]capacity.Row{}
	for _, r := range rows {
		if r.Level == "operator" && r.Window == -1 && r.Method == capacity.MethodInOut {
			byOp[r.Operator] = r
		}
	}
	var named []string
	lowest := ""
	for _, op := range operators {
		r, ok := byOp[op]
		if !ok || !(r.Capacity > 0) || !(r.MaxSourceRate > 0) {
			t.Errorf("capacity: operator %s: no whole-run row with a capacity (%+v)", op, r)
			continue
		}
		t.Logf("capacity: %s: %d instances, capacity %.0f/s, saturates at a source rate of %.0f/s, load %.2f, bottleneck %v",
			op, r.Instances, r.Capacity, r.MaxSourceRate, r.Load, r.Bottleneck)
		if r.Bottleneck {
			named = append(named, op)
		}
		if lowest == "" || r.MaxSourceRate < byOp[lowest].MaxSourceRate {
			lowest = op
		}
	}
	if len(byOp) != len(operators) {
		t.Errorf("capacity: operators %v, want %v", slices.Sorted(maps.Keys(byOp)), operators)
	}
	if len(named) != 1 || named[0] != lowest {
		t.Errorf("capacity: bottleneck %v, want exactly %s (the smallest source rate at saturation)", named, lowest)
	}
}
