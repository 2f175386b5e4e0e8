package minrtt

import (
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

// Ground truth: simulated nodes with exact linear counters; every bound the
// model gives must contain the truth.

const minute = 3e9 * 60 // ticks

type stats struct{ errs []float64 }

func (s *stats) add(e float64) { s.errs = append(s.errs, e) }
func (s *stats) median() float64 {
	if len(s.errs) == 0 {
		return math.NaN()
	}
	sort.Float64s(s.errs)
	return s.errs[len(s.errs)/2]
}
func (s *stats) max() float64 {
	m := math.Inf(-1)
	for _, e := range s.errs {
		m = math.Max(m, e)
	}
	return m
}

type models struct{ best, paper, all *Model }

func buildModels(t testing.TB, rs []*Round, ref string) models {
	t.Helper()
	var ms models
	var err error
	ms.best, err = NewModel(rs, Options{Ref: ref})
	require.NoError(t, err)
	ms.paper, err = NewModel(rs, Options{Ref: ref, Method: MethodPaper})
	require.NoError(t, err)
	ms.all, err = NewModel(rs, Options{Ref: ref, Method: MethodAllProbes})
	require.NoError(t, err)
	return ms
}

// checkTruth runs n random point and duration queries over [lo, hi] true
// time and counts violations per method; it returns per-scenario errors.
func checkTruth(t *testing.T, s *sim, ms models, n int, lo, hi float64) *truthResult {
	t.Helper()
	ref := ms.best.RefIndex()
	idx := make([]int, len(s.nodes)) // sim index -> model index
	for i, nd := range s.nodes {
		idx[i] = ms.best.NodeIndex(nd.name)
		require.GreaterOrEqual(t, idx[i], 0)
	}
	simRef := -1
	for i := range s.nodes {
		if idx[i] == ref {
			simRef = i
		}
	}
	origin := ms.best.RefOrigin()
	res := &truthResult{}
	paperErr, allErr, bestErr, baseErr := &res.paper, &res.all, &res.best, &res.base
	viol := map[string]int{}
	check := func(what string, truth float64, v Value) {
		if !(math.Abs(truth-v.Est) <= v.Err) {
			if viol[what] < 5 {
				t.Errorf("%s: truth %.3f outside %.3f +- %.3f (off by %.3f)", what, truth, v.Est, v.Err, math.Abs(truth-v.Est)-v.Err)
			}
			viol[what]++
		}
	}
	rng := s.rng
	for q := 0; q < n; q++ {
		// Point.
		i := rng.Intn(len(s.nodes))
		tau := lo + rng.Float64()*(hi-lo)
		c := s.nodes[i].read(tau)
		truth := s.truthPoint(simRef, i, c, origin)
		pb, pp, pa := ms.best.PointRelIdx(idx[i], c), ms.paper.PointRelIdx(idx[i], c), ms.all.PointRelIdx(idx[i], c)
		check("point best", truth, pb)
		check("point paper", truth, pp)
		check("point all", truth, pa)
		if i != simRef {
			in := tau >= s.firstTau && tau <= s.lastTau
			res.points++
			if pa.Err <= pp.Err+1e-9 {
				res.allNoWider++
			}
			if in {
				res.ptPaper.add(pp.Err)
				res.ptAll.add(pa.Err)
				res.ptBest.add(pb.Err)
				res.ptFloor.add(s.floor(i, simRef))
				res.ptAllOverFloor.add(pa.Err / s.floor(i, simRef))
			} else {
				res.exPaper.add(pp.Err)
				res.exAll.add(pa.Err)
			}
		}
		// Absolute point, with the absolute truth.
		abs := ms.best.PointIdx(idx[i], c)
		absTruth := float64(s.nodes[simRef].off) + s.nodes[simRef].rate*s.tau(i, c)
		// The truth itself is a rounded float64 here: allow its own ulp.
		require.LessOrEqual(t, math.Abs(absTruth-abs.Est), abs.Err+ulp(absTruth), "absolute point")

		// Duration: random ends, mostly short (a tuple's latency), some long.
		si, ei := rng.Intn(len(s.nodes)), rng.Intn(len(s.nodes))
		if q%4 == 0 {
			ei = si // scenario 0/1 often enough
		}
		ts := lo + rng.Float64()*(hi-lo)
		dur := rng.ExpFloat64() * 3e6 // ~1 ms
		if q%10 == 0 {
			dur = rng.Float64() * 2 * minute
		}
		if q%7 == 0 {
			dur = -dur
		}
		start, end := s.nodes[si].read(ts), s.nodes[ei].read(ts+dur)
		dt := s.truthDuration(simRef, si, start, ei, end)
		db := ms.best.DurationIdx(idx[si], start, idx[ei], end)
		dp := ms.paper.DurationIdx(idx[si], start, idx[ei], end)
		da := ms.all.DurationIdx(idx[si], start, idx[ei], end)
		check("duration best", dt, db.Value)
		check("duration paper", dt, dp.Value)
		check("duration all", dt, da.Value)
		require.Equal(t, dp.Scenario, db.Scenario)
		require.InDelta(t, dp.Err, db.Paper, 1e-9*(1+dp.Err), "Paper field = paper method's error")
		require.InDelta(t, dp.Baseline, db.Baseline, 1e-9*(1+dp.Baseline))
		require.LessOrEqual(t, db.Err, dp.Err+1e-6, "best is no wider than paper")
		require.LessOrEqual(t, db.Err, da.Err+1e-6, "best is no wider than all-probes")
		sc := db.Scenario
		if sc > 0 {
			res.durations++
			if da.Err <= dp.Err+1e-9 {
				res.durAllNoWider++
			}
		}
		paperErr[sc].add(dp.Err)
		allErr[sc].add(da.Err)
		bestErr[sc].add(db.Err)
		baseErr[sc].add(dp.Baseline)
	}
	for what, v := range viol {
		t.Errorf("%s: %d violations in %d queries", what, v, n)
	}
	res.violations = 0
	for _, v := range viol {
		res.violations += v
	}
	return res
}

// truthResult gathers the errors of a checkTruth run: per duration
// scenario, and for points off the reference inside the rounds' time span
// (pt*) and outside it (ex*), with the floor for each point.
type truthResult struct {
	paper, all, best, base          [4]stats
	ptPaper, ptAll, ptBest, ptFloor stats
	ptAllOverFloor                  stats
	exPaper, exAll                  stats
	points, allNoWider, violations  int
	durations, durAllNoWider        int
}

func (r *truthResult) log(t *testing.T) {
	for sc := 0; sc < 4; sc++ {
		t.Logf("duration scenario %d: n=%d error median/max: paper %.1f/%.0f all-probes %.1f/%.0f best %.1f/%.0f baseline %.1f/%.0f",
			sc, len(r.paper[sc].errs), r.paper[sc].median(), r.paper[sc].max(), r.all[sc].median(), r.all[sc].max(),
			r.best[sc].median(), r.best[sc].max(), r.base[sc].median(), r.base[sc].max())
	}
	t.Logf("points within the rounds: n=%d error median/max: paper %.0f/%.0f all-probes %.0f/%.0f best %.0f/%.0f; floor median %.0f; all-probes/floor median %.3f max %.3f",
		len(r.ptPaper.errs), r.ptPaper.median(), r.ptPaper.max(), r.ptAll.median(), r.ptAll.max(), r.ptBest.median(), r.ptBest.max(),
		r.ptFloor.median(), r.ptAllOverFloor.median(), r.ptAllOverFloor.max())
	t.Logf("points extrapolated: n=%d median paper %.0f all-probes %.0f; all-probes no wider than paper on %d of %d points, %d of %d durations (scenarios 1-3)",
		len(r.exPaper.errs), r.exPaper.median(), r.exAll.median(), r.allNoWider, r.points, r.durAllNoWider, r.durations)
}

// TestGroundTruth: four nodes with rates 1, 0.9997, 1.0004, 1.00013 and
// offsets of billions to trillions of cycles; four rounds two minutes apart,
// node d missing from the second; asymmetric one-way delays with jitter and
// spikes. 100k queries of each kind per method, a fifth of them
// extrapolated beyond the rounds on either side.
func TestGroundTruth(t *testing.T) {
	s := newSim(1)
	s.missing[1] = map[int]bool{3: true} // d misses round 2
	rs := s.rounds([]float64{10 * minute, 12 * minute, 14 * minute, 16 * minute})
	ms := buildModels(t, rs, "a")
	span := s.lastTau - s.firstTau
	n := 100000
	if testing.Short() {
		n = 10000
	}
	r := checkTruth(t, s, ms, n, s.firstTau-0.2*span, s.lastTau+0.2*span)
	r.log(t)
	// The all-probes bound is never wider than the paper's on a point (same
	// data, more constraints), and it reaches the floor within 1%.
	require.Equal(t, r.points, r.allNoWider)
	require.Less(t, r.ptAllOverFloor.max(), 1.01)
	require.GreaterOrEqual(t, r.ptAllOverFloor.median(), 1.0)
	// Table 2: the baseline is about twice scenario 3's error.
	require.Greater(t, r.base[3].median(), 1.8*r.paper[3].median())
}

// TestGroundTruthNoisy: heavier jitter (mean 20k ticks each way), fewer
// probes per direction, more spikes: the paper's single MinRTT probe per
// round is further from the floor, the all-probes bound much less so.
func TestGroundTruthNoisy(t *testing.T) {
	s := newSim(2)
	s.jitter, s.perDir, s.spikeP = 20000, 60, 0.05
	s.missing[2] = map[int]bool{1: true}
	rs := s.rounds([]float64{5 * minute, 7 * minute, 9 * minute, 11 * minute, 13 * minute})
	ms := buildModels(t, rs, "a")
	span := s.lastTau - s.firstTau
	n := 50000
	if testing.Short() {
		n = 5000
	}
	r := checkTruth(t, s, ms, n, s.firstTau-0.2*span, s.lastTau+0.2*span)
	r.log(t)
	require.Equal(t, r.points, r.allNoWider)
	require.Less(t, r.ptAll.median(), r.ptPaper.median())
}

// TestGroundTruthZeroDelay: probes with no delay at all (the responder
// reads at the very instant the origin sends and receives): the truth sits
// on the edge of every probe's bracket and only the quantization slack and
// float rounding keep it inside. The bounds shrink to a few cycles.
func TestGroundTruthZeroDelay(t *testing.T) {
	s := newSim(11)
	for k := range s.base {
		s.base[k] = 0
	}
	s.jitter, s.spikeP, s.perDir = 0.5, 0, 20
	rs := s.rounds([]float64{10 * minute, 30 * minute, 50 * minute, 70 * minute})
	ms := buildModels(t, rs, "c")
	span := s.lastTau - s.firstTau
	n := 30000
	if testing.Short() {
		n = 3000
	}
	r := checkTruth(t, s, ms, n, s.firstTau-0.3*span, s.lastTau+0.3*span)
	r.log(t)
	require.Less(t, r.ptAll.max(), 20.0)
}
