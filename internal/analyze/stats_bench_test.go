package analyze

import (
	"math"
	"math/rand"
	"testing"
)

// benchValues are the streams Add is measured on (1<<16 values, repeated).
func benchValues(kind string) []float64 {
	r := rand.New(rand.NewSource(7))
	vs := make([]float64, 1<<16)
	switch kind {
	case "duration": // cycles: lognormal, 95 % from 3e3 to 3e6
		for i := range vs {
			vs[i] = math.Exp(math.Log(9.5e4) + 1.73*r.NormFloat64())
		}
	case "bound": // a bound held for 1-64 durations at a time, slowly moving around 1e3
		level := 1000.0
		for i := 0; i < len(vs); {
			level = math.Max(100, level*(1+0.002*r.NormFloat64()))
			for n := 1 + r.Intn(64); n > 0 && i < len(vs); n-- {
				vs[i] = level
				i++
			}
		}
	case "bound-drift": // a new bound every time (proportional to something), slowly moving
		level := 1000.0
		for i := range vs {
			level = math.Max(100, level*(1+0.0005*r.NormFloat64()))
			vs[i] = level * (1 + 0.01*r.Float64())
		}
	}
	return vs
}

// BenchmarkStatsAdd: ns per Add, old (refStats, the map histogram) and new,
// on a duration Stats past its exact limit and a limit-0 bound Stats.
func BenchmarkStatsAdd(b *testing.B) {
	for _, c := range []struct {
		kind  string
		limit uint64
	}{{"duration", ExactLimit}, {"bound", 0}, {"bound-drift", 0}} {
		vs := benchValues(c.kind)
		mask := len(vs) - 1
		b.Run(c.kind+"/old", func(b *testing.B) {
			s := newRefStatsLimit(c.limit)
			for i := uint64(0); i <= c.limit; i++ {
				s.Add(vs[int(i)&mask])
			}
			for i := 0; b.Loop(); i++ {
				s.Add(vs[i&mask])
			}
		})
		b.Run(c.kind+"/new", func(b *testing.B) {
			s := newStatsLimit(c.limit)
			for i := uint64(0); i <= c.limit; i++ {
				s.Add(vs[int(i)&mask])
			}
			for i := 0; b.Loop(); i++ {
				s.Add(vs[i&mask])
			}
		})
	}
}

// BenchmarkStatsAddExact: a duration Stats under its limit (appends only).
func BenchmarkStatsAddExact(b *testing.B) {
	vs := benchValues("duration")
	b.Run("old", func(b *testing.B) {
		s := newRefStatsLimit(math.MaxUint64)
		for i := 0; b.Loop(); i++ {
			s.Add(vs[i&(len(vs)-1)])
		}
	})
	b.Run("new", func(b *testing.B) {
		s := newStatsLimit(math.MaxUint64)
		for i := 0; b.Loop(); i++ {
			s.Add(vs[i&(len(vs)-1)])
		}
	})
}

// BenchmarkStatsMerge: merging two duration Stats past the limit.
func BenchmarkStatsMerge(b *testing.B) {
	vs := benchValues("duration")
	o := newStats()
	for i := 0; i <= ExactLimit; i++ {
		o.Add(vs[i&(len(vs)-1)])
	}
	s := newStats()
	for b.Loop() {
		s.Merge(o)
	}
}

// BenchmarkBucketOf: the bucket alone, against the old expression.
func BenchmarkBucketOf(b *testing.B) {
	vs := benchValues("duration")
	b.Run("old", func(b *testing.B) {
		x := int32(0)
		for i := 0; b.Loop(); i++ {
			x += refBucketOf(vs[i&(len(vs)-1)])
		}
		sinkB = x
	})
	b.Run("new", func(b *testing.B) {
		x := int32(0)
		for i := 0; b.Loop(); i++ {
			x += bucketOf(vs[i&(len(vs)-1)])
		}
		sinkB = x
	})
}

var sinkB int32

// BenchmarkStatsAddColumn: ns per value added a column of 2,048 at a time
// (the columnar core's batches), past the exact limit.
func BenchmarkStatsAddColumn(b *testing.B) {
	for _, c := range []struct {
		kind  string
		limit uint64
	}{{"duration", ExactLimit}, {"bound", 0}, {"bound-drift", 0}} {
		vs := benchValues(c.kind)
		b.Run(c.kind, func(b *testing.B) {
			s := newStatsLimit(c.limit)
			for i := uint64(0); i <= c.limit; i++ {
				s.Add(vs[int(i)&(len(vs)-1)])
			}
			off := 0
			for b.Loop() {
				s.AddColumn(vs[off : off+2048])
				off = (off + 2048) & (len(vs) - 1)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2048, "ns/value")
		})
	}
}
