package mace

import (
	"fmt"
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/cost"

	"github.com/stretchr/testify/require"
)

// A chain src -> A -> B -> sink simulated exactly: each operator a FIFO
// server of its own (FIFO in a chain is stimulus-time order), transfers of
// d; colocated, A and B one server doing both (stimulus-time order on one
// CPU finishes a tuple's A and B before the next tuple's A).
type sim struct {
	hz        float64 // cycles per second
	a, b, d   float64 // seconds
	colocated bool
}

// The channels: src out, A in, A out, B in, B out, sink in, sink out.
var simChans = []Channel{
	{Inst: 0, Role: capacity.RoleOut},
	{Inst: 1, Role: capacity.RoleIn}, {Inst: 1, Role: capacity.RoleOut},
	{Inst: 2, Role: capacity.RoleIn}, {Inst: 2, Role: capacity.RoleOut},
	{Inst: 3, Role: capacity.RoleIn}, {Inst: 3, Role: capacity.RoleOut},
}

var simInsts = []Instance{
	{Operator: "src", Label: "a/1/0", Machine: "a"},
	{Operator: "A", Label: "a/1/1", Machine: "a", HasIn: true},
	{Operator: "B", Label: "b/2/0", Machine: "b", HasIn: true},
	{Operator: "sink", Label: "b/3/0", Machine: "b", HasIn: true},
}

// onOff is the arrivals: high phases at rate hi for on seconds, low
// phases at rate lo for off seconds, for total seconds (Poisson).
func onOff(r *rand.Rand, hi, lo, on, off, total float64) []float64 {
	var ts []float64
	t := 0.0
	for t < total {
		phase := math.Mod(t, on+off)
		rate := lo
		if phase < on {
			rate = hi
		}
		t += r.ExpFloat64() / rate
		ts = append(ts, t)
	}
	return ts
}

// walk sums the cost model on Mace's windows as the critical-path
// analysis's walk of the visits does: each instance's visits (an in, its
// last out, the tuple's record before the in) in the order of their ins,
// those handed off no later than the previous departure taken while
// backlogged.
func walk(t *testing.T, cfg *Config, tuples [][]capacity.Event) CostModel {
	t.Helper()
	type visit struct{ h, in, dep float64 }
	per := make([][]visit, len(cfg.Insts))
	for _, evs := range tuples {
		for i, e := range evs {
			c := cfg.Chans[e.Ch]
			if c.Inst < 0 || c.Role != capacity.RoleIn {
				continue
			}
			v := visit{h: math.Inf(1), in: e.Est, dep: e.Est}
			if i > 0 {
				v.h = evs[i-1].Est
			}
			for k := i + 1; k < len(evs); k++ {
				ck := cfg.Chans[evs[k].Ch]
				if ck.Inst != c.Inst || ck.Role == capacity.RoleIn {
					break
				}
				if ck.Role == capacity.RoleOut {
					v.dep = evs[k].Est
				}
			}
			per[c.Inst] = append(per[c.Inst], v)
		}
	}
	n := int(math.Max(1, math.Ceil((cfg.T1-cfg.T0)/cfg.Width)))
	acc, err := cost.NewAcc(len(cfg.Insts), cost.Grid{T0: cfg.T0, Width: cfg.Width, N: n, Sub: 4})
	require.NoError(t, err)
	cm := CostModel{Acc: acc}
	hasOut := make([]bool, len(cfg.Insts))
	for _, c := range cfg.Chans {
		if c.Inst >= 0 && c.Role == capacity.RoleOut {
			hasOut[c.Inst] = true
		}
	}
	for j, vs := range per {
		cm.Opts = append(cm.Opts, cost.Options{Hz: cfg.Hz, MinTake: 10})
		if !hasOut[j] {
			continue
		}
		sort.Slice(vs, func(a, b int) bool { return vs[a].in < vs[b].in })
		for k, v := range vs {
			acc.Visit(j, int64(v.in))
			acc.Own(j, int64(v.in), int64(v.dep))
			if k > 0 && v.h <= vs[k-1].dep {
				acc.Take(j, int64(vs[k-1].dep), int64(v.in), int64(v.dep))
			}
		}
	}
	return cm
}

// run feeds the simulated tuples to an accumulator and returns it with
// the true largest latency per window of w seconds at rate 1, and the
// cost model.
func (s sim) run(t *testing.T, arrivals []float64, w float64, rates []float64) (*Acc, []float64, CostModel) {
	t.Helper()
	cfg := &Config{Hz: s.hz, T0: arrivals[0] * s.hz, T1: 0, Width: w * s.hz, Chans: simChans, Insts: simInsts, Rates: rates}
	type tup struct{ ev [7]float64 }
	tups := make([]tup, len(arrivals))
	freeA, freeB := 0.0, 0.0
	for k, at := range arrivals {
		e := &tups[k].ev
		e[0] = at
		if s.colocated {
			start := math.Max(at+s.d, freeB)
			e[1], e[2] = start, start+s.a
			e[3], e[4] = e[2], e[2]+s.b
			freeB = e[4]
		} else {
			e[1] = math.Max(at+s.d, freeA)
			e[2] = e[1] + s.a
			freeA = e[2]
			e[3] = math.Max(e[2]+s.d, freeB)
			e[4] = e[3] + s.b
			freeB = e[4]
		}
		e[5] = e[4] + s.d
		e[6] = e[5]
		cfg.T1 = math.Max(cfg.T1, e[6]*s.hz)
	}
	acc, err := NewAcc(cfg)
	require.NoError(t, err)
	truth := make([]float64, acc.n[0])
	all := make([][]capacity.Event, len(tups))
	for k := range tups {
		evs := make([]capacity.Event, 7)
		for i, v := range tups[k].ev {
			evs[i] = capacity.Event{Ch: uint32(i), Est: v * s.hz}
		}
		all[k] = evs
		acc.Tuple(int64(k), evs, true)
		p := acc.window(evs[0].Est, 0)
		truth[p] = math.Max(truth[p], tups[k].ev[6]-tups[k].ev[0])
	}
	return acc, truth, walk(t, cfg, all)
}

func scenario(t *testing.T, res *Result, name string) Scenario {
	for _, s := range res.Scenarios {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return Scenario{}
}

// The theorem on an exact simulation: every window's largest latency
// within [Mace, Mace + w + eps + the smallest latency] (99% of them: the
// theorem assumes arrivals even within a window, these are Poisson), the worst case
// within 4% when it spans 10 windows or more; the what-ifs against
// simulations made that way within 10%; the input rate at which latency
// stops being bounded from the bottleneck's load.
func TestMaceOnSimulatedChain(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	base := sim{hz: 1e9, a: 20e-6, b: 50e-6, d: 30e-6}
	const w = 0.01
	// B's capacity 20000/s: high phases at 30000/s for 0.4 s, low at 300/s
	// (100 times lower). Halved, B still cannot keep up with the high phase
	// at twice the rate; colocated, A and B together cannot at the rate.
	arr := onOff(r, 30000, 300, 0.4, 1.6, 8)
	acc, truth, cm := base.run(t, arr, w, []float64{1, 2})
	wi := []WhatIf{mustWhatIf(t, "rate=x2"), mustWhatIf(t, "rate=x2;cost:B=0.5"), mustWhatIf(t, "colocate:A,B")}
	res, err := Finish(acc, wi, nil, 0, cm)
	require.NoError(t, err)
	// A, B and the sink (0); the source has no in: no cost. A tuple handed
	// off before the previous departure but still in flight (its 30 us
	// transfer) counts as taken while backlogged: its wait is in A's take.
	require.InDelta(t, 20e-6+50e-6, res.EpsS, 5e-6)
	out := 0
	for _, row := range res.Rows {
		if row.Scenario != "measured" || row.Tuples == 0 {
			continue
		}
		require.InDelta(t, truth[row.Window], row.MeasuredMaxS, 1e-9)
		if !row.Within {
			out++
			t.Logf("window %d: measured %.6f outside [%.6f, %.6f]", row.Window, row.MeasuredMaxS, row.MaceS, row.BoundS)
		}
	}
	m := scenario(t, res, "measured")
	t.Logf("%d of %d windows outside the bounds (Poisson arrivals bunch within a sub-window)", out, m.Windows)
	require.GreaterOrEqual(t, m.Within, 0.99, "windows within the bounds")
	t.Logf("measured: Mace WC %.4f s, Lat WC %.4f s (%+.2f%%); load %.3f on %s, bounded up to x%.3f (%.0f tuples/s)",
		m.WorstMaceS, m.WorstMeasuredS, 100*(m.WorstMaceS/m.WorstMeasuredS-1), m.Load, m.Bottleneck, m.MaxRate, m.MaxSourceRate)
	require.Greater(t, m.WorstMeasuredS, 10*w)
	require.InDelta(t, 1, m.WorstLatencyS/m.WorstMeasuredS, 0.04)
	require.Contains(t, m.Bottleneck, "B@")
	// B's long-run load: its tuples x 50 us over the span.
	span := (acc.cfg.T1 - acc.cfg.T0) / base.hz
	require.InDelta(t, float64(len(arr))*50e-6/span, m.Load, 1e-3)

	// What-ifs against simulations made that way.
	check := func(name string, s sim, arr []float64) {
		_, tr, _ := s.run(t, arr, w, []float64{1})
		worst := 0.0
		for _, v := range tr {
			worst = math.Max(worst, v)
		}
		sc := scenario(t, res, name)
		t.Logf("%s: predicted worst %.4f s, simulated %.4f s (%+.2f%%)", name, sc.WorstLatencyS, worst, 100*(sc.WorstLatencyS/worst-1))
		require.InDelta(t, 1, sc.WorstLatencyS/worst, 0.1, name)
	}
	fast := make([]float64, len(arr))
	for k, v := range arr {
		fast[k] = arr[0] + (v-arr[0])/2
	}
	check("rate=x2", base, fast)
	half := base
	half.b /= 2
	check("rate=x2;cost:B=0.5", half, fast)
	co := base
	co.colocated = true
	check("colocate:A,B", co, arr)
	// Twice the rate, the same run: the same limit (as a multiple of the measured rate).
	require.InDelta(t, m.MaxRate, scenario(t, res, "rate=x2").MaxRate, 1e-9*m.MaxRate)
	require.InDelta(t, 2*m.MaxRate, scenario(t, res, "rate=x2;cost:B=0.5").MaxRate, 1e-6*m.MaxRate) // B at 25 us: still above A's 20
	require.Empty(t, res.Flags, "a FIFO chain on its own CPUs breaks no assumption")
}

func costOf(res *Result, op string) float64 {
	for _, c := range res.Costs {
		if c.Operator == op {
			return c.CostS
		}
	}
	return math.NaN()
}

func mustWhatIf(t *testing.T, s string) WhatIf {
	t.Helper()
	w, err := ParseWhatIf(s)
	require.NoError(t, err)
	return w
}

func TestParseWhatIf(t *testing.T) {
	w := mustWhatIf(t, "rate=x2; cost:B=0.5;colocate:A,B,C")
	require.Equal(t, 2.0, w.Rate)
	require.Equal(t, map[string]float64{"B": 0.5}, w.Cost)
	require.Equal(t, [][]string{{"A", "B", "C"}}, w.Colocate)
	require.Equal(t, 3.0, mustWhatIf(t, "rate=3").Rate)
	for _, bad := range []string{"", "rate=x0", "rate=abc", "cost:B", "cost:=1", "cost:B=-1", "colocate:A", "colocate:A,", "speed=2"} {
		_, err := ParseWhatIf(bad)
		require.Error(t, err, bad)
	}
	// An operator the run does not have.
	acc, _, cm := sim{hz: 1e9, a: 1e-6, b: 2e-6, d: 1e-6}.run(t, []float64{1, 2, 3}, 1, []float64{1})
	_, err := Finish(acc, []WhatIf{mustWhatIf(t, "cost:C=0.5")}, nil, 0, cm)
	require.ErrorContains(t, err, `no operator "C"`)
	_, err = Finish(acc, []WhatIf{mustWhatIf(t, "rate=x2")}, nil, 0, cm)
	require.ErrorContains(t, err, "not counted")
}

// Costs fitted on the first share of the run, and costs from another run.
func TestMaceCosts(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	arr := onOff(r, 30000, 300, 0.4, 1.6, 4)
	s := sim{hz: 1e9, a: 20e-6, b: 50e-6, d: 30e-6}
	acc, _, cm := s.run(t, arr, 0.01, []float64{1})
	res, err := Finish(acc, nil, nil, 0.08, cm)
	require.NoError(t, err)
	require.InDelta(t, 50e-6, costOf(res, "B"), 1e-12)
	for _, c := range res.Costs {
		require.Contains(t, c.From, "this run's first 8% of tuples")
		if c.Operator == "B" {
			// B's tuples of those windows by the time it took them: it
			// lags behind the stimuli in a high phase.
			require.Greater(t, float64(c.Tuples), 0.04*float64(len(arr)))
			require.LessOrEqual(t, float64(c.Tuples), 0.08*float64(len(arr)))
		}
	}
	res, err = Finish(acc, nil, map[string]float64{"B": 25e-6, "X": 1}, 0, cm)
	require.NoError(t, err)
	require.InDelta(t, 25e-6, costOf(res, "B"), 1e-15)
	require.Contains(t, strings.Join(res.Notes, "\n"), `operator "X" is not in this run`)
}

// What breaks the assumptions is flagged: streams merging, a CPU shared,
// tuples taken out of stimulus order, too few tuples a window, ids made
// without lineage; an operator without out marks has no cost, and says so.
func TestMaceFlags(t *testing.T) {
	chans := []Channel{
		{Inst: 0, Role: capacity.RoleOut}, {Inst: 1, Role: capacity.RoleOut}, // two sources
		{Inst: 2, Role: capacity.RoleIn}, {Inst: 2, Role: capacity.RoleOut}, // M merges them
		{Inst: 3, Role: capacity.RoleIn}, // a sink with no out
	}
	insts := []Instance{{"s1", "a/1/0", "a", false}, {"s2", "a/1/1", "a", false}, {"M", "a/2/0", "a", true}, {"sink", "b/3/0", "b", true}}
	cfg := &Config{Hz: 1e9, T0: 0, T1: 10e9, Width: 1e9, Chans: chans, Insts: insts, Rates: []float64{1}}
	acc, err := NewAcc(cfg)
	require.NoError(t, err)
	// 5 windows of 5 tuples (few), from both sources; M taken out of
	// order (later stimuli first within pairs).
	id := int64(0)
	var all [][]capacity.Event
	for p := 0; p < 5; p++ {
		for k := 0; k < 5; k++ {
			stim := float64(p)*1e9 + float64(k)*1e8
			in := stim + 5e7
			if k%2 == 0 {
				in += 1.5e8 // the next tuple goes first
			}
			for rep := 0; rep < 640; rep++ { // the sample keeps 1 id in 64
				evs := []capacity.Event{{Ch: uint32(k % 2), Est: stim}, {Ch: 2, Est: in}, {Ch: 3, Est: in + 1e6}, {Ch: 4, Est: in + 2e6}}
				acc.Tuple(id, evs, rep == 0)
				all = append(all, evs)
				id++
			}
		}
	}
	// A tuple that starts at M's out: an id M made, without lineage.
	acc.Tuple(id, []capacity.Event{{Ch: 3, Est: 1e9}, {Ch: 4, Est: 1.1e9}}, true)
	res, err := Finish(acc, nil, nil, 0, walk(t, cfg, all))
	require.NoError(t, err)
	flags := strings.Join(res.Flags, "\n")
	require.Contains(t, flags, "missing lineage: 1 tuple(s) start at M's out (a/2/0)")
	require.Contains(t, flags, "fan-in: M (a/2/0) takes tuples from 2 upstream channels")
	require.Contains(t, flags, "out of order: M (a/2/0)")
	require.Contains(t, flags, "few events: 5 of 5 windows")
	require.Contains(t, strings.Join(res.Notes, "\n"), "no cost per tuple for sink (b/3/0)") // the sources take no input

	// A shared CPU: A's service time doubles in windows where B (same
	// machine) is busy.
	chans = simChans
	insts = []Instance{{"src", "m/1/0", "m", false}, {"A", "m/1/1", "m", true}, {"B", "m/2/0", "m", true}, {"sink", "n/3/0", "n", true}}
	cfg = &Config{Hz: 1e9, T0: 0, T1: 20e9, Width: 1e9, Chans: chans, Insts: insts, Rates: []float64{1}}
	acc, err = NewAcc(cfg)
	require.NoError(t, err)
	all = nil
	for p := 0; p < 20; p++ {
		busy := p%2 == 0
		n, bcost, acost := 50, 1e6, 1e6
		if busy {
			n, bcost, acost = 1000, 0.8e6, 2e6
		}
		for k := 0; k < n; k++ {
			stim := float64(p)*1e9 + float64(k)*(1e9/float64(n))
			e := []float64{stim, stim + 1e3, stim + 1e3 + acost, stim + 2e3 + acost, stim + 2e3 + acost + bcost, stim + 3e3 + acost + bcost, stim + 3e3 + acost + bcost}
			evs := make([]capacity.Event, 7)
			for i, v := range e {
				evs[i] = capacity.Event{Ch: uint32(i), Est: v}
			}
			acc.Tuple(id, evs, true)
			all = append(all, evs)
			id++
		}
	}
	res, err = Finish(acc, nil, nil, 0, walk(t, cfg, all))
	require.NoError(t, err)
	require.Contains(t, strings.Join(res.Flags, "\n"), "shared CPU: A (m/1/1) takes 2.00x as long per tuple while other operators on m are busy")
}

// Bad input: no tuples, a window too narrow for the run, no rate 1.
func TestMaceBadInput(t *testing.T) {
	cfg := &Config{Hz: 1e9, T0: 0, T1: 1e12, Width: 1e3, Chans: simChans, Insts: simInsts, Rates: []float64{1}}
	_, err := NewAcc(cfg)
	require.ErrorContains(t, err, "give a wider --mace-window")
	cfg = &Config{Hz: 1e9, T0: 0, T1: 1e9, Width: 1e9, Chans: simChans, Insts: simInsts, Rates: []float64{2}}
	_, err = NewAcc(cfg)
	require.ErrorContains(t, err, "must start with 1")
	cfg.Rates = []float64{1}
	acc, err := NewAcc(cfg)
	require.NoError(t, err)
	acc.Tuple(1, nil, true)
	acc.Tuple(2, []capacity.Event{{Ch: 0, Est: math.NaN()}}, true)
	res, err := Finish(acc, []WhatIf{mustWhatIf(t, "cost:B=2")}, nil, 0, CostModel{})
	require.NoError(t, err)
	m := scenario(t, res, "measured")
	require.Zero(t, m.Windows)
	require.True(t, math.IsNaN(m.Within))
	require.Zero(t, m.WorstMaceS)
	require.NotEmpty(t, res.Notes) // no costs at all
}

// eps sums the operators' costs in one order, so that it gives the same
// bits every time (in a map's order, the measured scenario's base came out
// 0 or 3e-21 from run to run).
func TestEpsIsDeterministic(t *testing.T) {
	var oc opCosts
	for i, k := range []float64{0.1, 1e-17, 0.7, 3.3e-5, 0.2, 1e-9, 0.3} {
		oc.add(fmt.Sprintf("op%d", i%5), k)
	}
	w := WhatIf{Cost: map[string]float64{"op1": 0.5}}
	first := math.Float64bits(oc.eps(&w))
	// op0..op4 in the order they came, each its instances' mean.
	// (float64 variables: constants would be summed exactly.)
	v := []float64{0.1, 1e-9, 1e-17, 0.3, 0.7, 3.3e-5, 0.2}
	want := 0.0
	want += (v[0] + v[1]) / 2
	want += (v[2] + v[3]) / 2 * 0.5
	want += v[4]
	want += v[5]
	want += v[6]
	require.Equal(t, math.Float64bits(want), first)
	for k := 0; k < 200; k++ {
		require.Equal(t, first, math.Float64bits(oc.eps(&w)), "call %d", k)
	}
}
