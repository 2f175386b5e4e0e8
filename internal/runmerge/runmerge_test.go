package runmerge

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

type rec struct{ k, seq uint64 }

func (r rec) RunKey() uint64 { return r.k }

// Sort is a stable sort of a slice of ascending runs: the order
// slices.SortStableFunc gives, ties across runs and within one included,
// for one run, two, an odd number, and empty runs' neighbours.
func TestSortIsStable(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 500; trial++ {
		var a []rec
		starts := []int{0}
		for k := 0; k < 1+r.IntN(9); k++ {
			run := make([]rec, 1+r.IntN(50))
			for i := range run {
				run[i].k = r.Uint64N(40)
			}
			slices.SortFunc(run, func(x, y rec) int { return int(x.k) - int(y.k) })
			if len(a) > 0 {
				starts = append(starts, len(a))
			}
			a = append(a, run...)
		}
		for i := range a {
			a[i].seq = uint64(i)
		}
		want := slices.Clone(a)
		slices.SortStableFunc(want, func(x, y rec) int { return int(x.k) - int(y.k) })
		got, buf := Sort(a, make([]rec, len(a)), starts)
		require.Equal(t, want, got, "trial %d", trial)
		require.Len(t, buf, len(a))
	}
}
