package analyze

import (
	"fmt"
	"maps"
	"math"
	"math/rand"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/racetest"
)

func TestStatsExact(t *testing.T) {
	s := newStats()
	for _, v := range []float64{5, 1, 4, 2, 3} {
		s.Add(v)
	}
	require.True(t, s.Exact())
	require.Equal(t, []float64{1, 2, 3, 5}, s.Quantiles(0, 0.25, 0.5, 1))
	require.Equal(t, 1.0, s.Min)
	require.Equal(t, 5.0, s.Max)
}

func TestStatsHistogramPastTheLimit(t *testing.T) {
	s := newStats()
	r := rand.New(rand.NewSource(1))
	n := ExactLimit + 1000
	for i := 0; i < n; i++ {
		// Durations from -50 to 1e6 cycles, uniform: quantiles are known.
		s.Add(-50 + r.Float64()*(1e6+50))
	}
	require.False(t, s.Exact())
	require.Nil(t, s.exact, "the exact buffer is dropped past the limit")
	q := s.Quantiles(0.25, 0.5, 0.99)
	for i, want := range []float64{-50 + 0.25*(1e6+50), -50 + 0.5*(1e6+50), -50 + 0.99*(1e6+50)} {
		require.InEpsilon(t, want, q[i], 0.003, "q%d", i) // bucket + sampling error
	}
	neg := newStats()
	for i := 0; i < ExactLimit+10; i++ {
		neg.Add(-float64(i%1000) - 0.5)
	}
	require.InEpsilon(t, -999.5, neg.Quantiles(0)[0], 0.001)
	require.InDelta(t, -0.5, neg.Quantiles(1)[0], 0.001)
}

func TestStatsInfinite(t *testing.T) {
	s := newStatsLimit(0)
	s.Add(10)
	s.Add(math.Inf(1))
	s.Add(math.NaN())
	require.EqualValues(t, 3, s.N)
	q := s.Quantiles(0.1, 1)
	require.InEpsilon(t, 10, q[0], 0.001)
	require.True(t, math.IsInf(q[1], 1))
	e := newStats()
	e.Add(math.Inf(1))
	e.Add(1)
	require.Equal(t, []float64{1, math.Inf(1)}, e.Quantiles(0, 1))
}

// refStats is Stats as it was before the fast bucketing, the dense histogram
// and Merge (commit caf1b27), kept as the oracle: Stats must answer exactly
// (bit for bit) as it does.
type refStats struct {
	N        uint64
	limit    uint64
	Min, Max float64
	exact    []float64
	hist     map[int32]uint64
	zero     uint64
	inf      uint64
}

func newRefStatsLimit(limit uint64) *refStats {
	return &refStats{Min: math.Inf(1), Max: math.Inf(-1), hist: map[int32]uint64{}, limit: limit}
}

func refBucketOf(v float64) int32 {
	b := int32(math.Log(math.Abs(v))/histLog) + 1
	if v < 0 {
		return -b
	}
	return b
}

func refBucketMid(b int32) float64 {
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

func (s *refStats) Add(v float64) {
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
		s.hist[refBucketOf(v)]++
	}
	if s.exact != nil || s.N == 1 {
		if s.N <= s.limit {
			s.exact = append(s.exact, v)
		} else {
			s.exact = nil
		}
	}
}

func (s *refStats) Exact() bool { return s.N <= s.limit }

func (s *refStats) Quantiles(qs ...float64) []float64 {
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
	sort.Slice(keys, func(i, j int) bool { return refOrder(keys[i]) < refOrder(keys[j]) })
	for i, q := range qs {
		want, seen := rank(q), uint64(0)
		out[i] = math.Inf(1)
		for _, b := range keys {
			n := s.hist[b]
			if b == 0 {
				n = s.zero
			}
			seen += n
			if seen >= want {
				v := 0.0
				if b != 0 {
					v = refBucketMid(b)
				}
				out[i] = math.Min(math.Max(v, s.Min), s.Max)
				break
			}
		}
	}
	return out
}

func refOrder(b int32) float64 {
	switch {
	case b < 0:
		return -float64(-b)
	default:
		return float64(b)
	}
}

// statsQs are the fractions every comparison asks for; outQs only where the
// histogram answers (the exact list panics on them, old and new alike).
var (
	statsQs = []float64{0, 1e-12, 1e-6, 0.001, 0.01, 0.1, 0.25, 1. / 3, 0.5, 0.75, 0.9, 0.99, 0.999, 0.999999, 1 - 1e-12, 1}
	outQs   = []float64{-0.5, -1e-300, 1 + 1e-9, 1.5, math.Inf(1), math.NaN()}
)

// quantilesOf calls Quantiles, reporting a panic instead of passing it on.
func quantilesOf(f func(...float64) []float64, qs []float64) (out []float64, panicked bool) {
	defer func() {
		if recover() != nil {
			out, panicked = nil, true
		}
	}()
	return f(qs...), false
}

// requireSame checks that s answers bit for bit as ref. zeroSign: a zero
// quantile of the exact list may have either sign (merged lists are in
// another order, and sorting keeps -0 and +0 in their order).
func requireSame(t *testing.T, ref *refStats, s *Stats, r *rand.Rand, zeroSign bool, msg string) {
	t.Helper()
	require.Equal(t, ref.N, s.N, msg)
	require.Equal(t, math.Float64bits(ref.Min), math.Float64bits(s.Min), "%s: min %v %v", msg, ref.Min, s.Min)
	require.Equal(t, math.Float64bits(ref.Max), math.Float64bits(s.Max), "%s: max %v %v", msg, ref.Max, s.Max)
	require.Equal(t, ref.Exact(), s.Exact(), msg)
	qs := append([]float64(nil), statsQs...)
	for range 4 {
		qs = append(qs, r.Float64())
	}
	if !s.Exact() {
		qs = append(qs, outQs...)
	}
	if s.N > 0 {
		// Every rank boundary near a few ranks.
		for _, k := range []uint64{1, 2, s.N / 2, s.N - 1, s.N} {
			f := float64(k) / float64(s.N)
			qs = append(qs, f, math.Nextafter(f, 0), math.Nextafter(f, 2))
		}
	}
	if !s.Exact() {
		requireSameHist(t, ref, s, msg)
	}
	want, wantPanic := quantilesOf(ref.Quantiles, qs)
	got, gotPanic := quantilesOf(s.Quantiles, qs)
	require.Equal(t, wantPanic, gotPanic, "%s: panic", msg)
	for i := range want {
		if zeroSign && s.Exact() && want[i] == 0 && got[i] == 0 {
			continue
		}
		require.Equal(t, math.Float64bits(want[i]), math.Float64bits(got[i]), "%s: q %v: %v, want %v", msg, qs[i], got[i], want[i])
	}
	// Exact quantiles only (panic-free fractions), asked for separately.
	if s.Exact() && s.N > 0 {
		want, _ := quantilesOf(ref.Quantiles, statsQs)
		got, _ := quantilesOf(s.Quantiles, statsQs)
		for i := range want {
			if zeroSign && want[i] == 0 && got[i] == 0 {
				continue
			}
			require.Equal(t, math.Float64bits(want[i]), math.Float64bits(got[i]), "%s: q %v", msg, statsQs[i])
		}
	}
}

// requireSameHist checks that s's histogram (past the limit) has the counts
// of ref's, bucket by bucket.
func requireSameHist(t *testing.T, ref *refStats, s *Stats, msg string) {
	t.Helper()
	s.flush()
	got := map[int32]uint64{}
	for i, c := range s.counts {
		if c != 0 {
			got[s.lo+int32(i)] = c
		}
	}
	for b, c := range s.far {
		if _, dup := got[b]; dup || c == 0 {
			t.Fatalf("%s: far bucket %d: count %d, dense too: %v", msg, b, c, dup)
		}
		got[b] = c
	}
	if !maps.Equal(ref.hist, got) {
		require.Equal(t, ref.hist, got, "%s: histogram", msg)
	}
	require.Equal(t, ref.zero, s.zero, "%s: |v| < 1", msg)
	require.LessOrEqual(t, len(s.counts), maxDense)
}

// statsGens make test streams: name -> value generator.
var statsGens = []struct {
	name string
	gen  func(r *rand.Rand, i int) float64
}{
	{"lognormal", func(r *rand.Rand, i int) float64 { return math.Exp(math.Log(9.5e4) + 1.7*r.NormFloat64()) }},
	{"uniform", func(r *rand.Rand, i int) float64 { return -50 + r.Float64()*(1e6+50) }},
	{"integers", func(r *rand.Rand, i int) float64 { return float64(r.Intn(3000) - 100) }},
	{"bounds", func(r *rand.Rand, i int) float64 { return 1000 + float64(i/37%11) + 0.25*float64(i/101%3) }},
	{"boundaries", func(r *rand.Rand, i int) float64 {
		x := math.Exp(float64(r.Intn(30000)) * histLog)
		for range r.Intn(4) {
			x = math.Nextafter(x, math.Inf(2*r.Intn(2)-1))
		}
		return x
	}},
	{"wild", func(r *rand.Rand, i int) float64 {
		switch r.Intn(16) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(1)
		case 2:
			return math.Inf(-1)
		case 3:
			return 0
		case 4:
			return math.Copysign(0, -1)
		case 5:
			return (r.Float64()*2 - 1) // |v| < 1
		case 6:
			return math.MaxFloat64 * (1 - 2*float64(r.Intn(2)))
		case 7:
			return math.Float64frombits(r.Uint64()&^(1<<63) | uint64(r.Intn(2))<<63) // anything
		case 8:
			return -1 - r.Float64()*1e4
		case 9:
			return 1
		case 10:
			return -1
		case 11:
			return math.Nextafter(1, 0)
		default:
			return math.Exp(math.Log(9.5e4) + 1.7*r.NormFloat64())
		}
	}},
	{"far", func(r *rand.Rand, i int) float64 { // past the dense window
		x := math.Exp(r.Float64() * 709)
		if r.Intn(3) == 0 {
			return -x
		}
		return x
	}},
}

func TestStatsSameAsBefore(t *testing.T) {
	racetest.Arithmetic(t)
	r := rand.New(rand.NewSource(2))
	for _, g := range statsGens {
		for _, limit := range []uint64{0, 1, 2, 7, 100, 1000} {
			for _, n := range []int{0, 1, 2, 3, 8, 99, 100, 101, 1000, 1001, 5000} {
				ref, s := newRefStatsLimit(limit), newStatsLimit(limit)
				for i := range n {
					v := g.gen(r, i)
					ref.Add(v)
					s.Add(v)
					if r.Intn(300) == 0 || uint64(i+1) == limit || uint64(i) == limit {
						requireSame(t, ref, s, r, false, fmt.Sprintf("%s limit %d n %d at %d", g.name, limit, n, i+1))
					}
				}
				requireSame(t, ref, s, r, false, fmt.Sprintf("%s limit %d n %d", g.name, limit, n))
				if limit > 0 && uint64(n) > limit {
					require.Nil(t, s.exact)
				}
				require.LessOrEqual(t, len(s.counts), maxDense)
				if g.name == "far" && n >= 1000 && limit < uint64(n) {
					require.NotEmpty(t, s.far)
				}
			}
		}
	}
}

func TestStatsSameAsBeforePastExactLimit(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	ref, s := newRefStatsLimit(ExactLimit), newStats()
	add := func(n int) {
		for range n {
			v := math.Exp(math.Log(9.5e4) + 1.7*r.NormFloat64())
			if r.Intn(1000) == 0 {
				v = -v / 1e3
			}
			ref.Add(v)
			s.Add(v)
		}
	}
	add(ExactLimit - 1)
	requireSame(t, ref, s, r, false, "limit-1")
	add(1)
	requireSame(t, ref, s, r, false, "limit")
	add(1)
	requireSame(t, ref, s, r, false, "limit+1")
	require.Nil(t, s.exact)
	add(100000)
	requireSame(t, ref, s, r, false, "limit+100001")
}

// TestStatsMerge feeds a stream to 1-4 Stats (each value to a random one,
// or in consecutive pieces), merges them in a random order and compares
// with one refStats fed the whole stream.
func TestStatsMerge(t *testing.T) {
	racetest.Arithmetic(t)
	r := rand.New(rand.NewSource(4))
	for _, g := range statsGens {
		for _, limit := range []uint64{0, 1, 5, 50, 1000} {
			for _, n := range []int{0, 1, 2, 5, 6, 49, 50, 51, 120, 999, 1000, 1001, 3000} {
				for _, parts := range []int{1, 2, 3, 4} {
					vs := make([]float64, n)
					for i := range vs {
						vs[i] = g.gen(r, i)
					}
					ref := newRefStatsLimit(limit)
					for _, v := range vs {
						ref.Add(v)
					}
					ss := make([]*Stats, parts)
					for i := range ss {
						ss[i] = newStatsLimit(limit)
					}
					contiguous := r.Intn(2) == 0
					for i, v := range vs {
						p := r.Intn(parts)
						if contiguous {
							p = i * parts / max(n, 1)
						}
						ss[p].Add(v)
						if r.Intn(500) == 0 {
							ss[p].Quantiles(0.5) // sorts the exact list in place
						}
					}
					// Merge pairs at random until one is left.
					for len(ss) > 1 {
						i, j := r.Intn(len(ss)), r.Intn(len(ss)-1)
						if j >= i {
							j++
						}
						ss[i].Merge(ss[j])
						ss = append(ss[:j], ss[j+1:]...)
					}
					msg := fmt.Sprintf("%s limit %d n %d parts %d", g.name, limit, n, parts)
					requireSame(t, ref, ss[0], r, true, msg)
					// It goes on like one Stats.
					for i := range 200 {
						v := g.gen(r, n+i)
						ref.Add(v)
						ss[0].Add(v)
					}
					requireSame(t, ref, ss[0], r, true, msg+" +200")
				}
			}
		}
	}
}

func TestStatsMergeEdges(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, limit := range []uint64{0, 3, 10} {
		s, e := newStatsLimit(limit), newStatsLimit(limit)
		s.Merge(e) // empty into empty
		requireSame(t, newRefStatsLimit(limit), s, r, false, "empty")
		ref := newRefStatsLimit(limit)
		for _, v := range []float64{3, 1e4, 7, -2, 0.5} {
			ref.Add(v)
			ref.Add(v)
			s.Add(v)
		}
		s.Merge(s) // itself: every value twice
		requireSame(t, ref, s, r, false, "self")
		s.Merge(e)
		requireSame(t, ref, s, r, false, "+empty")
		e.Merge(s)
		requireSame(t, ref, e, r, false, "into empty")
		require.EqualValues(t, 10, s.N, "o unchanged")
	}
	require.Panics(t, func() { newStatsLimit(0).Merge(newStats()) })
}

// TestStatsMergeSign: the one answer Merge cannot reproduce is the sign of
// an exact zero quantile when both -0 and +0 were added: sorting leaves
// them in the order they came.
func TestStatsMergeSign(t *testing.T) {
	a, b := newStats(), newStats()
	a.Add(math.Copysign(0, -1))
	b.Add(0)
	a.Merge(b)
	q := a.Quantiles(0, 1)
	require.Equal(t, []float64{0, 0}, q)
}

func TestBucketOfRandom(t *testing.T) {
	racetest.Arithmetic(t)
	r := rand.New(rand.NewSource(6))
	worst := 0.0
	check := func(v float64) {
		a := math.Abs(v)
		want := refBucketOf(v)
		if got := bucketOf(v); got != want {
			t.Fatalf("bucketOf(%v = %#x) = %d, want %d", v, math.Float64bits(v), got, want)
		}
		worst = math.Max(worst, math.Abs(bucketPos(math.Float64bits(a))-math.Log(a)/histLog))
	}
	n := 3_000_000
	if testing.Short() {
		n /= 10
	}
	for range n {
		// Anything from 1 to MaxFloat64, either sign.
		check(math.Float64frombits(uint64(1023+r.Intn(1024))<<52 | r.Uint64()&(1<<52-1) | uint64(r.Intn(2))<<63))
		// The realistic range, 1 to 1e15.
		check(math.Exp(r.Float64() * math.Log(1e15)))
		// Integers (cycle counts).
		check(float64(1 + r.Int63n(1<<40)))
		check(float64(1 + r.Intn(100000)))
	}
	for e := 0; e < 1024; e++ { // powers of two, and around them
		x := math.Ldexp(1, e)
		for _, v := range []float64{x, math.Nextafter(x, 0), math.Nextafter(x, math.Inf(1)), x * 1.5, x * (1 + 1./512), x * (1 + 1./256), x * (1 + 255./256)} {
			if v >= 1 && v <= math.MaxFloat64 {
				check(v)
				check(-v)
			}
		}
	}
	check(1)
	check(math.MaxFloat64)
	check(math.Nextafter(1, 2))
	t.Logf("worst |bucketPos - Log/histLog| = %.3g buckets (proven < 5.2e-9, trusted from %.3g)", worst, fastTol)
	require.Less(t, worst, 5.2e-9)
}

// TestBucketOfBoundaries tries the values next to every bucket boundary from
// 1 to MaxFloat64 (the old expression's transitions, found with Nextafter).
func TestBucketOfBoundaries(t *testing.T) {
	racetest.Arithmetic(t)
	worst, slow := 0.0, 0
	// Every value also goes through Add (the cache, the runs, the sign).
	ref, s := newRefStatsLimit(0), newStatsLimit(0)
	add := func(v float64) {
		if k := bucketExact(v); k > 40000 && k%64 != 0 {
			return // enough of the far range
		}
		ref.Add(v)
		s.Add(v)
		ref.Add(-v)
		s.Add(-v)
	}
	for k := int32(1); ; k++ {
		x := math.Exp(float64(k) * histLog)
		if x > math.MaxFloat64 {
			break
		}
		// Down to a value of bucket <= k, then up to the first of k+1.
		for x > 1 && refBucketOf(x) > k {
			x = math.Nextafter(x, 0)
		}
		for x < math.MaxFloat64 && refBucketOf(x) <= k {
			x = math.Nextafter(x, math.Inf(1))
		}
		if refBucketOf(x) != k+1 {
			continue // past MaxFloat64
		}
		lo := x
		for range 4 {
			lo = math.Nextafter(lo, 0)
		}
		for v, i := lo, 0; i < 9 && v <= math.MaxFloat64; v, i = math.Nextafter(v, math.Inf(1)), i+1 {
			want := refBucketOf(v)
			if got := bucketOf(v); got != want {
				t.Fatalf("bucketOf(%v = %#x) = %d, want %d", v, math.Float64bits(v), got, want)
			}
			if got := bucketOf(-v); got != -want {
				t.Fatalf("bucketOf(%v) = %d, want %d", -v, got, -want)
			}
			add(v)
			y := bucketPos(math.Float64bits(v))
			worst = math.Max(worst, math.Abs(y-math.Log(v)/histLog))
			if f := y - math.Floor(y); f <= fastTol || f >= 1-fastTol {
				slow++
			}
		}
		// Either side of the fast path's tolerance (fastTol buckets off
		// the boundary, relative fastTol·histLog): both paths, at their edge.
		for _, m := range []float64{-4, -2, -1.5, -1.01, -0.99, -0.5, 0.5, 0.99, 1.01, 1.5, 2, 4} {
			v := x * (1 + m*fastTol*histLog)
			if v >= 1 && v <= math.MaxFloat64 {
				if got, want := bucketOf(v), refBucketOf(v); got != want {
					t.Fatalf("bucketOf(%v = %#x) = %d, want %d", v, math.Float64bits(v), got, want)
				}
				add(v)
			}
		}
		if k < 35000 && k%5000 == 0 { // some within the realistic range: 10 ulps more each side
			for i, v := 0, x; i < 10; i++ {
				v = math.Nextafter(v, 0)
				require.Equal(t, refBucketOf(v), bucketOf(v))
			}
		}
	}
	t.Logf("worst |bucketPos - Log/histLog| next to boundaries = %.3g buckets; %d values took the exact path", worst, slow)
	require.Less(t, worst, 5.2e-9)
	requireSameHist(t, ref, s, "boundaries")
	require.NotEmpty(t, s.far)
}

// Stats split across workers that share a count of kept values and forget
// their exact lists once it passes the limit (aggregate.go) merge into what
// one Stats fed everything gives.
func TestStatsForgetExactWhenSharedCountPasses(t *testing.T) {
	r := rand.New(rand.NewSource(9))
	for _, g := range statsGens {
		for _, limit := range []uint64{1, 50, 1000} {
			for _, n := range []int{int(limit) + 1, 2 * int(limit), 5*int(limit) + 3} {
				for _, parts := range []int{2, 3} {
					ref := newRefStatsLimit(limit)
					ss := make([]*Stats, parts)
					for i := range ss {
						ss[i] = newStatsLimit(limit)
					}
					var kept uint64
					for i := range n {
						v := g.gen(r, i)
						ref.Add(v)
						s := ss[r.Intn(parts)]
						s.Add(v)
						if s.exact != nil {
							if kept++; kept > limit {
								s.forgetExact()
							}
						}
						held := uint64(0)
						for _, s := range ss {
							held += uint64(len(s.exact))
						}
						require.LessOrEqual(t, held, limit, "together they keep at most the limit")
					}
					for len(ss) > 1 {
						ss[0].Merge(ss[len(ss)-1])
						ss = ss[:len(ss)-1]
					}
					requireSame(t, ref, ss[0], r, true, fmt.Sprintf("%s limit %d n %d parts %d", g.name, limit, n, parts))
				}
			}
		}
	}
}

// AddColumn leaves a Stats as Add given the same values one at a time
// would, field for field: within the exact limit, across it, past it, with
// NaN, infinities and signed zeros among the values, and after
// forgetExact.
func TestStatsAddColumnIsAdd(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 0.5, -3}
	for _, limit := range []uint64{0, 1, 100, 1000} {
		for _, c := range []struct{ forget, nonneg bool }{{false, false}, {true, false}, {false, true}} {
			forget := c.forget
			one, col := newStatsLimit(limit), newStatsLimit(limit)
			if forget {
				one.forgetExact()
				col.forgetExact()
			}
			for batch := 0; batch < 40; batch++ {
				vs := make([]float64, r.Intn(90))
				for i := range vs {
					vs[i] = math.Exp(r.Float64()*20) * float64(1-2*r.Intn(2))
					if r.Intn(20) == 0 {
						vs[i] = special[r.Intn(len(special))]
					}
					if c.nonneg && !(vs[i] >= 0) {
						vs[i] = math.Copysign(0, float64(r.Intn(2)-1)) // -0 or +0: the minimum's sign
					}
					if i > 0 && r.Intn(4) == 0 { // runs of one value, as bounds make
						vs[i] = vs[i-1]
					}
				}
				for _, v := range vs {
					one.Add(v)
				}
				col.AddColumn(vs)
				if d := statsFieldsDiffer(one, col); d != "" {
					require.Equal(t, fmt.Sprintf("%+v", *one), fmt.Sprintf("%+v", *col), "limit %d forget %v batch %d: %s", limit, forget, batch, d)
				}
			}
			require.Greater(t, one.N, limit, "the values pass the limit")
		}
	}
}

// statsFieldsDiffer names the first field in which a and b differ ("":
// none), as their %+v would show it (a NaN equals a NaN, +0 is not -0; an
// empty list or map equals a nil one), without printing them: printing
// every batch's Stats took all of TestStatsAddColumnIsAdd's time under -race.
func statsFieldsDiffer(a, b *Stats) string {
	same := func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y)
	}
	switch {
	case a.N != b.N || a.limit != b.limit:
		return "N or limit"
	case !same(a.Min, b.Min) || !same(a.Max, b.Max):
		return "Min or Max"
	case len(a.exact) != len(b.exact):
		return "exact's length"
	case a.zero != b.zero || a.lo != b.lo || len(a.counts) != len(b.counts) || len(a.far) != len(b.far):
		return "zero, lo, counts' or far's length"
	case a.lastBits != b.lastBits || a.lastB != b.lastB || a.run != b.run || a.past != b.past:
		return "the run or past"
	}
	for i := range a.exact {
		if !same(a.exact[i], b.exact[i]) {
			return fmt.Sprintf("exact[%d]", i)
		}
	}
	for i := range a.counts {
		if a.counts[i] != b.counts[i] {
			return fmt.Sprintf("counts[%d]", i)
		}
	}
	for k, v := range a.far {
		if w, ok := b.far[k]; !ok || w != v {
			return fmt.Sprintf("far[%d]", k)
		}
	}
	return ""
}

// widen keeps the minimum and maximum as math.Min and math.Max would, bit
// for bit (the sign of a zero among them).
func TestWidenIsMathMinMax(t *testing.T) {
	vals := []float64{math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1, -1, 2.5, math.MaxFloat64, math.SmallestNonzeroFloat64}
	for _, mn := range vals {
		for _, mx := range vals {
			for _, v := range vals {
				gmn, gmx := widen(mn, mx, v)
				require.Equal(t, math.Float64bits(math.Min(mn, v)), math.Float64bits(gmn), "min(%v, %v)", mn, v)
				require.Equal(t, math.Float64bits(math.Max(mx, v)), math.Float64bits(gmx), "max(%v, %v)", mx, v)
			}
		}
	}
}
