package multinode

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
	"cloudprofiler/tests/internal/netns"
	"cloudprofiler/tsc"
)

// node is one simulated machine: a namespace, a fake TSC, an injected probe
// delay for its TSC client, and one pipeline stage.
type node struct {
	name   string
	fake   string // CP_FAKE_TSC
	inject string // tsc-client --inject
	role   string // source, relay or sink
	stage  string // channel names are "<stage> in" / "<stage> out"
	workNs int    // relays: spin per tuple
}

// config is one run of the test: its nodes and where the CPU is loaded.
type config struct {
	name  string
	nodes []node // in pipeline order: a source, relays, a sink
	// Nodes whose CPU is kept busy for 2 s of the pipeline's 4, and nodes
	// busy while the before and after rounds run.
	burnPipeline, burnRounds []string
	// giveOrder passes the pipeline's channel order to analyze (--order):
	// where a node delays all it sends, no timestamp can tell which of two
	// close events came first, and the order found from the data is wrong.
	giveOrder bool
}

// In both, the counters disagree by seconds and drift apart by up to 1100
// ppm, and each node's probes see their own delay, jitter and spikes. An
// injected fwd delays the probes a node sends, rev its answers: a node with
// both delays everything it sends, an asymmetry no probe can see.
var configs = []config{
	{
		name: "moderate",
		nodes: []node{
			{"a", "1.0:-3000000000", "fwd=40us,rev=10us,jitter=30us,spike=0.02:400us,seed=1", "source", "source", 0},
			{"b", "0.9996:70000000000", "fwd=5us,rev=60us,jitter=20us,spike=0.05:300us,seed=2", "relay", "map", 3000},
			{"c", "1.00037:-2000000000", "jitter=10us,spike=0.01:1ms,seed=3", "relay", "reduce", 8000},
			{"d", "1.0011:25000000000", "fwd=80us,jitter=50us,spike=0.03:200us,seed=4", "sink", "sink", 0},
		},
		burnPipeline: []string{"b", "c"}, burnRounds: []string{"c"},
	},
	{
		// a sends everything 300 us late (floor about 150 us to any node),
		// heavy jitter and frequent spikes, every CPU busy.
		name: "harsh",
		nodes: []node{
			{"a", "1.0002:-3000000000", "fwd=300us,rev=300us,jitter=50us,spike=0.1:1ms,seed=5", "source", "source", 0},
			{"b", "0.9991:40000000000", "rev=100us,jitter=100us,spike=0.2:500us,seed=6", "relay", "map", 3000},
			{"c", "1.0007:-1000000000", "jitter=200us,spike=0.3:500us,seed=7", "relay", "reduce", 8000},
			{"d", "0.9999:90000000000", "fwd=50us,rev=150us,jitter=100us,spike=0.1:2ms,seed=8", "sink", "sink", 0},
		},
		burnPipeline: []string{"a", "b", "c", "d"}, burnRounds: []string{"b", "d"}, giveOrder: true,
	},
}

const (
	nTuples      = 20000
	tupleRate    = 5000 // per second: the pipeline runs 4 s
	tscPort      = 7400
	probesPerDir = 300 // probes per direction and round (the server sends them 200 us apart)
	stagePort    = 7500
	retPort      = 7300 // the source's FOX_START channel hears ReTACKs on <source IP>:retPort
)

// env is what the test needs from the build; it skips without it.
type env struct {
	tool, lib, capi string
}

func needEnv(t *testing.T) env {
	e := env{tool: os.Getenv("CP_TOOL"), lib: os.Getenv("CP_LIB")}
	if e.tool == "" || e.lib == "" {
		t.Skip("CP_TOOL and CP_LIB (paths of build/cloudprofiler and build/libcloudprofiler.so) are not set: run `make test-multinode`")
	}
	if why := netns.Available(); why != "" {
		t.Skip(why)
	}
	for _, p := range []*string{&e.tool, &e.lib} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			t.Fatalf("check failed: %v", err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("check failed: CP_TOOL/CP_LIB: %v", err)
		}
		*p = abs
	}
	capi, err := filepath.Abs("../../capi")
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	e.capi = capi
	return e
}

// needCommands fails the test unless the tool's --help lists every
// subcommand the test runs.
func needCommands(t *testing.T, tool string) {
	out, _ := exec.Command(tool, "--help").CombinedOutput()
	for _, c := range []string{"tsc-server", "tsc-client", "tsc-round", "analyze"} {
		if !strings.Contains(string(out), c) {
			t.Fatalf("check failed: %s has no %s command", tool, c)
		}
	}
}

// buildStage compiles examples/pipeline/stage.c (the demo's pipeline too)
// against the header and the library.
func buildStage(t *testing.T, e env, dir string) string {
	bin := filepath.Join(dir, "stage")
	libdir := filepath.Dir(e.lib)
	args := []string{"-O2", "-Wall", "-Werror", "-I" + e.capi, "../../examples/pipeline/stage.c", "-o", bin,
		"-L" + libdir, "-lcloudprofiler", "-Wl,-rpath," + libdir, "-lpthread"}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("check failed: gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// TestMultiNode: four nodes in network namespaces, each with its own fake
// TSC; a TSC server and clients probe them before and after a C pipeline
// passes 20k tuples through them under CPU load; `cloudprofiler analyze`
// translates every duration into one reference TSC with an error bound, and
// every bound must hold the exactly known truth. Once per configuration.
func TestMultiNode(t *testing.T) {
	e := needEnv(t)
	needCommands(t, e.tool)
	bin := buildStage(t, e, t.TempDir())
	for i, c := range configs {
		t.Run(c.name, func(t *testing.T) { runConfig(t, e, bin, fmt.Sprint(i), c) })
	}
}

func runConfig(t *testing.T, e env, bin, tag string, c config) {
	t0 := time.Now()
	nodes := c.nodes
	tmp := t.TempDir()
	fakes, names := parseFakes(t, nodes)
	l := netns.New(t, tag, names, tmp)
	roundsDir, logsDir, outDir := filepath.Join(tmp, "rounds"), filepath.Join(tmp, "logs"), filepath.Join(tmp, "out")
	nodeEnv := func(n node) []string {
		return []string{"CP_FAKE_TSC=" + n.fake, "CP_NODE=" + n.name, "CP_LOG_DIR=" + filepath.Join(logsDir, n.name)}
	}

	// The TSC server in the hub, a client per node with that node's counter.
	server := fmt.Sprintf("%s:%d", l.HubIP, tscPort)
	var tscProcs []*netns.Proc
	round := func(label string) {
		var burners []*netns.Proc
		for _, n := range c.burnRounds {
			burners = append(burners, l.Start("burn-"+label+"-"+n, l.NS[n], nil, bin, "burn", "30"))
		}
		defer func() {
			for _, p := range burners {
				p.Stop(2 * time.Second)
			}
		}()
		out, err := l.Run(60*time.Second, l.Hub, nil, e.tool, "tsc-round", "--server", server, "--label", label,
			"--wait-nodes", fmt.Sprint(len(nodes)), "--wait-timeout", "15s")
		if err != nil {
			t.Fatalf("check failed: tsc-round %s: %v", label, err)
		}
		t.Logf("round %s: %s", label, strings.TrimSpace(out))
	}
	srv := l.Start("tsc-server", l.Hub, nil, e.tool, "tsc-server", "--listen", server, "--out", roundsDir,
		"--probes", fmt.Sprint(probesPerDir))
	srv.WaitOutput(t, "listening on", 10*time.Second) // clients retry; tsc-round does not
	tscProcs = append(tscProcs, srv)
	for _, n := range nodes {
		tscProcs = append(tscProcs, l.Start("tsc-client-"+n.name, l.NS[n.name], nodeEnv(n),
			e.tool, "tsc-client", "--server", server, "--node", n.name, "--inject", n.inject))
	}
	round("before")

	// The pipeline a -> b -> c -> d, started from the sink back, and CPU
	// load on the configuration's nodes for two seconds of its four.
	// STAGE_FOX=1 adds the return-trip method beside ours: the source's
	// "out" channel is FOX_START (listening on its own address), the sink's
	// "in" channel FOX_END (sending each tuple's ReTACK there). The sink
	// opens first: its open only resolves and connects a UDP socket, and it
	// sends nothing before the first id, which the source sends after its
	// channel is bound. The source waits for the ReTACKs before it closes.
	retAddr := fmt.Sprintf("%s:%d", l.IP[nodes[0].name], retPort)
	retEnv := []string{"STAGE_FOX=1", "CP_RET_LISTEN=" + retAddr, "CP_RET_START=" + retAddr}
	var stages []*netns.Proc
	pipelineStart := time.Now()
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		port := fmt.Sprint(stagePort + i)
		var argv []string
		switch n.role {
		case "sink":
			argv = []string{bin, "sink", n.stage, port, fmt.Sprint(nTuples)}
		case "relay":
			argv = []string{bin, "relay", n.stage, port, l.IP[nodes[i+1].name], fmt.Sprint(stagePort + i + 1), fmt.Sprint(n.workNs)}
		case "source":
			argv = []string{bin, "source", n.stage, l.IP[nodes[i+1].name], fmt.Sprint(stagePort + i + 1), fmt.Sprint(nTuples), fmt.Sprint(tupleRate)}
		}
		stages = append(stages, l.Start("stage-"+n.name, l.NS[n.name], append(nodeEnv(n), retEnv...), argv...))
	}
	time.Sleep(time.Second)
	var burners []*netns.Proc
	for _, n := range c.burnPipeline {
		burners = append(burners, l.Start("burn-"+n, l.NS[n], nil, bin, "burn", "2"))
	}
	for _, p := range append(stages, burners...) {
		if err := p.Wait(60 * time.Second); err != nil {
			t.Fatalf("check failed: %v", err)
		}
	}
	pipelineTook := time.Since(pipelineStart)
	t.Logf("pipeline done at %.1fs (it ran %.1fs)", time.Since(t0).Seconds(), pipelineTook.Seconds())

	round("after")
	for _, p := range tscProcs {
		p.Stop(5 * time.Second)
	}

	// Every tuple left the source and reached every stage, and the logged
	// counters give back causal, plausible true durations.
	logged := checkLogs(t, nodes, fakes, logsDir, pipelineTook)

	rounds, err := minrtt.ReadRounds(roundsDir)
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	checkRounds(t, rounds, len(nodes))
	delays, nProbes, err := probeDelays(fakes, rounds)
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	t.Logf("%d rounds, %d answered probes; every one-way delay is positive under the fake counters", len(rounds), nProbes)
	var sb strings.Builder
	for i, a := range nodes {
		for _, b := range nodes[i+1:] {
			fmt.Fprintf(&sb, "  %s-%s: %s\n", a.name, b.name, delays.floorText(a.name, b.name))
		}
	}
	t.Logf("floor (min fwd + min rev one-way delay)/2 of every pair, from the probes' true delays:\n%s", sb.String())

	// analyze, first with the reference node it chooses, then with a relay
	// as the reference (so that the durations fall in all four scenarios),
	// then with each of the other bound methods: all must hold the truth.
	analyze := func(out string, verbose bool, extra ...string) {
		args := append([]string{e.tool, "analyze", "--rounds", roundsDir, "--out", out}, extra...)
		if len(extra) > 1 && extra[0] == "--rounds" {
			args = append([]string{e.tool, "analyze", "--out", out}, extra...)
		}
		if c.giveOrder {
			args = append(args, "--order", strings.Join(path(nodes), ","))
		}
		args = append(args, "--logs")
		for _, n := range nodes {
			args = append(args, filepath.Join(logsDir, n.name))
		}
		text, err := l.Run(90*time.Second, l.Hub, nil, args...)
		if err != nil {
			t.Fatalf("check failed: analyze: %v\n%s", err, text)
		}
		if verbose {
			t.Logf("%s:\n%s", strings.Join(args[1:len(args)-len(nodes)-1], " "), text)
		}
	}
	analyze(outDir, true)
	tr := truth{nodes, fakes, logged, delays}
	var ret []retRow
	ref, r := tr.checkAnalysis(t, outDir, true)
	ret = append(ret, r.named("default (ref "+ref+")"))
	tr.checkCapacity(t, outDir)
	tr.checkBreakdown(t, outDir)
	// The same probes as the processes timed them: the injected delays,
	// which the kernels' timestamps leave out (they come before the
	// transmit timestamps), are network delay to these, an asymmetry
	// no probe sees, as before kernel timestamps.
	userRounds := filepath.Join(tmp, "rounds-process-timed")
	for _, r := range rounds {
		if _, err := minrtt.WriteRound(userRounds, r.UserTimed()); err != nil {
			t.Fatalf("check failed: %v", err)
		}
	}
	analyze(outDir+"-process-timed", false, "--rounds", userRounds)
	t.Log("analyze on the probes as the processes timed them:")
	_, r = tr.checkAnalysis(t, outDir+"-process-timed", true)
	ret = append(ret, r.named("process-timed probes"))
	relay := "b"
	if ref == relay {
		relay = "c"
	}
	analyze(outDir+"-ref-"+relay, true, "--ref", relay)
	ref, r = tr.checkAnalysis(t, outDir+"-ref-"+relay, true)
	if ref != relay {
		t.Errorf("check failed: analyze --ref %s: model.json says the reference is %s", relay, ref)
	}
	ret = append(ret, r.named("--ref "+relay))
	tr.checkBreakdown(t, outDir+"-ref-"+relay)
	for _, m := range []string{"paper", "allprobes"} {
		dir := outDir + "-" + m
		analyze(dir, false, "--ref", relay, "--method", m)
		t.Logf("analyze --ref %s --method %s:", relay, m)
		_, r := tr.checkAnalysis(t, dir, false)
		ret = append(ret, r.named("--ref "+relay+" --method "+m))
	}
	t.Log("\n" + tr.retTable(ret))
	t.Logf("total %.1fs", time.Since(t0).Seconds())
}

// parseFakes is each node's fake counter (CP_FAKE_TSC) by name, and the
// names in order.
func parseFakes(t *testing.T, nodes []node) (map[string]tsc.Fake, []string) {
	t.Helper()
	fakes := map[string]tsc.Fake{}
	var names []string
	for _, n := range nodes {
		f, err := tsc.ParseFake(n.fake)
		if err != nil {
			t.Fatalf("check failed: %v", err)
		}
		fakes[n.name] = f
		names = append(names, n.name)
	}
	return fakes, names
}

// checkRounds wants two rounds, before and after, in which every node took
// part and every direction got most of its probes answered.
func checkRounds(t *testing.T, rounds []*minrtt.Round, n int) {
	t.Helper()
	if len(rounds) != 2 || rounds[0].Label != "before" || rounds[1].Label != "after" {
		var labels []string
		for _, r := range rounds {
			labels = append(labels, r.Label)
		}
		t.Fatalf("check failed: want rounds before and after, got %v", labels)
	}
	for _, r := range rounds {
		if len(r.Nodes) != n || len(r.Missing) != 0 || len(r.Dirs) != n*(n-1) {
			t.Fatalf("check failed: round %q: %d nodes, %d directions, missing %v: want %d nodes, %d directions", r.Label, len(r.Nodes), len(r.Dirs), r.Missing, n, n*(n-1))
		}
		for _, d := range r.Dirs {
			if len(d.Probes) < d.Sent/2 || len(d.Probes) == 0 {
				t.Errorf("check failed: round %q %s->%s: %d of %d probes answered (%s)", r.Label, d.Origin, d.Responder, len(d.Probes), d.Sent, d.Error)
			}
		}
	}
}

// path is the channels every tuple passes, in order.
func path(nodes []node) []string {
	var p []string
	for _, n := range nodes {
		if n.role != "source" {
			p = append(p, n.stage+" in")
		}
		if n.role != "sink" {
			p = append(p, n.stage+" out")
		}
	}
	return p
}

// logs is what the nodes logged: each channel's node and its TSC by tuple id,
// and the source's return log (FOX_START: each tuple's ReTACK arrival).
type logs struct {
	node   map[string]string   // channel -> node
	tscs   map[string][]uint64 // channel -> TSC by tuple id
	waited map[string][]bool   // channel -> by tuple id, the record says its thread waited since its instance's previous mark (rseq: the kernel's word)
	ret    []uint64            // return log: ReTACK arrival TSC (source node's counter) by tuple id
}

// foxRoles is the FOX role each file of the pipeline must have: the
// source's "out" channel is FOX_START (and its return log), the sink's "in"
// FOX_END, every other channel none.
func foxRoles(nodes []node) map[string]string {
	return map[string]string{nodes[0].stage + " out": "start", nodes[len(nodes)-1].stage + " in": "end"}
}

// checkLogs reads every node's log files, checks that each channel of the
// path holds every tuple once, and that each hop's true duration (from the
// logged fake counters, inverted) is positive and no longer than the
// pipeline ran. The
// source's return log must hold every tuple's ReTACK, none dropped, each
// arriving after the sink logged the tuple.
func checkLogs(t *testing.T, nodes []node, fakes map[string]tsc.Fake, logsDir string, pipelineTook time.Duration) logs {
	t.Helper()
	chanNode := map[string]string{}
	tscs := map[string][]uint64{}
	waited := map[string][]bool{}
	var ret []uint64
	roles := foxRoles(nodes)
	for _, n := range nodes {
		files, _ := filepath.Glob(filepath.Join(logsDir, n.name, "*.cplog"))
		if len(files) == 0 {
			t.Fatalf("check failed: node %s wrote no log files", n.name)
		}
		for _, path := range files {
			lf, err := logfile.Open(path)
			if err != nil {
				t.Fatalf("check failed: %v", err)
			}
			name := lf.Header.Name
			if lf.Header.Node != n.name {
				t.Fatalf("check failed: %s: header node %q, want %q (CP_NODE)", path, lf.Header.Node, n.name)
			}
			role := ""
			if lf.Header.Fox != nil {
				role = lf.Header.Fox.Role
			}
			isRet := role == "return"
			if want := roles[name]; role != want && !(isRet && want == "start") {
				t.Fatalf("check failed: %s: channel %q has FOX role %q, want %q (STAGE_FOX=1)", path, name, role, want)
			}
			if isRet != strings.HasSuffix(path, ".ret.cplog") {
				t.Fatalf("check failed: %s: FOX role %q: only return logs are named *.ret.cplog", path, role)
			}
			if role != "" {
				// Every ReTACK was sent and heard: the trailers count them.
				tr := lf.Summary.Trailer
				if tr == nil || tr.Fox == nil {
					t.Fatalf("check failed: %s: FOX role %q without ReTACK counts in a trailer", path, role)
				}
				f := *tr.Fox
				if role == "end" && (f.Sent != nTuples || f.SendFailed != 0) ||
					role != "end" && (f.Received != nTuples || f.Malformed != 0 || f.KernelDrop != 0) {
					t.Fatalf("check failed: %s: FOX role %q: ReTACK counts %+v, want every one of %d sent and received", path, role, f, nTuples)
				}
			}
			if _, dup := tscs[name]; dup && !isRet || isRet && ret != nil {
				t.Fatalf("check failed: channel %q logged twice", name)
			}
			got := make([]uint64, nTuples)
			w := make([]bool, nTuples)
			seen := 0
			err = lf.Records(func(r logfile.Record) error {
				if r.TupleID < 0 || r.TupleID >= nTuples || got[r.TupleID] != 0 {
					return fmt.Errorf("tuple id %d out of range or seen twice", r.TupleID)
				}
				got[r.TupleID], w[r.TupleID] = r.TSC, r.Waited
				seen++
				return nil
			})
			lf.Close()
			if err != nil {
				t.Fatalf("check failed: %s: %v", path, err)
			}
			if seen != nTuples {
				t.Fatalf("check failed: %s: %d records, want %d", path, seen, nTuples)
			}
			if isRet {
				ret = got
				continue
			}
			tscs[name], waited[name], chanNode[name] = got, w, n.name
		}
	}
	hz := tsc.HardwareFreq().Hz
	p := path(nodes)
	for i := 1; i < len(p); i++ {
		from, to := p[i-1], p[i]
		if tscs[from] == nil || tscs[to] == nil {
			t.Fatalf("check failed: no channel %q or %q in the logs", from, to)
		}
		ff, tf := fakes[chanNode[from]], fakes[chanNode[to]]
		var us []float64
		for id := 0; id < nTuples; id++ {
			for _, x := range []struct {
				f tsc.Fake
				v uint64
			}{{ff, tscs[from][id]}, {tf, tscs[to][id]}} {
				// With a rate above 1 some counter values are never read;
				// a logged one would mean another mapping than tsc.Fake's.
				if lo, hi := rawOf(x.f, x.v); hi < lo {
					t.Fatalf("check failed: tuple %d: %d is not a value counter %s ever reads", id, x.v, x.f)
				}
			}
			d := rawMid(tf, tscs[to][id]) - rawMid(ff, tscs[from][id])
			// No hop outlasts the pipeline's run (a hop of over 2 s was
			// seen on a machine busy beyond the test's own load).
			if d < -1 || d > pipelineTook.Seconds()*hz {
				t.Fatalf("check failed: tuple %d %q -> %q: true duration %.0f cycles: the logged counters are not the nodes' CP_FAKE_TSC", id, from, to, d)
			}
			us = append(us, d/hz*1e6)
		}
		med, max, _ := stats(us)
		t.Logf("true %q (%s) -> %q (%s): min %.1f us, median %.1f us, max %.1f us", from, chanNode[from], to, chanNode[to], slices.Min(us), med, max)
	}
	// The ReTACKs: the arrival is the kernel's receive time moved onto the
	// source's counter (not a value read from it, so any value may occur);
	// it comes after the sink logged the tuple, within a second.
	if ret == nil {
		t.Fatalf("check failed: no return log (*.ret.cplog) of %q", p[0])
	}
	first, last := p[0], p[len(p)-1]
	src, snk := fakes[chanNode[first]], fakes[chanNode[last]]
	var back []float64
	for id := 0; id < nTuples; id++ {
		d := rawMid(src, ret[id]) - rawMid(snk, tscs[last][id])
		if d <= 0 || d > hz {
			t.Fatalf("check failed: tuple %d: ReTACK arrived %.0f cycles after %q logged it: the return log is not on the source's counter", id, d, last)
		}
		back = append(back, d/hz*1e6)
	}
	med, max, _ := stats(back)
	t.Logf("true ReTACK time, %q (%s) -> return log (%s): min %.1f us, median %.1f us, max %.1f us",
		last, chanNode[last], chanNode[first], slices.Min(back), med, max)
	return logs{node: chanNode, tscs: tscs, waited: waited, ret: ret}
}

// truth is what the test knows exactly: the nodes' counters, what they
// logged, and the probes' true one-way delays.
type truth struct {
	nodes  []node
	fakes  map[string]tsc.Fake
	logged logs
	delays oneWay
}

// checkAnalysis reads the analyzer's output and checks every duration
// against the truth, then reports the bounds next to the floor.
// It returns the reference node and what it found of the return-trip method.
func (tr truth) checkAnalysis(t *testing.T, outDir string, verbose bool) (string, retRow) {
	fakes, logged, delays := tr.fakes, tr.logged, tr.delays
	t.Helper()
	var model struct {
		Ref   string  `json:"ref"`
		RefHz float64 `json:"ref_hz"`
	}
	b, err := os.ReadFile(filepath.Join(outDir, "model.json"))
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	if err := json.Unmarshal(b, &model); err != nil || model.Ref == "" || !(model.RefHz > 0) {
		t.Fatalf("check failed: model.json: %v %s", err, b)
	}
	if _, ok := fakes[model.Ref]; !ok {
		t.Fatalf("check failed: model.json: reference node %q is not one of ours", model.Ref)
	}
	for _, f := range []string{"summary.csv", "report.html"} {
		if st, err := os.Stat(filepath.Join(outDir, f)); err != nil || st.Size() == 0 {
			t.Errorf("check failed: %s missing or empty: %v", f, err)
		}
	}
	rows, err := readDurations(filepath.Join(outDir, "durations.parquet"))
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}

	// Every tuple has all its hops (5 consecutive pairs), its end to end and
	// its return trip (source out to its ReTACK's arrival, both on the
	// source's node and channel).
	p := path(tr.nodes)
	want := map[string]string{} // "from -> to" channels: kind
	for i := 1; i < len(p); i++ {
		kind := "transfer"
		if logged.node[p[i-1]] == logged.node[p[i]] {
			kind = "compute" // one stage: one process
		}
		want[p[i-1]+" -> "+p[i]] = kind
	}
	want[p[0]+" -> "+p[len(p)-1]] = "end_to_end"
	want[p[0]+" -> "+p[0]] = "return_trip"
	count := map[string]int{}
	perTuple := make([]int, nTuples)
	offPath := map[int64]bool{} // tuples with a duration off the pipeline's path
	var offExample string
	bad := 0
	for _, d := range rows {
		if d.tuple < 0 || d.tuple >= nTuples {
			t.Fatalf("check failed: line %d: tuple id %d was never logged", d.line, d.tuple)
		}
		k := d.fromCh + " -> " + d.toCh
		count[k]++
		if _, ok := want[k]; !ok {
			offPath[d.tuple] = true
			if offExample == "" {
				offExample = fmt.Sprintf("line %d tuple %d %s (%s)", d.line, d.tuple, k, d.kind)
			}
		}
	}
	for _, d := range rows {
		k := d.fromCh + " -> " + d.toCh
		switch {
		case !offPath[d.tuple] && d.kind != want[k]:
			// The kinds of a tuple whose events are in the pipeline's order.
			if bad++; bad <= 10 {
				t.Errorf("check failed: line %d: %s is a %s duration, want %s", d.line, k, d.kind, want[k])
			}
		case logged.node[d.fromCh] != d.fromNode || logged.node[d.toCh] != d.toNode:
			if bad++; bad <= 10 {
				t.Errorf("check failed: line %d: %s on nodes %s -> %s, logged on %s -> %s", d.line, k, d.fromNode, d.toNode, logged.node[d.fromCh], logged.node[d.toCh])
			}
		case d.start != logged.tscs[d.fromCh][d.tuple] || d.end != logged.tscs[d.toCh][d.tuple] && d.kind != "return_trip" ||
			d.kind == "return_trip" && d.end != logged.ret[d.tuple]:
			// The truth is computed from start_tsc and end_tsc: they must be
			// the values the stages logged (a return trip's end is its
			// ReTACK's arrival in the return log).
			if bad++; bad <= 10 {
				t.Errorf("check failed: line %d: tuple %d %s: start_tsc %d end_tsc %d are not the logged values", d.line, d.tuple, k, d.start, d.end)
			}
		}
		perTuple[d.tuple]++
	}
	if bad > 0 {
		t.Errorf("check failed: %d rows with a kind, nodes or start_tsc/end_tsc other than logged", bad)
	}
	// Each tuple crossed 6 channels: 5 consecutive durations, its end to end
	// and its return trip.
	if len(rows) != len(want)*nTuples {
		t.Errorf("check failed: %d rows, want %d", len(rows), len(want)*nTuples)
	}
	for id, n := range perTuple {
		if n != len(want) {
			t.Errorf("check failed: tuple %d has %d durations, want %d", id, n, len(want))
			break
		}
	}
	// Every tuple's hops must follow the pipeline's order.
	var short []string
	for k := range want {
		if count[k] != nTuples {
			short = append(short, fmt.Sprintf("%s: %d", k, count[k]))
		}
	}
	sort.Strings(short)
	if len(offPath) > 0 || len(short) > 0 {
		msg := fmt.Sprintf("%d of %d tuples have their events in another order than the pipeline's (e.g. %s); rows per hop short of %d: %s",
			len(offPath), nTuples, offExample, nTuples, strings.Join(short, ", "))
		t.Error("check failed: " + msg)
	}

	// The scenario follows from the nodes (paper 3.3, numbered from 0).
	badScenario := 0
	for _, d := range rows {
		want := 3
		switch {
		case d.fromNode == d.toNode && d.fromNode == model.Ref:
			want = 0
		case d.fromNode == d.toNode:
			want = 1
		case d.fromNode == model.Ref || d.toNode == model.Ref:
			want = 2
		}
		if d.scenario != want {
			if badScenario++; badScenario <= 5 {
				t.Errorf("check failed: line %d: %s -> %s with reference %s: scenario %d, want %d", d.line, d.fromNode, d.toNode, model.Ref, d.scenario, want)
			}
		}
	}

	v, err := check(fakes, model.Ref, rows)
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	us := func(c float64) float64 { return c / model.RefHz * 1e6 }
	t.Logf("reference node %s at %.0f Hz; %d durations checked against the truth (slack %.0f cycles): %d violations; "+
		"the paper's bound missed %d, the baseline's %d",
		model.Ref, model.RefHz, v.rows, slackCycles, v.nViolation, v.paperMiss, v.baselineMiss)
	for _, s := range v.violations {
		t.Errorf("check failed: violation: %s", s)
	}
	if v.nViolation > len(v.violations) {
		t.Errorf("check failed: ... and %d more violations", v.nViolation-len(v.violations))
	}
	// The reference frequency is the reference node's counter's: the
	// hardware's times its fake rate.
	if hz := tsc.HardwareFreq().Hz * fakes[model.Ref].Rate(); math.Abs(model.RefHz-hz) > hz*1e-6 {
		t.Errorf("check failed: model.json: ref_hz %.0f, the reference node's counter runs at %.0f Hz", model.RefHz, hz)
	}
	if verbose {
		// The check has teeth on this data: were one relay's counter later
		// than its CP_FAKE_TSC says, by 20 us more than twice the largest
		// bound, every duration that starts or ends there (and not both)
		// must be caught.
		touching, maxErr := 0, 0.0
		for _, d := range rows {
			if (d.fromNode == "c") != (d.toNode == "c") {
				touching++
				maxErr = math.Max(maxErr, d.err)
			}
		}
		shiftUs := 2*maxErr/model.RefHz*1e6 + 20
		moved := maps.Clone(fakes)
		f := moved["c"]
		f.Offset += int64(shiftUs * 1e-6 * tsc.HardwareFreq().Hz * f.Rate())
		moved["c"] = f
		mv, err := check(moved, model.Ref, rows)
		if err != nil {
			t.Fatalf("check failed: %v", err)
		}
		t.Logf("negative control: with node c's counter taken %.0f us later than it is, %d of the %d rows that cross c's border are violations", shiftUs, mv.nViolation, touching)
		if mv.nViolation != touching {
			t.Errorf("check failed: negative control: %d violations, want %d", mv.nViolation, touching)
		}
	}

	// The bound per scenario and per pair of nodes, next to the floor.
	type group struct{ err, paper, base []float64 }
	byScenario := map[int]*group{}
	type pairKey struct {
		scenario   int
		kind       string
		from, to   string
		fromN, toN string
	}
	byPair := map[pairKey]*group{}
	add := func(g *group, d duration) {
		g.err = append(g.err, us(d.err))
		g.paper = append(g.paper, us(d.paperErr))
		g.base = append(g.base, us(d.baselineErr))
	}
	for _, d := range rows {
		if byScenario[d.scenario] == nil {
			byScenario[d.scenario] = &group{}
		}
		add(byScenario[d.scenario], d)
		k := pairKey{d.scenario, d.kind, d.fromCh, d.toCh, d.fromNode, d.toNode}
		if byPair[k] == nil {
			byPair[k] = &group{}
		}
		add(byPair[k], d)
	}
	fmtStats := func(xs []float64) string {
		med, max, n := stats(xs)
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f/%.3f", med, max)
	}
	var sc []int
	for s := range byScenario {
		sc = append(sc, s)
	}
	sort.Ints(sc)
	var sb strings.Builder
	fmt.Fprintf(&sb, "bound per scenario, median/max us:\n")
	for _, s := range sc {
		g := byScenario[s]
		um, ux, _ := stats(v.used[s])
		fmt.Fprintf(&sb, "  scenario %d: %6d rows  bound %s  paper %s  baseline %s  |truth-reported|/(bound+slack) median %.2f max %.2f\n",
			s, len(g.err), fmtStats(g.err), fmtStats(g.paper), fmtStats(g.base), um, ux)
	}
	var keys []pairKey
	for k := range byPair {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].scenario != keys[j].scenario {
			return keys[i].scenario < keys[j].scenario
		}
		return keys[i].from < keys[j].from
	})
	rr := tr.checkReturnTrips(t, outDir, model.Ref, model.RefHz, rows)
	if !verbose {
		t.Log("\n" + sb.String())
		return model.Ref, rr
	}
	fmt.Fprintf(&sb, "bound per duration, median/max us, next to the floor (min fwd + min rev one-way delay)/2 of its nodes:\n")
	off := &group{} // durations between events taken out of the pipeline's order
	offKinds := 0
	for _, k := range keys {
		g := byPair[k]
		if _, ok := want[k.from+" -> "+k.to]; ok {
			fmt.Fprintf(&sb, "  s%d %-11s %q (%s) -> %q (%s): bound %s  paper %s  baseline %s  floor %s\n",
				k.scenario, k.kind, k.from, k.fromN, k.to, k.toN, fmtStats(g.err), fmtStats(g.paper), fmtStats(g.base), delays.floorText(k.fromN, k.toN))
		} else {
			off.err, off.paper, off.base = append(off.err, g.err...), append(off.paper, g.paper...), append(off.base, g.base...)
			offKinds++
		}
		// A bound under the floor cannot be strict from the probes alone
		// (some world consistent with them breaks it): worth a look even
		// when this run's truth happened to fall inside.
		if pf := delays.pathFloor(k.fromN, k.toN) / tsc.HardwareFreq().Hz * 1e6; pf > 0 {
			if lo := slices.Min(g.err); lo < pf*0.99 {
				fmt.Fprintf(&sb, "    NOTE: %q -> %q: smallest bound %.3f us is under the floor %.3f us\n", k.from, k.to, lo, pf)
			}
		}
	}
	if offKinds > 0 {
		fmt.Fprintf(&sb, "  %d rows of %d other channel pairs (events out of the pipeline's order): bound %s  paper %s  baseline %s\n",
			len(off.err), offKinds, fmtStats(off.err), fmtStats(off.paper), fmtStats(off.base))
	}
	t.Log("\n" + sb.String())
	return model.Ref, rr
}

// retRow is what one analysis says of the return-trip (ReT) method next to
// ours, on the tuples' way from the source's first channel to the sink's
// last, in microseconds.
type retRow struct {
	name             string
	oursMed, oursMax float64 // our bound on the end_to_end durations
	floor, pathFloor float64 // (min fwd + min rev one-way delay)/2 of source and sink, direct and through other nodes
	trueMed, trueMax float64 // true ReT error: ReT duration - true latency (the ReTACK's time back)
	repMed, repMax   float64 // ret_minus_ours_median_s and _max_s of summary.csv
	slack            float64 // largest return_trip + end_to_end bound of a tuple (plus quantization)
	retBoundMax      float64 // largest bound of a return_trip row (one node: the rate's uncertainty only)
	sumFrom, sumTo   string
}

func (r retRow) named(name string) retRow { r.name = name; return r }

// checkReturnTrips compares the ReT method's error that analyze reports
// (summary.csv's return_trip row: ReT duration minus our end-to-end
// estimate, median and max) with the true one (ReT duration minus the true
// end to end: the time from the sink's log to the ReTACK's arrival). Each
// tuple's reported error is off the truth by at most the bounds of its two
// rows, so its median and max are too (order statistics move no more than
// the values they are taken of).
func (tr truth) checkReturnTrips(t *testing.T, outDir, ref string, refHz float64, rows []duration) retRow {
	t.Helper()
	p := path(tr.nodes)
	first, last := p[0], p[len(p)-1]
	src, snk := tr.logged.node[first], tr.logged.node[last]
	hz := tsc.HardwareFreq().Hz
	us := func(c float64) float64 { return c / refHz * 1e6 }
	type pair struct {
		e2e, ret *duration
	}
	byTuple := make([]pair, nTuples)
	var ours []float64
	for i := range rows {
		d := &rows[i]
		switch {
		case d.kind == "end_to_end" && d.fromCh == first && d.toCh == last:
			byTuple[d.tuple].e2e = d
			ours = append(ours, us(d.err))
		case d.kind == "return_trip":
			byTuple[d.tuple].ret = d
		}
	}
	r := retRow{floor: math.NaN(), pathFloor: tr.delays.pathFloor(src, snk) / hz * 1e6}
	if f, ok := tr.delays.floor(src, snk); ok {
		r.floor = f / hz * 1e6
	}
	r.oursMed, r.oursMax, _ = stats(ours)
	var truth []float64
	for id, b := range byTuple {
		if b.e2e == nil || b.ret == nil {
			t.Errorf("check failed: tuple %d: no end_to_end %q -> %q or no return_trip row", id, first, last)
			return r
		}
		truth = append(truth, (rawMid(tr.fakes[src], tr.logged.ret[id])-rawMid(tr.fakes[snk], tr.logged.tscs[last][id]))/hz*1e6)
		r.slack = math.Max(r.slack, us(b.e2e.err+b.ret.err+2*slackCycles))
		r.retBoundMax = math.Max(r.retBoundMax, us(b.ret.err))
	}
	r.trueMed, r.trueMax = nearestRank(truth, 0.5), slices.Max(truth)

	f, err := os.Open(filepath.Join(outDir, "summary.csv"))
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("check failed: summary.csv: %v (%d lines)", err, len(recs))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, c := range []string{"kind", "from", "to", "count", "ret_minus_ours_median_s", "ret_minus_ours_max_s"} {
		if _, ok := col[c]; !ok {
			t.Fatalf("check failed: summary.csv: no column %q", c)
		}
	}
	found := 0
	for _, rec := range recs[1:] {
		if rec[col["kind"]] != "return_trip" {
			continue
		}
		found++
		r.sumFrom, r.sumTo = rec[col["from"]], rec[col["to"]]
		if r.sumFrom != src+"/"+first || r.sumTo != snk+"/"+last || rec[col["count"]] != fmt.Sprint(nTuples) {
			t.Errorf("check failed: summary.csv: return_trip %s -> %s, %s tuples: want %s/%s -> %s/%s, %d", r.sumFrom, r.sumTo,
				rec[col["count"]], src, first, snk, last, nTuples)
		}
		med, err1 := strconv.ParseFloat(rec[col["ret_minus_ours_median_s"]], 64)
		max, err2 := strconv.ParseFloat(rec[col["ret_minus_ours_max_s"]], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("check failed: summary.csv: return_trip: %v %v", err1, err2)
		}
		r.repMed, r.repMax = med*1e6, max*1e6
	}
	if found != 1 {
		t.Fatalf("check failed: summary.csv: %d return_trip rows, want 1", found)
	}
	if math.Abs(r.repMed-r.trueMed) > r.slack || math.Abs(r.repMax-r.trueMax) > r.slack {
		t.Errorf("check failed: summary.csv: the ReT method overestimates by %.3f us (median), %.3f us (max); the truth is %.3f, %.3f, and bounds allow ±%.3f",
			r.repMed, r.repMax, r.trueMed, r.trueMax, r.slack)
	}
	return r
}

// retTable lays the return-trip method's error beside our bound and the floor.
func (tr truth) retTable(rows []retRow) string {
	p := path(tr.nodes)
	src, snk := tr.logged.node[p[0]], tr.logged.node[p[len(p)-1]]
	var sb strings.Builder
	fmt.Fprintf(&sb, "return-trip method (ReT) beside ours, end to end %q (%s) -> %q (%s), %d tuples, us:\n", p[0], src, p[len(p)-1], snk, nTuples)
	fmt.Fprintf(&sb, "  floor %s-%s: %s\n", src, snk, tr.delays.floorText(src, snk))
	if len(rows) > 0 {
		fmt.Fprintf(&sb, "  true ReT error (ReT duration - true latency = the ReTACK's time %s -> %s): median %.1f, max %.1f\n",
			snk, src, rows[0].trueMed, rows[0].trueMax)
	}
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  analysis\tours ±median\t±max\tfloor\tpath floor\tReT error true median\tmax\treported median\tmax\tallowed |reported-true|\tReT row ±max\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", r.name, r.oursMed, r.oursMax, r.floor, r.pathFloor,
			r.trueMed, r.trueMax, r.repMed, r.repMax, r.slack, r.retBoundMax)
	}
	tw.Flush()
	return sb.String()
}
