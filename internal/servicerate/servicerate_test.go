package servicerate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParamsValidate(t *testing.T) {
	require.NoError(t, DefaultParams().Validate())
	d := DefaultParams()
	assert.Equal(t, Params{MinPeriod: 100 * time.Microsecond, MaxPeriod: 16 * time.Millisecond, Window: 64, WidenAfter: 16, StablePPM: 100000, TolerancePPM: 1000}, d)

	cases := []struct {
		mod  func(*Params)
		want string
	}{
		{func(p *Params) { p.MinPeriod = 49 * time.Microsecond }, "MinPeriod 49µs out of range [50µs, 1s]"},
		{func(p *Params) { p.MinPeriod = 2 * time.Second; p.MaxPeriod = 2 * time.Second }, "MinPeriod 2s out of range [50µs, 1s]"},
		{func(p *Params) { p.MaxPeriod = 50 * time.Microsecond }, "MaxPeriod 50µs out of range [MinPeriod (100µs), 1s]"},
		{func(p *Params) { p.MaxPeriod = 1001 * time.Millisecond }, "MaxPeriod 1.001s out of range"},
		{func(p *Params) { p.Window = 7 }, "Window 7 out of range [8, 4096]"},
		{func(p *Params) { p.Window = 4097 }, "Window 4097 out of range [8, 4096]"},
		{func(p *Params) { p.WidenAfter = 0 }, "WidenAfter 0 out of range [1, 1000000]"},
		{func(p *Params) { p.WidenAfter = 1000001 }, "WidenAfter 1000001 out of range"},
		{func(p *Params) { p.StablePPM = 0 }, "StablePPM 0 out of range [1, 1000000]"},
		{func(p *Params) { p.StablePPM = 1000001 }, "StablePPM 1000001 out of range"},
		{func(p *Params) { p.TolerancePPM = -1 }, "TolerancePPM -1 out of range [1, 1000000]"},
		{func(p *Params) { p.TolerancePPM = 1000001 }, "TolerancePPM 1000001 out of range"},
	}
	for _, c := range cases {
		p := DefaultParams()
		c.mod(&p)
		err := p.Validate()
		if assert.Error(t, err, c.want) {
			assert.Contains(t, err.Error(), c.want)
		}
	}
	// The edges are in range, and every fault is named at once.
	require.NoError(t, Params{MinPeriod: 50 * time.Microsecond, MaxPeriod: 50 * time.Microsecond, Window: 8, WidenAfter: 1, StablePPM: 1, TolerancePPM: 1}.Validate())
	require.NoError(t, Params{MinPeriod: time.Second, MaxPeriod: time.Second, Window: 4096, WidenAfter: 1000000, StablePPM: 1000000, TolerancePPM: 1000000}.Validate())
	err := Params{}.Validate()
	require.Error(t, err)
	assert.Equal(t, 5, strings.Count(err.Error(), "out of range"), err.Error()) // MaxPeriod 0 >= MinPeriod 0
}

// New brings parameters into range instead of failing: the estimator works.
func TestNewClamps(t *testing.T) {
	e := New(Params{})
	assert.Equal(t, Params{MinPeriod: 50 * time.Microsecond, MaxPeriod: 50 * time.Microsecond, Window: 8, WidenAfter: 1, StablePPM: 1, TolerancePPM: 1}, e.p)
	for range 100 {
		e.Sample(10, 0.00005, false)
	}
	st := e.State()
	assert.Equal(t, int64(100), st.Samples)
	assert.True(t, st.Converged)
	assert.InDelta(t, 200000, st.Rate, 1e-6)
}

// The kernels are the paper's: Eq. 2 normalised (its raw values sum to
// 0.99086), Eq. 4 with σ = 1/2 computed from the formula.
func TestKernels(t *testing.T) {
	raw := 0.0
	for x := -2.0; x <= 2; x++ {
		raw += math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
	}
	assert.InDelta(t, 0.99086, raw, 1e-5)
	sum := 0.0
	for _, g := range gauss {
		sum += g
	}
	assert.InDelta(t, 1, sum, 1e-15)
	assert.InDelta(t, 0.054488, gauss[0], 1e-6)
	assert.InDelta(t, 0.402620, gauss[2], 1e-6)
	assert.InDelta(t, 1.295783, logKernel[0], 1e-6)
	assert.InDelta(t, -3.191538, logKernel[1], 1e-6)
	assert.Equal(t, logKernel[0], logKernel[2])
}

// A constant rate converges to exactly that rate at the first moment the
// heuristic allows: S full at sample Window (first q), the first relative
// σ(q̄) at the second q, the first filtered value at the fourth, the 16th
// at the 19th q: sample Window+18. The statistics then restart while S keeps
// sliding: the next estimate comes 19 samples later.
func TestConstantRateConvergesOnTime(t *testing.T) {
	p := DefaultParams()
	p.MinPeriod, p.MaxPeriod = time.Millisecond, time.Millisecond // no widening: every period is 1 ms
	e := New(p)
	var at []int
	for i := 1; i <= 200; i++ {
		next, conv, rate := e.Sample(55, 0.0011, false)
		require.Equal(t, time.Millisecond, next)
		if conv {
			at = append(at, i)
			assert.InDelta(t, 50000, rate, 1e-6)
		}
		st := e.State()
		if i < 82 {
			assert.False(t, st.Converged)
			if i >= 64 {
				assert.InDelta(t, 50000, st.Rate, 1e-6, "running q̄ before convergence")
			} else {
				assert.Zero(t, st.Rate)
			}
		}
	}
	assert.Equal(t, []int{82, 101, 120, 139, 158, 177, 196}, at)
	st := e.State()
	assert.Equal(t, State{Rate: 50000, Running: 50000, Period: time.Millisecond, Samples: 200, Periods: 200, Convergences: 7, Converged: true, Mean: 50000}, roundState(st))
	assert.Equal(t, int64(19), e.Averaged())
}

func roundState(s State) State {
	s.Rate = math.Round(s.Rate*1e6) / 1e6
	s.Running = math.Round(s.Running*1e6) / 1e6
	s.Mean = math.Round(s.Mean*1e6) / 1e6
	return s
}

// untilConverged feeds e a steady rate until it converges.
func untilConverged(t *testing.T, e *Estimator, items uint64, seconds float64) {
	for range 1000 {
		if _, conv, _ := e.Sample(items, seconds, false); conv {
			return
		}
	}
	t.Fatal("no convergence in 1000 samples")
}

// After a convergence the rate stays the last converged one while Running
// follows the new statistics (here of a new, higher rate).
func TestStateAfterReset(t *testing.T) {
	p := DefaultParams()
	p.MinPeriod, p.MaxPeriod = time.Millisecond, time.Millisecond
	p.Window = 8
	e := New(p)
	untilConverged(t, e, 10, 0.001)
	st := e.State()
	assert.True(t, st.Converged)
	assert.InDelta(t, 10000, st.Rate, 1e-6)
	assert.Zero(t, st.Running)
	e.Sample(20, 0.001, false)
	st = e.State()
	assert.True(t, st.Converged)
	assert.InDelta(t, 10000, st.Rate, 1e-6)
	assert.Greater(t, st.Running, 10000.0)
}

// What the non-blocking filter keeps and discards.
func TestFilter(t *testing.T) {
	e := New(DefaultParams())
	type in struct {
		items   uint64
		seconds float64
		blocked bool
	}
	steps := []struct {
		in   in
		used bool
	}{
		{in{50, 0.001, false}, true},
		{in{50, 0.001, true}, false},  // marked
		{in{0, 0.001, false}, false},  // still waiting: nothing taken since the mark
		{in{30, 0.001, false}, false}, // the wait ended in it: partly blocked
		{in{50, 0.001, false}, true},
		{in{0, 0.001, false}, true},    // nothing taken, not waiting: a long service, an observation
		{in{50, 0.0021, false}, true},  // late (> 2T): still an observation
		{in{50, 0.016, false}, true},   // 16T exactly
		{in{50, 0.0161, false}, false}, // stalled (> 16T)
		{in{50, 0.0004, false}, false}, // early (< T/2)
		{in{50, 0.002, false}, true},   // 2T exactly
		{in{50, 0.0005, false}, true},  // T/2 exactly
		{in{math.MaxUint64, 0.001, false}, false},
		{in{1e9, 0.001, false}, true}, // 1e12/s: the largest rate taken
		{in{1e9 + 1, 0.001, false}, false},
	}
	samples := int64(0)
	for i, s := range steps {
		_, conv, rate := e.Sample(s.in.items, s.in.seconds, s.in.blocked)
		assert.False(t, conv)
		assert.Zero(t, rate)
		if s.used {
			samples++
		}
		st := e.State()
		assert.Equal(t, samples, st.Samples, "step %d %+v", i, s.in)
		assert.Equal(t, int64(i+1), st.Periods)
	}
}

// Widening: T doubles after WidenAfter consecutive clean periods whose
// lengths are within ε of their mean, up to MaxPeriod; a blocked, late or
// unstable period restarts the streak (a late one is used all the same).
func TestWidening(t *testing.T) {
	p := DefaultParams()
	p.MaxPeriod = 10 * time.Millisecond
	e := New(p)
	var got []time.Duration
	T := p.Start()
	for i := range 100 {
		next, _, _ := e.Sample(100, 1.1*T.Seconds(), false)
		if next != T {
			got = append(got, next)
			assert.Equal(t, 15, i%16, "widened after sample %d", i)
		}
		T = next
	}
	assert.Equal(t, []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 10 * time.Millisecond}, got)
	assert.Equal(t, 10*time.Millisecond, e.State().Period)

	sample := func(e *Estimator, n int, seconds float64, blocked bool) (next time.Duration) {
		for range n {
			next, _, _ = e.Sample(100, seconds, blocked)
		}
		return next
	}
	p = DefaultParams()
	e = New(p)
	assert.Equal(t, time.Millisecond, sample(e, 15, 0.0011, false))
	assert.Equal(t, time.Millisecond, sample(e, 1, 0.0011, true))   // blocked: streak restarts
	assert.Equal(t, time.Millisecond, sample(e, 1, 0.0011, false))  // after a mark: discarded, restarts
	assert.Equal(t, time.Millisecond, sample(e, 15, 0.0011, false)) // 15 of 16
	before := e.State().Samples
	assert.Equal(t, time.Millisecond, sample(e, 1, 0.0025, false)) // late: used, but restarts
	assert.Equal(t, before+1, e.State().Samples)
	assert.Equal(t, time.Millisecond, sample(e, 15, 0.0011, false))
	assert.Equal(t, 2*time.Millisecond, sample(e, 1, 0.0011, false))
	assert.Equal(t, 2*time.Millisecond, sample(e, 15, 0.0022, false))
	assert.Equal(t, 2*time.Millisecond, sample(e, 1, 0.0041, false)) // late at T = 2 ms: restarts
	assert.Equal(t, 2*time.Millisecond, sample(e, 15, 0.0022, false))
	assert.Equal(t, 4*time.Millisecond, sample(e, 1, 0.0022, false))

	// Unstable lengths (±20 % around the mean, ε = 10 %) never widen; once
	// the last outlier leaves the last 16, the sliding test widens.
	e = New(p)
	for i := range 64 {
		s := 0.0011
		if i%8 == 0 {
			s *= 1.25
		}
		assert.Equal(t, time.Millisecond, sample(e, 1, s, false))
	}
	assert.Equal(t, time.Millisecond, sample(e, 8, 0.0011, false)) // the last outlier is 16 back
	assert.Equal(t, 2*time.Millisecond, sample(e, 1, 0.0011, false))

	// Lengths just within ε of their mean widen; the realized length may
	// be anything in [T/2, 2T] (here ~1.5T), stability is about spread.
	e = New(p)
	for i := range 15 {
		s := 0.0015 * (1 + 0.09*float64(i%2*2-1))
		assert.Equal(t, time.Millisecond, sample(e, 1, s, false))
	}
	assert.Equal(t, 2*time.Millisecond, sample(e, 1, 0.0015*1.09, false))
}

// The widening streak's sliding minimum and maximum agree with a direct scan.
func TestStreakAgainstScan(t *testing.T) {
	for _, k := range []int{1, 2, 3, 16, 50} {
		var s streak
		s.init(k, 0.05)
		var hist []float64
		x := uint64(12345)
		for i := range 2000 {
			x = x*6364136223846793005 + 1442695040888963407
			v := 1 + 0.12*float64(x>>40)/float64(1<<24)
			if i%97 == 0 {
				s.reset()
				hist = hist[:0]
			}
			got := s.push(v)
			hist = append(hist, v)
			want := false
			if len(hist) >= k {
				w := hist[len(hist)-k:]
				mean, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
				for _, y := range w {
					mean += y
					lo, hi = min(lo, y), max(hi, y)
				}
				mean /= float64(k)
				want = hi-mean <= 0.05*mean && mean-lo <= 0.05*mean
			}
			require.Equal(t, want, got, "k %d i %d", k, i)
		}
	}
}

// Bad input never panics, is counted as a period and discarded.
func TestBadInput(t *testing.T) {
	e := New(DefaultParams())
	for _, seconds := range []float64{0, -0.001, math.NaN(), math.Inf(1), math.Inf(-1), 1e-300, math.SmallestNonzeroFloat64, math.MaxFloat64} {
		for _, items := range []uint64{0, 1, 1 << 40, math.MaxUint64} {
			for _, blocked := range []bool{false, true} {
				next, conv, rate := e.Sample(items, seconds, blocked)
				assert.Equal(t, time.Millisecond, next)
				assert.False(t, conv)
				assert.Zero(t, rate)
			}
		}
	}
	st := e.State()
	assert.Equal(t, State{Period: time.Millisecond, Periods: 64}, st)
	e.p.MinPeriod, e.p.MaxPeriod = time.Millisecond, time.Millisecond // keep T at 1 ms for what follows
	// The estimator still works afterwards (the last bad period was
	// marked: the first good one after it is discarded).
	for range 200 {
		e.Sample(50, 0.001, false)
	}
	st = e.State()
	assert.Equal(t, int64(199), st.Samples)
	assert.True(t, st.Converged)
	assert.InDelta(t, 50000, st.Rate, 1e-6)
}

// Sample does not allocate, whatever path it takes: discarded periods,
// late periods, filling S, q, convergence, reset, widening.
func TestSampleDoesNotAllocate(t *testing.T) {
	p := DefaultParams()
	p.Window = 8
	e := New(p)
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		i++
		switch {
		case i%50 == 0:
			e.Sample(40, 0.0011, true)
		case i%77 == 0:
			e.Sample(40, math.NaN(), false)
		case i%31 == 0: // late: used, restarts the widening streak
			T := e.State().Period
			e.Sample(uint64(150*T/time.Millisecond), T.Seconds()*3, false)
		default:
			T := e.State().Period
			e.Sample(uint64(50*T/time.Millisecond)+uint64(i%3), T.Seconds()*1.1, false)
		}
	})
	assert.Zero(t, allocs)
	st := e.State()
	assert.Greater(t, st.Convergences, int64(10))
	assert.Equal(t, p.MaxPeriod, st.Period)
}

func FuzzSample(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x3f, 0}, uint8(0), uint16(0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0xc0, 0x7f, 1}, uint8(3), uint16(4096))
	f.Fuzz(func(t *testing.T, data []byte, window uint8, widen uint16) {
		p := DefaultParams()
		p.Window = int(window) + 4 // 4..259: New brings 4..7 to 8
		p.WidenAfter = int(widen)  // 0 is brought to 1
		e := New(p)
		// Each 13 bytes: items (8, little endian), seconds as a float32 (4)
		// scaled to T, and a blocked byte; then the same records replayed
		// to reach S and the convergence test.
		for rep := range 40 {
			for b := data; len(b) >= 13; b = b[13:] {
				items := uint64(0)
				for i := range 8 {
					items |= uint64(b[i]) << (8 * i)
				}
				bits := uint32(b[8]) | uint32(b[9])<<8 | uint32(b[10])<<16 | uint32(b[11])<<24
				seconds := float64(math.Float32frombits(bits)) * e.State().Period.Seconds()
				next, conv, rate := e.Sample(items>>(rep%64), seconds, b[12]&1 != 0)
				if next < p.MinPeriod || next > p.MaxPeriod {
					t.Fatalf("period %v out of [%v, %v]", next, p.MinPeriod, p.MaxPeriod)
				}
				if conv && !(rate > 0 && rate <= maxRate) || !conv && rate != 0 {
					t.Fatalf("converged %v rate %v", conv, rate)
				}
				st := e.State()
				if !(st.Rate >= 0 && st.Rate <= maxRate && st.Running >= 0 && st.Running <= maxRate) || st.Samples > st.Periods {
					t.Fatalf("state %+v", st)
				}
			}
		}
	})
}

// A change of rate in the middle of a cycle of q̄ restarts it once Window
// consecutive q's are more than 10 % off: the next estimate is the new rate
// alone, soon after the change.
func TestPhaseShiftRestart(t *testing.T) {
	p := DefaultParams()
	p.MinPeriod, p.MaxPeriod = time.Millisecond, time.Millisecond
	p.Window = 8
	e := New(p)
	untilConverged(t, e, 10, 0.001)
	for range 5 { // q̄ of the new cycle holds five q's of 10000/s
		e.Sample(10, 0.001, false)
	}
	for j := 1; j <= 100; j++ {
		_, conv, rate := e.Sample(20, 0.001, false)
		if conv {
			assert.InDelta(t, 20000, rate, 1e-6)
			// 8 to fill S with the new rate, 19 q's of a new cycle; the
			// shift is seen from the third new sample on.
			assert.LessOrEqual(t, j, 8+19+3)
			return
		}
	}
	t.Fatal("no estimate of the new rate")
}

// Mean is the items over the length of the window's unblocked periods:
// blocked periods and those right after them stay out, late ones count by
// their length, the oldest leave as new ones come.
func TestStateMean(t *testing.T) {
	p := DefaultParams()
	p.MinPeriod, p.MaxPeriod = time.Millisecond, time.Millisecond
	p.Window = 8
	e := New(p)
	assert.Zero(t, e.State().Mean, "no period yet")
	e.Sample(10, 0.001, false) // 10,000/s
	e.Sample(30, 0.001, false) // 30,000/s
	assert.InDelta(t, 20000, e.State().Mean, 1e-6)
	e.Sample(1000, 0.001, true)  // blocked: left out
	e.Sample(1000, 0.001, false) // right after a blocked one: left out too
	assert.InDelta(t, 20000, e.State().Mean, 1e-6)
	// A period 20 times as long as asked (the sampler was late): the
	// estimator leaves it out, Mean weighs it by its length.
	st := e.State()
	e.Sample(100, 0.020, false)
	assert.Equal(t, st.Samples, e.State().Samples, "a stalled period is no sample of the estimator's")
	assert.InDelta(t, 140.0/0.022, e.State().Mean, 1e-6)
	e.Sample(5, 0, false) // no length: left out
	assert.InDelta(t, 140.0/0.022, e.State().Mean, 1e-6)
	for i := 0; i < 8; i++ { // a full window of 50,000/s pushes the others out
		e.Sample(50, 0.001, false)
	}
	assert.InDelta(t, 50000, e.State().Mean, 1e-6)
}
