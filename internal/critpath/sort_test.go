package critpath

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSortedKeysOrderByInThenInst(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, span := range []int64{10, 1 << 20, 1 << 40, 1 << 50} {
		vs := make([]Visit, 5000)
		for i := range vs {
			vs[i] = Visit{In: -5 + r.Int64N(span), Inst: uint16(r.IntN(3))}
		}
		want := slices.Clone(vs)
		sortVisits(want)
		keys, _ := sortedKeys(vs, nil, nil)
		require.Len(t, keys, len(vs))
		for i, k := range keys {
			require.Equal(t, want[i].In, vs[k.i].In)
			require.Equal(t, want[i].Inst, vs[k.i].Inst)
		}
	}
}

// A buffer of a few ascending runs (each partition's visits climbing) is
// merged rather than radix-sorted; either way visits of one instance at
// one in come in visitCmp's order, whatever their order in the buffer:
// the order is total.
func TestSortedKeysMergesFewRunsInTotalOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		var vs []Visit
		runs := 1 + r.IntN(12)
		span := int64(1) << (8 + r.IntN(40))
		for k := 0; k < runs; k++ {
			run := make([]Visit, r.IntN(400))
			for i := range run {
				run[i] = Visit{In: r.Int64N(span) - span/4, Inst: uint16(r.IntN(3)), Out: int64(len(vs) + i)}
				if i > 0 && r.IntN(5) == 0 { // a tie with the visit before it
					run[i].In, run[i].Inst = run[i-1].In, run[i-1].Inst
				}
			}
			slices.SortStableFunc(run, func(x, y Visit) int {
				if x.In != y.In {
					return cmpInt(x.In, y.In)
				}
				return int(x.Inst) - int(y.Inst)
			})
			vs = append(vs, run...)
		}
		if len(vs) > 0 && r.IntN(3) == 0 { // ties across runs
			vs[len(vs)-1].In, vs[len(vs)-1].Inst = vs[0].In, vs[0].Inst
		}
		for i := range vs { // ties in (In, Inst) with other fields apart
			vs[i].Dep = int64(r.IntN(3))
		}
		want := slices.Clone(vs)
		slices.SortFunc(want, func(x, y Visit) int { return visitCmp(&x, &y) })
		keys, _ := sortedKeys(vs, nil, nil)
		got := make([]Visit, len(keys))
		for i, k := range keys {
			got[i] = vs[k.i]
		}
		require.Equal(t, want, got, "trial %d: %d runs, span %d", trial, runs, span)
	}
}

func cmpInt(x, y int64) int {
	if x < y {
		return -1
	}
	return 1
}
