package servicerate

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// A discrete-event simulation, in integer nanoseconds, of a tandem queue: a
// source feeding a bounded input queue and a server taking items from it,
// watched by a monitor that samples the server's taken-items counter and its
// blocked mark every T (realized T·U(1.05, 1.15), like the library's sampler).
//
// The server marks "blocked" the way CP_MarkBlocked does: once, when it is
// about to wait for an empty input, and the monitor clears the mark at each
// sample; so a wait spanning whole periods marks only the period it began in.
// The server's output is never full (a sink).

// dist is a service or inter-arrival time distribution.
type dist struct {
	mean float64 // ns; 0: always ready (a saturating source)
	exp  bool    // exponential, else deterministic
}

func (d dist) draw(rng *rand.Rand) int64 {
	if d.mean == 0 {
		return 0
	}
	if !d.exp {
		return int64(d.mean + 0.5)
	}
	return max(1, int64(rng.ExpFloat64()*d.mean+0.5))
}

type sim struct {
	rng     *rand.Rand
	arr     dist
	svc     dist
	cap     int
	now     int64
	nextArr int64 // when the source's next item is ready
	holding bool  // the source holds an item the full queue refused
	q       int   // items in the input queue
	idle    bool  // the server waits for input
	doneAt  int64 // when the server's current service ends
	// levelMarks makes the mark a state (set for a period the server
	// waited in at all, as if it marked on every poll of an empty queue)
	// instead of an event; for comparison only.
	levelMarks bool
	// late is the share of periods in which the monitor is late: such a
	// period is realized T·U(2, 8) instead of T·U(1.05, 1.15) (a sampler
	// starved of CPU, as the library's is beside busy real-time threads).
	late float64

	items   uint64 // taken since the last sample
	blocked bool   // marked since the last sample
}

func newSim(seed uint64, arr, svc dist, capacity int) *sim {
	s := &sim{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), arr: arr, svc: svc, cap: capacity, idle: true}
	s.nextArr = s.arr.draw(s.rng)
	return s
}

// run advances the simulation to time until. (It works on local copies of
// the state: the race detector instruments every access to memory, and the
// tests run millions of events.)
func (s *sim) run(until int64) {
	const never = math.MaxInt64
	rng, arr, svc := s.rng, s.arr, s.svc
	nextArr, holding, q, idle, doneAt := s.nextArr, s.holding, s.q, s.idle, s.doneAt
	items, blocked := s.items, s.blocked
	for {
		ta, td := int64(never), int64(never)
		if !holding {
			ta = nextArr
		}
		if !idle {
			td = doneAt
		}
		if min(ta, td) > until {
			break
		}
		if ta <= td { // the source's item is ready
			switch {
			case idle: // the server was waiting for it: it takes it
				items++
				idle = false
				doneAt = ta + svc.draw(rng)
				nextArr = ta + arr.draw(rng)
			case q < s.cap:
				q++
				nextArr = ta + arr.draw(rng)
			default:
				holding = true
			}
			continue
		}
		// The server is done with its item.
		if q == 0 {
			idle = true
			blocked = true // CP_MarkBlocked: about to wait for input
			continue
		}
		q--
		items++
		doneAt = td + svc.draw(rng)
		if holding {
			holding = false
			q++
			nextArr = td + arr.draw(rng)
		}
	}
	s.nextArr, s.holding, s.q, s.idle, s.doneAt = nextArr, holding, q, idle, doneAt
	s.items, s.blocked = items, blocked
	s.now = until
}

// period runs one sampling period of requested length T and returns what the
// monitor sees.
func (s *sim) period(T time.Duration) (items uint64, seconds float64, blocked bool) {
	f := 1.05 + 0.1*s.rng.Float64()
	if s.late > 0 && s.rng.Float64() < s.late {
		f = 2 + 6*s.rng.Float64()
	}
	realized := int64(float64(T) * f)
	s.items, s.blocked = 0, s.levelMarks && s.idle
	s.run(s.now + realized)
	return s.items, float64(realized) / 1e9, s.blocked
}

// estimate is one converged estimate and when it came.
type estimate struct {
	at   int64 // simulated ns
	rate float64
}

// monitor runs the estimator over the simulation for d of simulated time;
// phase, if not nil, is called at each period with the simulated time, to
// change the service time.
func monitor(s *sim, e *Estimator, d time.Duration, phase func(s *sim)) []estimate {
	var out []estimate
	T := e.State().Period
	for end := s.now + int64(d); s.now < end; {
		if phase != nil {
			phase(s)
		}
		items, seconds, blocked := s.period(T)
		var conv bool
		var rate float64
		T, conv, rate = e.Sample(items, seconds, blocked)
		if conv {
			out = append(out, estimate{s.now, rate})
		}
	}
	return out
}

// relErr is the relative error of got against want.
func relErr(got, want float64) float64 { return (got - want) / want }

// median of xs (NaN if none); xs is sorted in place.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// quantiles formats the 0, 10, 50, 90 and 100th percentiles of xs (sorted in
// place) as percentages.
func quantiles(xs []float64) [5]float64 {
	var q [5]float64
	if len(xs) == 0 {
		for i := range q {
			q[i] = math.NaN()
		}
		return q
	}
	slices.Sort(xs)
	for i, p := range []float64{0, 0.1, 0.5, 0.9, 1} {
		q[i] = 100 * xs[int(math.Round(p*float64(len(xs)-1)))]
	}
	return q
}
