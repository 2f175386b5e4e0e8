package critpath

import (
	"math"
	"math/big"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// An errSum does not depend on the order of its terms nor on how they
// were shared out among sums merged later (the workers' collectors), and
// it bounds their exact sum from above by less than 2^-errFrac cycles a
// term.
func TestErrSumIsOrderFree(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for round := 0; round < 50; round++ {
		vs := make([]float64, 1+r.Intn(3000))
		for i := range vs {
			vs[i] = math.Exp(r.Float64()*60-10) * r.Float64() // 0 to ~1e26 cycles: past 2^64 units too
		}
		var one errSum
		exact := new(big.Float).SetPrec(2000)
		for _, v := range vs {
			one.add(v)
			exact.Add(exact, new(big.Float).SetFloat64(v))
		}
		// The same terms shuffled and shared out among three sums.
		r.Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
		var parts [3]errSum
		for _, v := range vs {
			parts[r.Intn(3)].add(v)
		}
		var merged errSum
		for _, k := range r.Perm(3) {
			merged.merge(parts[k])
		}
		require.Equal(t, one, merged, "round %d", round)
		// Above the exact sum, by less than a unit a term (before the
		// final rounding to float64).
		got := new(big.Float).SetPrec(2000).SetInt(new(big.Int).Or(new(big.Int).Lsh(new(big.Int).SetUint64(one.hi), 64), new(big.Int).SetUint64(one.lo)))
		got.SetMantExp(got, -errFrac)
		require.True(t, got.Cmp(exact) >= 0, "round %d: a bound", round)
		slackF := new(big.Float).SetPrec(2000).SetFloat64(float64(len(vs)) * math.Ldexp(1, -errFrac))
		require.True(t, new(big.Float).SetPrec(2000).Sub(got, exact).Cmp(slackF) < 0, "round %d: within a unit a term", round)
		f, _ := got.Float64()
		require.Equal(t, f, one.float(), "round %d: float is the sum rounded", round)
	}
}

// Terms that are no bound make the sum +Inf; zeros and the sum of nothing
// are zero.
func TestErrSumEdges(t *testing.T) {
	var s errSum
	s.add(0)
	s.add(math.Copysign(0, -1))
	require.True(t, s.zero())
	require.Equal(t, 0.0, s.float())
	for _, v := range []float64{math.Inf(1), math.NaN(), math.MaxFloat64} {
		var e errSum
		e.add(1)
		e.add(v)
		require.True(t, math.IsInf(e.float(), 1), "%v", v)
	}
	var big errSum
	big.add(0x1p90) // 2^122 units: the high word
	big.add(0x1p90)
	require.Equal(t, 0x1p91, big.float())
}
