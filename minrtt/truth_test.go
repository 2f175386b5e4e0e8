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
func checkTruth(t *testing.T, s *sim, ms models, n int, lo, hi float64) (paperErr, allErr, bestErr, baseErr map[int]*stats) {
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
	paperErr, allErr, bestErr, baseErr = map[int]*stats{}, map[int]*stats{}, map[int]*stats{}, map[int]*stats{}
	for k := 0; k < 4; k++ {
		paperErr[k], allErr[k], bestErr[k], baseErr[k] = &stats{}, &stats{}, &stats{}, &stats{}
	}
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
		check("point best", truth, ms.best.PointRelIdx(idx[i], c))
		check("point paper", truth, ms.paper.PointRelIdx(idx[i], c))
		check("point all", truth, ms.all.PointRelIdx(idx[i], c))
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
		paperErr[sc].add(dp.Err)
		allErr[sc].add(da.Err)
		bestErr[sc].add(db.Err)
		baseErr[sc].add(dp.Baseline)
	}
	for what, v := range viol {
		t.Errorf("%s: %d violations in %d queries", what, v, n)
	}
	return
}

func TestGroundTruth(t *testing.T) {
	s := newSim(1)
	s.missing[1] = map[int]bool{3: true} // d misses round 2
	rs := s.rounds([]float64{10 * minute, 12 * minute, 14 * minute, 16 * minute})
	ms := buildModels(t, rs, "a")
	span := s.lastTau - s.firstTau
	p, a, b, base := checkTruth(t, s, ms, 20000, s.firstTau-0.2*span, s.lastTau+0.2*span)
	for sc := 0; sc < 4; sc++ {
		t.Logf("scenario %d: n=%d paper median %.0f max %.0f | all-probes median %.0f max %.0f | best median %.0f | baseline median %.0f",
			sc, len(p[sc].errs), p[sc].median(), p[sc].max(), a[sc].median(), a[sc].max(), b[sc].median(), base[sc].median())
	}
}
