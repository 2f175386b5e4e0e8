package analyze

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStatsExact(t *testing.T) {
	s := newStats()
	for _, v := range []float64{5, 1, 4, 2, 3} {
		s.Add(v)
	}
	require.True(t, s.Exact())
	require.Equal(t, []float64{1, 2, 3, 5}, s.Quantiles(0, 0.25, 0.5, 1))
	require.Equal(t, 1.0, s.Min)
	require.Equal(t, 5.0, s.Max)
}

func TestStatsHistogramPastTheLimit(t *testing.T) {
	s := newStats()
	r := rand.New(rand.NewSource(1))
	n := exactLimit + 1000
	for i := 0; i < n; i++ {
		// Durations from -50 to 1e6 cycles, uniform: quantiles are known.
		s.Add(-50 + r.Float64()*(1e6+50))
	}
	require.False(t, s.Exact())
	require.Nil(t, s.exact, "the exact buffer is dropped past the limit")
	q := s.Quantiles(0.25, 0.5, 0.99)
	for i, want := range []float64{-50 + 0.25*(1e6+50), -50 + 0.5*(1e6+50), -50 + 0.99*(1e6+50)} {
		require.InEpsilon(t, want, q[i], 0.003, "q%d", i) // bucket + sampling error
	}
	neg := newStats()
	for i := 0; i < exactLimit+10; i++ {
		neg.Add(-float64(i%1000) - 0.5)
	}
	require.InEpsilon(t, -999.5, neg.Quantiles(0)[0], 0.001)
	require.InDelta(t, -0.5, neg.Quantiles(1)[0], 0.001)
}

func TestStatsInfinite(t *testing.T) {
	s := newStatsLimit(0)
	s.Add(10)
	s.Add(math.Inf(1))
	s.Add(math.NaN())
	require.EqualValues(t, 3, s.N)
	q := s.Quantiles(0.1, 1)
	require.InEpsilon(t, 10, q[0], 0.001)
	require.True(t, math.IsInf(q[1], 1))
	e := newStats()
	e.Add(math.Inf(1))
	e.Add(1)
	require.Equal(t, []float64{1, math.Inf(1)}, e.Quantiles(0, 1))
}
