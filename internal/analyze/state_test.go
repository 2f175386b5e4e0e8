package analyze

import (
	"bytes"
	"encoding/gob"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// A State carries each Stats through gob as it was, field for
// field: exact values as raw bytes (floatColumn: NaN's payload, -0 and the
// infinities kept), no list (histogram only), an empty list still kept
// (exact values to come), and a list past a few pages.
func TestStateKeepsStats(t *testing.T) {
	special := []float64{math.Float64frombits(0x7ff8000000000bad), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0, 1e-300, 3.5e9}
	many := make([]float64, 100_000)
	for i := range many {
		many[i] = float64(i) * 1.25
	}
	empty := newStatsLimit(10)
	hist := newStatsLimit(0)
	for _, v := range many {
		hist.Add(v)
	}
	withSpecial, withMany := newStatsLimit(100), newStatsLimit(200_000)
	for _, v := range special {
		withSpecial.Add(v)
	}
	for _, v := range many {
		withMany.Add(v)
	}
	for name, s := range map[string]*Stats{"empty": empty, "histogram": hist, "special": withSpecial, "many": withMany} {
		var buf bytes.Buffer
		require.NoError(t, gob.NewEncoder(&buf).Encode(&State{Pairs: []PairState{{Dur: s.state()}}}))
		var st State
		require.NoError(t, gob.NewDecoder(&buf).Decode(&st))
		got := st.Pairs[0].Dur.stats()
		// state() flushed s's run of one bucket into its counts; the
		// bucket it remembers for the next value is a cache, not carried.
		s.lastBits, s.lastB = 0, 0
		require.Empty(t, statsFieldsDiffer(s, got), "%s: min %v/%v max %v/%v", name, s.Min, got.Min, s.Max, got.Max)
		require.Equal(t, s.exact == nil, got.exact == nil, "%s: a list kept, or none", name)
		for i, v := range s.exact {
			require.Equal(t, math.Float64bits(v), math.Float64bits(got.exact[i]), "%s: value %d", name, i)
		}
	}
	var f floatColumn
	require.ErrorContains(t, f.GobDecode(make([]byte, 12)), "not 8 a value")
}
