package multinode

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/results"
	"cloudprofiler/minrtt"
	"cloudprofiler/tests/internal/groundtruth"
	"cloudprofiler/tsc"
)

// Ground truth (package groundtruth): a logged value gives back the
// hardware TSC it was read at, to within one raw cycle, so any duration's
// true length is known exactly.
var (
	rawOf  = groundtruth.RawOf
	rawMid = groundtruth.RawMid
)

const slackCycles = groundtruth.SlackCycles

// duration is one row of durations.parquet (the analyzer's output).
type duration struct {
	tuple                 int64
	fromNode, fromCh      string
	toNode, toCh, kind    string
	start, end            uint64
	cycles, err           float64
	scenario              int
	paperErr, baselineErr float64 // NaN when the analyzer gave none
	seconds, errSeconds   float64
	line                  int
}

// readDurations reads durations.parquet (line: the row's number, from 2
// as in a CSV with its header).
func readDurations(path string) ([]duration, error) {
	rows, err := results.ReadAll[analyze.DurationRow](path)
	if err != nil {
		return nil, err
	}
	out := make([]duration, len(rows))
	for i, r := range rows {
		out[i] = duration{tuple: r.TupleID, fromNode: r.FromNode, fromCh: r.FromChannel, toNode: r.ToNode,
			toCh: r.ToChannel, kind: r.Kind, start: r.StartTSC, end: r.EndTSC, cycles: r.Cycles, err: r.ErrorCycles,
			scenario: int(r.Scenario), paperErr: r.PaperErrorCycles, baselineErr: r.BaselineErrorCycles,
			seconds: r.Seconds, errSeconds: r.ErrorSeconds, line: i + 2}
	}
	return out, nil
}

// truthCycles is a row's true length in reference cycles.
func truthCycles(fakes map[string]tsc.Fake, ref string, d duration) (float64, error) {
	c, err := groundtruth.Cycles(fakes, ref, d.fromNode, d.toNode, d.start, d.end)
	if err != nil {
		return 0, fmt.Errorf("line %d: %v", d.line, err)
	}
	return c, nil
}

// verdict is what checking every row found.
type verdict struct {
	rows       int
	violations []string // one line per violating row (the first ones)
	nViolation int
	// Rows whose truth lies outside the paper's (or the baseline's) own bound:
	// reported, not failed: only the analyzer's bound is asked to be strict.
	paperMiss, baselineMiss int
	// used is, per scenario, |truth - cycles| / (error_cycles + slack) of
	// every row: how much of its bound the truth needed (at most 1).
	used map[int][]float64
}

// check compares every row with the truth.
func check(fakes map[string]tsc.Fake, ref string, rows []duration) (verdict, error) {
	v := verdict{rows: len(rows), used: map[int][]float64{}}
	for _, d := range rows {
		truth, err := truthCycles(fakes, ref, d)
		if err != nil {
			return v, err
		}
		miss := math.Abs(truth - d.cycles)
		v.used[d.scenario] = append(v.used[d.scenario], miss/(d.err+slackCycles))
		if !(miss <= d.err+slackCycles) || d.err < 0 || math.IsNaN(d.err) {
			v.nViolation++
			if len(v.violations) < 10 {
				v.violations = append(v.violations, fmt.Sprintf(
					"line %d: tuple %d %s/%q -> %s/%q scenario %d: truth %.1f, reported %.1f ± %.1f cycles (off by %.1f)",
					d.line, d.tuple, d.fromNode, d.fromCh, d.toNode, d.toCh, d.scenario, truth, d.cycles, d.err, miss))
			}
		}
		if !math.IsNaN(d.paperErr) && miss > d.paperErr+slackCycles {
			v.paperMiss++
		}
		if !math.IsNaN(d.baselineErr) && miss > d.baselineErr+slackCycles {
			v.baselineMiss++
		}
	}
	return v, nil
}

// oneWay is the smallest true one-way delay seen from node to node, in
// hardware cycles, over every probe of every round.
type oneWay map[[2]string]float64

// probeDelays reads the rounds files and returns the minimum one-way delay
// of each ordered pair. A probe origin->responder gives origin->responder
// (truth of Resp - Send) and responder->origin (Recv - truth of Resp). A
// delay that is not positive is a broken clock model and an error.
func probeDelays(fakes map[string]tsc.Fake, rounds []*minrtt.Round) (oneWay, int, error) {
	min := oneWay{}
	n := 0
	note := func(from, to string, d float64) {
		k := [2]string{from, to}
		if cur, ok := min[k]; !ok || d < cur {
			min[k] = d
		}
	}
	for _, r := range rounds {
		for _, dir := range r.Dirs {
			fo, ok1 := fakes[dir.Origin]
			fr, ok2 := fakes[dir.Responder]
			if !ok1 || !ok2 {
				return nil, 0, fmt.Errorf("round %d: unknown node %q or %q", r.Round, dir.Origin, dir.Responder)
			}
			for i, p := range dir.Probes {
				// A probe the kernels timed holds values placed on the
				// counters from their timestamps, which need not be
				// values a counter reads; the processes' readings are.
				kernel := dir.UserProbes != nil && p != dir.UserProbes[i]
				for _, x := range []struct {
					f tsc.Fake
					v uint64
				}{{fo, p.Send}, {fr, p.Resp}, {fo, p.Recv}} {
					if lo, hi := rawOf(x.f, x.v); hi < lo && !kernel {
						return nil, 0, fmt.Errorf("round %d %s->%s probe %v: %d is not a value counter %s ever reads", r.Round, dir.Origin, dir.Responder, p, x.v, x.f)
					}
				}
				send, resp, recv := rawMid(fo, p.Send), rawMid(fr, p.Resp), rawMid(fo, p.Recv)
				fwd, rev := resp-send, recv-resp
				if fwd < -2 || rev < -2 {
					return nil, 0, fmt.Errorf("round %d %s->%s probe %v: one-way delays %.0f and %.0f cycles: the responder's counter is not where its CP_FAKE_TSC says",
						r.Round, dir.Origin, dir.Responder, p, fwd, rev)
				}
				note(dir.Origin, dir.Responder, fwd)
				note(dir.Responder, dir.Origin, rev)
				n++
			}
		}
	}
	return min, n, nil
}

// floor is (min forward + min reverse one-way delay)/2 between a and b in
// hardware cycles: no strict method can bound an a-b offset tighter.
func (w oneWay) floor(a, b string) (float64, bool) {
	f, ok1 := w[[2]string{a, b}]
	r, ok2 := w[[2]string{b, a}]
	return (f + r) / 2, ok1 && ok2
}

// shortest is the smallest sum of minimum one-way delays over any chain of
// nodes from a to b (the direct link is a chain of one); +Inf if none.
func (w oneWay) shortest(a, b string) float64 {
	dist := map[string]float64{a: 0}
	for range len(w) { // Bellman-Ford; every delay is positive
		for k, d := range w {
			if da, ok := dist[k[0]]; ok {
				if db, ok := dist[k[1]]; !ok || da+d < db {
					dist[k[1]] = da + d
				}
			}
		}
	}
	if d, ok := dist[b]; ok {
		return d
	}
	return math.Inf(1)
}

// pathFloor is the floor of the a-b offset when every probe of every pair
// may be combined: an offset known through a chain of links is known to
// within the sums of the chain's one-way minima, and intersecting chains
// leaves (shortest a->b + shortest b->a)/2. Hardware cycles; 0 on one node.
// No method using the probes alone can give a strict bound below it.
func (w oneWay) pathFloor(a, b string) float64 {
	if a == b {
		return 0
	}
	return (w.shortest(a, b) + w.shortest(b, a)) / 2
}

// floorText is the floor of a and b in microseconds with the two minima
// behind it, and the path floor when chains through other nodes beat the
// direct link; a duration on one node has no offset to bound (floor 0).
func (w oneWay) floorText(a, b string) string {
	if a == b {
		return "0 (one node)"
	}
	f, ok := w.floor(a, b)
	if !ok {
		return "n/a"
	}
	us := func(c float64) float64 { return c / tsc.HardwareFreq().Hz * 1e6 }
	txt := fmt.Sprintf("%.1f us (min %s->%s %.1f, %s->%s %.1f)", us(f), a, b, us(w[[2]string{a, b}]), b, a, us(w[[2]string{b, a}]))
	if pf := w.pathFloor(a, b); pf < f-0.5 {
		txt += fmt.Sprintf(", %.1f us through other nodes", us(pf))
	}
	return txt
}

// stats are the median and the maximum of xs (NaNs left out).
func stats(xs []float64) (med, max float64, n int) {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return math.NaN(), math.NaN(), 0
	}
	sort.Float64s(v)
	return v[len(v)/2], v[len(v)-1], len(v)
}

// nearestRank is the q-quantile of xs by nearest rank (as analyze's
// summaries take it): the ceil(q*n)-th smallest.
func nearestRank(xs []float64, q float64) float64 {
	v := slices.Clone(xs)
	sort.Float64s(v)
	r := int(math.Ceil(q * float64(len(v))))
	return v[max(r, 1)-1]
}

func TestRawOfInvertsFake(t *testing.T) {
	for _, s := range []string{"1.0:-3000000000", "0.9996:70000000000", "1.00037:-1500000000", "1.0011:25000000000", "0.5:7", "3.3:-99"} {
		f, err := tsc.ParseFake(s)
		if err != nil {
			t.Fatalf("check failed: %v", err)
		}
		for _, raw := range []uint64{1 << 40, 1<<40 + 1, 123456789012345, 987654321098765, 1<<50 + 12345} {
			v := f.Apply(raw)
			lo, hi := rawOf(f, v)
			if raw < lo || raw > hi || f.Apply(lo) != v || f.Apply(hi) != v || f.Apply(lo-1) == v || f.Apply(hi+1) == v {
				t.Errorf("check failed: %s raw %d -> %d: rawOf gave [%d, %d]", s, raw, v, lo, hi)
			}
			if hi-lo > uint64(math.Ceil(1/f.Rate())) {
				t.Errorf("check failed: %s: range [%d, %d] wider than 1/rate", s, lo, hi)
			}
		}
	}
	// Rate 3.3: only about one value in 3.3 is ever read; the others give
	// an empty range between the raw values around them.
	f, err := tsc.ParseFake("3.3:-99")
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	raw := uint64(1 << 40)
	v := f.Apply(raw) + 1
	lo, hi := rawOf(f, v)
	if hi != lo-1 || f.Apply(hi) >= v || f.Apply(lo) <= v || rawMid(f, v) != float64(lo)-0.5 {
		t.Errorf("check failed: unread value %d: rawOf gave [%d, %d], mid %v", v, lo, hi, rawMid(f, v))
	}
}

// TestCheckFindsViolations runs the checker on rows made from known raw
// values: bounds that hold pass, one that misses the truth by 10 cycles is
// reported.
func TestCheckFindsViolations(t *testing.T) {
	fakes := map[string]tsc.Fake{}
	for n, s := range map[string]string{"a": "1.0:-3000000000", "b": "0.9996:70000000000"} {
		f, err := tsc.ParseFake(s)
		if err != nil {
			t.Fatalf("check failed: %v", err)
		}
		fakes[n] = f
	}
	const raw0 = 5_000_000_000_000
	mk := func(line int, from, to string, rawStart, rawEnd uint64, cycles, bound float64) duration {
		return duration{line: line, fromNode: from, toNode: to, start: fakes[from].Apply(rawStart), end: fakes[to].Apply(rawEnd),
			cycles: cycles, err: bound, paperErr: math.NaN(), baselineErr: math.NaN()}
	}
	rows := []duration{
		mk(2, "a", "b", raw0, raw0+30000, 30000, 0),       // exact, bound 0: within the slack
		mk(3, "a", "b", raw0, raw0+30000, 30500, 600),     // off by 500, bound 600
		mk(4, "b", "b", raw0, raw0+100000, 100000, 0),     // one node, exact
		mk(5, "b", "a", raw0, raw0+30000, 30000+510, 500), // off by 510 > 500 + slack
		mk(6, "a", "b", raw0, raw0+30000, 30000, -1),      // a negative bound
		mk(7, "a", "a", raw0+9, raw0, -9, 0),              // negative durations are fine
	}
	v, err := check(fakes, "a", rows)
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	if v.nViolation != 2 || !strings.HasPrefix(v.violations[0], "line 5:") || !strings.HasPrefix(v.violations[1], "line 6:") {
		t.Fatalf("check failed: want lines 5 and 6 flagged, got %d: %v", v.nViolation, v.violations)
	}
	// Truth is in the reference node's cycles: with b (rate 0.9996) as the
	// reference, 100000 raw cycles are 99960.
	b := []duration{mk(2, "b", "b", raw0, raw0+100000, 99960, 0), mk(3, "b", "b", raw0, raw0+100000, 100000, 0)}
	v, err = check(fakes, "b", b)
	if err != nil || v.nViolation != 1 || !strings.HasPrefix(v.violations[0], "line 3:") {
		t.Fatalf("check failed: ref b: want line 3 flagged: %v %v", err, v.violations)
	}
}
