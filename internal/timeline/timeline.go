// Package timeline keeps what `analyze`'s report draws over time, in a
// fixed number of buckets across the run (reference cycles): per pair of
// channels, its durations' count, mean, median, p99 and largest; per
// channel, its records. Workers fill accumulators of their own, merged at
// the end. Aggregates only, so the report stays small whatever the run's
// length.
//
// A bucket's quantiles come from a histogram with 8 bins an octave: a
// value is reported as its bin's middle, within 1/16 (6.25%) of the truth.
// That is enough for a line over time; the exact quantiles of the whole run
// are in the summary.
package timeline

import (
	"math"
	"math/bits"
)

// Grid is the buckets: N of Width reference cycles from T0.
type Grid struct {
	T0, Width float64
	N         int
	inv       float64
}

// NewGrid divides [t0, t1] into n buckets (one bucket of one cycle for an
// empty span).
func NewGrid(t0, t1 float64, n int) Grid {
	if n < 1 {
		n = 1
	}
	w := (t1 - t0) / float64(n)
	if !(w > 0) || math.IsInf(w, 0) {
		w = 1
	}
	// Nudged so that t1 itself falls in the last bucket.
	w *= 1 + 1e-12
	return Grid{T0: t0, Width: w, N: n, inv: 1 / w}
}

// Bucket is t's bucket, clamped to the grid.
func (g *Grid) Bucket(t float64) int {
	b := (t - g.T0) * g.inv
	switch {
	case !(b >= 0):
		return 0
	case b >= float64(g.N):
		return g.N - 1
	}
	return int(b)
}

// The histogram's bins: values below 2^subBits cycles exactly, then
// 2^subBits bins an octave up to maxOctave (2^48 cycles: a day at 3 GHz);
// below one cycle (and negative: an estimate can be) in bin 0.
const (
	subBits   = 3
	maxOctave = 48
	// Bins is the number of bins of one bucket's histogram.
	Bins = (maxOctave - subBits + 1) << subBits
)

func binOf(d float64) int {
	if !(d >= 1) {
		return 0
	}
	if d >= 1<<maxOctave {
		return Bins - 1
	}
	u := uint64(d)
	oct := bits.Len64(u) // 1..maxOctave
	if oct <= subBits {
		return int(u)
	}
	shift := oct - 1 - subBits
	return (oct-subBits)<<subBits | int(u>>shift)&(1<<subBits-1)
}

// binMid is the middle of bin b's values (cycles).
func binMid(b int) float64 {
	if b < 1<<subBits {
		return float64(b)
	}
	oct := b>>subBits + subBits
	shift := oct - 1 - subBits
	lo := float64(uint64(1<<subBits|b&(1<<subBits-1)) << shift)
	return lo + float64(uint64(1)<<shift)/2
}

// Series is one pair's durations over the grid.
type Series struct {
	n    []uint64
	sum  []float64
	max  []float64
	hist [][]uint32 // per bucket, allocated at its first duration
}

// NewSeries is an empty series on a grid of n buckets.
func NewSeries(n int) *Series {
	s := &Series{n: make([]uint64, n), sum: make([]float64, n), max: make([]float64, n), hist: make([][]uint32, n)}
	for i := range s.max {
		s.max[i] = math.Inf(-1)
	}
	return s
}

// Add counts a duration d (cycles) that started in bucket b.
func (s *Series) Add(b int, d float64) {
	h := s.hist[b]
	if h == nil {
		h = make([]uint32, Bins)
		s.hist[b] = h
	}
	h[binOf(d)]++
	s.n[b]++
	s.sum[b] += d
	if d > s.max[b] {
		s.max[b] = d
	}
}

// Merge adds o (on the same grid) into s.
func (s *Series) Merge(o *Series) {
	for b := range s.n {
		if o.n[b] == 0 {
			continue
		}
		s.n[b] += o.n[b]
		s.sum[b] += o.sum[b]
		s.max[b] = max(s.max[b], o.max[b])
		if s.hist[b] == nil {
			s.hist[b] = o.hist[b]
			continue
		}
		for i, v := range o.hist[b] {
			s.hist[b][i] += v
		}
	}
}

// Point is one bucket of a series: its durations' count, and their mean,
// median, p99 and largest in cycles (NaN without durations).
type Point struct {
	Bucket              int
	N                   uint64
	Mean, P50, P99, Max float64
}

// Points are the series' buckets that hold durations.
func (s *Series) Points() []Point {
	var ps []Point
	for b, n := range s.n {
		if n == 0 {
			continue
		}
		ps = append(ps, Point{Bucket: b, N: n, Mean: s.sum[b] / float64(n), P50: s.quantile(b, 0.5), P99: s.quantile(b, 0.99), Max: s.max[b]})
	}
	return ps
}

// quantile of bucket b: the middle of the bin that holds its q-th value,
// never above the bucket's largest.
func (s *Series) quantile(b int, q float64) float64 {
	rank := uint64(math.Ceil(q * float64(s.n[b])))
	if rank < 1 {
		rank = 1
	}
	seen := uint64(0)
	for i, v := range s.hist[b] {
		seen += uint64(v)
		if seen >= rank {
			return min(binMid(i), s.max[b])
		}
	}
	return s.max[b]
}

// Records counts each channel's records per bucket.
type Records struct {
	n   int
	cnt []uint64 // channel*n + bucket
}

// NewRecords is an empty count of chans channels on a grid of n buckets.
func NewRecords(chans, n int) *Records {
	return &Records{n: n, cnt: make([]uint64, chans*n)}
}

// Add counts one record of channel ch in bucket b.
func (r *Records) Add(ch, b int) { r.cnt[ch*r.n+b]++ }

// Merge adds o into r.
func (r *Records) Merge(o *Records) {
	for i, v := range o.cnt {
		r.cnt[i] += v
	}
}

// Channel is channel ch's count per bucket, and whether it has any.
func (r *Records) Channel(ch int) ([]uint64, bool) {
	c := r.cnt[ch*r.n : (ch+1)*r.n]
	for _, v := range c {
		if v > 0 {
			return c, true
		}
	}
	return c, false
}
