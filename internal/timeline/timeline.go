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

	"cloudprofiler/internal/pad"
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

// The histogram's bins: 2^subBits bins an octave, read off a float64's
// exponent and the top bits of its mantissa (no logarithm, no branch on
// the octave); below one cycle (and negative: an estimate can be) in bin
// 0, from 2^maxOctave cycles (a day at 3 GHz) in the last.
const (
	subBits   = 3
	maxOctave = 48
	// Bins is the number of bins of one bucket's histogram.
	Bins = (maxOctave+1)<<subBits + 1
)

func binOf(d float64) int {
	if !(d >= 1) {
		return 0
	}
	if d >= 1<<maxOctave {
		return Bins - 1
	}
	b := math.Float64bits(d)
	oct := int(b>>52) - 1023 // 0 .. maxOctave-1
	return 1 + (oct<<subBits | int(b>>(52-subBits))&(1<<subBits-1))
}

// binMid is the middle of bin b's values (cycles).
func binMid(b int) float64 {
	if b == 0 {
		return 0
	}
	b--
	oct, sub := b>>subBits, b&(1<<subBits-1)
	lo := math.Ldexp(1+float64(sub)/(1<<subBits), oct)
	return lo + math.Ldexp(0.5/(1<<subBits), oct)
}

// Series is one pair's durations over the grid: per bucket, a histogram
// and the largest. One flat array (a bucket's bins side by side): the
// hot path indexes it without a pointer to follow.
type Series struct {
	max  []float64
	hist []uint32 // bucket*Bins + bin
}

// NewSeries is an empty series on a grid of n buckets.
func NewSeries(n int) *Series {
	s := &Series{max: pad.Slice[float64](n), hist: pad.Slice[uint32](n * Bins)} // one per worker, written for every tuple
	for i := range s.max {
		s.max[i] = math.Inf(-1)
	}
	return s
}

// Add counts a duration d (cycles) that started in bucket b.
func (s *Series) Add(b int, d float64) {
	s.hist[b*Bins+binOf(d)]++
	if d > s.max[b] {
		s.max[b] = d
	}
}

// Merge adds o (on the same grid) into s.
func (s *Series) Merge(o *Series) {
	for b, m := range o.max {
		s.max[b] = max(s.max[b], m)
	}
	for i, v := range o.hist {
		s.hist[i] += v
	}
}

// Point is one bucket of a series: its durations' count, and their
// median, p99 and largest in cycles.
type Point struct {
	Bucket        int
	N             uint64
	P50, P99, Max float64
}

// Points are the series' buckets that hold durations.
func (s *Series) Points() []Point {
	var ps []Point
	for b, m := range s.max {
		if math.IsInf(m, -1) {
			continue
		}
		h := s.hist[b*Bins : (b+1)*Bins]
		n := uint64(0)
		for _, v := range h {
			n += uint64(v)
		}
		ps = append(ps, Point{Bucket: b, N: n, P50: quantile(h, n, 0.5, m), P99: quantile(h, n, 0.99, m), Max: m})
	}
	return ps
}

// quantile of a bucket's histogram h (n durations, the largest mx): the
// middle of the bin that holds its q-th value, never above the largest.
func quantile(h []uint32, n uint64, q, mx float64) float64 {
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	seen := uint64(0)
	for i, v := range h {
		seen += uint64(v)
		if seen >= rank {
			return min(binMid(i), mx)
		}
	}
	return mx
}

// Records counts each channel's records per bucket.
type Records struct {
	n   int
	cnt []uint64 // channel*n + bucket
}

// NewRecords is an empty count of chans channels on a grid of n buckets.
func NewRecords(chans, n int) *Records {
	return &Records{n: n, cnt: pad.Slice[uint64](chans * n)} // one per worker, written for every record
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
