package cost

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

const hz = 1e9 // a cycle is a nanosecond

func grid(n, sub int) Grid { return Grid{T0: 0, Width: 1e9, N: n, Sub: sub} }

// The cost of a span: its backlogged tuples' own work and take, and the
// send; with too few backlogged tuples, every tuple's own work and the
// run's take; never backlogged: own work alone, an upper bound said so.
func TestEstimateParts(t *testing.T) {
	a, err := NewAcc(1, grid(2, 4))
	require.NoError(t, err)
	// Window 0: 100 tuples of 2 us own work, 40 of them taken while
	// backlogged with 3 us own work and a 1 us take; a 0.5 us send each,
	// and 10 hand-offs blocked 7 us.
	for i := 0; i < 100; i++ {
		in := int64(i) * 5e6
		a.Own(0, in, in+2000)
		a.Send(0, in+2000, in+2500)
	}
	for i := 0; i < 40; i++ {
		in := int64(i)*5e6 + 1000
		a.Take(0, in-1000, in, in+3000)
	}
	for i := 0; i < 10; i++ {
		a.Blocked(0, int64(i)*5e6, int64(i)*5e6+7000)
	}
	// Window 1: 50 tuples of 4 us, 5 backlogged (too few: the run's take).
	for i := 0; i < 50; i++ {
		in := 1e9 + int64(i)*1e7
		a.Own(0, in, in+4000)
	}
	for i := 0; i < 5; i++ {
		in := 1e9 + int64(i)*1e7
		a.Take(0, in-500, in, in+4000)
	}
	o := Options{Hz: hz, MinTake: 10, HasSend: true}
	runTake := a.RunTake(0, 0)
	require.InDelta(t, (40*1000+5*500)/45.0, runTake, 1e-9)
	w0 := a.Window(0, 0, 0, o, runTake)
	require.Equal(t, TakeSpan, w0.TakeFrom)
	require.EqualValues(t, 100, w0.Tuples)
	require.EqualValues(t, 40, w0.Backlogged)
	require.EqualValues(t, 10, w0.Blocked)
	require.InDelta(t, 70e-6, w0.BlockedS, 1e-15)
	require.InDelta(t, (3000+1000+500)/hz, w0.CostS, 1e-15)
	require.InDelta(t, 3000/hz, w0.OwnS, 1e-15) // the backlogged tuples' own work: the cost's
	require.InDelta(t, hz/4500, w0.Capacity, 1e-6)
	require.InDelta(t, hz/2000, w0.ServiceRate, 1e-6)
	w1 := a.Window(0, 0, 1, o, runTake)
	require.Equal(t, TakeRun, w1.TakeFrom)
	require.InDelta(t, (4000+runTake)/hz, w1.CostS, 1e-15) // no send in window 1
	require.True(t, math.IsNaN(w1.SendS))

	b, err := NewAcc(1, grid(1, 1))
	require.NoError(t, err)
	b.Own(0, 0, 1000)
	e := b.Run(0, 0, Options{Hz: hz})
	require.Equal(t, TakeNone, e.TakeFrom)
	require.InDelta(t, 1e6, e.Capacity, 1e-6)
	require.True(t, math.IsNaN(e.CapacityLow), "one batch: no interval")
	// Nothing at all.
	c, _ := NewAcc(1, grid(1, 1))
	e = c.Run(0, 0, Options{Hz: hz})
	require.Zero(t, e.Tuples)
	require.True(t, math.IsNaN(e.Capacity))
}

// Times outside the grid go to its first or last cell; bad grids are
// refused; merged accumulators sum to one that saw everything.
func TestGridsAndMerge(t *testing.T) {
	_, err := NewAcc(1, Grid{Width: 0, N: 1, Sub: 1})
	require.Error(t, err)
	_, err = NewAcc(1, Grid{Width: 1, N: 0, Sub: 1})
	require.Error(t, err)
	g := grid(3, 2)
	require.Equal(t, 0, g.cellOf(-5e9))
	require.Equal(t, 5, g.cellOf(9e9))
	require.Equal(t, 3, g.cellOf(1.6e9))
	one, _ := NewAcc(2, g, grid(30, 1))
	parts := []*Acc{}
	for i := 0; i < 3; i++ {
		p, _ := NewAcc(2, g, grid(30, 1))
		parts = append(parts, p)
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 10000; i++ {
		in := int64(r.Float64() * 3e9)
		j := r.Intn(2)
		one.Own(j, in, in+int64(r.Intn(5000)))
		parts[i%3].Own(j, in, in+int64(r.Intn(5000)))
	}
	require.Equal(t, Bytes(2, g, grid(30, 1)), int64(2*6*CellBytes+2*30*CellBytes))
	for _, p := range parts[1:] {
		parts[0].Merge(p)
	}
	var n1, n2 uint32
	for _, c := range one.Cells(1, 0) {
		n1 += c.OwnN
	}
	for _, c := range parts[0].Cells(1, 0) {
		n2 += c.OwnN
	}
	require.Equal(t, n1, n2)
	var nilAcc *Acc
	nilAcc.Own(0, 0, 1) // no cost model: nothing, no panic
	nilAcc.Merge(one)
}

// A backlogged visit's time is shared among the cells it spans by how
// long it spent in each (Busy, Served): a visit preempted across a cell's
// edge slows both cells, and the rate the backlog was served at in a cell
// is what it was (a take and own work by the cell of the in put all of a
// long visit in one cell).
func TestServedByTime(t *testing.T) {
	g := grid(4, 1) // cells of 1e9 cycles
	a, _ := NewAcc(1, g)
	// Cell 0: 4 visits of 0.2e9 from 0.1e9; the fifth runs from 0.9e9 to
	// 1.5e9 (preempted over the edge); cell 1: 5 visits of 0.1e9 after it.
	dep := int64(0.1e9)
	for k := 0; k < 4; k++ {
		a.Take(0, dep, dep+1000, dep+0.2e9)
		dep += 0.2e9
	}
	a.Take(0, dep, dep+1000, 1.5e9)
	dep = 1.5e9
	for k := 0; k < 5; k++ {
		a.Take(0, dep, dep, dep+0.1e9)
		dep += 0.1e9
	}
	c := a.Cells(0, 0)
	require.EqualValues(t, 0.9e9, c[0].Busy)
	require.EqualValues(t, 1.0e9, c[1].Busy)
	require.EqualValues(t, 4*ServedUnit+ServedUnit/6, c[0].Served)
	require.EqualValues(t, 5*ServedUnit+ServedUnit-ServedUnit/6, c[1].Served)
	require.EqualValues(t, 5, c[0].TakeN) // by the in: the long visit's time all in cell 0
	require.EqualValues(t, 5, c[1].TakeN)
	// Spread: the parts add up exactly, an empty span is one visit, spans
	// past the grid's ends land in its first and last cells.
	for _, s := range [][2]int64{{-5e9, 9e9}, {3, 3}, {0.5e9, 3.7e9}, {1e9, 2e9}} {
		var cy, sv int64
		g.spread(s[0], s[1], func(i int, cycles, served int64) {
			require.True(t, i >= 0 && i < 4)
			cy += cycles
			sv += served
		})
		require.EqualValues(t, ServedUnit, sv, "%v", s)
		require.EqualValues(t, s[1]-s[0], cy, "%v", s)
	}
}

// A cost that moves between windows beyond a window's interval is said to
// have moved; one within is not.
func TestMoved(t *testing.T) {
	run := Estimate{CostS: 30e-6}
	require.True(t, Moved(Estimate{CostS: 40e-6, CostLowS: 38e-6, CostHighS: 42e-6}, run))
	require.False(t, Moved(Estimate{CostS: 31e-6, CostLowS: 28e-6, CostHighS: 34e-6}, run))
	require.False(t, Moved(Estimate{CostS: 40e-6, CostLowS: math.NaN(), CostHighS: math.NaN()}, run))
	require.False(t, Moved(Estimate{CostS: 30.9e-6, CostLowS: 30.9e-6, CostHighS: 30.9e-6}, run), "within the floor")
}

// The interval survives what a shared machine does to a cost: tuples of a
// skewed cost, 0.1% of them preempted for 1 to 5 ms, and windows of 100 ms
// where another process takes half the CPU (the tuples then take 1.8
// times as long). Over 300 simulated runs the jackknife over batches
// covers the process's true mean cost in at least 90% of them; the
// delta method on single tuples (what capacity's interval was), which
// takes tuples for independent, covers it far less often.
func TestIntervalCoversHeavyTails(t *testing.T) {
	const (
		runs      = 300
		seconds   = 3
		rate      = 20000 // backlogged tuples a second
		median    = 25e3  // cycles
		sigma     = 0.3
		preempt   = 0.001
		contended = 0.3
		slow      = 1.8
	)
	truth := median * math.Exp(sigma*sigma/2) * (1 + contended*(slow-1))
	truth += preempt * 3e6
	r := rand.New(rand.NewSource(7))
	jack, delta := 0, 0
	for run := 0; run < runs; run++ {
		a, _ := NewAcc(1, Grid{T0: 0, Width: 1e9, N: seconds, Sub: 8})
		var sum, sq float64
		n := 0
		for w := 0; w < seconds*10; w++ { // 100 ms windows
			factor := 1.0
			if r.Float64() < contended {
				factor = slow
			}
			for k := 0; k < rate/10; k++ {
				c := median * math.Exp(sigma*r.NormFloat64()) * factor
				if r.Float64() < preempt {
					c += 1e6 + 4e6*r.Float64()
				}
				in := int64(w)*1e8 + int64(k)*(1e8/(rate/10))
				a.Own(0, in, in+int64(c))
				a.Take(0, in, in, in+int64(c))
				sum += math.Floor(c)
				sq += math.Floor(c) * math.Floor(c)
				n++
			}
		}
		e := a.Run(0, 0, Options{Hz: hz, MinTake: 10})
		if e.CostLowS*hz <= truth && truth <= e.CostHighS*hz {
			jack++
		}
		mean := sum / float64(n)
		sd := math.Sqrt((sq - sum*sum/float64(n)) / float64(n-1))
		h := 1.96 * sd / math.Sqrt(float64(n))
		if mean-h <= truth && truth <= mean+h {
			delta++
		}
	}
	t.Logf("of %d runs, the true mean cost %.0f cycles lies in the jackknife's interval in %d, in the delta method's in %d", runs, truth, jack, delta)
	require.GreaterOrEqual(t, jack, runs*90/100)
	require.Less(t, delta, jack)
}

// Add counts a visit as Visit, Own and Take one by one do.
func TestAddIsVisitOwnTake(t *testing.T) {
	g1, g2 := grid(3, 4), grid(30, 1)
	one, each := must(NewAcc(2, g1, g2)), must(NewAcc(2, g1, g2))
	r := rand.New(rand.NewSource(3))
	for i := 0; i < 20000; i++ {
		j := r.Intn(2)
		in := int64(r.Float64() * 3e9)
		out := in + int64(r.Intn(3e6)) - 1e5 // now and then before the in
		prev := in - int64(r.Intn(3e6)) + 1e5
		dep := out + int64(r.Intn(1e5))
		own, taken := r.Intn(3) > 0, r.Intn(2) > 0
		one.Add(j, in, out, own, prev, dep, taken)
		each.Visit(j, in)
		if own {
			each.Own(j, in, out)
		}
		if taken {
			each.Take(j, prev, in, dep)
		}
	}
	for k := range one.Grids() {
		for j := 0; j < 2; j++ {
			require.Equal(t, each.Cells(k, j), one.Cells(k, j))
		}
	}
}

func must(a *Acc, err error) *Acc {
	if err != nil {
		panic(err)
	}
	return a
}
