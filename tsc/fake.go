package tsc

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
)

// Fake is a made-up counter derived from the hardware TSC, so that one
// machine can play several nodes whose counters run at different rates from
// different origins, with exact ground truth (CP_FAKE_TSC=RATE:OFFSET):
//
//	fake = floor(raw * RateQ32 / 2^32) + Offset
//
// The rate is held as a 32.32 fixed-point number so that Go, C and a test
// computing the truth all get the same integer for the same raw value.
// A rate above 1 makes the counter step by RATE cycles per hardware cycle:
// minrtt's strict bounds take every reading to be within 2 cycles of its
// instant, which holds for RATE <= 1 and is off by RATE-1 cycles above it
// (0.0011 cycles at the 1.0011 the multi-node test uses).
type Fake struct {
	RateQ32 uint64 // rate * 2^32, rounded
	Offset  int64  // cycles added after scaling
}

// Rate is the fake counter's rate relative to the hardware TSC.
func (f Fake) Rate() float64 { return float64(f.RateQ32) / (1 << 32) }

// Apply maps a hardware TSC value to the fake counter.
func (f Fake) Apply(raw uint64) uint64 {
	hi, lo := bits.Mul64(raw, f.RateQ32)
	return uint64(int64(hi<<32|lo>>32) + f.Offset)
}

// String is the CP_FAKE_TSC form that parses back to f.
func (f Fake) String() string {
	return fmt.Sprintf("%s:%d", strconv.FormatFloat(f.Rate(), 'f', -1, 64), f.Offset)
}

// ParseFake reads RATE:OFFSET: RATE a decimal in [0.01, 100], OFFSET a
// signed integer number of cycles. The offset may not make the counter
// negative now (it would wrap).
func ParseFake(s string) (Fake, error) {
	rs, os_, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return Fake{}, fmt.Errorf("CP_FAKE_TSC=%q: want RATE:OFFSET, e.g. 1.0002:-5000000000", s)
	}
	rate, err := strconv.ParseFloat(rs, 64)
	if err != nil || math.IsNaN(rate) || rate < 0.01 || rate > 100 {
		return Fake{}, fmt.Errorf("CP_FAKE_TSC=%q: rate must be a number in [0.01, 100]", s)
	}
	off, err := strconv.ParseInt(os_, 10, 64)
	if err != nil || off < -(1<<62) || off > 1<<62 {
		return Fake{}, fmt.Errorf("CP_FAKE_TSC=%q: offset must be an integer in [-2^62, 2^62]", s)
	}
	f := Fake{RateQ32: uint64(math.Round(rate * (1 << 32))), Offset: off}
	if v := f.Apply(readRaw()); int64(v) < 0 {
		return Fake{}, fmt.Errorf("CP_FAKE_TSC=%q: the offset makes the counter negative", s)
	}
	return f, nil
}

var active atomic.Pointer[Fake]

// SetFake makes Read return f's counter from now on; nil restores the
// hardware counter. The native library calls it at its first OpenChannel
// with CP_FAKE_TSC as libc sees it then.
func SetFake(f *Fake) { active.Store(f) }

// ActiveFake returns the fake counter in use, if any.
func ActiveFake() (Fake, bool) {
	if f := active.Load(); f != nil {
		return *f, true
	}
	return Fake{}, false
}

// FakeFromEnv reads CP_FAKE_TSC from the Go environment and, when set,
// makes it active. Commands call it at start and stop on its error.
func FakeFromEnv() error { return SetFakeFrom(os.Getenv("CP_FAKE_TSC")) }

// SetFakeFrom parses a CP_FAKE_TSC value ("" means none) and makes it active.
func SetFakeFrom(s string) error {
	if s == "" {
		SetFake(nil)
		return nil
	}
	f, err := ParseFake(s)
	if err != nil {
		return err
	}
	SetFake(&f)
	return nil
}
