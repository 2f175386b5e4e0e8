package timeline

import (
	"math/rand"
	"testing"
)

// BenchmarkTuple: what the report's aggregates cost one tuple of `make
// bench-analyze`'s shape (four records, three hops and end to end): four
// record counts and four durations into their series.
func BenchmarkTuple(b *testing.B) {
	g := NewGrid(0, 1e10, 120)
	r := NewRecords(4, g.N)
	ss := []*Series{NewSeries(g.N), NewSeries(g.N), NewSeries(g.N), NewSeries(g.N)}
	rng := rand.New(rand.NewSource(1))
	ds := make([]float64, 4096)
	for i := range ds {
		ds[i] = rng.ExpFloat64() * 5e4
	}
	// Tuples come by id, in about the order of their times (a partition
	// of the join): the time climbs across the run once.
	step := 1e10 / float64(b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i & 4095
		bk := g.Bucket(float64(i) * step)
		for ch := 0; ch < 4; ch++ {
			r.Add(ch, bk)
			ss[ch].Add(bk, ds[(k+ch)&4095])
		}
	}
}
