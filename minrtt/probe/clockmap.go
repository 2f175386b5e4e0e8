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

const (
	// rateTolerance bounds, relative, how far the counter's cycles per
	// nanosecond of CLOCK_REALTIME may be from its stated frequency: NTP
	// moves CLOCK_REALTIME's rate by at most 500 ppm (adjtimex's frequency)
	// plus 500 ppm (adjtime's slew), and the stated frequency (tsc.Freq) is
	// within 1000 ppm of the counter's. Over the few microseconds between a
	// timestamp and its bracket this costs a few nanoseconds.
	rateTolerance = 2e-3
	// stampSlackNs is how far a kernel timestamp and a CLOCK_REALTIME
	// reading in the process may disagree about the order of two instants:
	// both come from the kernel's one timekeeper in whole nanoseconds.
	stampSlackNs = 10
	// maxBracketNs: a timestamp further than this from its bracket is not
	// placed (the clock was stepped, or the stamp is someone else's).
	maxBracketNs = int64(time.Second)
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
	return b.before - uint64(math.Ceil(float64(-d)*m.kHi)), true
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
	return b.after - uint64(float64(-d)*m.kLo), true
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
