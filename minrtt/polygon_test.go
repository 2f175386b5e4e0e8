package minrtt

import (
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
)

// The clipping against brute force: for random sets of half-planes, the
// range of a + u*k over the polygon equals the range over every pairwise
// intersection of the lines that satisfies all half-planes (the vertices
// of the feasible set, found the slow way).
func TestPolygonBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	feasible, empty := 0, 0
	for iter := 0; iter < 2000; iter++ {
		n := 3 + rng.Intn(30)
		var hs []halfPlane
		// Lines shaped like probe constraints: coefficient 1 or -1 on a,
		// k in [-1/2, 1/2] on u, w around the true point (0, 0) plus
		// delays; a few inconsistent ones now and then.
		for i := 0; i < n; i++ {
			sign := 1.0
			if rng.Intn(2) == 0 {
				sign = -1
			}
			k := rng.Float64() - 0.5
			w := rng.ExpFloat64() * 1000
			if iter%10 == 0 && i == 0 {
				w = -5000 // likely infeasible
			}
			hs = append(hs, halfPlane{sign, sign * k, w})
		}
		// Keep u bounded: two constraints far apart in k on both sides.
		hs = append(hs, halfPlane{1, 0.5, 3000}, halfPlane{-1, -0.5, 3000}, halfPlane{1, -0.5, 3000}, halfPlane{-1, 0.5, 3000})

		p := intersect(hs, 1e12)
		// Brute force.
		var va, vu []float64
		for i := range hs {
			for j := i + 1; j < len(hs); j++ {
				l1, l2 := hs[i], hs[j]
				det := l1.ca*l2.cu - l1.cu*l2.ca
				if math.Abs(det) < 1e-12 {
					continue
				}
				a := (l1.w*l2.cu - l1.cu*l2.w) / det
				u := (l1.ca*l2.w - l1.w*l2.ca) / det
				ok := true
				for _, h := range hs {
					if h.ca*a+h.cu*u-h.w > 1e-7*(1+math.Abs(h.w)) {
						ok = false
						break
					}
				}
				if ok {
					va, vu = append(va, a), append(vu, u)
				}
			}
		}
		if len(va) == 0 {
			empty++
			require.Empty(t, p.a, "iter %d: brute force finds no vertex", iter)
			continue
		}
		feasible++
		require.NotEmpty(t, p.a, "iter %d", iter)
		require.False(t, p.touchesBox())
		for q := 0; q < 5; q++ {
			k := (rng.Float64() - 0.5) * 4
			lo, hi := p.rangeAt(k)
			blo, bhi := math.Inf(1), math.Inf(-1)
			for i := range va {
				v := va[i] + vu[i]*k
				blo, bhi = math.Min(blo, v), math.Max(bhi, v)
			}
			tol := 1e-6 * (1 + math.Abs(blo) + math.Abs(bhi))
			require.InDelta(t, blo, lo, tol, "iter %d k %g", iter, k)
			require.InDelta(t, bhi, hi, tol, "iter %d k %g", iter, k)
		}
	}
	t.Logf("%d feasible, %d empty", feasible, empty)
	require.Greater(t, feasible, 1000)
	require.Greater(t, empty, 50)
}
