package capacity

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"cloudprofiler/tests/internal/udppipe"
)

// The pipeline of the issue that found capacity 62-169% off on a shared
// VM: gen -> fold (4 us of work) -> mix (15 us) -> drain, four processes
// over UDP, with another process spinning on the machine. The truth is
// what each operator departed per second while backlogged, worked out of
// the run's own records (package udppipe), never the work it was told to
// do: with the hog, mix really costs 25-60 us a tuple, its work, the send
// and the receive, and the CPU it shares.
func chain(rate float64, seconds float64, seed int) udppipe.Pipeline {
	return udppipe.Pipeline{Hog: true, Stages: []udppipe.Stage{
		{Kind: "source", Name: "gen", To: []string{"fold"}, Args: []string{"--rate", fmt.Sprint(rate), "--duration", fmt.Sprint(seconds), "--poisson", strconv.Itoa(seed)}},
		{Kind: "op", Name: "fold", To: []string{"mix"}, Args: []string{"--work-us", "4"}},
		{Kind: "op", Name: "mix", To: []string{"drain"}, Args: []string{"--work-us", "15"}},
		{Kind: "sink", Name: "drain"},
	}}
}

// instRow is an instance's whole-run in/out row (its operator has one).
func instRow(t *testing.T, rows []capRow, op string) capRow {
	t.Helper()
	return wholeRun(t, rows, "instance", op, "in/out")
}

// windowRows are an instance's window rows by window.
func windowRows(rows []capRow, op string) map[int]capRow {
	m := map[int]capRow{}
	for _, r := range rows {
		if r["level"] == "instance" && r["operator"] == op && r["method"] == "in/out" && r["window"] != "-1" {
			w, _ := strconv.Atoi(r["window"])
			m[w] = r
		}
	}
	return m
}

// TestCapacityAgainstTheRun: the chain at three rates, light, near mix's
// capacity and past it, two runs each, with the other vCPU busy. Every
// run: mix is the bottleneck; its capacity within 10% of its departures
// per second while backlogged, over the run and in at least 90% of the
// windows of 1 s that hold 30 backlogged tuples or more; the loss between
// fold and mix (a full socket buffer drops datagrams) counted as the
// records show it. Over all runs, every instance's interval covers its
// truth in at least 90% of them.
func TestCapacityAgainstTheRun(t *testing.T) {
	e := needEnv(t)
	needCapacity(t, e)
	dir := t.TempDir()
	type tally struct{ covered, of int }
	var cov tally
	var fails []string
	run := 0
	for _, rate := range []float64{12000, 24000, 45000} {
		for rep := 1; rep <= 2; rep++ {
			run++
			logs := filepath.Join(dir, fmt.Sprintf("logs-%d", run))
			res, err := chain(rate, 3, run).Run(e.udpstage, logs, 60*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, fmt.Sprintf("out-%d", run))
			analyze(t, e, logs, out)
			rows := readCapacity(t, out)
			recs, err := udppipe.Read(e.tool, logs)
			if err != nil {
				t.Fatal(err)
			}
			tag := fmt.Sprintf("run %d (%.0f/s, rep %d)", run, rate, rep)
			for _, op := range []struct{ name, up string }{{"mix", "fold out"}, {"fold", "gen out"}} {
				truth, wins := recs.Backlogged(op.name, []string{op.up}, 1)
				r := instRow(t, rows, op.name)
				c, lo, hi := r.f("capacity"), r.f("capacity_low"), r.f("capacity_high")
				in := lo <= truth.Rate && truth.Rate <= hi
				cov.of++
				if in {
					cov.covered++
				}
				good, counted := 0, 0
				for w, tw := range wins {
					wr, ok := windowRows(rows, op.name)[w]
					if !ok || tw.Backlogged < 30 {
						continue
					}
					counted++
					if math.Abs(wr.f("capacity")/tw.Rate-1) <= 0.1 {
						good++
					}
				}
				t.Logf("%s %-4s: truth %.0f/s (%d of %d visits backlogged, load %.2f); capacity %.0f/s [%.0f, %.0f] %s, %s; windows within 10%%: %d of %d",
					tag, op.name, truth.Rate, truth.Backlogged, truth.Visits, rate/truth.Rate, c, lo, hi, pct(c/truth.Rate-1),
					map[bool]string{true: "covered", false: "NOT covered"}[in], good, counted)
				if op.name != "mix" {
					continue
				}
				if !(math.Abs(c/truth.Rate-1) <= 0.1) {
					fails = append(fails, fmt.Sprintf("%s: mix's capacity %.0f/s against its truth %.0f/s: %s", tag, c, truth.Rate, pct(c/truth.Rate-1)))
				}
				if good*10 < 9*counted {
					fails = append(fails, fmt.Sprintf("%s: mix's capacity within 10%% of the truth in %d of %d windows", tag, good, counted))
				}
			}
			b := wholeRun(t, rows, "operator", "mix", "in/out")
			if b["bottleneck"] != "true" {
				fails = append(fails, fmt.Sprintf("%s: the bottleneck is not mix: %v", tag, b))
			}
			lost := recs.Lost([]string{"fold out"}, []string{"mix in"})
			fold := wholeRun(t, rows, "operator", "fold", "in/out")
			got, _ := strconv.Atoi(fold["lost"])
			t.Logf("%s: fold -> mix lost %d of %.0f (the records), analyze says %d; mix's reach %s, max source %s/s; stages %v",
				tag, lost, res.Stats["fold"]["sent"], got, b["reach"], b["max_source_rate"], res.Stats)
			if got != lost {
				fails = append(fails, fmt.Sprintf("%s: fold's lost %d, the records show %d", tag, got, lost))
			}
			if reach := b.f("reach"); !(math.Abs(reach-1) < 1e-9) {
				fails = append(fails, fmt.Sprintf("%s: mix's reach %v, want 1 (lost tuples are not filtered)", tag, reach))
			}
		}
	}
	t.Logf("intervals: %d of %d cover their truth", cov.covered, cov.of)
	if cov.covered*10 < 9*cov.of {
		fails = append(fails, fmt.Sprintf("intervals cover the truth in %d of %d (instance, run) pairs, want 90%%", cov.covered, cov.of))
	}
	for _, f := range fails {
		t.Error(f)
	}
}

// TestSplitFilterLoss: gen -> split (1 -> 3: every id handed on three
// times) -> mix (per copy) -> filt (keeps the ids divisible by 3) -> lossy
// (drops 10% of what it hands on, after its out mark) -> drain, with the
// other vCPU busy. Each operator's capacity within 10% of its truth; reach
// (the copies of a source tuple that reach it, lost ones included) and
// selectivity as the stages counted them; the loss after lossy counted as
// loss; DS2's parallelism for twice the highest source rate as the truth
// gives it.
func TestSplitFilterLoss(t *testing.T) {
	e := needEnv(t)
	needCapacity(t, e)
	dir := t.TempDir()
	p := udppipe.Pipeline{Hog: true, Stages: []udppipe.Stage{
		{Kind: "source", Name: "gen", To: []string{"split"}, Args: []string{"--rate", "5000", "--duration", "3", "--poisson", "5"}},
		{Kind: "op", Name: "split", To: []string{"mix"}, Args: []string{"--work-us", "3", "--split", "3"}},
		{Kind: "op", Name: "mix", To: []string{"filt"}, Args: []string{"--work-us", "8"}},
		{Kind: "op", Name: "filt", To: []string{"lossy"}, Args: []string{"--work-us", "2", "--keep", "3"}},
		{Kind: "op", Name: "lossy", To: []string{"drain"}, Args: []string{"--work-us", "2", "--drop", "0.1"}},
		{Kind: "sink", Name: "drain"},
	}}
	logs := filepath.Join(dir, "logs")
	res, err := p.Run(e.udpstage, logs, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := udppipe.Read(e.tool, logs)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	// The truth of reach: each stage's copies handed on (sent, dropped on
	// purpose or by a full buffer) per tuple it received, along the chain.
	perIn := func(s string) float64 {
		x := st[s]
		return (x["sent"] + x["dropped"] + x["send_dropped"]) / x["received"]
	}
	reach := map[string]float64{"split": 1}
	reach["mix"] = reach["split"] * perIn("split")
	reach["filt"] = reach["mix"] * perIn("mix")
	reach["lossy"] = reach["filt"] * perIn("filt")
	reach["drain"] = reach["lossy"] * perIn("lossy")
	ups := map[string]string{"split": "gen out", "mix": "split out", "filt": "mix out", "lossy": "filt out"}
	truth := map[string]udppipe.Truth{}
	for op, up := range ups {
		truth[op], _ = recs.Backlogged(op, []string{up}, 1)
	}
	// The highest source rate and DS2's parallelism from the truth.
	maxSrc := math.Inf(1)
	for op, tr := range truth {
		maxSrc = math.Min(maxSrc, tr.Rate/reach[op])
	}
	target := 2 * maxSrc
	out := filepath.Join(dir, "out")
	analyze(t, e, logs, out, "--target-rate", fmt.Sprint(math.Round(target)))
	rows := readCapacity(t, out)
	for _, op := range []string{"split", "mix", "filt", "lossy"} {
		r := wholeRun(t, rows, "operator", op, "in/out")
		tr := truth[op]
		c := r.f("capacity")
		want := int64(math.Ceil(target * reach[op] / tr.Rate))
		got, _ := strconv.ParseInt(r["parallelism_needed"], 10, 64)
		lost, _ := strconv.Atoi(r["lost"])
		t.Logf("%-5s: capacity %.0f/s, truth %.0f/s (%d of %d backlogged): %s; reach %.3f, truth %.3f; selectivity %s; lost %d; parallelism for %.0f/s %d, truth %d",
			op, c, tr.Rate, tr.Backlogged, tr.Visits, pct(c/tr.Rate-1), r.f("reach"), reach[op], r["selectivity"], lost, target, got, want)
		if !(math.Abs(c/tr.Rate-1) <= 0.1) {
			t.Errorf("%s: capacity %.0f/s against its truth %.0f/s: %s", op, c, tr.Rate, pct(c/tr.Rate-1))
		}
		if !(math.Abs(r.f("reach")/reach[op]-1) <= 0.01) {
			t.Errorf("%s: reach %.4f, the stages' counters say %.4f", op, r.f("reach"), reach[op])
		}
		// DS2's rule on the truth: the same count, unless the truth lies
		// within the 10% allowed of a whole number of instances.
		exact := target * reach[op] / tr.Rate
		if got != want && math.Abs(exact-math.Round(exact)) > 0.1*exact {
			t.Errorf("%s: parallelism %d for %.0f/s, the truth says %d (%.2f)", op, got, target, want, exact)
		}
	}
	sel := wholeRun(t, rows, "operator", "filt", "in/out").f("selectivity")
	if want := st["filt"]["sent"] / st["filt"]["received"]; math.Abs(sel-want) > 0.01 {
		t.Errorf("filt's selectivity %.4f, it kept %.4f of what it took", sel, want)
	}
	lossy := wholeRun(t, rows, "operator", "lossy", "in/out")
	lost, _ := strconv.Atoi(lossy["lost"])
	want := recs.Lost([]string{"lossy out"}, []string{"drain in"})
	t.Logf("lossy dropped %.0f on purpose; the records show %d copies lost on the way to drain; analyze says %d (%s)", st["lossy"]["dropped"], want, lost, lossy["note"])
	if lost != want || float64(lost) < st["lossy"]["dropped"] {
		t.Errorf("lossy's lost %d: the records show %d, it dropped %.0f on purpose", lost, want, st["lossy"]["dropped"])
	}
	if f, _ := strconv.Atoi(wholeRun(t, rows, "operator", "filt", "in/out")["lost"]); f != recs.Lost([]string{"filt out"}, []string{"lossy in"}) {
		t.Errorf("filt's lost %d: its filtering is not loss", f)
	}
}
