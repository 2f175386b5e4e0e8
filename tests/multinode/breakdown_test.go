package multinode

import (
	"cloudprofiler/tests/internal/testrun"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
)

// modelJSON is what the tests read of an analysis's model.json.
type modelJSON struct {
	Ref   string  `json:"ref"`
	RefHz float64 `json:"ref_hz"`
}

// readModel reads outDir's model.json.
func readModel(t *testing.T, outDir string) modelJSON {
	t.Helper()
	var m modelJSON
	b, err := os.ReadFile(filepath.Join(outDir, "model.json"))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}
	return m
}

// bdRow is one row of breakdown.csv.
type bdRow struct {
	group, part, where  string
	tuples              int64
	e2eMeanUS, e2eBound float64
	meanUS, boundUS     float64
	totalCycles         int64
}

// readBreakdown reads breakdown.csv by its header's names.
func readBreakdown(path string) ([]bdRow, error) {
	recs, err := testrun.ReadCSV(path, []string{"group", "tuples", "e2e_mean_us", "e2e_bound_us", "part", "where", "mean_us", "share", "bound_us", "total_cycles"})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s: no rows", path)
	}
	var rows []bdRow
	for i, rec := range recs {
		var r bdRow
		var errs [6]error
		r.group, r.part, r.where = rec["group"], rec["part"], rec["where"]
		r.tuples, errs[0] = strconv.ParseInt(rec["tuples"], 10, 64)
		r.e2eMeanUS, errs[1] = strconv.ParseFloat(rec["e2e_mean_us"], 64)
		r.e2eBound, errs[2] = strconv.ParseFloat(rec["e2e_bound_us"], 64)
		r.meanUS, errs[3] = strconv.ParseFloat(rec["mean_us"], 64)
		r.boundUS, errs[4] = strconv.ParseFloat(rec["bound_us"], 64)
		r.totalCycles, errs[5] = strconv.ParseInt(rec["total_cycles"], 10, 64)
		for _, e := range errs {
			if e != nil {
				return nil, fmt.Errorf("%s line %d: %w", path, i+2, e)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// checkBreakdown holds breakdown.csv (docs/critical-path.md) to
// the truth of a run on several nodes. The relays' channels mark operator
// instances, so each tuple's journey source out -> map in, map out ->
// reduce in, reduce out -> sink in takes apart into the relays' compute
// (in..out, one process: no bound) and, per hop between nodes, queueing at
// the receiver and the transfer on the link, the hop's inter-node bound on
// the one of the two that starts at the sender's record. Per group, the
// parts' total_cycles add up to the end-to-end's exactly and their bounds to
// at least its bound; every link between two nodes carries a bound. In the
// group of all journeys (every tuple), the end-to-end mean, each hop's
// queue + transfer, the sum of the cross-node parts and each relay's
// compute are within their mean bounds (and 1 cycle of rounding plus the
// truth's slack per tuple) of the true means from the logged counters.
func (tr truth) checkBreakdown(t *testing.T, outDir string) {
	t.Helper()
	model := readModel(t, outDir)
	hz := model.RefHz
	rows, err := readBreakdown(filepath.Join(outDir, "breakdown.csv"))
	if err != nil {
		t.Fatalf("check failed: breakdown: %v", err)
	}
	durs, err := readDurations(filepath.Join(outDir, "durations.parquet"))
	if err != nil {
		t.Fatalf("check failed: %v", err)
	}

	// The journey from the topology: each hop into an in is a hop between
	// two stages (a link FROM -> TO, across nodes when the stages' nodes
	// differ), each in..out a relay's compute.
	p := path(tr.nodes)
	stageOf := func(ch string) string {
		return strings.TrimSuffix(strings.TrimSuffix(ch, " in"), " out")
	}
	type hop struct {
		from, to string // channels
		link     string // "FROM -> TO" (transfer), or "" (compute)
		op       string // the operator the hop reaches (its queue) or computes at
		cross    bool
	}
	var hops []hop
	for i := 1; i < len(p); i++ {
		x, y := p[i-1], p[i]
		h := hop{from: x, to: y, op: stageOf(y), cross: tr.logged.node[x] != tr.logged.node[y]}
		if stageOf(x) != stageOf(y) {
			h.link = stageOf(x) + " -> " + stageOf(y)
		}
		hops = append(hops, h)
	}
	first, last := p[0], p[len(p)-1]

	// Per group: the parts add up exactly, their bounds cover the
	// end-to-end's, every cross-node link carries a bound, parts within one
	// node none.
	type group struct {
		e2e   bdRow
		parts map[string]bdRow // part + "|" + where
		sumC  int64
		sumB  float64
	}
	groups := map[string]*group{}
	var order []string
	for _, r := range rows {
		g := groups[r.group]
		if g == nil {
			g = &group{parts: map[string]bdRow{}}
			groups[r.group] = g
			order = append(order, r.group)
		}
		if r.part == "end-to-end" {
			if g.e2e.part != "" {
				t.Errorf("check failed: breakdown: group %s has two end-to-end rows", r.group)
			}
			g.e2e = r
			continue
		}
		k := r.part + "|" + r.where
		if _, dup := g.parts[k]; dup {
			t.Errorf("check failed: breakdown: group %s has two %s %q rows", r.group, r.part, r.where)
		}
		g.parts[k] = r
		g.sumC += r.totalCycles
		g.sumB += r.boundUS
	}
	for _, name := range []string{"p99", "median", "all"} {
		if groups[name] == nil || groups[name].e2e.part == "" {
			t.Errorf("check failed: breakdown: no end-to-end row of group %s (groups %v)", name, order)
		}
	}
	if t.Failed() {
		return
	}
	for _, name := range order {
		g := groups[name]
		if g.sumC != g.e2e.totalCycles {
			t.Errorf("check failed: breakdown %s: the parts' total_cycles add up to %d, the end-to-end's is %d", name, g.sumC, g.e2e.totalCycles)
		}
		if !(g.sumB >= g.e2e.boundUS*(1-1e-9)) {
			t.Errorf("check failed: breakdown %s: the parts' bounds add up to %.6f us, under the end-to-end bound %.6f us", name, g.sumB, g.e2e.boundUS)
		}
		for k, r := range g.parts {
			if r.tuples != g.e2e.tuples || r.e2eMeanUS != g.e2e.e2eMeanUS || r.e2eBound != g.e2e.e2eBound {
				t.Errorf("check failed: breakdown %s %s: tuples/e2e columns %d %v %v differ from the end-to-end row's", name, k, r.tuples, r.e2eMeanUS, r.e2eBound)
			}
			if !(r.boundUS >= 0) {
				t.Errorf("check failed: breakdown %s %s: bound %v", name, k, r.boundUS)
			}
		}
		for _, h := range hops {
			if h.link == "" {
				c, ok := g.parts["compute|"+h.op]
				if !ok {
					t.Errorf("check failed: breakdown %s: no compute row of %s", name, h.op)
				} else if c.boundUS != 0 {
					t.Errorf("check failed: breakdown %s: compute at %s (one process) has bound %v us, want 0", name, h.op, c.boundUS)
				}
				continue
			}
			// A cross-node hop's bound sits on the part that starts at the
			// sender's record: the transfer, or the queueing when the
			// receiver was busy (then the transfer, from the receiver's
			// previous departure to its in, is within one node). In a
			// group of queued tuples (the tail) it is all on the queue.
			x, ok := g.parts["transfer|"+h.link]
			q := g.parts["queue|"+h.op]
			switch {
			case !ok && !(h.cross && q.boundUS > 0):
				t.Errorf("check failed: breakdown %s: no transfer row of link %q", name, h.link)
			case h.cross && !(x.boundUS+q.boundUS > 0):
				t.Errorf("check failed: breakdown %s: the hop %q crosses nodes %s -> %s but neither its transfer nor the queue at %s carries a bound (%v, %v us)", name, h.link,
					tr.logged.node[h.from], tr.logged.node[h.to], h.op, x.boundUS, q.boundUS)
			case !h.cross && x.boundUS != 0:
				t.Errorf("check failed: breakdown %s: transfer %q within one node carries bound %v us, want 0", name, h.link, x.boundUS)
			}
		}
		// No part but the journey's: the relays' compute, the receivers'
		// queues, the links between the stages (this pipeline has no
		// unmarked records in a process: no other).
		want := map[string]bool{}
		for _, h := range hops {
			if h.link == "" {
				want["compute|"+h.op] = true
			} else {
				want["queue|"+h.op] = true
				want["transfer|"+h.link] = true
			}
		}
		for k, r := range g.parts {
			if !want[k] && (r.totalCycles != 0 || r.boundUS != 0) {
				t.Errorf("check failed: breakdown %s: unexpected part %s (total %d cycles, bound %v us)", name, k, r.totalCycles, r.boundUS)
			}
		}
	}

	// The truth, in the 'all' group: every tuple's journey.
	all := groups["all"]
	n := float64(nTuples)
	if all.e2e.tuples != nTuples {
		t.Errorf("check failed: breakdown all: %d tuples, want %d", all.e2e.tuples, nTuples)
		return
	}
	fr := tr.fakes[model.Ref]
	trueRef := func(ch string, id int) float64 {
		return rawMid(tr.fakes[tr.logged.node[ch]], tr.logged.tscs[ch][id]) * fr.Rate()
	}
	trueSum := func(x, y string) float64 {
		s := 0.0
		for id := 0; id < nTuples; id++ {
			s += trueRef(y, id) - trueRef(x, id)
		}
		return s
	}
	// The durations' bounds, summed per channel pair: the parts' bounds
	// must be theirs (a hop's bound sits on its queue or its transfer).
	durErr := map[[2]string]float64{}
	durN := map[[2]string]int{}
	for _, d := range durs {
		k := [2]string{d.fromCh, d.toCh}
		durErr[k] += d.err
		durN[k]++
	}
	cyc := func(us float64) float64 { return us * 1e-6 * hz * n } // a mean in us, as a total in cycles
	usOf := func(c float64) float64 { return c / n / hz * 1e6 }   // a total in cycles, as a mean in us
	perTuple := 1 + slackCycles                                   // rounding to whole cycles, the truth's slack
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "  part\tmean us\ttrue mean us\tdiff us\tbound us\tdurations' mean bound us\t\n")
	checkPart := func(what string, total, truth, boundUS, durBound float64, k int) {
		diff := total - truth
		tol := cyc(boundUS) + float64(k)*n*perTuple
		fmt.Fprintf(tw, "  %s\t%.3f\t%.3f\t%+.4f\t%.3f\t%.3f\t\n", what, usOf(total), usOf(truth), usOf(diff), boundUS, usOf(durBound))
		if !(math.Abs(diff) <= tol) {
			t.Errorf("check failed: breakdown all %s: mean %.4f us, truth %.4f us: off by %.4f us, more than the bound %.4f us (+ %.0f cycles a tuple)",
				what, usOf(total), usOf(truth), usOf(diff), boundUS, float64(k)*perTuple)
		}
	}
	e2eKey := [2]string{first, last}
	if durN[e2eKey] != nTuples {
		t.Errorf("check failed: durations.parquet: %d end-to-end rows %q -> %q, want %d", durN[e2eKey], first, last, nTuples)
	}
	// The end-to-end bound is the end_to_end durations' mean bound.
	if eb := usOf(durErr[e2eKey]); math.Abs(all.e2e.boundUS-eb) > 1e-6*eb+1e-9 {
		t.Errorf("check failed: breakdown all: end-to-end bound %.6f us, the end_to_end durations' mean bound is %.6f us", all.e2e.boundUS, eb)
	}
	checkPart("end-to-end", float64(all.e2e.totalCycles), trueSum(first, last), all.e2e.boundUS, durErr[e2eKey], 1)
	var crossTotal, crossTruth, crossBound, crossDur float64
	nCross := 0
	for _, h := range hops {
		k := [2]string{h.from, h.to}
		if h.link == "" {
			c := all.parts["compute|"+h.op]
			checkPart("compute "+h.op, float64(c.totalCycles), trueSum(h.from, h.to), usOf(durErr[k]), durErr[k], 1)
			continue
		}
		q, tp := all.parts["queue|"+h.op], all.parts["transfer|"+h.link]
		total, bound := float64(q.totalCycles+tp.totalCycles), q.boundUS+tp.boundUS
		truth := trueSum(h.from, h.to)
		// The hop's bound is on its queue or its transfer: together they
		// carry the hop's durations' bounds (float32 in between).
		if db := usOf(durErr[k]); math.Abs(bound-db) > 1e-6*db+1e-9 {
			t.Errorf("check failed: breakdown all: queue at %s + transfer %q carry bound %.6f us, the hop's durations %.6f us", h.op, h.link, bound, db)
		}
		checkPart(fmt.Sprintf("queue %s + transfer %s (%s -> %s)", h.op, h.link, tr.logged.node[h.from], tr.logged.node[h.to]),
			total, truth, bound, durErr[k], 1)
		fmt.Fprintf(tw, "    queue %s\t%.3f\t\t\t%.3f\t\t\n", h.op, q.meanUS, q.boundUS)
		fmt.Fprintf(tw, "    transfer %s\t%.3f\t\t\t%.3f\t\t\n", h.link, tp.meanUS, tp.boundUS)
		if h.cross {
			crossTotal += total
			crossTruth += truth
			crossBound += bound
			crossDur += durErr[k]
			nCross++
		}
	}
	if nCross == 0 {
		t.Errorf("check failed: breakdown: no hop of the pipeline crosses nodes")
	}
	checkPart("cross-node parts", crossTotal, crossTruth, crossBound, crossDur, nCross)
	tw.Flush()

	var gs strings.Builder
	for _, name := range order {
		g := groups[name]
		fmt.Fprintf(&gs, "  %s: %d tuples, end-to-end %.3f ± %.3f us; parts add up to %d of %d cycles, their bounds to %.3f us\n",
			name, g.e2e.tuples, g.e2e.e2eMeanUS, g.e2e.e2eBound, g.sumC, g.e2e.totalCycles, g.sumB)
	}
	t.Logf("breakdown (ref %s):\n%sgroup all against the truth (mean per tuple):\n%s", model.Ref, gs.String(), sb.String())
}
