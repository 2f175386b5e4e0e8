package servicerate

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Params are the estimator's parameters (spec section 3, CP_ARG_SR_*).
type Params struct {
	// MinPeriod is the shortest sampling period T narrowing reaches;
	// MaxPeriod the widest T widening reaches. T starts at StartPeriod
	// (within them).
	MinPeriod, MaxPeriod time.Duration
	// Window is |S|, the number of non-blocked rates the 95th percentile
	// is taken over. WidenAfter is k, the number of consecutive clean,
	// stable periods after which T doubles.
	Window, WidenAfter int
	// StablePPM is ε in parts per million: the last WidenAfter realized
	// periods must all lie within ε of their mean for T to double.
	StablePPM int64
	// TolerancePPM is the convergence tolerance, in parts per million, on
	// the filtered relative standard error of q̄.
	TolerancePPM int64
}

// The ranges of the parameters (spec section 3).
const (
	minMinPeriod  = 50 * time.Microsecond
	maxPeriodCap  = time.Second
	minWindow     = 8
	maxWindow     = 4096
	maxWidenAfter = 1000000
	maxPPM        = 1000000
)

// DefaultParams returns the defaults: T from 1 ms, narrowing down to 100 us
// while periods are blocked but busy, widening up to 16 ms, |S| = 64,
// k = 16, ε = 10 %, tolerance 0.1 %.
func DefaultParams() Params {
	return Params{
		MinPeriod:    100 * time.Microsecond,
		MaxPeriod:    16 * time.Millisecond,
		Window:       64,
		WidenAfter:   16,
		StablePPM:    100000,
		TolerancePPM: 1000,
	}
}

// Validate reports every parameter out of its range, each naming the field,
// its value and the range.
func (p Params) Validate() error {
	var errs []error
	if p.MinPeriod < minMinPeriod || p.MinPeriod > maxPeriodCap {
		errs = append(errs, fmt.Errorf("servicerate: MinPeriod %v out of range [%v, %v]", p.MinPeriod, minMinPeriod, maxPeriodCap))
	}
	if p.MaxPeriod < p.MinPeriod || p.MaxPeriod > maxPeriodCap {
		errs = append(errs, fmt.Errorf("servicerate: MaxPeriod %v out of range [MinPeriod (%v), %v]", p.MaxPeriod, p.MinPeriod, maxPeriodCap))
	}
	if p.Window < minWindow || p.Window > maxWindow {
		errs = append(errs, fmt.Errorf("servicerate: Window %d out of range [%d, %d]", p.Window, minWindow, maxWindow))
	}
	if p.WidenAfter < 1 || p.WidenAfter > maxWidenAfter {
		errs = append(errs, fmt.Errorf("servicerate: WidenAfter %d out of range [1, %d]", p.WidenAfter, maxWidenAfter))
	}
	if p.StablePPM < 1 || p.StablePPM > maxPPM {
		errs = append(errs, fmt.Errorf("servicerate: StablePPM %d out of range [1, %d]", p.StablePPM, maxPPM))
	}
	if p.TolerancePPM < 1 || p.TolerancePPM > maxPPM {
		errs = append(errs, fmt.Errorf("servicerate: TolerancePPM %d out of range [1, %d]", p.TolerancePPM, maxPPM))
	}
	return errors.Join(errs...)
}

// StartPeriod is the first T: 1 ms, within [MinPeriod, MaxPeriod].
const StartPeriod = time.Millisecond

// Start is p's first T.
func (p Params) Start() time.Duration { return max(p.MinPeriod, min(StartPeriod, p.MaxPeriod)) }

// clamped returns p with every field brought into its range, so that New
// never fails nor panics on parameters Validate would refuse.
func (p Params) clamped() Params {
	clampD := func(v, lo, hi time.Duration) time.Duration { return max(lo, min(v, hi)) }
	clampI := func(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }
	p.MinPeriod = clampD(p.MinPeriod, minMinPeriod, maxPeriodCap)
	p.MaxPeriod = clampD(p.MaxPeriod, p.MinPeriod, maxPeriodCap)
	p.Window = int(clampI(int64(p.Window), minWindow, maxWindow))
	p.WidenAfter = int(clampI(int64(p.WidenAfter), 1, maxWidenAfter))
	p.StablePPM = clampI(p.StablePPM, 1, maxPPM)
	p.TolerancePPM = clampI(p.TolerancePPM, 1, maxPPM)
	return p
}

// The constants of the heuristic (see the package doc).
const (
	// z95 is the standard normal's 95th percentile (Eq. 3).
	z95 = 1.64485
	// gaussRadius is the radius of the Gaussian filter on S (Eq. 2).
	gaussRadius = 2
	// convWindow is the number of filtered relative σ(q̄) values that must
	// all be within tolerance for convergence.
	convWindow = 16
	// maxRate is the largest rate (items/s) taken as an observation; more
	// is a wrapped or garbage counter delta.
	maxRate = 1e12
	// shiftFraction: Window consecutive values of q more than this
	// fraction away from q̄, on the same side, restart the statistics
	// without an estimate (a change of phase, see the package doc).
	shiftFraction = 0.1
	// lateFactor, stallFactor and earlyFactor bound the realized period
	// against the requested T. Longer than 2T: the sampler was late; the
	// period is still an observation of the rate (items / its realized
	// length) when no blocked mark was set in it, but it is no regular
	// period: it breaks the widening streak. Longer than 16T: the sampler
	// did not run for most of the period, which more likely tells that the
	// whole process or machine stood still (stopped, a paused VM, the
	// real-time throttle) than that the operator worked on while only the
	// sampler waited; the period is discarded. Shorter than T/2 (it woke
	// early): discarded, the few items of a short period make a noisy rate.
	lateFactor  = 2.0
	stallFactor = 16.0
	earlyFactor = 0.5
)

// gauss is the Gaussian kernel of Eq. 2 at x = -2..2, normalised to sum 1
// (the paper's values sum to 0.99086: unnormalised they would bias every
// filtered rate 0.9 % low).
var gauss = func() (k [2*gaussRadius + 1]float64) {
	sum := 0.0
	for i := range k {
		x := float64(i - gaussRadius)
		k[i] = math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
		sum += k[i]
	}
	for i := range k {
		k[i] /= sum
	}
	return k
}()

// logKernel is the combined Gaussian and Laplacian kernel of Eq. 4 at
// x = -1, 0, 1 with σ = 1/2: {1.2958, -3.1915, 1.2958}. It is used as the
// paper gives it, unnormalised (it sums to -0.5999, so a constant sequence
// c filters to -0.6c: the test bounds the relative standard error itself as
// well as its change).
var logKernel = func() (k [3]float64) {
	const s = 0.5
	for i := range k {
		x := float64(i - 1)
		g := math.Exp(-x*x/(2*s*s)) / math.Sqrt(2*math.Pi)
		k[i] = x*x*g/math.Pow(s, 5) - g/math.Pow(s, 3)
	}
	return k
}()

// Estimator is one channel's service-rate estimator. It is not safe for
// concurrent use: the sampler calls Sample, and whoever reads State must
// hold the same lock.
type Estimator struct {
	p      Params
	period time.Duration
	tol    float64

	// S: a ring of the last Window non-blocked rates (items/s).
	s          []float64
	sPos, sLen int
	// The last Window unblocked periods' items and lengths, late ones
	// too, and their sums: State's Mean, weighted by time.
	mItems     []uint64
	mSecs      []float64
	mPos, mLen int
	mSumItems  uint64
	mSumSecs   float64

	// S': a ring of the Gaussian-filtered S, one value a push once S holds
	// five; once S is full it holds exactly the Window-4 values of the
	// filtered window (no padding).
	f          []float64
	fPos, fLen int

	// Welford's running mean and sum of squared deviations of q since the
	// last reset.
	qN        int64
	qMean, qM float64
	// The last three relative standard errors σ(q̄)/q̄ and the last
	// convWindow of them filtered by logKernel.
	rel        [3]float64
	relLen     int
	conv       [convWindow]float64
	convPos    int
	convLen    int
	lastQCount int64
	// shiftSide and shiftLen: the side (+1 above, -1 below) on which the
	// last shiftLen values of q fell more than shiftFraction away from q̄.
	shiftSide, shiftLen int

	// The widening streak.
	st streak
	// The narrowing: busy is the periods in a row that took items but
	// were blocked (the operator works in stretches shorter than T), and
	// busyRate the sum of their rates; dry is the periods since the last
	// used one.
	busy, dry int
	busyRate  float64

	// waiting: the operator may have been waiting at the end of the last
	// period: that period was marked, or it took nothing after a period
	// that may have ended waiting (the mark is set once, when a wait
	// begins, so a wait spanning whole periods leaves them unmarked).
	waiting bool

	samples, periods, convergences int64
	rate                           float64
	converged                      bool
}

// New returns an estimator with parameters p. Parameters out of range are
// brought into it (call Validate first to refuse them instead). All the
// buffers Sample uses are allocated here.
func New(p Params) *Estimator {
	p = p.clamped()
	e := &Estimator{
		p:      p,
		period: p.Start(),
		tol:    float64(p.TolerancePPM) / 1e6,
		s:      make([]float64, p.Window),
		f:      make([]float64, p.Window-2*gaussRadius),
		mItems: make([]uint64, p.Window),
		mSecs:  make([]float64, p.Window),
	}
	e.st.init(p.WidenAfter, float64(p.StablePPM)/1e6)
	return e
}

// Sample takes one sampling period: items counted in it, its realized length
// in seconds, and whether a blocked mark (input empty or output full) was set
// during it. It returns the period to use next and, when the estimate
// converged at this sample, the converged rate (items/s).
//
// It never panics and does not allocate. A period that is marked blocked,
// that follows a period that may have ended waiting (see the package doc),
// whose length is not within [T/2, 16T] of the T requested for it (NaN,
// ±Inf, 0 and negative lengths included), or whose rate exceeds 1e12
// items/s is counted in Periods and otherwise discarded, and breaks the
// widening streak. A period longer than 2T (the sampler was late) is used
// but breaks the widening streak too: it is not a regular period.
func (e *Estimator) Sample(items uint64, seconds float64, blocked bool) (next time.Duration, converged bool, rate float64) {
	e.periods++
	wasWaiting := e.waiting
	if blocked {
		e.waiting = true
	} else if items > 0 {
		e.waiting = false
	}
	if !blocked && !wasWaiting && seconds > 0 && seconds <= maxMeanPeriod {
		e.meanPush(items, seconds)
	}
	t := e.period.Seconds()
	valid := seconds >= earlyFactor*t && seconds <= stallFactor*t // false for NaN
	if valid {
		rate = float64(items) / seconds
		valid = rate <= maxRate
	}
	if blocked || wasWaiting || !valid {
		e.st.reset()
		if !valid || items == 0 {
			rate = 0
		}
		e.narrow(rate)
		return e.period, false, 0
	}
	e.samples++
	e.busy, e.dry, e.busyRate = 0, 0, 0
	if seconds > lateFactor*t {
		// Late: a valid observation, not a regular period.
		e.st.reset()
	} else if e.period < e.p.MaxPeriod && e.st.push(seconds) {
		e.period = min(2*e.period, e.p.MaxPeriod)
		e.st.reset()
	}
	converged, rate = e.push(rate)
	return e.period, converged, rate
}

// maxMeanPeriod: a period longer than this (a sampler stopped, or a
// nonsense length) stays out of Mean too.
const maxMeanPeriod = 3600.0

// meanPush adds an unblocked period, of any regularity, to Mean's window:
// periods the sampler ended late are those the machine was busiest in, and
// the estimator's rates leave the longest out, so Mean counts them all,
// each by its length.
func (e *Estimator) meanPush(items uint64, seconds float64) {
	w := len(e.mItems)
	if e.mLen == w {
		e.mSumItems -= e.mItems[e.mPos]
		e.mSumSecs -= e.mSecs[e.mPos]
	} else {
		e.mLen++
	}
	e.mItems[e.mPos], e.mSecs[e.mPos] = items, seconds
	e.mSumItems += items
	e.mSumSecs += seconds
	e.mPos = (e.mPos + 1) % w
}

// narrowItems: T narrows only while half a period still takes this many
// items: the 95th percentile of the periods' rates biases upward by about
// 0.87/sqrt(items a period) on variable service times (package doc), 11%
// at 64.
const narrowItems = 64

// narrow follows a period that could not be used, at rate (0: it took
// nothing, or was no regular period): after
// WidenAfter in a row that took items (the operator worked, but in
// stretches shorter than T) T halves, down to MinPeriod and while half
// of T still takes narrowItems, so that a fast operator whose busy
// stretches are short still shows unblocked periods (a 4 us operator at
// load 0.8: 0.3% of 1 ms periods unblocked, 11% of 200 us ones, in
// simulation). A T below the start that found no usable period in
// 4·Window periods doubles back: sampling fast costs CPU and buys
// nothing there (a lightly loaded operator).
func (e *Estimator) narrow(rate float64) {
	e.dry++
	if rate > 0 {
		e.busy++
		e.busyRate += rate
	} else {
		e.busy, e.busyRate = 0, 0
	}
	half := e.period / 2
	switch {
	case e.busy >= e.p.WidenAfter && e.period > e.p.MinPeriod && e.busyRate/float64(e.busy)*half.Seconds() >= narrowItems:
		e.period = max(half, e.p.MinPeriod)
		e.busy, e.dry, e.busyRate = 0, 0, 0
	case e.dry >= 4*e.p.Window && e.period < e.p.Start():
		e.period = min(2*e.period, e.p.Start())
		e.busy, e.dry, e.busyRate = 0, 0, 0
	}
}

// push adds a non-blocked rate to S, and once S is full computes q (Eq. 3),
// updates q̄ and tests convergence.
func (e *Estimator) push(x float64) (bool, float64) {
	w := len(e.s)
	e.s[e.sPos] = x
	e.sPos = (e.sPos + 1) % w
	if e.sLen < w {
		e.sLen++
	}
	if e.sLen < 2*gaussRadius+1 {
		return false, 0
	}
	// The newest five values of S, oldest first, make one value of S'.
	v := 0.0
	for i, g := range gauss {
		v += g * e.s[(e.sPos-len(gauss)+i+w)%w]
	}
	e.f[e.fPos] = v
	e.fPos = (e.fPos + 1) % len(e.f)
	if e.fLen < len(e.f) {
		e.fLen++
	}
	if e.sLen < w {
		return false, 0
	}
	mean := 0.0
	for _, y := range e.f {
		mean += y
	}
	mean /= float64(len(e.f))
	ss := 0.0
	for _, y := range e.f {
		ss += (y - mean) * (y - mean)
	}
	// A 95th percentile of rates of at most maxRate is at most maxRate;
	// mean + z·sd is not, where a few rates near it stand far above the
	// rest (the fuzzer found 1.1e12).
	q := min(mean+z95*math.Sqrt(ss/float64(len(e.f)-1)), maxRate)
	return e.updateStats(q)
}

// updateStats adds q to q̄ (Welford) and runs QConverged: the relative
// standard error σ(q̄)/q̄ = sd(q)/(√n q̄) is filtered with Eq. 4's kernel and
// the estimate has converged when the last 16 filtered values are all within
// the tolerance. On convergence q̄ is the estimate and the statistics restart.
// They also restart, without an estimate, when Window consecutive q's lie
// more than 10 % from q̄ on the same side (a new phase; see the package doc).
func (e *Estimator) updateStats(q float64) (bool, float64) {
	if e.qN > 0 {
		side := 0
		if d := q - e.qMean; d > shiftFraction*e.qMean {
			side = 1
		} else if d < -shiftFraction*e.qMean {
			side = -1
		}
		if side != 0 && side == e.shiftSide {
			e.shiftLen++
		} else {
			e.shiftSide, e.shiftLen = side, side*side
		}
		if e.shiftLen >= len(e.s) {
			// S has differed from q̄ for a whole window: a new phase.
			e.resetStats()
		}
	}
	e.qN++
	d := q - e.qMean
	e.qMean += d / float64(e.qN)
	e.qM += d * (q - e.qMean)
	if e.qN < 2 {
		return false, 0
	}
	if !(e.qMean > 0) {
		// Every q was 0: nothing was taken in the non-blocked periods of
		// the whole window. The relative error is undefined; a zero rate
		// is never reported as converged.
		e.relLen, e.convLen = 0, 0
		return false, 0
	}
	sd := math.Sqrt(e.qM / float64(e.qN-1))
	r := sd / math.Sqrt(float64(e.qN)) / e.qMean
	e.rel[0], e.rel[1], e.rel[2] = e.rel[1], e.rel[2], r
	if e.relLen < 3 {
		e.relLen++
		if e.relLen < 3 {
			return false, 0
		}
	}
	fv := logKernel[0]*e.rel[0] + logKernel[1]*e.rel[1] + logKernel[2]*e.rel[2]
	e.conv[e.convPos] = fv
	e.convPos = (e.convPos + 1) % convWindow
	if e.convLen < convWindow {
		e.convLen++
		if e.convLen < convWindow {
			return false, 0
		}
	}
	for _, c := range e.conv {
		if !(math.Abs(c) <= e.tol) {
			return false, 0
		}
	}
	rate := e.qMean
	e.rate, e.converged = rate, true
	e.convergences++
	e.lastQCount = e.qN
	e.resetStats()
	return true, rate
}

// resetStats restarts q̄ and the convergence test (the paper's restart
// after a convergence); S and S' keep sliding.
func (e *Estimator) resetStats() {
	e.qN, e.qMean, e.qM = 0, 0, 0
	e.relLen, e.convLen, e.convPos = 0, 0, 0
	e.shiftSide, e.shiftLen = 0, 0
}

// State is a snapshot of the estimator; it maps onto cp_service_rate_t.
type State struct {
	// Rate is the last converged estimate (items/s) if there was one
	// (Converged is then true), else the running q̄ (0 if none).
	Rate float64
	// Running is q̄ since the last reset (0 if no q since).
	Running float64
	// Period is the sampling period T to use now.
	Period time.Duration
	// Samples counts the non-blocked periods used, Periods all the periods
	// sampled, Convergences the converged estimates.
	Samples, Periods, Convergences int64
	// Converged tells that Rate is a converged estimate.
	Converged bool
	// Mean is the items over the length of the last Window unblocked
	// periods (late ones too; 0 if none yet): what the operator did a
	// second while not blocked, preemption and all. Rate, the 95th
	// percentile of their rates, keeps the periods it ran undisturbed,
	// and stands above Mean on a shared machine.
	Mean float64
}

// State returns the current estimate and counters.
func (e *Estimator) State() State {
	s := State{
		Period:       e.period,
		Samples:      e.samples,
		Periods:      e.periods,
		Convergences: e.convergences,
		Converged:    e.converged,
	}
	if e.qN > 0 {
		s.Running = e.qMean
	}
	if e.mLen > 0 && e.mSumSecs > 0 {
		s.Mean = float64(e.mSumItems) / e.mSumSecs
	}
	s.Rate = s.Running
	if e.converged {
		s.Rate = e.rate
	}
	return s
}

// Averaged returns how many values of q were averaged into the last converged
// estimate (0 before the first): the Samples of the file's service_rate event.
func (e *Estimator) Averaged() int64 { return e.lastQCount }

// streak tracks the widening condition: the last k realized lengths of
// consecutive clean periods all within ε of their mean. The values are in a
// ring with their running sum; their minimum and maximum in two monotonic
// queues of ring positions, so each push is O(1) amortised whatever k.
type streak struct {
	eps    float64
	v      []float64
	pos, n int
	sum    float64
	lo, hi mono
}

// mono is a monotonic queue of positions in the streak's ring, oldest first.
type mono struct {
	buf     []int32
	head, n int
}

func (s *streak) init(k int, eps float64) {
	s.eps = eps
	s.v = make([]float64, k)
	s.lo.buf = make([]int32, k)
	s.hi.buf = make([]int32, k)
}

func (s *streak) reset() {
	s.pos, s.n, s.sum = 0, 0, 0
	s.lo.head, s.lo.n, s.hi.head, s.hi.n = 0, 0, 0, 0
}

// push adds one realized length and tells whether the last k are stable.
func (s *streak) push(x float64) bool {
	k := len(s.v)
	if s.n == k {
		// The value at pos, the oldest, leaves the window.
		s.sum -= s.v[s.pos]
		s.lo.dropFront(int32(s.pos))
		s.hi.dropFront(int32(s.pos))
	} else {
		s.n++
	}
	s.v[s.pos] = x
	s.sum += x
	s.lo.push(int32(s.pos), s.v, func(a, b float64) bool { return a >= b })
	s.hi.push(int32(s.pos), s.v, func(a, b float64) bool { return a <= b })
	s.pos = (s.pos + 1) % k
	if s.n < k {
		return false
	}
	mean := s.sum / float64(k)
	return s.v[s.hi.front()]-mean <= s.eps*mean && mean-s.v[s.lo.front()] <= s.eps*mean
}

func (m *mono) front() int32 { return m.buf[m.head] }

func (m *mono) dropFront(p int32) {
	if m.n > 0 && m.buf[m.head] == p {
		m.head = (m.head + 1) % len(m.buf)
		m.n--
	}
}

// push appends position p after dropping from the back every position whose
// value is dominated by v[p] (dominated(back, new) true).
func (m *mono) push(p int32, v []float64, dominated func(back, x float64) bool) {
	for m.n > 0 {
		b := (m.head + m.n - 1) % len(m.buf)
		if !dominated(v[m.buf[b]], v[p]) {
			break
		}
		m.n--
	}
	m.buf[(m.head+m.n)%len(m.buf)] = p
	m.n++
}
