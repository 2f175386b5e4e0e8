package minrtt

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Path choice: with the direct link gone or bad, values go through another
// node, and the bounds still hold.

func pathCase(t *testing.T, s *sim, rs []*Round) models {
	t.Helper()
	ms := buildModels(t, rs, "a")
	span := s.lastTau - s.firstTau
	r := checkTruth(t, s, ms, 10000, s.firstTau-0.1*span, s.lastTau+0.1*span)
	require.Zero(t, r.violations)
	return ms
}

func TestPathNoDirectLink(t *testing.T) {
	s := newSim(3)
	s.noDirect[pairKey(0, 1)] = true // a and b never probe each other
	rs := s.rounds([]float64{10 * minute, 13 * minute, 16 * minute})
	ms := pathCase(t, s, rs)
	for _, meth := range []Method{MethodPaper, MethodAllProbes} {
		p, err := ms.best.Path("b", meth)
		require.NoError(t, err)
		require.Len(t, p, 3, "%s: %v", meth, p)
		require.Equal(t, "b", p[0])
		require.Contains(t, []string{"c", "d"}, p[1])
		require.Equal(t, "a", p[2])
	}
	p, _ := ms.best.Path("c", MethodAllProbes)
	require.Equal(t, []string{"c", "a"}, p)
	for _, l := range ms.best.Links() {
		require.False(t, l.Into == "a" && l.From == "b", "no a<-b link without probes")
	}
}

func TestPathAvoidsBadPair(t *testing.T) {
	s := newSim(4)
	s.badPair[pairKey(0, 1)] = 2e6 // a-b: every probe 2M ticks slower each way
	rs := s.rounds([]float64{10 * minute, 13 * minute, 16 * minute})
	ms := pathCase(t, s, rs)
	for _, meth := range []Method{MethodPaper, MethodAllProbes} {
		p, err := ms.best.Path("b", meth)
		require.NoError(t, err)
		require.Len(t, p, 3, "%s: %v", meth, p)
	}
	// The direct link is still reported, with its large RTT, but unused.
	found := false
	for _, l := range ms.best.Links() {
		if l.Into == "a" && l.From == "b" {
			found = true
			require.Greater(t, l.MinRTT, 4e6)
			require.False(t, l.Used)
			require.Empty(t, l.Unusable)
		}
	}
	require.True(t, found)
}

func TestPathOneRoundLink(t *testing.T) {
	s := newSim(5)
	rs := s.rounds([]float64{10 * minute, 13 * minute, 16 * minute})
	// a and b probed each other in the first round only.
	for _, r := range rs[1:] {
		var keep []Direction
		for _, d := range r.Dirs {
			if !(d.Origin == "a" && d.Responder == "b" || d.Origin == "b" && d.Responder == "a") {
				keep = append(keep, d)
			}
		}
		r.Dirs = keep
	}
	ms := pathCase(t, s, rs)
	p, _ := ms.best.Path("b", MethodBest)
	require.Len(t, p, 3)
	for _, l := range ms.best.Links() {
		if l.Into == "a" && l.From == "b" {
			require.Contains(t, l.Unusable, "1 round(s)")
			require.False(t, l.Used)
		}
	}
}

func TestChooseRef(t *testing.T) {
	s := newSim(6)
	s.missing[1] = map[int]bool{0: true} // a misses round 2: not the reference
	rs := s.rounds([]float64{10 * minute, 13 * minute, 16 * minute})
	m, err := NewModel(rs, Options{})
	require.NoError(t, err)
	require.NotEqual(t, "a", m.Ref())
	require.Equal(t, m.Nodes()[m.RefIndex()], m.Ref())
	require.InDelta(t, 3e9*s.nodes[m.RefIndex()].rate, m.RefHz(), 1e-3)
	// Same data, same choice: deterministic.
	m2, err := NewModel(rs, Options{})
	require.NoError(t, err)
	require.Equal(t, m.Ref(), m2.Ref())
	// The choice works as the reference: bounds hold.
	ms := buildModels(t, rs, m.Ref())
	span := s.lastTau - s.firstTau
	require.Zero(t, checkTruth(t, s, ms, 5000, s.firstTau, s.firstTau+span).violations)
}

// Queries from many goroutines at once see the same numbers as one by one
// (go test -race checks the model is only read).
func TestConcurrentQueries(t *testing.T) {
	s := newSim(7)
	rs := s.rounds([]float64{10 * minute, 13 * minute})
	m, err := NewModel(rs, Options{Ref: "b"})
	require.NoError(t, err)
	type q struct {
		si, ei     int
		start, end uint64
	}
	var qs []q
	for i := 0; i < 2000; i++ {
		tau := 10*minute + s.rng.Float64()*3*minute
		si, ei := s.rng.Intn(4), s.rng.Intn(4)
		qs = append(qs, q{si, ei, s.nodes[si].read(tau), s.nodes[ei].read(tau + 1e6)})
	}
	want := make([]Duration, len(qs))
	for i, x := range qs {
		want[i] = m.DurationIdx(m.NodeIndex(s.nodes[x.si].name), x.start, m.NodeIndex(s.nodes[x.ei].name), x.end)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, x := range qs {
				got := m.DurationIdx(m.NodeIndex(s.nodes[x.si].name), x.start, m.NodeIndex(s.nodes[x.ei].name), x.end)
				_ = m.PointIdx(m.NodeIndex(s.nodes[x.si].name), x.start)
				if got != want[i] {
					errs <- "different result"
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []string
	for e := range errs {
		all = append(all, e)
	}
	require.Empty(t, strings.Join(all, ","))
}
