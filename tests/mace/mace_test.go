// Package mace tests the Mace analysis against runs of a pipeline of
// processes over UDP (examples/pipeline/udpstage.c) on a shared machine:
// gen -> A -> B -> sink, an on-off source whose high phases outrun B, the
// receive buffers large enough that nothing is dropped, another process
// spinning beside it, no real-time priority, no pinning. The truth is
// each window's largest latency worked out of the run's own records
// (package udppipe), never a designed cost. `make test-mace` runs it.
//
// The sink logs nothing (udpstage --mark 0): a tuple's latency runs from
// gen's out to B's out, through the operators Mace has a cost for. A
// marked sink is a hop the theorem leaves out, and on a busy machine a
// preempted receiver adds milliseconds to it: while B drains a backlog,
// where the theorem's interval is tight on both sides (a window's first
// tuple waits Mace + the window, its last Mace), that put 10% of the
// windows of a run outside it.
package mace

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloudprofiler/tests/internal/testrun"
	"cloudprofiler/tests/internal/udppipe"
)

type tools struct{ cli, udpstage string }

func needTools(t *testing.T) tools {
	t.Helper()
	tl := tools{os.Getenv("CP_TOOL"), os.Getenv("CP_UDPSTAGE")}
	if tl.cli == "" || tl.udpstage == "" {
		t.Skip("CP_TOOL and CP_UDPSTAGE (build/cloudprofiler, build/udpstage) are not set: run `make test-mace`")
	}
	return tl
}

// onOff is the pipeline: the source at high tuples/s for on seconds, then
// at low for off seconds, cycles times; A does 5 us of CPU work a tuple,
// B 50 us (kind "work": CPU work; "sleep": a sleep, a cost that does not
// move with what else the machine runs).
func onOff(high, low, on, off float64, cycles int, kind string, seed int) udppipe.Pipeline {
	buf := []string{"--rcvbuf", "16000000"}
	return udppipe.Pipeline{Hog: true, Stages: []udppipe.Stage{
		{Kind: "source", Name: "gen", To: []string{"A"}, Args: []string{"--rate", fmt.Sprint(high), "--on-off", fmt.Sprintf("%g,%g,%g", on, off, low),
			"--duration", fmt.Sprint((on + off) * float64(cycles)), "--poisson", strconv.Itoa(seed)}},
		{Kind: "op", Name: "A", To: []string{"B"}, Args: append([]string{"--work-us", "5"}, buf...)},
		{Kind: "op", Name: "B", To: []string{"sink"}, Args: append([]string{"--" + kind + "-us", "50"}, buf...)},
		{Kind: "sink", Name: "sink", Args: append([]string{"--mark", "0"}, buf...)},
	}}
}

// window of the Mace runs.
const window = 0.01

// run runs p and analyzes it; it returns the rows of mace.csv, the
// summary and the records.
func (tl tools) run(t *testing.T, p udppipe.Pipeline, dir string, extra ...string) ([]map[string]string, string, *udppipe.Records) {
	t.Helper()
	rows, sum, recs, _ := tl.runStats(t, p, dir, extra...)
	return rows, sum, recs
}

// runStats is run that also returns what each stage counted
// (udppipe.Run's Stats: udpstage's exit line).
func (tl tools) runStats(t *testing.T, p udppipe.Pipeline, dir string, extra ...string) ([]map[string]string, string, *udppipe.Records, map[string]map[string]float64) {
	t.Helper()
	logs := filepath.Join(dir, "logs")
	run, err := p.Run(tl.udpstage, logs, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	args := append([]string{tl.cli, "analyze", "--logs", logs, "--out", out, "--quiet", "--no-durations", "--mace-window", fmt.Sprintf("%gs", window)}, extra...)
	r := testrun.Run(120*time.Second, nil, args...)
	if r.Err != nil || testrun.Panicked(r.Stderr) {
		t.Fatalf("analyze: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	rows, err := testrun.ReadCSV(filepath.Join(out, "mace.csv"), []string{"scenario", "window", "mace_s", "bound_s", "predicted_s", "tuples", "measured_max_s", "measured_min_s", "within"})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := udppipe.Read(tl.cli, logs)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return rows, string(sum), recs, run.Stats
}

func f(r map[string]string, col string) float64 {
	v, err := strconv.ParseFloat(r[col], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// truth is each window's largest latency, gen out to B out, by the
// window of the tuple's stimulus (its gen out) from the run's first
// record, worked out of the records. The frequency dump prints (to the
// kHz) may differ from the registered one analyze takes by a few parts in
// 10^8, a fraction of a microsecond over the run: a stimulus that close
// to a window's edge may be either window's: per window, sure is the
// largest latency without them, edge with them counted in both windows.
func truth(recs *udppipe.Records) (worst, sure, edge map[int]float64) {
	in := map[int64]uint64{}
	for _, x := range recs.Chan["B out"] {
		in[x.ID] = x.TSC
	}
	worst, sure, edge = map[int]float64{}, map[int]float64{}, map[int]float64{}
	const near = 1e-6 // s
	for _, x := range recs.Chan["gen out"] {
		end, ok := in[x.ID]
		if !ok {
			continue
		}
		at := float64(x.TSC-recs.T0) / recs.Hz
		lat := float64(end-x.TSC) / recs.Hz
		w := int(at / window)
		worst[w] = math.Max(worst[w], lat)
		edge[w] = math.Max(edge[w], lat)
		lo, hi := int(max(at-near, 0)/window), int((at+near)/window)
		if lo == w && hi == w {
			sure[w] = math.Max(sure[w], lat)
		}
		edge[lo] = math.Max(edge[lo], lat)
		edge[hi] = math.Max(edge[hi], lat)
	}
	return worst, sure, edge
}

// check compares a measured run's mace.csv with the truth of its records:
// each window's measured largest latency is the truth's; the worst case
// predicted within max(4%, (w + e + the smallest latency) / the true
// worst); it returns the windows within the theorem's bounds, of how many,
// and whether the worst case held.
// stalled are the windows (by stimulus) whose tuples met an operator the
// machine stopped, as the records show it (Mace models the load, not a CPU
// taken away): mid-work, a stay from "X in" to "X out" over ten times X's
// median and over least; or between two tuples, a hand-off (from X's out
// to its next in while that tuple already waited: its upstream out came
// first) over ten times X's median hand-off and over least; and the
// windows after either for twice that time (the tuples queued behind it
// wait as long).
func stalled(recs *udppipe.Records, least float64) map[int]bool {
	stim := map[int64]uint64{}
	for _, x := range recs.Chan["gen out"] {
		stim[x.ID] = x.TSC
	}
	out := map[int]bool{}
	type gap struct {
		id int64 // the tuple at its end
		d  float64
	}
	// mark marks the windows of the gaps far over their median.
	mark := func(gaps []gap) {
		if len(gaps) == 0 {
			return
		}
		ds := make([]float64, len(gaps))
		for i, g := range gaps {
			ds[i] = g.d
		}
		sort.Float64s(ds)
		med := ds[len(ds)/2]
		for _, g := range gaps {
			if at, ok := stim[g.id]; ok && g.d > 10*med && g.d > least {
				from := float64(at-recs.T0) / recs.Hz
				for w := int(from / window); w <= int((from+2*g.d)/window); w++ {
					out[w] = true
				}
			}
		}
	}
	for _, op := range [][2]string{{"A", "gen out"}, {"B", "A out"}} {
		in, up := map[int64]uint64{}, map[int64]uint64{}
		for _, x := range recs.Chan[op[0]+" in"] {
			in[x.ID] = x.TSC
		}
		for _, x := range recs.Chan[op[1]] {
			up[x.ID] = x.TSC
		}
		var stays, handOffs []gap
		outs := recs.Chan[op[0]+" out"]
		for k, x := range outs {
			t, ok := in[x.ID]
			if !ok || x.TSC < t {
				continue
			}
			stays = append(stays, gap{x.ID, float64(x.TSC-t) / recs.Hz})
			if k == 0 {
				continue
			}
			prev := outs[k-1].TSC
			if u, ok := up[x.ID]; ok && u <= prev && t >= prev {
				handOffs = append(handOffs, gap{x.ID, float64(t-prev) / recs.Hz})
			}
		}
		mark(stays)
		mark(handOffs)
	}
	return out
}

func check(t *testing.T, tag string, rows []map[string]string, recs *udppipe.Records) (within, windows int, worstOK bool) {
	t.Helper()
	tr, sure, edge := truth(recs)
	stall := stalled(recs, 1e-3)
	skipped := 0
	trueWorst, predWorst, eps, minLat := 0.0, 0.0, 0.0, math.Inf(1)
	for _, r := range rows {
		if r["scenario"] != "measured" {
			continue
		}
		w, _ := strconv.Atoi(r["window"])
		predWorst = math.Max(predWorst, f(r, "predicted_s"))
		eps = f(r, "bound_s") - f(r, "mace_s") - window
		if r["tuples"] == "0" {
			continue
		}
		if stall[w] {
			skipped++
		} else {
			windows++
			if r["within"] == "true" {
				within++
			}
		}
		if m := f(r, "measured_max_s"); math.Abs(m-tr[w]) > 1e-6 && (m < sure[w]-1e-6 || m > edge[w]+1e-6) {
			t.Errorf("%s window %d: mace.csv measured %.9f s, the records %.9f s (%.9f to %.9f s with the stimuli within 1 us of its edges in either window)",
				tag, w, m, tr[w], sure[w], edge[w])
		}
		trueWorst = math.Max(trueWorst, tr[w])
		minLat = math.Min(minLat, f(r, "measured_min_s"))
	}
	allowed := math.Max(0.04, (window+eps+minLat)/trueWorst)
	err := predWorst/trueWorst - 1
	worstOK = math.Abs(err) <= allowed
	t.Logf("%s: worst latency %.6f s, predicted %.6f s (%+.2f%%, %.1f%% allowed); %d of %d windows within the theorem's bounds (%d more where the machine stalled an operator)",
		tag, trueWorst, predWorst, 100*err, 100*allowed, within, windows, skipped)
	return within, windows, worstOK
}

// TestMaceOnOff: five runs, high phases of 0.2 s at 30,000 tuples/s (B's
// real capacity with the hog is 11-17,000), low phases of 1.3 s at 300/s,
// 10 ms windows. The worst case predicted within max(4%, w + e + the
// smallest latency over the true worst) in at least 4 of the 5 runs; the
// theorem's interval holds in at least 90% of the windows where the
// records show no operator stalled by the machine.
func TestMaceOnOff(t *testing.T) {
	tl := needTools(t)
	dir := t.TempDir()
	var within, windows, good int
	const runs = 5
	for seed := 1; seed <= runs; seed++ {
		rows, sum, recs := tl.run(t, onOff(30000, 300, 0.2, 1.3, 3, "work", seed), filepath.Join(dir, fmt.Sprint(seed)))
		w, n, ok := check(t, fmt.Sprintf("run %d", seed), rows, recs)
		within, windows = within+w, windows+n
		if ok {
			good++
		}
		if seed == 1 {
			t.Logf("summary's Mace section:\n%s", section(sum, "Mace:"))
		}
	}
	t.Logf("worst case held in %d of %d runs; %d of %d windows within the bounds", good, runs, within, windows)
	if good < 4 {
		t.Errorf("the worst case held in %d of %d runs, want 4", good, runs)
	}
	// Windows where the records show the machine stalling an operator are
	// left out (stalled): with them, 89-97% held with the other vCPU busy
	// and 75-78% with three spinning processes; without, 94-96% and 88.7%.
	if within*10 < 9*windows {
		t.Errorf("%d of %d windows within the theorem's bounds, want 90%%", within, windows)
	}
}

// section is the summary's lines from the one that starts with head to
// the next blank-free heading.
func section(sum, head string) string {
	i := strings.Index(sum, head)
	if i < 0 {
		return "(none)"
	}
	s := sum[i:]
	if j := strings.Index(s, "\nanalysed "); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestMaceNoExcess: tuples evenly spaced at 500/s (2 ms apart; B's 50 us
// of work takes about 100 us with the other vCPU busy): no window has
// excess (a sub-window of 312 us holds at most one tuple, and a window's
// ten backlogged tuples it would take to slow a node's speed cannot come
// at five a window), so every Mace is 0. A busy machine may preempt the
// source, which then sends the tuples it owes at once: the windows where
// its records show three within a 32nd of a window (and the next) are not
// held to 0 (CI once saw Mace 2.1 ms in one), and where a tuple's cost
// outlasts its sub-window Mace is less than a sub-window. With no excess
// anywhere the summary says "no excess" where a relative error of a bound
// would mean nothing. (Poisson arrivals at 2,000/s bunch: four in a
// sub-window are excess where a tuple costs 100 us.)
func TestMaceNoExcess(t *testing.T) {
	tl := needTools(t)
	p := onOff(500, 500, 1, 0, 2, "work", 1)
	src := p.Stages[0].Args
	for i := range src {
		if src[i] == "--poisson" {
			p.Stages[0].Args = append(src[:i:i], src[i+2:]...)
			break
		}
	}
	rows, sum, recs := tl.run(t, p, t.TempDir())
	// The windows in which the source sent three stimuli within a 32nd
	// of a window (catching up after it was preempted): their work may
	// be excess there and in the next window.
	bunched := map[int]bool{}
	gen := recs.Chan["gen out"]
	for i := 2; i < len(gen); i++ {
		if float64(gen[i].TSC-gen[i-2].TSC)/recs.Hz < window/32 {
			w := int(float64(gen[i].TSC-recs.T0) / recs.Hz / window)
			bunched[w], bunched[w+1] = true, true
		}
	}
	// And the windows whose tuples met an operator the machine stopped
	// mid-work, as the records show (stalled): a stay the machine
	// stretched is excess Mace rightly sees, not load (with two busy loops
	// beside it, CI once saw Mace 1.34 ms in a window of evenly spaced
	// tuples), or held between two tuples (B's hand-off 801 us once, with
	// the other vCPU busy): one such cost over two sub-windows leaves
	// more than one of excess.
	stall := stalled(recs, window/16)
	even, total, excess := 0, 0, false
	for _, r := range rows {
		if r["scenario"] != "measured" || r["tuples"] == "0" {
			continue
		}
		total++
		w, _ := strconv.Atoi(r["window"])
		excess = excess || f(r, "mace_s") != 0
		if bunched[w] || stall[w] {
			continue
		}
		even++
		// One tuple a sub-window is no excess while it costs less than a
		// sub-window; on a busy machine its cost (the time it took) may
		// outlast one: Mace is then what one tuple adds, less than a
		// sub-window (68 us seen with two spinning processes).
		if f(r, "mace_s") >= window/32 {
			t.Errorf("window %s: Mace %s s, where the source sent every tuple at least %g s apart", r["window"], r["mace_s"], window/32)
		}
	}
	if even*5 < total { // 92-152 of 200 in runs with the other vCPU busy
		t.Errorf("only %d of %d windows of evenly spaced tuples: the run says nothing", even, total)
	}
	m := section(sum, "Mace:")
	for _, l := range strings.Split(m, "\n") {
		if !excess && strings.HasPrefix(strings.TrimSpace(l), "measured") && (!strings.Contains(l, "no excess") || strings.Contains(l, "%  ")) {
			t.Errorf("the measured line gives no word of no excess, or a relative error: %q", l)
		}
	}
	t.Logf("%d of %d windows of evenly spaced tuples\n%s", even, total, m)
}

// TestMaceWhatIfRate, a benchmark (make bench-mace; skipped in make
// test): B's cost a wait (a sleep of 50 us, about 90 us with the timer's
// slack: what the machine's contention does to it does not move with the
// rate); a run with --what-if rate=x0.5, its high phases at 40,000/s (B
// takes about 11,000), and a second real run made that way (the phases
// twice as long at half the rates, still above B): it prints the
// predicted worst beside the second run's worst, worked out of its
// records. Two runs taken apart compare two states of the machine, not an
// analysis with its truth: a figure to print, not a test (in make test it
// needed its third try on a loaded machine: +84.6%, -25.5%, +1.9%).
func TestMaceWhatIfRate(t *testing.T) {
	if os.Getenv("CP_BENCH_MACE") == "" {
		t.Skip("compares two runs taken apart: a benchmark, make bench-mace")
	}
	tl := needTools(t)
	dir := t.TempDir()
	rows, _, _ := tl.run(t, onOff(40000, 400, 0.2, 1.3, 3, "sleep", 1), filepath.Join(dir, "x1"), "--what-if", "rate=x0.5")
	pred := 0.0
	for _, r := range rows {
		if r["scenario"] == "rate=x0.5" {
			pred = math.Max(pred, f(r, "predicted_s"))
		}
	}
	_, _, recs := tl.run(t, onOff(20000, 200, 0.4, 2.6, 2, "sleep", 1), filepath.Join(dir, "x05"))
	real := 0.0
	worst, _, _ := truth(recs)
	for _, v := range worst {
		real = math.Max(real, v)
	}
	fmt.Printf("bench-mace: rate=x0.5 predicted worst %.6f s; a run made at half the rate right after: %.6f s (%+.2f%%)\n",
		pred, real, 100*(pred/real-1))
}

// TestMaceDrift: B's work doubles 1.5 s after its first tuple (50 to 100
// us): the assumption flags say B's cost drifted, and the capacity
// analysis names the windows its cost moved in, where the same run shows
// it moved. One run, judged by two truths that tell the machine's
// preemptions from B's work: B's thread CPU time a tuple before and after
// the change (udpstage's counters around its work), which no other work
// on the machine lengthens, and B's median stay (in to out, its records)
// before and after, which the visits the machine left alone decide. A
// machine that preempted most of B's visits hides the change from every
// record: then the run says so, and the moved windows go untested (never
// seen in 20 runs beside two busy loops, which left the median stays
// 1.86x-2.04x apart). Before, a run whose backlogged departures did not show
// the doubling was made again: two busy loops hid it in 12 of 20.
func TestMaceDrift(t *testing.T) {
	tl := needTools(t)
	p := onOff(8000, 8000, 1, 0, 3, "work", 2)
	p.Stages[2].Args = append(p.Stages[2].Args, "--phase", "1.5,100")
	_, sum, recs, stats := tl.runStats(t, p, t.TempDir())
	cpuBefore, cpuAfter := stats["B"]["cpu_us"], stats["B"]["phase_cpu_us"]
	if !(cpuBefore > 0 && cpuAfter > 0) {
		t.Fatalf("B counted no CPU time before or after its phase: %v", stats["B"])
	}
	work := cpuAfter / cpuBefore
	if work < 1.4 {
		t.Fatalf("B's work a tuple rose %.2fx by its thread's CPU clock (%.1f to %.1f us): --phase did not change it, the run tests nothing", work, cpuBefore, cpuAfter)
	}
	before, after := stays(recs, "B", 1.5)
	if len(before) < 100 || len(after) < 100 {
		t.Fatalf("B's stays: %d before its phase, %d after: too few to tell", len(before), len(after))
	}
	mb, ma := median(before), median(after)
	stay := ma / mb
	t.Logf("B's work a tuple by its thread's CPU clock: %.1f us, then %.1f us (%.2fx); its median stay: %.1f us, then %.1f us (%.2fx; %d and %d visits)",
		cpuBefore, cpuAfter, work, mb*1e6, ma*1e6, stay, len(before), len(after))
	if !strings.Contains(sum, "cost drift: B (") {
		t.Errorf("B's work rose %.2fx, its median stay %.2fx: no cost drift flag for B:\n%s", work, stay, section(sum, "Mace:"))
	}
	switch {
	case stay < 1.4:
		t.Logf("the machine preempted most of B's visits: its median stay rose %.2fx where its work rose %.2fx, and no record shows the change: capacity's moved windows are not tested this run", stay, work)
	case !strings.Contains(sum, "cost moved: B ("):
		t.Errorf("capacity names no windows B's cost moved in, though its median stay rose %.2fx (its work %.2fx):\n%s", stay, work, section(sum, "capacity"))
	}
}

// stays are instance inst's stays in seconds (its "in" record of an id to
// its "out" of it), those that began before at seconds after its first in
// and those that began after it, leaving out 0.1 s around at.
func stays(r *udppipe.Records, inst string, at float64) (before, after []float64) {
	out := map[int64]uint64{}
	for _, x := range r.Chan[inst+" out"] {
		out[x.ID] = x.TSC
	}
	ins := r.Chan[inst+" in"]
	first := uint64(math.MaxUint64)
	for _, x := range ins {
		first = min(first, x.TSC)
	}
	for _, x := range ins {
		o, ok := out[x.ID]
		if !ok || o < x.TSC {
			continue
		}
		since, d := float64(x.TSC-first)/r.Hz, float64(o-x.TSC)/r.Hz
		switch {
		case since < at-0.1:
			before = append(before, d)
		case since > at+0.1:
			after = append(after, d)
		}
	}
	return before, after
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestMaceBadInput: what cannot be analysed gives a message, never a
// panic.
func TestMaceBadInput(t *testing.T) {
	tl := needTools(t)
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if _, err := onOff(2000, 2000, 1, 0, 1, "work", 1).Run(tl.udpstage, logs, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--what-if", "speed=2"}, "want rate=xR"},
		{[]string{"--what-if", "cost:C=0.5"}, `no operator "C"`},
		{[]string{"--mace-costs", filepath.Join(dir, "none.csv")}, "--mace-costs"},
		{[]string{"--mace-window", "1ns"}, "wider --mace-window"},
		{[]string{"--mace-fit", "2"}, "--mace-fit"},
	} {
		args := append([]string{tl.cli, "analyze", "--logs", logs, "--out", filepath.Join(dir, "out"), "--quiet"}, c.args...)
		r := testrun.Run(60*time.Second, nil, args...)
		if r.Err == nil || testrun.Panicked(r.Stderr) || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("analyze %v: want an error with %q, got %v\n%s", c.args, c.want, r.Err, r.Stderr)
		}
	}
	// --no-critical-path keeps the costs: Mace still runs.
	r := testrun.Run(60*time.Second, nil, tl.cli, "analyze", "--logs", logs, "--out", filepath.Join(dir, "ncp"), "--no-critical-path")
	if r.Err != nil || !strings.Contains(r.Stdout, "cost B (") || strings.Contains(r.Stdout, "Mace: not analysed") {
		t.Errorf("analyze --no-critical-path: want Mace with B's cost, got %v\n%s%s", r.Err, section(r.Stdout, "Mace:"), r.Stderr)
	}
	// No marks: a note, not an error.
	plain := filepath.Join(dir, "plain")
	p := udppipe.Pipeline{Stages: []udppipe.Stage{
		{Kind: "source", Name: "gen", To: []string{"end"}, Args: []string{"--rate", "1000", "--tuples", "500"}},
		{Kind: "sink", Name: "end"},
	}}
	if _, err := p.Run(tl.udpstage, plain, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// "gen out" and "end in" mark operators: take the marks' names away.
	r = testrun.Run(60*time.Second, nil, tl.cli, "analyze", "--logs", plain, "--out", filepath.Join(dir, "plain-out"), "--quiet", "--no-capacity")
	if testrun.Panicked(r.Stderr) || !strings.Contains(r.Stdout+r.Stderr, "Mace: not analysed") {
		t.Errorf("logs without capacity: want \"Mace: not analysed\", got %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
}
