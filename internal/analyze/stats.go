package analyze

import (
	"math"
	"sort"
)

// exactLimit is how many durations a pair keeps for exact quantiles; past it
// the pair's quantiles come from its histogram (relative error histRel/2),
// so that memory stays bounded however long the run.
const exactLimit = 1 << 20

// histRel is the relative width of a histogram bucket: 0.1 %.
const histRel = 0.001

var histLog = math.Log1p(histRel)

// Stats summarises a stream of values (durations or their bounds): count,
// min, max exactly; quantiles exactly up to exactLimit values, from a
// log-bucketed histogram after that.
type Stats struct {
	N        uint64
	limit    uint64 // values kept for exact quantiles
	Min, Max float64
	exact    []float64
	hist     map[int32]uint64 // bucket -> count; negative buckets for negative values
	zero     uint64           // values with |v| < 1
	inf      uint64           // +Inf and NaN (a bound a method could not give): sorted last
}

func newStats() *Stats { return newStatsLimit(exactLimit) }

// newStatsLimit keeps up to limit values for exact quantiles (0: the
// histogram only, for values whose quantiles need not be exact).
func newStatsLimit(limit uint64) *Stats {
	return &Stats{Min: math.Inf(1), Max: math.Inf(-1), hist: map[int32]uint64{}, limit: limit}
}

func bucketOf(v float64) int32 {
	b := int32(math.Log(math.Abs(v))/histLog) + 1
	if v < 0 {
		return -b
	}
	return b
}

// bucketMid is the geometric middle of a bucket.
func bucketMid(b int32) float64 {
	a := b
	if a < 0 {
		a = -a
	}
	v := math.Exp((float64(a-1) + 0.5) * histLog)
	if b < 0 {
		return -v
	}
	return v
}

// Add records one value.
func (s *Stats) Add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = math.Inf(1)
		s.inf++
	}
	s.N++
	s.Min = math.Min(s.Min, v)
	s.Max = math.Max(s.Max, v)
	if math.Abs(v) < 1 {
		s.zero++
	} else if s.inf == 0 || !math.IsInf(v, 1) {
		s.hist[bucketOf(v)]++
	}
	if s.exact != nil || s.N == 1 {
		if s.N <= s.limit {
			s.exact = append(s.exact, v)
		} else {
			s.exact = nil
		}
	}
}

// Exact says whether Quantile is exact (else within histRel/2 relative).
func (s *Stats) Exact() bool { return s.N <= s.limit }

// Quantiles returns the values at the given fractions (0..1), nearest rank.
func (s *Stats) Quantiles(qs ...float64) []float64 {
	out := make([]float64, len(qs))
	if s.N == 0 {
		for i := range out {
			out[i] = math.NaN()
		}
		return out
	}
	rank := func(q float64) uint64 {
		r := uint64(math.Ceil(q * float64(s.N)))
		if r < 1 {
			r = 1
		}
		return r
	}
	if s.Exact() {
		sort.Float64s(s.exact)
		for i, q := range qs {
			out[i] = s.exact[rank(q)-1]
		}
		return out
	}
	keys := make([]int32, 0, len(s.hist)+1)
	for b := range s.hist {
		keys = append(keys, b)
	}
	keys = append(keys, 0)
	// Order buckets by value: negative buckets (larger magnitude first),
	// then the |v| < 1 bucket, then positive buckets.
	sort.Slice(keys, func(i, j int) bool { return order(keys[i]) < order(keys[j]) })
	for i, q := range qs {
		want, seen := rank(q), uint64(0)
		out[i] = math.Inf(1) // past every bucket: the +Inf values
		for _, b := range keys {
			n := s.hist[b]
			if b == 0 {
				n = s.zero
			}
			seen += n
			if seen >= want {
				v := 0.0
				if b != 0 {
					v = bucketMid(b)
				}
				out[i] = math.Min(math.Max(v, s.Min), s.Max)
				break
			}
		}
	}
	return out
}

func order(b int32) float64 {
	switch {
	case b < 0:
		return -float64(-b)
	default:
		return float64(b)
	}
}
