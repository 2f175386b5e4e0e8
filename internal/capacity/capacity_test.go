package capacity

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/cost"
	"cloudprofiler/internal/logfile"
)

func TestPlanAmbiguousPairing(t *testing.T) {
	chans := []Channel{
		{Node: "b", PID: 20, Name: "map in", Path: "logs/b-1-map_in.cplog", Tuples: true},
		{Node: "b", PID: 20, Name: "map out", Path: "logs/b-2-map_out.cplog", Tuples: true},
		{Node: "b", PID: 21, Name: "map in", Path: "logs/b-3-map_in.cplog", Tuples: true}, // another process: fine
		{Node: "b", PID: 20, Name: "map  in", Path: "logs/b-4-map_in.cplog", Tuples: true},
	}
	_, err := NewPlan(chans)
	require.Error(t, err)
	for _, s := range []string{"logs/b-1-map_in.cplog", "logs/b-4-map_in.cplog", `"map in"`, `"map  in"`, "--no-capacity", "#INSTANCE", "process 20 on node b"} {
		require.Contains(t, err.Error(), s)
	}
	// Distinct instances: no error, two instances in one process.
	chans[3].Name = "map#2 in"
	p, err := NewPlan(chans)
	require.NoError(t, err)
	require.Len(t, p.Operators, 1)
	require.Len(t, p.Instances, 3)
	require.True(t, p.TupleMarks())
}

func TestPlanIgnoresWhatCannotTakePart(t *testing.T) {
	p, err := NewPlan([]Channel{
		{Node: "n", Name: "map count", Path: "c1"},                     // a PERIODICCOUNTER
		{Node: "n", Name: "map in", Path: "c2"},                        // a counter named like a mark
		{Node: "n", Name: "estimates", Path: "c3", ServiceRate: true},  // SERVICERATE not following the rule
		{Node: "n", Name: "src out", Path: "c4", Internal: true},       // a return log
		{Node: "n", Name: "sink count", Path: "c5", ServiceRate: true}, // a count mark
		{Node: "n", Name: "b work", Path: "c6", Tuples: true},          // not a mark
	})
	require.NoError(t, err)
	require.True(t, p.Marked())
	require.False(t, p.TupleMarks())
	require.Len(t, p.Ignored, 3)
	require.Contains(t, p.Ignored[0], "role count needs a CP_SERVICERATE channel")
	require.Contains(t, p.Ignored[1], "role in needs a tuple channel")
	require.Contains(t, p.Ignored[2], "does not follow the naming rule")
	require.Equal(t, 4, p.Instances[0].Chans[RoleCount])
	p, err = NewPlan([]Channel{{Node: "n", Name: "x", Tuples: true}})
	require.NoError(t, err)
	require.False(t, p.Marked())
}

// A CP_LINEAGE channel named "OPERATOR lineage" is recorded with its
// instance, never as a tuple mark; the role on another channel, or another
// role on a LINEAGE channel, is ignored and said so.
func TestPlanLineage(t *testing.T) {
	p, err := NewPlan([]Channel{
		{Node: "n", PID: 1, Name: "win in", Path: "c0", Tuples: true},
		{Node: "n", PID: 1, Name: "win out", Path: "c1", Tuples: true},
		{Node: "n", PID: 1, Name: "win lineage", Path: "c2", Lineage: true},
		{Node: "n", PID: 1, Name: "agg lineage", Path: "c3", Tuples: true}, // a tuple channel named like it
		{Node: "n", PID: 1, Name: "agg out", Path: "c4", Lineage: true},    // a LINEAGE channel with another role
		{Node: "n", PID: 1, Name: "pairs", Path: "c5", Lineage: true},      // not following the rule
	})
	require.NoError(t, err)
	require.Len(t, p.Instances, 1)
	in := p.Instances[0]
	require.Equal(t, [numRoles]int{-1, 0, 1, -1, -1, 2}, in.Chans)
	require.True(t, in.Has(RoleLineage))
	ii, r := p.Role(2)
	require.Equal(t, -1, ii, "not a tuple mark")
	require.Equal(t, RoleNone, r)
	ii, r = p.Role(1)
	require.Equal(t, 0, ii)
	require.Equal(t, RoleOut, r)
	require.Len(t, p.Ignored, 3)
	require.Contains(t, p.Ignored[0], "c3): role lineage needs a CP_LINEAGE channel")
	require.Contains(t, p.Ignored[1], "c4): a CP_LINEAGE channel takes role lineage, not out")
	require.Contains(t, p.Ignored[2], `c5): a CP_LINEAGE channel whose name does not follow the naming rule "OPERATOR[#INSTANCE] lineage"`)
	require.Equal(t, "lineage", RoleLineage.String())
	require.Equal(t, Role(4), RoleCount, "numeric values kept")
}

// plan1: source "src" (out) and operator "op" (in, out, sent), one process.
func plan1(t *testing.T) *Plan {
	p, err := NewPlan([]Channel{
		{Node: "n", PID: 1, Name: "src out", Tuples: true},
		{Node: "n", PID: 1, Name: "op in", Tuples: true},
		{Node: "n", PID: 1, Name: "op out", Tuples: true},
		{Node: "n", PID: 1, Name: "op sent", Tuples: true},
		{Node: "n", PID: 1, Name: "other", Tuples: true},
	})
	require.NoError(t, err)
	return p
}

func find(t *testing.T, rows []Row, level, op string, window int64, method string) Row {
	t.Helper()
	for _, r := range rows {
		if r.Level == level && r.Operator == op && r.Window == window && r.Method == method {
			return r
		}
	}
	t.Fatalf("no %s row of %s in window %d (%s)", level, op, window, method)
	return Row{}
}

// walk sums the cost model as the critical-path analysis's walk does, for
// tuples whose records are in hop order (one process's in time order):
// each instance's visits (an in, its last out after it, the tuple's
// record before the in) in the order of their ins; a visit whose tuple was
// handed off no later than the previous visit's departure was taken while
// backlogged.
func walk(t *testing.T, p *Plan, grid cost.Grid, tuples [][]Event) *cost.Acc {
	t.Helper()
	// dep: the departure, the sent where marked (else the out); blocked:
	// out to sent, which in these tests only waits for room downstream.
	type visit struct{ h, in, out, dep float64 }
	per := make([][]visit, len(p.Instances))
	for _, evs := range tuples {
		for i, e := range evs {
			inst, role := p.Role(int(e.Ch))
			if inst < 0 || role != RoleIn {
				continue
			}
			v := visit{h: math.Inf(1), in: e.Est, out: e.Est, dep: e.Est}
			if i > 0 {
				v.h = evs[i-1].Est
			}
			for k := i + 1; k < len(evs); k++ {
				ik, rk := p.Role(int(evs[k].Ch))
				if ik != inst || rk == RoleIn {
					break
				}
				switch rk {
				case RoleOut:
					v.out, v.dep = evs[k].Est, evs[k].Est
				case RoleSent:
					v.dep = evs[k].Est
				}
			}
			per[inst] = append(per[inst], v)
		}
	}
	acc, err := cost.NewAcc(len(p.Instances), grid)
	require.NoError(t, err)
	for j, vs := range per {
		if !p.Instances[j].Has(RoleOut) {
			continue
		}
		sort.Slice(vs, func(a, b int) bool { return vs[a].in < vs[b].in })
		for k, v := range vs {
			acc.Visit(j, int64(v.in))
			acc.Own(j, int64(v.in), int64(v.out))
			if v.dep > v.out {
				acc.Blocked(j, int64(v.out), int64(v.dep))
			}
			if k > 0 && v.h <= vs[k-1].dep {
				acc.Take(j, int64(vs[k-1].dep), int64(v.in), int64(v.out))
			}
		}
	}
	return acc
}

// rowsOf feeds the tuples to an Acc and the walk, and makes the rows.
func rowsOf(t *testing.T, p *Plan, win Windows, tuples [][]Event, cfg Config) *Result {
	t.Helper()
	acc := NewAcc(p, win)
	for _, tu := range tuples {
		acc.Tuple(tu)
	}
	costs := walk(t, p, cost.Grid{T0: win.T0, Width: win.Width, N: win.N, Sub: 8}, tuples)
	return p.Rows(acc, win, nil, costs, cfg)
}

// Hz 1e9: a cycle is a nanosecond; windows of 1 s.
func TestWindowsArrivalsBusyBlocked(t *testing.T) {
	p := plan1(t)
	win, err := NewWindows(0, 2.5e9, 1e9)
	require.NoError(t, err)
	tuples := [][]Event{
		// 1: arrives (src out) in window 0, served 0.2-0.7 us, blocked 0.1 us.
		{{0, 100}, {1, 200}, {2, 700}, {3, 800}},
		// 2: src out in window 0, op in at 0.9 s, out at 2.1 s: busy in three windows.
		{{0, 0.8e9}, {4, 0.85e9}, {1, 0.9e9}, {2, 2.1e9}, {3, 2.2e9}},
		// 3: no src record: it arrives with its in (window 1); out before in: left out.
		{{1, 1.5e9}, {2, 1.4e9}},
		// 4: an in without out, an out without in (another tuple), a sent without out.
		{{0, 2.4e9}, {1, 2.45e9}},
		{{2, 2.46e9}, {3, 2.47e9}},
		// 5: unmarked records only: not counted.
		{{4, 1e9}},
	}
	res := rowsOf(t, p, win, tuples, Config{Hz: 1e9, MinTuples: 1})
	rows := res.Rows
	require.EqualValues(t, 5, res.Counted)
	require.EqualValues(t, 1, res.Negative)

	w0 := find(t, rows, "instance", "op", 0, MethodInOut)
	require.EqualValues(t, 2, w0.TuplesIn)
	require.EqualValues(t, 1, w0.TuplesOut)
	require.Equal(t, 2.0, w0.ArrivalsPerS) // both src outs in window 0
	require.InDelta(t, (500+0.1e9)/1e9, w0.BusyShare, 1e-12)
	require.InDelta(t, 100/1e9, w0.BlockedShare, 1e-12)
	require.Equal(t, 0.5, w0.Selectivity)
	require.Equal(t, "n/1/", w0.Instance)
	// Own work of the visits in window 0: tuples 1 and 2, 500 ns and 1.2 s;
	// never backlogged: the capacity is an upper bound and says so.
	require.InDelta(t, 2/(1.2+500e-9), w0.ServiceRate, 1e-9)
	require.InDelta(t, 2/(1.2+500e-9), w0.Capacity, 1e-9)
	require.Contains(t, w0.Note, "never backlogged")
	w1 := find(t, rows, "instance", "op", 1, MethodInOut)
	require.Equal(t, 1.0, w1.BusyShare)
	require.EqualValues(t, 1, w1.TuplesIn)
	require.Equal(t, 1.0, w1.ArrivalsPerS) // tuple 3 arrives with its in
	w2 := find(t, rows, "instance", "op", 2, MethodInOut)
	require.Equal(t, 0.5, w2.StartS-1.5) // the last window ends with the run: 2 .. 2.5 s
	require.Equal(t, 2.5, w2.EndS)
	require.InDelta(t, 0.1e9/0.5e9, w2.BusyShare, 1e-12)
	require.InDelta(t, (0.1e9+0.01e9)/0.5e9, w2.BlockedShare, 1e-12) // tuple 2's 0.1 s and the lone out's 0.01 s
	require.EqualValues(t, 1, w2.TuplesIn)
	require.EqualValues(t, 2, w2.TuplesOut)

	whole := find(t, rows, "instance", "op", -1, MethodInOut)
	require.EqualValues(t, 4, whole.TuplesIn)
	require.EqualValues(t, 4, whole.TuplesOut)
	require.Equal(t, 2.5, whole.EndS)
	require.Equal(t, 4/2.5, whole.ArrivalsPerS)
	src := find(t, rows, "operator", "src", -1, MethodInOut)
	require.True(t, math.IsNaN(src.ServiceRate))
	require.Contains(t, src.Note, `no in mark`)
	require.Equal(t, 3/2.5, src.DeparturesPerS)
	op := find(t, rows, "operator", "op", -1, MethodInOut)
	// src hands 3 tuples on, 3 reach op (one of them from outside), so
	// nothing is lost; op's reach is per src tuple that went there.
	require.EqualValues(t, 0, op.Lost)
	require.Equal(t, "op", res.Bottleneck)
	require.True(t, op.Bottleneck)
	// one instance: capacity is its rate, max source rate that over reach
	require.InDelta(t, whole.Capacity, op.Capacity, 1e-9)
	require.InDelta(t, op.Capacity/op.Reach, op.MaxSourceRate, 1e-9)
}

// The capacity comes from the tuples taken while backlogged: their own
// work and their take, departure to departure; the service rate from
// every tuple's own work; both with a jackknife interval over the
// batches.
func TestCapacityFromBackloggedTuples(t *testing.T) {
	p := plan1(t)
	win, err := NewWindows(0, 100e9, 10e9)
	require.NoError(t, err)
	r := rand.New(rand.NewSource(1))
	var tuples [][]Event
	var ownAll, ownB, takeB float64
	var nB int
	dep := 0.0
	const n = 5000
	for i := 0; i < n; i++ {
		h := float64(i) * 2e7 // one every 20 ms...
		if i%2 == 1 {
			h = dep - 10 // ...every other one already waiting
		}
		in := math.Max(h, dep) + 1000
		s := 2000 + math.Round(r.ExpFloat64()*3000)
		ownAll += s
		if h <= dep && i > 0 {
			ownB += s
			takeB += in - dep
			nB++
		}
		dep = in + s
		tuples = append(tuples, []Event{{0, h}, {1, in}, {2, dep}})
	}
	res := rowsOf(t, p, win, tuples, Config{Hz: 2e9, MinTuples: 30})
	row := find(t, res.Rows, "instance", "op", -1, MethodInOut)
	require.EqualValues(t, nB, row.Backlogged)
	require.InEpsilon(t, 2e9*float64(nB)/(ownB+takeB), row.Capacity, 1e-9)
	require.InEpsilon(t, 2e9*n/ownAll, row.ServiceRate, 1e-9)
	require.Less(t, row.CapacityLow, row.Capacity)
	require.Greater(t, row.CapacityHigh, row.Capacity)
	require.InDelta(t, (ownB+takeB)/float64(nB)/2e9*1e6, row.CostUS, 1e-6)
	require.InDelta(t, 1000/2e9*1e6, row.HandOffUS, 1e-6)

	// Few tuples: not enough data.
	res = rowsOf(t, p, win, tuples[:2], Config{Hz: 1e9, MinTuples: 3})
	for _, r := range res.Rows {
		if r.Operator == "op" && r.Level == "instance" {
			require.Contains(t, r.Note, "not enough data: 2 tuples with an in and an out (< 3)")
			require.True(t, math.IsNaN(r.Capacity))
		}
	}
}

// csvOf prints the rows, a line each, every field exact (NaN as NaN).
func csvOf(t *testing.T, rows []Row) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%+v\n", r)
	}
	return b.String()
}

// Workers' accumulators merged give what one accumulator fed everything
// gives, to the bit, however the tuples were shared out.
func TestMergeIsOrderIndependent(t *testing.T) {
	p := plan1(t)
	win, err := NewWindows(0, 10e9, 0.3e9)
	require.NoError(t, err)
	r := rand.New(rand.NewSource(2))
	var tuples [][]Event
	for i := 0; i < 20000; i++ {
		at := r.Float64() * 9.9e9
		in := at + r.Float64()*1e5
		out := in + r.ExpFloat64()*3e6
		tuples = append(tuples, []Event{{0, at}, {1, in}, {2, out}, {3, out + r.Float64()*1e5}})
	}
	costs := walk(t, p, cost.Grid{T0: 0, Width: win.Width, N: win.N, Sub: 8}, tuples)
	one := NewAcc(p, win)
	for _, tu := range tuples {
		one.Tuple(tu)
	}
	want := csvOf(t, p.Rows(one, win, nil, costs, Config{Hz: 1e9, MinTuples: 30}).Rows)
	for _, workers := range []int{2, 3, 7} {
		accs := make([]*Acc, workers)
		for i := range accs {
			accs[i] = NewAcc(p, win)
		}
		for _, i := range r.Perm(len(tuples)) {
			accs[r.Intn(workers)].Tuple(tuples[i])
		}
		for _, a := range accs[1:] {
			accs[0].Merge(a)
		}
		require.Equal(t, want, csvOf(t, p.Rows(accs[0], win, nil, costs, Config{Hz: 1e9, MinTuples: 30}).Rows), "%d workers", workers)
	}
	require.Greater(t, strings.Count(want, "\n"), 60)
}

// Skew-aware capacity, reach and DS2's parallelism on a small topology:
// "a" (two instances, 3:1 arrivals, 1 us and 2 us), then "f" (filters out
// half), then "z" (0.5 us). Every tuple waits at each instance (handed off
// before the previous departure, taken at once): capacity is 1 / own work.
func TestTopology(t *testing.T) {
	p, err := NewPlan([]Channel{
		{Node: "n", PID: 1, Name: "a#0 in", Tuples: true}, {Node: "n", PID: 1, Name: "a#0 out", Tuples: true},
		{Node: "n", PID: 1, Name: "a#1 in", Tuples: true}, {Node: "n", PID: 1, Name: "a#1 out", Tuples: true},
		{Node: "n", PID: 2, Name: "z in", Tuples: true}, {Node: "n", PID: 2, Name: "z out", Tuples: true},
		{Node: "n", PID: 3, Name: "f in", Tuples: true}, {Node: "n", PID: 3, Name: "f out", Tuples: true},
		{Node: "n", PID: 4, Name: "src out", Tuples: true},
	})
	require.NoError(t, err)
	win, err := NewWindows(0, 1e9, 1e9)
	require.NoError(t, err)
	var tuples [][]Event
	var a0, a1, f, z float64 // each instance's last departure
	for i := 0; i < 4000; i++ {
		h := float64(i) * 10
		ev := []Event{{8, h}}
		if i%4 == 3 {
			a1 = math.Max(a1, h) + 2000
			ev = append(ev, Event{2, a1 - 2000}, Event{3, a1})
		} else {
			a0 = math.Max(a0, h) + 1000
			ev = append(ev, Event{0, a0 - 1000}, Event{1, a0})
		}
		hf := ev[len(ev)-1].Est
		f = math.Max(f, hf) + 100
		ev = append(ev, Event{6, f - 100})
		if i%2 == 0 {
			ev = append(ev, Event{7, f})
			z = math.Max(z, f) + 500
			ev = append(ev, Event{4, z - 500}, Event{5, z})
		}
		tuples = append(tuples, ev)
	}
	rank := []int{1, 2, 3, 4, 7, 8, 5, 6, 0}
	res := rowsOf(t, p, win, tuples, Config{Hz: 1e9, MinTuples: 30, TargetRate: 2e6, Rank: rank})
	a := find(t, res.Rows, "operator", "a", -1, MethodInOut)
	fr := find(t, res.Rows, "operator", "f", -1, MethodInOut)
	zr := find(t, res.Rows, "operator", "z", -1, MethodInOut)
	// operators in hop order
	var order []string
	for _, r := range res.Rows {
		if r.Level == "operator" && r.Window == -1 {
			order = append(order, r.Operator)
		}
	}
	require.Equal(t, []string{"src", "a", "f", "z"}, order)
	require.EqualValues(t, 2, a.Instances)
	require.InDelta(t, 1.5, a.Skew, 1e-12) // 3000 / mean(3000, 1000)
	// min(1e6 / 0.75, 0.5e6 / 0.25)
	require.InDelta(t, 1e6/0.75, a.Capacity, 1)
	require.InDelta(t, 1.0, a.Reach, 1e-12)
	require.InDelta(t, 1.0, fr.Reach, 1e-12)
	require.Equal(t, 0.5, fr.Selectivity)
	require.InDelta(t, 0.5, zr.Reach, 1e-12)
	require.EqualValues(t, 0, fr.Lost, "a filter loses nothing")
	require.InDelta(t, 2e6, zr.Capacity, 1)
	require.InDelta(t, 4e6, zr.MaxSourceRate, 2)
	require.True(t, a.Bottleneck)
	require.False(t, zr.Bottleneck || fr.Bottleneck)
	require.Equal(t, "a", res.Bottleneck)
	// DS2: ceil(2e6 * reach / mean instance capacity)
	require.EqualValues(t, 3, a.ParallelismNeeded)  // 2e6 / 0.75e6 = 2.67
	require.EqualValues(t, 1, zr.ParallelismNeeded) // 1e6 / 2e6
	var text bytes.Buffer
	require.NoError(t, res.WriteText(&text))
	require.Contains(t, text.String(), "bottleneck: a (*)")
	require.Contains(t, text.String(), "parallelism for a source rate of 2000000 tuples/s")
	require.Contains(t, text.String(), "a 3, ")
	require.Contains(t, text.String(), "z 1")
}

// A 1->3 split (the same id handed on three times), then a 10% loss on
// the way to the next operator: reach counts the copies, loss is said and
// counted as loss, not as the next operator's filtering.
func TestSplitAndLoss(t *testing.T) {
	p, err := NewPlan([]Channel{
		{Node: "n", PID: 1, Name: "src out", Tuples: true},
		{Node: "n", PID: 2, Name: "split in", Tuples: true}, {Node: "n", PID: 2, Name: "split out", Tuples: true},
		{Node: "n", PID: 3, Name: "down in", Tuples: true}, {Node: "n", PID: 3, Name: "down out", Tuples: true},
		{Node: "n", PID: 4, Name: "sink in", Tuples: true},
	})
	require.NoError(t, err)
	win, err := NewWindows(0, 1e9, 1e9)
	require.NoError(t, err)
	var tuples [][]Event
	var sp, dn float64
	lost := 0
	for i := 0; i < 3000; i++ {
		h := float64(i) * 10
		sp = math.Max(sp, h) + 3000
		ev := []Event{{0, h}, {1, sp - 3000}, {2, sp - 2000}, {2, sp - 1000}, {2, sp}}
		// Copies 0..2 reach down unless lost (1 in 10 tuples loses its
		// last copy); down works 1 us on each; the sink takes them.
		var ds []Event
		for c := 0; c < 3; c++ {
			if c == 2 && i%10 == 0 {
				lost++
				continue
			}
			dn = math.Max(dn, sp-float64(2-c)*1000) + 1000
			ds = append(ds, Event{3, dn - 1000}, Event{4, dn}, Event{5, dn + 10})
		}
		// In hop order, one process's records in time order: down's
		// ins and outs interleaved, then the sink's.
		for _, e := range ds {
			if e.Ch != 5 {
				ev = append(ev, e)
			}
		}
		for _, e := range ds {
			if e.Ch == 5 {
				ev = append(ev, e)
			}
		}
		tuples = append(tuples, ev)
	}
	res := rowsOf(t, p, win, tuples, Config{Hz: 1e9, MinTuples: 30, TargetRate: 1e6})
	split := find(t, res.Rows, "operator", "split", -1, MethodInOut)
	down := find(t, res.Rows, "operator", "down", -1, MethodInOut)
	sink := find(t, res.Rows, "operator", "sink", -1, MethodInOut)
	require.InDelta(t, 3, split.Selectivity, 1e-12)
	require.InDelta(t, 1, split.Reach, 1e-12)
	require.InDelta(t, 3, down.Reach, 1e-12, "every tuple sends three copies down, one of which is lost in 1 of 10")
	require.EqualValues(t, lost, split.Lost)
	require.Contains(t, split.Note, "never reached down")
	require.InDelta(t, 1, down.Selectivity, 1e-12)
	require.InDelta(t, 3, sink.Reach, 1e-12)
	// split: 3 us a tuple (backlogged); down: 1 us a copy, 3 copies a
	// source tuple: the bottleneck is down at 1e6/3 source tuples a second.
	require.InDelta(t, 1e9/3000, split.Capacity, 1)
	require.InDelta(t, 1e6, down.Capacity, 1)
	require.InDelta(t, 1e6/3, down.MaxSourceRate, 1)
	require.Equal(t, "down", res.Bottleneck)
	require.EqualValues(t, 3, down.ParallelismNeeded)
	require.EqualValues(t, lost, res.Lost)
}

// writeServiceRateFile writes a CP_SERVICERATE channel's file as the library
// does: header, counter frames, service_rate events, a trailer.
func writeServiceRateFile(t *testing.T, path string, open uint64, periods [][2]uint64, events []logfile.Event) {
	h := logfile.Header{Version: logfile.Version, ByteOrder: "little", Format: "BINARY_TSC", FormatID: int32(logfile.BinaryTSC),
		Handler: "SERVICERATE", HandlerID: 14, RecordSize: 16, Columns: []string{"period_end_tsc", "count", "skipped_periods"},
		Node: "n", PID: 3, Name: "z count", TSCHz: 1e9, OpenSync: logfile.Sync{TSC: open}, CounterPeriod: 1e8}
	js, err := json.Marshal(h)
	require.NoError(t, err)
	b := []byte(logfile.Magic)
	b = binary.LittleEndian.AppendUint16(b, logfile.Version)
	b = binary.LittleEndian.AppendUint16(b, logfile.ByteOrderMark)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(js)))
	b = append(b, js...)
	var total uint64 // the events counted: what the periods add up to
	for i, p := range periods {
		total += p[1]
		var raw []byte
		for _, v := range []uint64{p[0], uint64(i) * 1e8, p[1], 0} {
			raw = binary.LittleEndian.AppendUint64(raw, v)
		}
		b = logfile.AppendFrame(b, logfile.FrameHeader{Kind: logfile.KindCounter, N: 1, RawLen: uint32(len(raw))}, raw)
		for _, e := range events {
			if e.Sync.TSC <= p[0] && (i == 0 || e.Sync.TSC > periods[i-1][0]) {
				ej, err := json.Marshal(e)
				require.NoError(t, err)
				b = logfile.AppendFrame(b, logfile.FrameHeader{Kind: logfile.KindEvent, RawLen: uint32(len(ej))}, ej)
			}
		}
	}
	tj, err := json.Marshal(logfile.Trailer{Reason: "close", Positions: uint64(len(periods)), Total: total})
	require.NoError(t, err)
	b = logfile.AppendFrame(b, logfile.FrameHeader{Kind: logfile.KindTrailer, RawLen: uint32(len(tj))}, tj)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

func TestReadCountAndBeardChamberlainRows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "n-3-z_count.cplog")
	var periods [][2]uint64
	for i := 1; i <= 25; i++ { // 100 ms periods from 1e9, 1000 items each
		periods = append(periods, [2]uint64{1e9 + uint64(i)*1e8, 1000})
	}
	ev := func(tsc uint64, rate float64) logfile.Event {
		return logfile.Event{Event: EventServiceRate, Sync: &logfile.Sync{TSC: tsc}, Rate: rate, PeriodNs: 4e6, Samples: 64}
	}
	events := []logfile.Event{ev(1.5e9, 27000), ev(2.2e9, 28000), ev(2.4e9, 27500), {Event: "param", Sync: &logfile.Sync{TSC: 2e9}}}
	writeServiceRateFile(t, path, 1e9, periods, events)
	lf, err := logfile.Open(path)
	require.NoError(t, err)
	s, err := ReadCount(lf, func(tsc uint64) float64 { return float64(tsc) - 1e9 })
	lf.Close()
	require.NoError(t, err)
	require.Len(t, s.Periods, 25)
	require.Equal(t, Period{Start: 0, End: 1e8, Count: 1000}, s.Periods[0])
	require.Equal(t, []Estimate{{0.5e9, 27000, 4e6, 64}, {1.2e9, 28000, 4e6, 64}, {1.4e9, 27500, 4e6, 64}}, s.Estimates)

	p, err := NewPlan([]Channel{{Node: "n", PID: 3, Name: "z count", Path: path, ServiceRate: true}})
	require.NoError(t, err)
	win, err := NewWindows(0, 2.5e9, 1e9)
	require.NoError(t, err)
	res := p.Rows(nil, win, []*CountSeries{s}, nil, Config{Hz: 1e9, MinTuples: 30})
	var bc []Row
	for _, r := range res.Rows {
		require.Equal(t, MethodBC, r.Method)
		bc = append(bc, r)
	}
	require.Len(t, bc, 5) // operator, instance whole run, three estimates
	require.Equal(t, "operator", bc[0].Level)
	require.Equal(t, 27500.0, bc[0].ServiceRate)
	require.Equal(t, 27500.0, bc[1].ServiceRate) // median
	require.EqualValues(t, 25000, bc[1].TuplesOut)
	require.InDelta(t, 10000, bc[1].DeparturesPerS, 1e-6)
	require.Contains(t, bc[1].Note, "median of 3 converged estimates")
	require.Equal(t, []int64{0, 1, 1}, []int64{bc[2].Window, bc[3].Window, bc[4].Window})
	require.Equal(t, 27000.0, bc[2].ServiceRate)
	require.EqualValues(t, 10000, bc[2].TuplesOut) // the periods in window 0 (by their middle)
	require.InDelta(t, 27000/10000.0, bc[2].Headroom, 1e-9)

	// Cut short in the middle of a frame: what is whole is read, the error
	// says the file is damaged, nothing panics.
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b[:len(b)*2/3], 0o644))
	lf, err = logfile.Open(path)
	require.NoError(t, err)
	s, err = ReadCount(lf, func(tsc uint64) float64 { return float64(tsc) - 1e9 })
	lf.Close()
	require.True(t, errors.Is(err, logfile.ErrDamaged), "%v", err)
	require.NotEmpty(t, s.Periods)
	require.Less(t, len(s.Periods), 25)
	res = p.Rows(nil, win, []*CountSeries{s}, nil, Config{Hz: 1e9, MinTuples: 30})
	require.NotEmpty(t, res.Rows)
	// No estimate at all: said so.
	res = p.Rows(nil, win, []*CountSeries{{Periods: s.Periods}}, nil, Config{Hz: 1e9, MinTuples: 30})
	require.Contains(t, res.Rows[0].Note, "no converged estimate")
	require.True(t, math.IsNaN(res.Rows[1].ServiceRate))
}

// An operator with both marks and a count channel: where Beard &
// Chamberlain's estimate and the in/out capacity of the same run part by
// more than 20%, the result says so; where they agree, nothing.
func TestBeardChamberlainDisagreement(t *testing.T) {
	p, err := NewPlan([]Channel{
		{Node: "n", PID: 3, Name: "z in", Tuples: true},
		{Node: "n", PID: 3, Name: "z out", Tuples: true},
		{Node: "n", PID: 3, Name: "z count", ServiceRate: true},
	})
	require.NoError(t, err)
	win, err := NewWindows(0, 1e9, 1e9)
	require.NoError(t, err)
	var tuples [][]Event
	dep := 0.0
	for i := 0; i < 5000; i++ { // backlogged, 100 us a tuple: 10,000/s
		tuples = append(tuples, []Event{{0, dep}, {1, dep + 1e5}})
		dep += 1e5
	}
	for _, c := range []struct {
		bc   float64
		says bool
	}{{10500, false}, {13000, true}, {7000, true}} {
		acc := NewAcc(p, win)
		for _, tu := range tuples {
			acc.Tuple(tu)
		}
		costs := walk(t, p, cost.Grid{T0: 0, Width: 1e9, N: 1, Sub: 8}, tuples)
		s := &CountSeries{Estimates: []Estimate{{Est: 5e8, Rate: c.bc}}}
		res := p.Rows(acc, win, []*CountSeries{s}, costs, Config{Hz: 1e9, MinTuples: 30})
		require.Equal(t, c.says, len(res.Disagree) == 1, "B&C %.0f/s against 10,000/s: %v", c.bc, res.Disagree)
		var b bytes.Buffer
		require.NoError(t, res.WriteText(&b))
		require.Equal(t, c.says, strings.Contains(b.String(), "disagree: z:"), b.String())
	}
}

// srcABPlan: a source's out, then A and B, each in its process, marking
// in and out, and any more channels after those.
func srcABPlan(t *testing.T, more ...Channel) *Plan {
	t.Helper()
	p, err := NewPlan(append([]Channel{
		{Node: "n", PID: 1, Name: "src out", Tuples: true},
		{Node: "n", PID: 2, Name: "a in", Tuples: true}, {Node: "n", PID: 2, Name: "a out", Tuples: true},
		{Node: "n", PID: 3, Name: "b in", Tuples: true}, {Node: "n", PID: 3, Name: "b out", Tuples: true},
	}, more...))
	require.NoError(t, err)
	return p
}

// A feeds B through a queue of one: B is saturated and A, blocked by it,
// takes its next tuple only once B took the last. A's take is time
// blocked, which is B's: A's capacity leaves it out (an upper bound, said
// so), and B is the bottleneck by far, not by a hair.
func TestBlockedByASaturatedDownstream(t *testing.T) {
	p := srcABPlan(t)
	var tuples [][]Event
	var aDep, bIn, bDep float64
	for i := 0; i < 5000; i++ {
		h := float64(i)                  // the source is always ahead
		ain := math.Max(aDep, bIn) + 100 // A takes the next once B took the last
		aout := ain + 1000
		bin := math.Max(aout+100, bDep)
		bout := bin + 10000
		aDep, bIn, bDep = aout, bin, bout
		tuples = append(tuples, []Event{{0, h}, {1, ain}, {2, aout}, {3, bin}, {4, bout}})
	}
	// Windows of 1 s over the run's 50 ms: B is busy throughout the run.
	win, err := NewWindows(0, bDep, 1e9)
	require.NoError(t, err)
	res := rowsOf(t, p, win, tuples, Config{Hz: 1e9, MinTuples: 30})
	a := find(t, res.Rows, "operator", "a", -1, MethodInOut)
	b := find(t, res.Rows, "operator", "b", -1, MethodInOut)
	require.Equal(t, "b", res.Bottleneck)
	require.InDelta(t, 1e5, b.Capacity, 1e3)
	require.InDelta(t, 1e6, a.Capacity, 1e4, "A's own work alone: 1 us")
	require.Contains(t, a.Note, "b, downstream, was saturated and held it back wherever it had a backlog")
}

// As above, but B itself waits 40 ms for room in its own downstream (out
// to sent) in the second of the run's cells, a third of the cell: B took
// no input then either, so it still held A back there, and A's take there
// (40 ms at once) is time blocked, not A's cost. Counting only B's
// backlogged time as saturation left that cell out, and A's take there
// made A the bottleneck (seen in a Flink job: busy 0.73, blocked 0.26).
func TestReceiverBlockedByItsOwnDownstreamStillHoldsItsSenderBack(t *testing.T) {
	p := srcABPlan(t, Channel{Node: "n", PID: 3, Name: "b sent", Tuples: true})
	var tuples [][]Event
	var aDep, bIn, bDep float64
	stalled := false
	for i := 0; i < 30000; i++ {
		h := float64(i)
		ain := math.Max(aDep, bIn) + 100
		aout := ain + 1000
		bin := math.Max(aout+100, bDep)
		bout := bin + 10000
		bsent := bout + 100
		if !stalled && bin >= 150e6 { // in the second cell of 125 ms
			bsent, stalled = bout+40e6, true
		}
		aDep, bIn, bDep = aout, bin, bsent
		tuples = append(tuples, []Event{{0, h}, {1, ain}, {2, aout}, {3, bin}, {4, bout}, {5, bsent}})
	}
	require.True(t, stalled)
	win, err := NewWindows(0, bDep, 1e9)
	require.NoError(t, err)
	res := rowsOf(t, p, win, tuples, Config{Hz: 1e9, MinTuples: 30})
	a := find(t, res.Rows, "operator", "a", -1, MethodInOut)
	b := find(t, res.Rows, "operator", "b", -1, MethodInOut)
	t.Logf("a: cap %.0f note %s; b: cap %.0f busy %.3f blocked %.3f", a.Capacity, a.Note, b.Capacity, b.BusyShare, b.BlockedShare)
	require.Equal(t, "b", res.Bottleneck, "a: %s", a.Note)
	require.InDelta(t, 1e6, a.Capacity, 1e4, "A's own work alone: 1 us")
	require.Contains(t, a.Note, "b, downstream, was saturated and held it back wherever it had a backlog")
	require.Greater(t, b.BlockedShare, 0.1, "B's 40 ms blocked")
}

// A saturated B behind an A that is not held back (an unbounded queue
// between them, as UDP's): A takes its bursts at its own speed, 1 us of
// take and 1 us of work a tuple, five times what B departs. A's take is
// its own and stays in its cost.
func TestFastSenderBeforeASaturatedDownstreamKeepsItsTake(t *testing.T) {
	p := srcABPlan(t)
	var tuples [][]Event
	var aDep, bDep float64
	for i := 0; i < 9000; i++ {
		h := float64(i/9) * 1e5 // 9 tuples every 100 us: 90,000/s, B busy 90%
		ain := math.Max(aDep, h) + 1000
		aout := ain + 1000
		bin := math.Max(aout+100, bDep)
		bout := bin + 10000
		aDep, bDep = aout, bout
		tuples = append(tuples, []Event{{0, h}, {1, ain}, {2, aout}, {3, bin}, {4, bout}})
	}
	win, err := NewWindows(0, bDep, 1e9)
	require.NoError(t, err)
	res := rowsOf(t, p, win, tuples, Config{Hz: 1e9, MinTuples: 30})
	a := find(t, res.Rows, "operator", "a", -1, MethodInOut)
	require.Equal(t, "b", res.Bottleneck)
	require.InDelta(t, 5e5, a.Capacity, 5e3, "A's own work and take: 2 us")
	require.NotContains(t, a.Note, "downstream")
}

// The topology counted by shapes (each shape once, times its tuples) is
// what counting every tuple gives, past maxShapes too (a tuple of a new
// shape then counts at once), merged across workers.
func TestTopologyByShapes(t *testing.T) {
	var chans []Channel
	for _, op := range []string{"a", "b", "c", "d"} {
		chans = append(chans, Channel{Node: "n", PID: 1, Name: op + " in", Tuples: true}, Channel{Node: "n", PID: 1, Name: op + " out", Tuples: true})
	}
	p, err := NewPlan(chans)
	require.NoError(t, err)
	win, err := NewWindows(0, 1e9, 1e9)
	require.NoError(t, err)
	r := rand.New(rand.NewSource(7))
	shaped := []*Acc{NewAcc(p, win), NewAcc(p, win)}
	direct := NewAcc(p, win)
	for i := 0; i < 20000; i++ {
		var evs []Event
		if i%3 == 0 { // a few common shapes
			for c := 0; c < 2+2*(i%2); c++ {
				evs = append(evs, Event{uint32(c), float64(i + c)})
			}
		} else { // and many rare ones
			for c, n := 0, 1+r.Intn(7); c < n; c++ {
				est := float64(i + c)
				if r.Intn(20) == 0 {
					est = math.NaN()
				}
				evs = append(evs, Event{uint32(r.Intn(len(chans))), est})
			}
		}
		shaped[i%2].countTopology(evs)
		var key []uint32
		for _, e := range evs {
			if c := direct.ch[e.Ch]; c.inst >= 0 && e.Est == e.Est && (c.role == RoleIn || c.role == RoleOut) {
				key = append(key, e.Ch)
			}
		}
		direct.countShape(key, 1)
	}
	require.Len(t, shaped[0].shapes, maxShapes)
	shaped[0].Merge(shaped[1])
	require.Equal(t, direct.topo, *shaped[0].topology())
}

// movedText names the range of the moved windows' costs, and one window's
// cost once (not "from 0.125 us (window 4) to 0.125 us (window 4)").
func TestMovedText(t *testing.T) {
	m := &maker{cfg: Config{MinTuples: 30}}
	tot := instTotal{est: cost.Estimate{CostS: 137e-9}, windows: []cost.Estimate{
		{Tuples: 100, CostS: 140e-9, CostLowS: 1e-9}, {Tuples: 100, CostS: 125e-9, CostLowS: 1e-9},
		{Tuples: 100, CostS: 150e-9, CostLowS: 1e-9}, {Tuples: 10, CostS: 1e-6, CostLowS: 1e-9}}}
	one := m.movedText("b", "b/1/", tot, []int{1})
	require.Contains(t, one, "in 1 of 3 windows (1): 0.125 us there, 0.137 us over the run")
	two := m.movedText("b", "b/1/", tot, []int{1, 2})
	require.Contains(t, two, "in 2 of 3 windows (1, 2): from 0.125 us (window 1) to 0.15 us (window 2), 0.137 us over the run")
}
