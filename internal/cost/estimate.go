package cost

import (
	"math"
)

// Estimate is an instance's cost per tuple over a span of the run (a
// window, or the whole run), in seconds, and the capacity it gives.
type Estimate struct {
	Visits     uint64 // every visit (a filter's without an out too)
	Tuples     uint64 // visits whose own work was measured (an in and an out)
	Backlogged uint64 // visits taken while backlogged (their take measured): the cost's
	Blocked    uint64 // hand-offs that waited for room downstream
	// The cost's parts, mean seconds per tuple (NaN: not measured): own
	// work, the send (where the instance marks sent), the take while
	// backlogged, OwnS + SendS + TakeS = CostS; and BlockedS, the seconds
	// blocked by a full downstream in all.
	OwnS, SendS, TakeS, BlockedS float64
	// CostS: the backlogged tuples' own work and take, and the send; with
	// too few backlogged tuples (TakeFrom), every tuple's own work, the
	// send and the run's take.
	CostS float64
	// CostLowS and CostHighS: the cost's 95% interval (jackknife over
	// Batches batches of the span); NaN with fewer than two batches.
	CostLowS, CostHighS float64
	Batches             int
	// Capacity is 1 / CostS: tuples per second the instance takes and
	// finishes while backlogged; Low and High its interval.
	Capacity, CapacityLow, CapacityHigh float64
	// ServiceRate is one over the own work of every tuple of the span (own
	// work only, not OwnS: that is the backlogged tuples'), with its
	// interval.
	ServiceRate, ServiceLow, ServiceHigh float64
	// TakeFrom says where the cost comes from: TakeSpan (this span's
	// backlogged visits), TakeRun (the span had fewer than MinTake: every
	// tuple's own work and the whole run's take), TakeNone (never
	// backlogged in the run: take counted as 0, so the capacity is an
	// upper bound).
	TakeFrom string
}

// Where an estimate's take comes from.
const (
	TakeSpan = "span"
	TakeRun  = "run"
	TakeNone = "none"
)

// Options say how estimates are made.
type Options struct {
	Hz      float64 // reference cycles a second
	MinTake int     // fewer backlogged visits in a span: the whole run's take
	// HasSend: the instance marks sent (its send is part of its cost).
	HasSend bool
}

// MaxBatches bounds the batches of a whole run's interval.
const MaxBatches = 32

// cost is the cost of the totals in t (cycles per tuple) and its parts
// (own + send + take = c): with minTake backlogged visits or more, theirs
// (own work and take) and the send; else every tuple's own work, the
// send, and runTake (the run's mean take in cycles; NaN: none, then 0).
func (o *Options) cost(t *Cell, runTake float64) (c, own, send, take float64, from string) {
	own, send, take = math.NaN(), math.NaN(), math.NaN()
	if t.OwnN > 0 {
		own = float64(t.Own) / float64(t.OwnN)
	}
	if o.HasSend && t.SendN > 0 {
		send = float64(t.Send) / float64(t.SendN)
	}
	s := send
	if math.IsNaN(s) {
		s = 0
	}
	switch {
	case t.TakeN > 0 && (int(t.TakeN) >= max(o.MinTake, 1) || math.IsNaN(runTake)):
		take, from = float64(t.Take)/float64(t.TakeN), TakeSpan
		own = float64(t.BOwn) / float64(t.TakeN)
		return own + s + take, own, send, take, from
	case !math.IsNaN(runTake):
		take, from = runTake, TakeRun
	default:
		take, from = 0, TakeNone
	}
	return own + s + take, own, send, take, from
}

// Estimate is the estimate over batches (each a sum of cells of the span),
// with runTake the whole run's mean take in cycles (NaN: none) for a span
// with too few backlogged visits.
func (o *Options) Estimate(batches []Cell, runTake float64) Estimate {
	nan := math.NaN()
	e := Estimate{OwnS: nan, SendS: nan, TakeS: nan, BlockedS: nan, CostS: nan, CostLowS: nan, CostHighS: nan,
		Capacity: nan, CapacityLow: nan, CapacityHigh: nan, ServiceRate: nan, ServiceLow: nan, ServiceHigh: nan}
	var t Cell
	for i := range batches {
		t.add(&batches[i])
	}
	e.Visits, e.Tuples, e.Backlogged, e.Blocked = uint64(t.Visits), uint64(t.OwnN), uint64(t.TakeN), uint64(t.BlockedN)
	if t.BlockedN > 0 || o.HasSend {
		e.BlockedS = float64(t.Blocked) / o.Hz
	}
	if t.OwnN == 0 {
		return e
	}
	c, own, send, take, from := o.cost(&t, runTake)
	e.OwnS, e.SendS, e.TakeS, e.CostS, e.TakeFrom = own/o.Hz, send/o.Hz, take/o.Hz, c/o.Hz, from
	all := float64(t.Own) / float64(t.OwnN)
	e.Capacity, e.ServiceRate = o.Hz/c, o.Hz/all
	// The jackknife: the cost without each batch in turn.
	var costs, owns []float64
	for i := range batches {
		b := &batches[i]
		if b.OwnN == 0 {
			continue
		}
		r := t
		r.Own -= b.Own
		r.BOwn -= b.BOwn
		r.Send -= b.Send
		r.Take -= b.Take
		r.OwnN -= b.OwnN
		r.SendN -= b.SendN
		r.TakeN -= b.TakeN
		if r.OwnN == 0 {
			continue
		}
		// The rest is estimated as the span was (its backlogged visits,
		// or every tuple and the run's take), whatever it has left.
		var rc float64
		switch {
		case from == TakeSpan && r.TakeN > 0:
			rs := send
			if r.SendN > 0 && o.HasSend {
				rs = float64(r.Send) / float64(r.SendN)
			}
			if math.IsNaN(rs) {
				rs = 0
			}
			rc = float64(r.BOwn+r.Take)/float64(r.TakeN) + rs
		case from == TakeSpan:
			continue // the batch held every backlogged visit
		default:
			rc, _, _, _, _ = o.cost(&r, runTake)
		}
		costs = append(costs, rc)
		owns = append(owns, float64(r.Own)/float64(r.OwnN))
	}
	e.Batches = len(costs)
	if h := jackknife(costs); !math.IsNaN(h) {
		e.CostLowS, e.CostHighS = (c-h)/o.Hz, (c+h)/o.Hz
		e.CapacityLow, e.CapacityHigh = o.Hz/(c+h), math.Inf(1)
		if c > h {
			e.CapacityHigh = o.Hz / (c - h)
		}
	}
	if h := jackknife(owns); !math.IsNaN(h) {
		e.ServiceLow, e.ServiceHigh = o.Hz/(all+h), math.Inf(1)
		if all > h {
			e.ServiceHigh = o.Hz / (all - h)
		}
	}
	return e
}

// jackknife is the half-width of the 95% interval from the leave-one-out
// values v: t(k-1) times the jackknife's standard error; NaN with fewer
// than two.
func jackknife(v []float64) float64 {
	k := len(v)
	if k < 2 {
		return math.NaN()
	}
	mean := 0.0
	for _, x := range v {
		mean += x
	}
	mean /= float64(k)
	ss := 0.0
	for _, x := range v {
		ss += (x - mean) * (x - mean)
	}
	return tQuantile(k-1) * math.Sqrt(float64(k-1)/float64(k)*ss)
}

// t975 is Student's t distribution's 97.5th percentile for 1..30 degrees
// of freedom.
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

func tQuantile(df int) float64 {
	switch {
	case df < 1:
		return math.NaN()
	case df <= len(t975):
		return t975[df-1]
	case df <= 60:
		return 2.042 - (2.042-2.000)*float64(df-30)/30
	case df <= 120:
		return 2.000 - (2.000-1.980)*float64(df-60)/60
	}
	return 1.960
}

// Window is instance inst's estimate in window w of grid k: its cells are
// the batches; runTake is the run's mean take in cycles (RunTake).
func (a *Acc) Window(k, inst, w int, o Options, runTake float64) Estimate {
	sub := a.grids[k].Sub
	return o.Estimate(a.Cells(k, inst)[w*sub:(w+1)*sub], runTake)
}

// RunTake is instance inst's mean take over the whole run (cycles; NaN:
// never backlogged).
func (a *Acc) RunTake(k, inst int) float64 { return TakeOf(a.Cells(k, inst)) }

// TakeOf is the mean take of the cells (cycles; NaN: none).
func TakeOf(cells []Cell) float64 {
	var s int64
	var n uint64
	for _, c := range cells {
		s += c.Take
		n += uint64(c.TakeN)
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(s) / float64(n)
}

// Run is instance inst's estimate over the whole run on grid k: its cells
// in up to MaxBatches consecutive batches, each about as many cells.
func (a *Acc) Run(k, inst int, o Options) Estimate { return o.RunOf(a.Cells(k, inst)) }

// RunOf is the estimate over a run's cells (Run's; cells a caller may
// have changed).
func (o *Options) RunOf(cells []Cell) Estimate {
	first, last := -1, -1
	for i := range cells {
		if cells[i].OwnN|cells[i].TakeN|cells[i].SendN|cells[i].BlockedN != 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return o.Estimate(nil, math.NaN())
	}
	runTake := TakeOf(cells)
	cells = cells[first : last+1]
	nb := min(MaxBatches, len(cells))
	batches := make([]Cell, nb)
	for i := range cells {
		batches[i*nb/len(cells)].add(&cells[i])
	}
	return o.Estimate(batches, runTake)
}

// MovedFloor is the least move between a window's cost and the run's
// that Moved reports, a share of the run's: an interval of a window whose
// batches all cost the same is no wider than a rounding.
const MovedFloor = 0.05

// Moved says whether a window's cost moved away from the run's by more
// than its interval: the run's cost lies outside the window's interval,
// and at least MovedFloor away from the window's cost.
func Moved(win, run Estimate) bool {
	if math.IsNaN(win.CostLowS) || math.IsNaN(run.CostS) {
		return false
	}
	if math.Abs(win.CostS-run.CostS) < MovedFloor*run.CostS {
		return false
	}
	return run.CostS < win.CostLowS || run.CostS > win.CostHighS
}
