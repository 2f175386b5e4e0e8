package probe

import (
	"math"
	"time"
)

// A kernel timestamp is CLOCK_REALTIME nanoseconds; the probes need the
// node's counter. A bracket reads CLOCK_REALTIME between two readings of the
// counter, a few microseconds from the timestamp; the counter at the
// timestamp's instant is then bounded on both sides by the counter at the
// bracket plus or minus the nanoseconds between them at the counter's rate,
// that rate known within rateTolerance. The bounds hold for any counter the
// client reads (a fake one too) as long as its frequency is the one stated.

// bracket is one reading of CLOCK_REALTIME (rt) taken between two readings
// of the counter (before, after).
type bracket struct {
	before, after uint64
	rt            int64
}

func takeBracket(clock func() uint64) bracket {
	b := clock()
	rt := time.Now().UnixNano()
	return bracket{before: b, after: clock(), rt: rt}
}

// offsetBase is where realOffset counts from.
var offsetBase = time.Now()

// realOffset is CLOCK_REALTIME less CLOCK_MONOTONIC (both since
// offsetBase), which the kernel slews alike but steps only the first of:
// constant but for steps of CLOCK_REALTIME. time.Now reads the two one
// after the other, and a thread preempted between them reads an offset
// off by the preemption: the median of three readings is not.
func realOffset() int64 {
	var o [3]int64
	for i := range o {
		t := time.Now()
		o[i] = (t.UnixNano() - offsetBase.UnixNano()) - int64(t.Sub(offsetBase))
	}
	if o[0] > o[1] {
		o[0], o[1] = o[1], o[0]
	}
	if o[1] > o[2] {
		o[1] = o[2]
	}
	return max(o[0], o[1])
}

// stepped says whether CLOCK_REALTIME was stepped by more than maxStepNs
// between two realOffset readings.
func stepped(from, to int64) bool {
	return to-from > maxStepNs || from-to > maxStepNs
}

const (
	// rateTolerance bounds, relative, how far the counter's cycles per
	// nanosecond of CLOCK_REALTIME may be from its stated frequency: the
	// kernel's discipline of CLOCK_REALTIME (its frequency offset, tick,
	// phase-locked loop and adjtime slew) moves its rate by at most
	// maxSlew, which is checked (clockSlew: else the probes are timed by
	// the processes), and the stated frequency (tsc.Freq, from CPUID or
	// calibrated against CLOCK_MONOTONIC_RAW) is taken to be within 1,000
	// ppm of the counter's. Over the few microseconds between a timestamp
	// and its bracket this costs a few nanoseconds.
	rateTolerance = 2e-3
	maxSlew       = 1e-3
	// maxStepNs: CLOCK_REALTIME stepped by more than this between two
	// readings (realOffset) and the kernel's timestamps in between are
	// not placed: the brackets' readings would be on the other side of
	// the step. Go reads its two clocks a few tens of ns apart.
	maxStepNs = 1000
	// stampSlackNs is how far a kernel timestamp and a CLOCK_REALTIME
	// reading in the process may disagree about the order of two instants:
	// both come from the kernel's one timekeeper in whole nanoseconds.
	stampSlackNs = 10
	// maxBracketNs: a timestamp further than this from its bracket is not
	// placed (brackets are microseconds from their timestamps; further, the
	// stamp is not the packet's or the clock moved).
	maxBracketNs = int64(10 * time.Millisecond)
)

// clockMap places CLOCK_REALTIME instants on a counter of frequency hz.
type clockMap struct {
	kLo, kHi float64 // counter cycles per nanosecond, at least and at most
}

func newClockMap(hz float64) clockMap {
	return clockMap{kLo: hz * (1 - rateTolerance) / 1e9, kHi: hz * (1 + rateTolerance) / 1e9}
}

// lowerAt is a counter value at or before the instant CLOCK_REALTIME read
// r, from bracket b; false when r is too far from b to place.
func (m clockMap) lowerAt(b bracket, r int64) (uint64, bool) {
	d := r - b.rt - stampSlackNs
	if d > maxBracketNs || d < -maxBracketNs {
		return 0, false
	}
	if d >= 0 {
		return b.before + uint64(float64(d)*m.kLo), true
	}
	back := uint64(math.Ceil(float64(-d) * m.kHi))
	if back > b.before {
		return 0, false // before the counter's zero: not a reading
	}
	return b.before - back, true
}

// upperAt is a counter value at or after the instant CLOCK_REALTIME read
// r, from bracket b; false when r is too far from b to place.
func (m clockMap) upperAt(b bracket, r int64) (uint64, bool) {
	d := r - b.rt + stampSlackNs
	if d > maxBracketNs || d < -maxBracketNs {
		return 0, false
	}
	if d >= 0 {
		return b.after + uint64(math.Ceil(float64(d)*m.kHi)), true
	}
	back := uint64(float64(-d) * m.kLo)
	if back > b.after {
		return 0, false
	}
	return b.after - back, true
}

// nsAtMost is cycles of the counter as nanoseconds, rounded up and widened
// by the rate's tolerance: the time they took is at most this.
func (m clockMap) nsAtMost(cycles uint64) uint64 {
	return uint64(math.Ceil(float64(cycles) / m.kLo))
}

// shrinkNs is n nanoseconds of another node's clock as at least this many
// of ours (the tolerance on both sides).
func shrinkNs(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return int64(float64(n) * (1 - 2*rateTolerance))
}

// growNs is n nanoseconds of another node's clock as at most this many of
// ours.
func growNs(n int64) int64 {
	return int64(math.Ceil(float64(n) * (1 + 2*rateTolerance)))
}

// turnNs is the time from a request's kernel receipt (rx) to a later
// instant read as at (both CLOCK_REALTIME), at least, capped to fit a
// packet's field; 0 when it cannot be said.
func turnNs(rx, at int64) uint32 {
	d := shrinkNs(at - rx - 2*stampSlackNs)
	return uint32(min(max(d, 0), math.MaxUint32))
}
