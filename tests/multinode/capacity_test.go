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

// checkCapacity holds capacity.parquet (README, "Capacity") to the truth of
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
		t.Fatal(err)
	}
	maxErrCycles := 0.0
	for _, d := range durs {
		maxErrCycles = math.Max(maxErrCycles, d.err)
	}
	rows, err := results.ReadAll[capacity.Row](filepath.Join(outDir, "capacity.parquet"))
	if err != nil {
		t.Fatal(err)
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
	slowest, slowestWork := "", 0
	for _, n := range tr.nodes {
		if n.role != "relay" {
			continue
		}
		if n.workNs > slowestWork {
			slowest, slowestWork = n.stage, n.workNs
		}
		in, out := n.stage+" in", n.stage+" out"
		up := p[indexOf(p, in)-1] // the upstream hand-off
		all, ok := inst[key{n.stage, -1}]
		if !ok {
			t.Errorf("capacity: no whole-run row of relay %s (node %s)", n.stage, n.name)
			continue
		}
		// Service rate: tuples over their true own service time.
		var svc float64
		for id := 0; id < nTuples; id++ {
			svc += trueRef(out, id) - trueRef(in, id)
		}
		truthRate := float64(nTuples) / (svc / refHz)
		rel := all.ServiceRate/truthRate - 1
		t.Logf("capacity: %s on %s: service rate %.0f/s (truth %.0f/s, %+.1e), busy share %.3f, %d tuples in, work %d ns",
			n.stage, n.name, all.ServiceRate, truthRate, rel, all.BusyShare, all.TuplesIn, n.workNs)
		if all.TuplesIn != nTuples || all.TuplesOut != nTuples {
			t.Errorf("capacity: %s: %d in, %d out, want %d", n.stage, all.TuplesIn, all.TuplesOut, nTuples)
		}
		// One node's records differ by the node's rate estimate only
		// (ppm): 50 ppm is far below the 370-1100 ppm between the nodes.
		if !(math.Abs(rel) <= 5e-5) {
			t.Errorf("capacity: %s: service rate %.2f/s, truth %.2f/s (%+.2e)", n.stage, all.ServiceRate, truthRate, rel)
		}
		if all.ServiceRate > 1e9/float64(n.workNs) {
			t.Errorf("capacity: %s: service rate %.0f/s beats its spin of %d ns a tuple", n.stage, all.ServiceRate, n.workNs)
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
					t.Errorf("capacity: %s window %d [%.3f s, %.3f s): %.1f %s, truth %d (+%d within %.0f cycles of an edge)",
						n.stage, k, r.StartS, r.EndS, c.got, c.what, sure, near, slack)
				}
			}
		}
		if w.Level == "" {
			t.Errorf("capacity: relay %s has no window rows", n.stage)
		} else if width <= 0 {
			t.Errorf("capacity: %s: windows of %v s", n.stage, width)
		}
	}
	// The slowest relay limits the pipeline.
	var names []string
	for op, r := range ops {
		names = append(names, op)
		if r.Bottleneck != (op == slowest) {
			t.Errorf("capacity: operator %s bottleneck=%v, want the slowest relay %s to be the bottleneck", op, r.Bottleneck, slowest)
		}
	}
	sort.Strings(names)
	if len(ops) == 0 {
		t.Errorf("capacity: no operator rows")
	}
	t.Logf("capacity: operators %v; bottleneck %s, max source rate %.0f/s", names, slowest, ops[slowest].MaxSourceRate)
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
