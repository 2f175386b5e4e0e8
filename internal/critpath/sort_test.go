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
