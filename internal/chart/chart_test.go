package chart

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNiceAndTicks(t *testing.T) {
	require.Equal(t, 100.0, nice(120, false))
	require.Equal(t, 200.0, nice(120, true))
	require.Equal(t, 5.0, nice(7, false))
	require.Equal(t, 10.0, nice(7, true))
	require.Equal(t, 1000.0, nice(1000, true))
	a := Axis{Log: true}
	lo, hi := a.span([]Series{{X: []float64{1}, Y: []float64{120, 180, -3, math.NaN()}}}, false)
	require.Equal(t, [2]float64{100, 200}, [2]float64{lo, hi}, "non-positive and NaN values are gaps on a log axis")
	require.Equal(t, []float64{100, 200}, a.ticks(lo, hi))
	lin := Axis{}
	require.Equal(t, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, roundAll(lin.ticks(0, 1)))
}

// A range below the values' precision (steps that add nothing to 1e17,
// or equal values near 2^52): a few ticks, not a loop without end.
func TestTicksBelowPrecision(t *testing.T) {
	lin := Axis{}
	for _, ys := range [][]float64{{1e17, 1e17 + 32}, {1 << 52, 1 << 52}, {5e15, 5e15}, {1e300, 1e300}} {
		lo, hi := lin.span([]Series{{X: []float64{0}, Y: ys}}, false)
		ts := lin.ticks(lo, hi)
		require.LessOrEqual(t, len(ts), 10, "%v", ys)
		for _, v := range ts {
			require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "%v: tick %v", ys, v)
		}
		c := Chart{Series: []Series{{Name: "s", X: []float64{0, 1}, Y: ys}}}
		var b strings.Builder
		c.SVG(&b)
		require.NotContains(t, b.String(), "NaN")
	}
}

func roundAll(v []float64) []float64 {
	for i := range v {
		v[i] = math.Round(v[i]*1e9) / 1e9
	}
	return v
}

// Each series is one mark, whatever its points: a line, a dot, or an
// empty line with a title saying so; the svg says how many.
func TestSeriesMarks(t *testing.T) {
	c := Chart{ID: "x", Title: "t <&>", X: Axis{Label: "s"}, Y: Axis{Label: "us", Log: true}, Series: []Series{
		{Name: "line", X: []float64{0, 1, 2}, Y: []float64{1, 10, 100}},
		{Name: "dot", X: []float64{1}, Y: []float64{5}},
		{Name: "empty", X: []float64{1}, Y: []float64{0}},
	}}
	var b strings.Builder
	c.SVG(&b)
	s := b.String()
	require.Contains(t, s, `data-chart="x" data-series="3"`)
	require.Equal(t, 3, strings.Count(s, `class="series"`))
	require.Contains(t, s, "<circle class=\"series\" data-name=\"dot\"")
	require.Contains(t, s, "empty: no values")
	require.Contains(t, s, "t &lt;&amp;&gt;", "escaped")
	require.NotContains(t, s, "NaN")
}

func TestTrimMiddle(t *testing.T) {
	require.Equal(t, "short", trimMiddle("short", 10))
	s := trimMiddle("compute: vm/0-source#0 out → vm/1-enrich#1 in", 24)
	require.Len(t, []rune(s), 24)
	require.True(t, strings.HasPrefix(s, "compute:"))
	require.True(t, strings.HasSuffix(s, "enrich#1 in"))
}
