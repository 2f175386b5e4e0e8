package multinode

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"testing"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/results"
)

// checkCapacity holds capacity.parquet (docs/capacity.md) to the truth of
// a run on several nodes: the relays' channels follow the naming rule
// ("map in", "map out"), so every relay is an operator instance. Windows are
// in the reference clock from the run's first tuple record; a relay's
// records fall in the windows their true reference times fall in (but for
// those within the analysis's bound of a window's edge), its arrivals in the
// windows of the upstream node's hand-offs, and its service rate is its
// tuples over the true time between its in and out records.
func (tr truth) checkCapacity(t *testing.T, outDir string) {
	t.Helper()
	model := readModel(t, outDir)
	ref, refHz := model.Ref, model.RefHz
	// The largest bound of any duration bounds each record's own.
	durs, err := readDurations(filepath.Join(outDir, "durations.parquet"))
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	maxErrCycles := 0.0
	for _, d := range durs {
		maxErrCycles = math.Max(maxErrCycles, d.err)
	}
	rows, err := results.ReadAll[capacity.Row](filepath.Join(outDir, "capacity.parquet"))
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	fr := tr.fakes[ref]
	// trueRef is a record's true time in reference cycles.
	trueRef := func(ch string, id int) float64 {
		f := tr.fakes[tr.logged.node[ch]]
		return rawMid(f, tr.logged.tscs[ch][id])*fr.Rate() + float64(fr.Offset)
	}
	p := path(tr.nodes)
	t0 := math.Inf(1)
	for _, ch := range p {
		for id := 0; id < nTuples; id++ {
			t0 = math.Min(t0, trueRef(ch, id))
		}
	}
	type key struct {
		op     string
		window int64
	}
	inst := map[key]capacity.Row{}
	ops := map[string]capacity.Row{}
	for _, r := range rows {
		switch {
		case r.Level == "instance" && r.Method == capacity.MethodInOut:
			inst[key{r.Operator, r.Window}] = r
		case r.Level == "operator" && r.Window == -1 && r.Method == capacity.MethodInOut:
			ops[r.Operator] = r
		}
	}
	// Each relay's real capacity: what it departed per second while
	// backlogged, from the true times. A tuple is taken while backlogged
	// when the upstream handed it on before the relay's previous departure;
	// its cost is then the gap between the two departures. Where the two
	// are within the analysis's bound of each other, the analysis may
	// count the tuple either way, so the truth is the range of capacities
	// over those choices. The designed spin does not say which relay
	// limits the pipeline: on a shared machine a relay preempted in its
	// backlogs departs slower than its spin allows.
	//
	// A hand-off is not an arrival, though: the tuple crosses the network
	// to the relay's node, and a relay whose in record says its thread
	// waited since its previous departure (rseq, the kernel's word in the
	// raw record) found its input empty: that tuple was not taken while
	// backlogged, however early it was handed off.
	//
	// The analysis's error on the gap from the upstream's hand-off to the
	// relay's previous departure is that of the hop into the relay (times
	// on one node share their translation).
	type hop struct {
		from, to string
		id       int64
	}
	hopErr := map[hop]float64{}
	for _, d := range durs {
		hopErr[hop{d.fromCh, d.toCh, d.tuple}] = d.err
	}
	trueCap := map[string]capRange{}
	for _, n := range tr.nodes {
		if n.role != "relay" {
			continue
		}
		in, out := n.stage+" in", n.stage+" out"
		up := p[indexOf(p, in)-1] // the upstream hand-off
		var sure, either []float64
		for id := 1; id < nTuples; id++ {
			prev := trueRef(out, id-1)
			gap := trueRef(out, id) - prev
			e, ok := hopErr[hop{up, in, int64(id)}]
			if !ok {
				t.Fatalf("check failed: capacity: no duration %q -> %q of tuple %d", up, in, id)
			}
			if tr.logged.waited[in][id] {
				continue
			}
			switch d := trueRef(up, id) - prev; {
			case math.Abs(d) <= e+2*slackCycles:
				either = append(either, gap)
			case d < 0:
				sure = append(sure, gap)
			}
		}
		c := capRange{sure: len(sure), either: len(either)}
		c.low, c.high = departureRates(sure, either, refHz)
		trueCap[n.stage] = c
		all, ok := inst[key{n.stage, -1}]
		if !ok {
			t.Errorf("check failed: capacity: no whole-run row of relay %s (node %s)", n.stage, n.name)
			continue
		}
		// Service rate: tuples over their true own service time.
		var svc float64
		for id := 0; id < nTuples; id++ {
			svc += trueRef(out, id) - trueRef(in, id)
		}
		truthRate := float64(nTuples) / (svc / refHz)
		rel := all.ServiceRate/truthRate - 1
		t.Logf("capacity: %s on %s: service rate %.0f/s (truth %.0f/s, %+.1e), busy share %.3f, %d tuples in, work %d ns; "+
			"capacity %.0f/s over %d backlogged (truth %.0f-%.0f/s: %d backlogged and %d within the hop's bound of it)",
			n.stage, n.name, all.ServiceRate, truthRate, rel, all.BusyShare, all.TuplesIn, n.workNs,
			all.Capacity, all.Backlogged, c.low, c.high, c.sure, c.either)
		// Capacity: within the truth's range (and the node's rate
		// estimate's ppm).
		if !(all.Capacity >= c.low*(1-5e-5) && all.Capacity <= c.high*(1+5e-5)) {
			t.Errorf("check failed: capacity: %s: capacity %.0f/s, truth %.0f-%.0f/s", n.stage, all.Capacity, c.low, c.high)
		}
		if all.TuplesIn != nTuples || all.TuplesOut != nTuples {
			t.Errorf("check failed: capacity: %s: %d in, %d out, want %d", n.stage, all.TuplesIn, all.TuplesOut, nTuples)
		}
		// One node's records differ by the node's rate estimate only
		// (ppm): 50 ppm is far below the 370-1100 ppm between the nodes.
		if !(math.Abs(rel) <= 5e-5) {
			t.Errorf("check failed: capacity: %s: service rate %.2f/s, truth %.2f/s (%+.2e)", n.stage, all.ServiceRate, truthRate, rel)
		}
		if all.ServiceRate > 1e9/float64(n.workNs) {
			t.Errorf("check failed: capacity: %s: service rate %.0f/s beats its spin of %d ns a tuple", n.stage, all.ServiceRate, n.workNs)
		}
		// Windows: the records of each, from the truth.
		width := all.EndS - all.StartS // whole run: not a window
		var w capacity.Row
		for k := int64(0); ; k++ {
			r, ok := inst[key{n.stage, k}]
			if !ok {
				break
			}
			w = r
			width = r.EndS - r.StartS
			edge0, edge1 := r.StartS*refHz, r.EndS*refHz
			// Records whose true time is within the bound (and the
			// estimate of t0's, also within it) of an edge may fall on
			// either side.
			slack := 2*maxErrCycles + 2*slackCycles
			count := func(ch string) (sure, near int) {
				for id := 0; id < nTuples; id++ {
					x := trueRef(ch, id) - t0
					switch {
					case math.Abs(x-edge0) <= slack || math.Abs(x-edge1) <= slack:
						near++
					case x >= edge0 && x < edge1:
						sure++
					}
				}
				return
			}
			for _, c := range []struct {
				what string
				ch   string
				got  float64
			}{
				{"in records", in, float64(r.TuplesIn)},
				{"out records", out, float64(r.TuplesOut)},
				{"arrivals", up, r.ArrivalsPerS * width},
			} {
				sure, near := count(c.ch)
				if !(c.got >= float64(sure)-0.5 && c.got <= float64(sure+near)+0.5) {
					t.Errorf("check failed: capacity: %s window %d [%.3f s, %.3f s): %.1f %s, truth %d (+%d within %.0f cycles of an edge)",
						n.stage, k, r.StartS, r.EndS, c.got, c.what, sure, near, slack)
				}
			}
		}
		if w.Level == "" {
			t.Errorf("check failed: capacity: relay %s has no window rows", n.stage)
		} else if width <= 0 {
			t.Errorf("check failed: capacity: %s: windows of %v s", n.stage, width)
		}
	}
	// The bottleneck is the relay that departed slowest while backlogged
	// (every tuple reaches each relay once): none other was surely slower.
	var names []string
	bottleneck := ""
	for op, r := range ops {
		names = append(names, op)
		if r.Bottleneck {
			bottleneck = op
		}
	}
	sort.Strings(names)
	if len(ops) == 0 {
		t.Errorf("check failed: capacity: no operator rows")
	}
	b, ok := trueCap[bottleneck]
	if !ok {
		t.Errorf("check failed: capacity: the bottleneck is %q, want a relay (operators %v)", bottleneck, names)
	}
	for op, c := range trueCap {
		if ok && c.high < b.low {
			t.Errorf("check failed: capacity: the bottleneck is %s (truth %.0f-%.0f/s), but %s departed slower while backlogged (%.0f-%.0f/s)",
				bottleneck, b.low, b.high, op, c.low, c.high)
		}
	}
	t.Logf("capacity: operators %v; bottleneck %s, max source rate %.0f/s", names, bottleneck, ops[bottleneck].MaxSourceRate)
}

// capRange is a relay's true capacity: between low and high over the
// tuples surely backlogged and any of those the analysis may count either
// way.
type capRange struct {
	low, high    float64
	sure, either int
}

// departureRates is the lowest and highest departure rate (tuples per
// second of hz cycles) over the gaps in sure and any subset of either: the
// mean gap is smallest with either's shortest gaps added, largest with
// its longest.
func departureRates(sure, either []float64, hz float64) (low, high float64) {
	sort.Float64s(either)
	sum := 0.0
	for _, g := range sure {
		sum += g
	}
	k := float64(len(sure))
	minMean, maxMean := math.Inf(1), math.Inf(-1)
	if k > 0 {
		minMean, maxMean = sum/k, sum/k
	}
	s, n := sum, k
	for _, g := range either {
		s, n = s+g, n+1
		minMean = math.Min(minMean, s/n)
	}
	s, n = sum, k
	for i := len(either) - 1; i >= 0; i-- {
		s, n = s+either[i], n+1
		maxMean = math.Max(maxMean, s/n)
	}
	if math.IsInf(minMean, 0) {
		return math.NaN(), math.NaN()
	}
	return hz / maxMean, hz / minMean
}

// indexOf is the index of s in p.
func indexOf(p []string, s string) int {
	for i, x := range p {
		if x == s {
			return i
		}
	}
	panic(fmt.Sprintf("%q not in %v", s, p))
}
