package capacity

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloudprofiler/tests/internal/testrun"
)

// A validation, not a test: `make validate` runs it (CP_VALIDATE=1) and it
// prints its figures. It compares two measurements taken at different
// times, minutes apart on a shared machine whose load moves between them,
// so it asserts nothing that a busy machine could break (docs/capacity.md,
// "How we know it is right").

func needValidate(t *testing.T) {
	if os.Getenv("CP_VALIDATE") == "" {
		t.Skip("a validation that prints figures, not a test: make validate runs it (CP_VALIDATE=1)")
	}
}

var maxRateLine = regexp.MustCompile(`maximum sustainable throughput: (?:at least )?([0-9.]+) tuples/s`)

// TestInsideVsOutside (a validation): the pipeline fed by `gen send` (tandem --listen):
// `gen maxrate` finds the highest rate it sustains from outside; one more
// run below that, logged and analysed, predicts it from inside (the
// bottleneck's max_source_rate); it prints both.
func TestInsideVsOutside(t *testing.T) {
	needValidate(t)
	e := needEnv(t)
	needCapacity(t, e)
	dir := t.TempDir()
	pipe := []string{"--a-cost", direct.a, "--b-cost", direct.b, "--rcvbuf", "65536"}
	pipe = append(countArgs(e), pipe...)
	listen := func(logs string, extra ...string) (*bg, string) {
		p := start(t, []string{"CP_LOG_DIR=" + logs}, append(append([]string{e.tandem, "--listen", "127.0.0.1:0"}, pipe...), extra...)...)
		line := p.waitFor(t, "listening on", 10*time.Second)
		return p, strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
	}

	// From outside: runs of 3 s; a run fails when the sender falls behind
	// (backpressure through TCP: the socket buffers hide about 2 MB of it,
	// 0.9 s of B's work) or when the REPORT, which the pipeline sends once
	// its sink has taken the stream's last tuple, is more than 200 ms late:
	// the queue grew through the run, the rate is not sustained (more than
	// about 7% over B's rate fails so). The 200 ms also absorb a stall of
	// the machine near the end of a run; the pauses of 1.5 s let the
	// pipeline drain what a failed run left in the buffers before the next.
	var ps problems
	insideVsOutside(t, e, filepath.Join(dir, "run"), listen, &ps)
	for _, p := range ps {
		t.Logf("differs: %s", p)
	}
}

// insideVsOutside is one attempt of TestInsideVsOutside.
func insideVsOutside(t *testing.T, e env, dir string, listen func(logs string, extra ...string) (*bg, string), ps *problems) {
	p, addr := listen(filepath.Join(dir, "maxrate-logs"))
	t0 := time.Now()
	r := testrun.Run(120*time.Second, nil, e.tool, "gen", "maxrate", "--to", addr, "--synthetic", "--start", fmt.Sprint(0.8*direct.bRate),
		"--duration", "3s", "--resolution", "2%", "--pause", "1500ms", "--report-timeout", "200ms")
	t.Logf("gen maxrate (%.1f s):\n%s", time.Since(t0).Seconds(), r.Stdout)
	if r.Err != nil {
		t.Fatalf("gen maxrate: %v\n%s", r.Err, r.Stderr)
	}
	m := maxRateLine.FindStringSubmatch(r.Stdout)
	if m == nil {
		t.Fatalf("gen maxrate gave no maximum:\n%s%s", r.Stdout, r.Stderr)
	}
	outside, _ := strconv.ParseFloat(m[1], 64)
	p.signal(syscall.SIGTERM)
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Fatalf("tandem (maxrate's receiver): %v\n%s", err, p.stderr())
	}
	if tr, err := parseTruth(p.stdout()); err == nil {
		t.Logf("maxrate's pipeline: B's true rate %.0f/s over %d tuples", tr.op("B").TrueRate, tr.op("B").Tuples)
	}

	// From inside: one logged run at 80% of it.
	logs := filepath.Join(dir, "logs")
	p, addr = listen(logs, "--streams", "1")
	rate := math.Round(0.8 * outside)
	r = testrun.Run(30*time.Second, nil, e.tool, "gen", "send", "--to", addr, "--synthetic", "--rate", fmt.Sprint(rate), "--duration", "2s")
	if r.Err != nil {
		t.Fatalf("gen send --rate %.0f: %v\n%s%s", rate, r.Err, r.Stdout, r.Stderr)
	}
	if err := p.wait(t, 20*time.Second); err != nil {
		t.Fatalf("tandem: %v\n%s", err, p.stderr())
	}
	tr, err := parseTruth(p.stdout())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	analyze(t, e, logs, out)
	rows := readCapacity(t, out)
	var bott []capRow
	for _, r := range rows {
		if r["bottleneck"] == "true" {
			bott = append(bott, r)
		}
	}
	if len(bott) != 1 {
		t.Fatalf("%d bottleneck rows, want 1", len(bott))
	}
	pred := bott[0].f("max_source_rate")
	relErr := pred/outside - 1
	t.Logf("inside vs outside: gen maxrate %.0f/s; predicted max_source_rate %.0f/s (bottleneck %s, from a run at %.0f/s): %s; B's true rate %.0f/s",
		outside, pred, bott[0]["operator"], rate, pct(relErr), tr.op("B").TrueRate)
	if bott[0]["operator"] != "B" {
		ps.add("the bottleneck is %s, want B", bott[0]["operator"])
	}
	if !(math.Abs(relErr) <= 0.1) {
		ps.add("predicted %.0f/s against gen maxrate's %.0f/s: %s, want within 10%%", pred, outside, pct(relErr))
	}
}
