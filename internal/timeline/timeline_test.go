package timeline

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBinsCoverValuesWithinASixteenth(t *testing.T) {
	prev := -1
	for _, d := range []float64{0.5, 1, 1.2, 2, 3, 7, 8, 9, 15, 16, 17, 100, 1e3, 12345, 1e6, 3e9, 1e12} {
		b := binOf(d)
		require.GreaterOrEqual(t, b, prev, "bins climb with the value (%g)", d)
		prev = b
		if d >= 1 {
			require.InDelta(t, 1, binMid(b)/d, 1.0/16, "value %g, bin %d, middle %g", d, b, binMid(b))
		}
	}
	require.Equal(t, 0, binOf(-5), "a negative estimate goes in bin 0")
	require.Equal(t, Bins-1, binOf(1e20))
}

func TestGridClampsAndSplits(t *testing.T) {
	g := NewGrid(100, 200, 10)
	require.Equal(t, 0, g.Bucket(50))
	require.Equal(t, 0, g.Bucket(100))
	require.Equal(t, 4, g.Bucket(145))
	require.Equal(t, 9, g.Bucket(200), "the last record falls in the last bucket")
	require.Equal(t, 9, g.Bucket(1e9))
	require.Equal(t, 0, g.Bucket(math.NaN()))
	empty := NewGrid(5, 5, 3)
	require.Equal(t, 0, empty.Bucket(5))
}

func TestSeriesQuantilesAgainstSorted(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	a, b := NewSeries(4), NewSeries(4)
	var all [4][]float64
	for i := 0; i < 40000; i++ {
		k := i % 4
		d := math.Exp(rng.NormFloat64()*1.5 + 8) // a long tail
		all[k] = append(all[k], d)
		if i%3 == 0 {
			a.Add(k, d)
		} else {
			b.Add(k, d)
		}
	}
	a.Merge(b)
	ps := a.Points()
	require.Len(t, ps, 4)
	for _, p := range ps {
		v := all[p.Bucket]
		slices.Sort(v)
		require.Equal(t, uint64(len(v)), p.N)
		require.Equal(t, v[len(v)-1], p.Max)
		require.InDelta(t, 1, p.P50/v[len(v)/2-1], 0.07)
		require.InDelta(t, 1, p.P99/v[int(math.Ceil(0.99*float64(len(v))))-1], 0.07)
	}
	empty := NewSeries(3)
	require.Empty(t, empty.Points())
}

func TestRecordsPerChannel(t *testing.T) {
	r, o := NewRecords(3, 5), NewRecords(3, 5)
	r.Add(0, 1)
	o.Add(0, 1)
	o.Add(2, 4)
	r.Merge(o)
	c, ok := r.Channel(0)
	require.True(t, ok)
	require.Equal(t, []uint64{0, 2, 0, 0, 0}, c)
	_, ok = r.Channel(1)
	require.False(t, ok)
}
