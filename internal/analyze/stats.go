package analyze

import (
	"maps"
	"math"
	"slices"
	"sort"
)

// ExactLimit is how many durations a pair keeps for exact quantiles; past it
// the pair's quantiles come from its histogram (relative error histRel/2),
// so that memory stays bounded however long the run.
const ExactLimit = 1 << 20

// histRel is the relative width of a histogram bucket: 0.1 %.
const histRel = 0.001

var histLog = math.Log1p(histRel)

// maxDense bounds the dense part of a histogram: at most 64Ki buckets
// (512 KiB of counts) in one window of consecutive buckets. 0.1 % buckets
// make 2,303 per decade, so the window spans 28 decades (1 to 1e28 cycles);
// buckets outside it (values absurdly far from the others) go to a map.
const maxDense = 1 << 16

// Stats summarises a stream of values (durations or their bounds): count,
// min, max exactly; quantiles exactly up to ExactLimit values, from a
// log-bucketed histogram after that.
//
// The histogram is only built once N passes the limit (from the values kept
// until then): a Stats with a limit costs one append per value until then.
// Memory: 128 bytes, 8 bytes per kept value (8 MiB at ExactLimit, dropped
// when the histogram takes over), then the dense counts over the range of
// buckets seen plus up to 25 % (at most maxDense: 512 KiB; 3e3 to 3e6 is
// 6,900 buckets, 54 KiB; lognormal durations over 1e2 to 1e8, 145 KiB;
// bounds within a factor 1.3, 2 KiB) plus a map entry per bucket outside it.
//
// Stats from several goroutines (one each) are combined with Merge.
type Stats struct {
	N        uint64
	limit    uint64 // values kept for exact quantiles
	Min, Max float64
	exact    []float64 // every value while N <= limit (nil while N == 0)
	// The histogram, used once N > limit (it counts every value then):
	zero   uint64           // values with |v| < 1
	lo     int32            // bucket of counts[0]
	counts []uint64         // dense counts: buckets lo .. lo+len-1
	far    map[int32]uint64 // buckets outside the dense window (never inside it)
	// The last value histogrammed (bits; 0 = +0 never matches, zeros take
	// no bucket), its bucket, and how many values of that bucket are not
	// yet in counts/far (a run: bounds repeat, or stay in one bucket).
	lastBits uint64
	lastB    int32
	run      uint64
	// past: these values are part of a set known to have more than limit
	// values (Stats to be merged with this one hold the rest): no exact
	// list is kept (ForgetExact).
	past bool
}

func newStats() *Stats { return newStatsLimit(ExactLimit) }

// newStatsLimit keeps up to limit values for exact quantiles (0: the
// histogram only, for values whose quantiles need not be exact).
func newStatsLimit(limit uint64) *Stats {
	return &Stats{Min: math.Inf(1), Max: math.Inf(-1), limit: limit}
}

// bucketOf returns int32(math.Log(|v|)/histLog) + 1, negated for negative v,
// for finite v with |v| >= 1: exactly that (the quantiles of every earlier
// version came from it), but mostly without math.Log.
//
// The fast path: with a = |v| = 2^e·m (1 <= m < 2), j = the top 9 bits of
// m's fraction, c = 1 + j/512 and d = m - c (the low 43 bits, exact;
// 0 <= d < 2^-9),
//
//	ln(a)/h = e·ln2/h + ln(c)/h + ln(1+u)/h,  u = d/c,  0 <= u < 2^-9,
//
// computed (bucketPos) as y = e·A + T[j] + u·(C1 + u·(C2 + u·C3)) with
// A = ln2/h, T[j] = Log(c)/h, u = mant·R[j], R[j] = 2^-52/c, C1..C3 = 1/h,
// -1/(2h), 1/(3h), all rounded to float64 (h = histLog ≈ 0.0009995, the
// float64 value; t = ln(a)/h <= 709.8/h < 710,200 < 2^20). y's error
// against t, in buckets:
//
//   - A: |A - ln2/h| <= 2^-52·694 (Ln2's and the division's rounding),
//     times e <= 1023: 1.6e-10; rounding e·A (< 2^20): 2^-33 = 1.2e-10
//   - T[j] < 694, Log's error < 1 ulp plus the division's: 2^-50·694 = 6.2e-13
//   - u: R[j] and the product rounded, relative 2^-52, so |u - d/c| <=
//     2^-61 and ln(1+u) moves by at most that: /h < 5e-16
//   - the cubic for ln(1+u) (alternating, decreasing terms): remainder
//     <= u^4/4 < 2^-38 = 3.64e-12 in ln, 3.64e-9 in buckets; Horner's
//     roundings on terms < 2: < 1e-15
//   - the two additions (results < 2^20): 2·2^-33 = 2.3e-10
//
// so |y - t| < 4.2e-9 (where the compiler fuses a multiply-add, as on
// arm64, a rounding is dropped: no worse). The exact expression r = Log(a)/h has
// |r - t| <= (2^-51 + 2^-53)·t < 2^-30 = 9.3e-10 even if Log were off by
// 2 ulp (Go's is < 1 ulp). So |y - r| < 5.2e-9 < fastTol/16. When y is
// more than fastTol from an integer k (k + fastTol < y < k+1 - fastTol),
// k < r < k+1 and int32(r) = k: the fast answer is the exact one
// (bucketSure). Else (2.4e-7 of values, and a near 1) the expression is
// evaluated. The tests compare both on every bucket boundary up to
// MaxFloat64 (where y is within fastTol and math.Log decides) and at
// fastTol from them (the fast path's closest calls).
func bucketOf(v float64) int32 {
	b := bucketSure(bucketPos(math.Float64bits(v) &^ (1 << 63)))
	if b == 0 {
		b = bucketExact(v)
	}
	if v < 0 {
		return -b
	}
	return b
}

// bucketExact is the bucket of |v| (>= 1) by the defining expression.
func bucketExact(v float64) int32 { return int32(math.Log(math.Abs(v))/histLog) + 1 }

// bucketSure returns int32(y)+1 when y is more than fastTol from an integer
// (int32(r)+1 then for any r within fastTol of y), else 0.
func bucketSure(y float64) int32 {
	k := int32(y)
	if f := y - float64(k); f > fastTol && f < 1-fastTol { // y - k is exact
		return k + 1
	}
	return 0
}

// bucketPos approximates ln(a)/histLog within 5.2e-9 for the float64 a
// (bits; finite, a >= 1); see bucketOf.
func bucketPos(a uint64) float64 {
	t := &logTab[a>>(52-logTabBits)&(1<<logTabBits-1)]
	u := float64(a&(1<<(52-logTabBits)-1)) * t.r
	return float64(int64(a>>52)-1023)*lnTwoB + t.t + u*(logC1+u*(logC2+u*logC3))
}

// fastTol is how far from an integer bucketPos must be to be trusted.
const fastTol = 0x1p-23

const logTabBits = 9

var (
	logTab                      [1 << logTabBits]struct{ t, r float64 } // Log(c)/h, 2^-52/c
	lnTwoB, logC1, logC2, logC3 float64
)

func init() {
	for j := range logTab {
		c := 1 + float64(j)/(1<<logTabBits)
		logTab[j].t = math.Log(c) / histLog
		logTab[j].r = 0x1p-52 / c
	}
	lnTwoB = math.Ln2 / histLog
	logC1, logC2, logC3 = 1/histLog, -0.5/histLog, 1/(3*histLog)
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
	v = orInf(v)
	s.N++
	s.Min, s.Max = widen(s.Min, s.Max, v)
	if s.N <= s.limit && !s.past {
		s.exact = append(s.exact, v)
		return
	}
	if s.exact != nil {
		s.spill()
	}
	s.histAdd(v)
}

// AddColumn records vs as Add records each in turn, to the bit, in a loop
// per mode with the running minimum and maximum in registers (the
// columnar core adds a column of durations at a time, shape.go).
func (s *Stats) AddColumn(vs []float64) {
	mn, mx := s.Min, s.Max
	if s.N < s.limit && !s.past {
		k := min(uint64(len(vs)), s.limit-s.N)
		for _, v := range vs[:k] {
			v = orInf(v)
			mn, mx = widen(mn, mx, v)
			s.exact = append(s.exact, v)
		}
		s.N += k
		vs = vs[k:]
	}
	if len(vs) > 0 && s.exact != nil {
		s.spill()
	}
	for _, v := range vs {
		v = orInf(v)
		mn, mx = widen(mn, mx, v)
		s.histAdd(v)
	}
	s.N += uint64(len(vs))
	s.Min, s.Max = mn, mx
}

// orInf is v, or +Inf for NaN and ±Inf: a bound a method could not give,
// sorted last.
func orInf(v float64) float64 {
	if v-v != 0 {
		return math.Inf(1)
	}
	return v
}

// widen is the minimum and maximum with v (not NaN), as math.Min and
// math.Max give them (-0 below +0), without their calls, so that it
// inlines.
func widen(mn, mx, v float64) (float64, float64) {
	if v < mn || (v == mn && math.Signbit(v)) {
		mn = v
	}
	if v > mx || (v == mx && !math.Signbit(v)) {
		mx = v
	}
	return mn, mx
}

// spill moves the kept values into the histogram (N just passed the limit).
func (s *Stats) spill() {
	for _, v := range s.exact {
		s.histAdd(v)
	}
	s.exact = nil
}

// histAdd counts v (not NaN) in the histogram.
func (s *Stats) histAdd(v float64) {
	bits := math.Float64bits(v)
	a := bits &^ (1 << 63)
	if a < 0x3ff0000000000000 { // |v| < 1 (never NaN here)
		s.zero++
		return
	}
	if a >= 0x7ff0000000000000 { // +Inf: counted in N only, sorted last
		return
	}
	if bits == s.lastBits {
		s.run++
		return
	}
	s.lastBits = bits
	b := bucketSure(bucketPos(a))
	if b == 0 {
		b = bucketExact(v)
	}
	if v < 0 {
		b = -b
	}
	lb := s.lastB
	if i := uint32(lb - s.lo); i < uint32(len(s.counts)) {
		// Without a branch on b == lb (it is known late, and bounds
		// wander in and out of a bucket): the run goes into the counts
		// when the bucket changes.
		add, run := s.run, uint64(1)
		if b == lb {
			add, run = 0, s.run+1
		}
		s.counts[i] += add
		s.lastB, s.run = b, run
		return
	}
	if b == lb {
		s.run++
		return
	}
	if s.run != 0 {
		s.countSlow(lb, s.run)
	}
	s.lastB, s.run = b, 1
}

// flush puts the run into the counts.
func (s *Stats) flush() {
	if s.run != 0 {
		s.count(s.lastB, s.run)
		s.run = 0
	}
}

// count adds c values to bucket b.
func (s *Stats) count(b int32, c uint64) {
	if i := uint32(b - s.lo); i < uint32(len(s.counts)) {
		s.counts[i] += c
		return
	}
	s.countSlow(b, c)
}

// countSlow adds c to bucket b, outside the dense window: grows the window
// to take b, with 25 % to spare on b's side, if it then spans at most
// maxDense buckets, else counts b in the map.
func (s *Stats) countSlow(b int32, c uint64) {
	if len(s.counts) == 0 {
		s.lo = b - 128
		s.counts = make([]uint64, 256)
		s.counts[b-s.lo] += c
		return
	}
	lo, hi := s.lo, s.lo+int32(len(s.counts))
	nlo, nhi := min(lo, b), max(hi, b+1)
	if nhi-nlo > maxDense {
		if s.far == nil {
			s.far = map[int32]uint64{}
		}
		s.far[b] += c
		return
	}
	size := min(nhi-nlo+max((nhi-nlo)/4, 64), maxDense)
	if b < lo {
		nlo = nhi - size
	} else {
		nhi = nlo + size
	}
	counts := make([]uint64, size)
	copy(counts[lo-nlo:], s.counts)
	s.lo, s.counts = nlo, counts
	s.counts[b-nlo] += c
}

// Merge adds o's values to s: afterwards s answers (N, Min, Max, Exact,
// Quantiles, bit for bit) as one Stats given s's values and o's, in any
// order, would; and goes on so with Add and Merge. The one exception: an
// exact quantile that is a zero, when both -0 and +0 were added, may have
// either sign (sort.Float64s leaves them in the order they came). Both must
// have the same limit (it panics otherwise). o is not changed and can be
// used further (o == s counts s's values twice). Merging a Stats past the
// limit costs one pass over its dense counts; within it, like Adding its
// values.
func (s *Stats) Merge(o *Stats) {
	if s.limit != o.limit {
		panic("analyze: Merge of Stats with different limits")
	}
	if o.N == 0 {
		return
	}
	if o == s {
		c := *o
		c.exact = slices.Clone(o.exact)
		c.counts = slices.Clone(o.counts)
		c.far = maps.Clone(o.far)
		o = &c
	}
	s.Min = math.Min(s.Min, o.Min)
	s.Max = math.Max(s.Max, o.Max)
	n := s.N + o.N
	s.past = s.past || o.past
	if n <= s.limit && !s.past {
		s.exact = append(s.exact, o.exact...)
		s.N = n
		return
	}
	if s.exact != nil {
		s.spill()
	}
	s.N = n
	if o.exact != nil {
		for _, v := range o.exact {
			s.histAdd(v)
		}
		return
	}
	s.zero += o.zero
	for i, c := range o.counts {
		if c != 0 {
			s.count(o.lo+int32(i), c)
		}
	}
	for b, c := range o.far {
		s.count(b, c)
	}
	if o.run != 0 {
		s.count(o.lastB, o.run)
	}
}

// Exact says whether Quantile is exact (else within histRel/2 relative).
func (s *Stats) Exact() bool { return s.N <= s.limit && !s.past }

// forgetExact says that s's values are part of a set of more than limit
// values, which other Stats (merged with s later) hold the rest of: the
// exact list goes into the histogram now, and none is kept from here on.
// Workers call it once their pair's shared count passes the limit, so
// that together they never hold more than limit exact values of a pair.
func (s *Stats) forgetExact() {
	if s.exact != nil {
		s.spill()
	}
	s.past = true
}

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
	s.flush()
	// The buckets in value order: negative buckets (larger magnitude
	// first), the |v| < 1 bucket 0, positive buckets; with the running
	// count up to each. Empty buckets never hold a rank (ranks are >= 1).
	type bc struct {
		b   int32
		cum uint64
	}
	extra := make([]bc, 0, len(s.far)+1)
	extra = append(extra, bc{0, s.zero})
	for b, c := range s.far {
		extra = append(extra, bc{b, c})
	}
	slices.SortFunc(extra, func(x, y bc) int { return int(x.b) - int(y.b) })
	all := make([]bc, 0, len(extra)+len(s.counts))
	seen := uint64(0)
	add := func(b int32, c uint64) {
		seen += c
		all = append(all, bc{b, seen})
	}
	k := 0
	for i, c := range s.counts {
		if c == 0 {
			continue
		}
		b := s.lo + int32(i)
		for ; k < len(extra) && extra[k].b < b; k++ {
			add(extra[k].b, extra[k].cum)
		}
		add(b, c)
	}
	for ; k < len(extra); k++ {
		add(extra[k].b, extra[k].cum)
	}
	for i, q := range qs {
		want := rank(q)
		j := sort.Search(len(all), func(j int) bool { return all[j].cum >= want })
		if j == len(all) {
			out[i] = math.Inf(1) // past every bucket: the +Inf values
			continue
		}
		v := 0.0
		if b := all[j].b; b != 0 {
			v = bucketMid(b)
		}
		out[i] = math.Min(math.Max(v, s.Min), s.Max)
	}
	return out
}
