package critpath

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"cloudprofiler/tests/internal/testrun"
)

// TestCounterfactual (a validation: `make validate`, CP_VALIDATE=1; it
// compares runs of four configurations made one after the other, which a
// shared machine's load moves between, so it is no test of make test):
// the baseline A 20 us, B 60 us, Poisson arrivals at
// 0.7 of B's capacity. Halving the operator with the largest share of the
// p99 journeys in breakdown.csv (its own work and the queueing charged to
// it: B by construction; the analysis must say so) lowers the tail of the
// end-to-end latency by far; halving one whose share is near 0
// moves it by less than 2%. The operator near 0 is A of a second baseline
// (A 2 us, B 60 us): in the first, A's 20 us are a tenth of a journey, and
// halving them moved the tail by a few percent either way (its own queue
// shrinks, but B then sees burstier arrivals), too little to tell from the
// machine's noise and too much to call no change.
//
// The tail, robust on a 2-vCPU machine with the other vCPU busy: every
// configuration runs with the same seed, so the same arrivals at the same
// times; each run (2 s) is cut into 10 windows of equal tuple counts, and a
// window's p99 (source out -> sink#0 out, read from the logs with `dump`) is
// the least over five runs of the configuration (interleaved with the
// others': a stall of the machine only ever lengthens journeys; with the
// other vCPU busy, stalls of 2 to 7 ms lifted the p99 of up to 9 of a run's
// 10 windows, and the least of three runs still moved the median by 4%).
// Each window is compared with the same window of the baseline, and the
// median of the ratios is the change. (The critical path of these
// unsaturated runs lies mostly on A and waiting for input, rightly: B waits
// between its busy periods, so a slice's path leaves B at each wait. The
// tail is B's queue, which the breakdown shows.)
func TestCounterfactual(t *testing.T) {
	if os.Getenv("CP_VALIDATE") == "" {
		t.Skip("a validation that compares runs made one after the other, not a test: make validate runs it (CP_VALIDATE=1)")
	}
	tl := needTools(t)
	dir := t.TempDir()
	const windows, repeats = 10, 6
	rate := fmt.Sprint(0.7 / 60e-6) // 0.7 of B's capacity
	runs := map[string]*cfRun{
		"base":     {a: "20us", b: "60us"},
		"B/2":      {a: "20us", b: "30us"},
		"base2":    {a: "2us", b: "60us"},
		"base2A/2": {a: "1us", b: "60us"},
	}
	order := []string{"base", "B/2", "base2", "base2A/2"}
	outs := map[string]string{}
	change := func(variant, base string) float64 {
		v, b := runs[variant].tail, runs[base].tail
		ratios := make([]float64, len(v))
		for i := range v {
			ratios[i] = v[i] / b[i]
		}
		sort.Float64s(ratios)
		m := median(ratios) - 1
		t.Logf("%s against %s: per-window p99 ratios %s; median change %+.2f%%", variant, base, fmtRatios(ratios), 100*m)
		return m
	}
	// One measurement of the four configurations; the latency checks on
	// it. The truth is runs on this machine: with the other vCPU busy, a
	// clean-clone CI once measured -4.6% for A/2 (every window's p99 the
	// least of five runs, yet 0.87 to 1.01 of the baseline's), so a
	// measurement whose checks fail is made again (testrun.Retry: up to
	// five, pausing between them). The order of the runs is reversed
	// every other repeat: on this VM the first of two back-to-back runs
	// tends to be the slower (A/B timings of analyze showed it too),
	// which, with a fixed order, always penalised base2 against base2A/2,
	// and a 2% check cannot carry that.
	measure := func(try int) (ps []string) {
		for _, r := range runs {
			r.tail = nil
		}
		for rep := 0; rep < repeats; rep++ {
			for i := range order {
				name := order[i]
				if rep%2 == 1 {
					name = order[len(order)-1-i]
				}
				r := runs[name]
				logs := filepath.Join(dir, fmt.Sprintf("logs-%d-%d-%d", try, rep, i))
				tr := pipeline(t, tl, logs, args("--a-cost", r.a, "--b-cost", r.b, "--rate", rate, "--duration", "2s", "--seed", "16")...)
				tail := tailByWindow(journeys(t, tl, logs, tr.TscHz), windows)
				t.Logf("%-9s A %-5s B %-5s: %d tuples; p99 per window (us): %s", name, r.a, r.b, tr.Source.Tuples, fmtUS(tail))
				if r.tail == nil {
					r.tail = tail
				}
				for w := range tail {
					r.tail[w] = min(r.tail[w], tail[w])
				}
				if rep == 0 && (name == "base" || name == "base2") {
					outs[name] = filepath.Join(dir, fmt.Sprintf("out-%s-%d", name, try))
					analysis(t, tl, logs, outs[name], "100ms")
				}
				if err := os.RemoveAll(logs); err != nil {
					t.Fatal(err)
				}
			}
		}
		if m := change("B/2", "base"); m > -0.25 {
			ps = append(ps, fmt.Sprintf("halving B (the bottleneck) changed the windows' p99 by %+.1f%%, want a drop of at least 25%%", 100*m))
		}
		if m := change("base2A/2", "base2"); m < -0.02 || m > 0.02 {
			ps = append(ps, fmt.Sprintf("halving A at 2 us changed the windows' p99 by %+.2f%%, want within 2%%", 100*m))
		}
		return ps
	}
	testrun.Retry(t, 5, measure)
	t.Run("breakdown", func(t *testing.T) {
		// The operator with the largest share of the p99 journeys (its own
		// work and the queueing charged to it) is the one whose halving
		// lowered the tail; the one with a share near 0 moved it < 2%.
		for _, base := range []string{"base", "base2"} {
			slices, run := criticalPath(t, outs[base])
			checkCriticalPath(t, slices, run, false)
			t.Logf("%s's critical path over the run: %s", base, run)
			shares := map[string]float64{}
			for _, p := range breakdown(t, outs[base])["p99"] {
				if p.part == "compute" || p.part == "queue" {
					shares[p.where] += p.row.num("share")
				}
			}
			t.Logf("%s: p99 journeys' shares (compute + queue) per operator: %v", base, shares)
			top := ""
			for op, v := range shares {
				if top == "" || v > shares[top] {
					top = op
				}
			}
			if top != "B" {
				t.Errorf("%s: the operator with the largest share of the p99 journeys is %q (%.3f), want B: halving B is what lowers the tail", base, top, shares[top])
			}
			if a := shares["A"]; base == "base2" && !(a < 0.05) {
				t.Errorf("base2: A (2 us of a journey of hundreds) holds %.3f of the p99 journeys, want near 0 (< 0.05)", a)
			}
		}
	})
}
