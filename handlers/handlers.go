// Package handlers is the catalogue of channel handlers: their numbers (the
// C header's), names, arguments with defaults and ranges, and which log
// formats each can write. The native library, the configuration server and
// the CLI all validate against this one table.
package handlers

import (
	"errors"
	"fmt"
)

// Type is a handler type; values match capi/cloudprofiler.h.
type Type int32

const (
	Identity Type = iota
	BufferIdentity
	BufferIdentityComp
	Median
	Downsample
	XoY
	FirstLast
	PeriodicCounter
	FastPeriodicCounter
	Null
	NetConf
	FoxStart
	FoxEnd
	GPIORTT
	ServiceRate
	Lineage
	numTypes
)

var names = [...]string{"IDENTITY", "BUFFER_IDENTITY", "BUFFER_IDENTITY_COMP", "MEDIAN", "DOWNSAMPLE",
	"XOY", "FIRSTLAST", "PERIODICCOUNTER", "FASTPERIODICCOUNTER", "NULLH", "NET_CONF", "FOX_START",
	"FOX_END", "GPIORTT", "SERVICERATE", "LINEAGE"}

func (t Type) Valid() bool { return t >= 0 && t < numTypes }

func (t Type) String() string {
	if !t.Valid() {
		return fmt.Sprintf("Handler(%d)", int32(t))
	}
	return names[t]
}

// Parse accepts a handler's name as in the C header (without CP_).
func Parse(s string) (Type, error) {
	for i, n := range names {
		if n == s {
			return Type(i), nil
		}
	}
	return 0, fmt.Errorf("unknown handler %q", s)
}

// Errors that map onto the C header's codes.
var (
	ErrUnknown  = errors.New("unknown handler type")
	ErrNotYet   = errors.New("handler not supported yet")
	ErrPlatform = errors.New("handler unsupported on this platform")
	ErrFormat   = errors.New("handler cannot write this format")
	ErrArgNum   = errors.New("handler has no such argument")
	ErrArgValue = errors.New("argument value out of range")
)

// ArgDropWhenFull is the argument number of CP_ARG_DROP_WHEN_FULL.
const ArgDropWhenFull int32 = 100

// The argument numbers of SERVICERATE's estimator (CP_ARG_SR_*).
const (
	ArgSRMinPeriodNs int32 = 200 + iota
	ArgSRMaxPeriodNs
	ArgSRWindow
	ArgSRWidenAfter
	ArgSRStablePPM
	ArgSRTolerancePPM
)

// Arg describes one handler argument.
type Arg struct {
	Num      int32 // ParameterizeChannel's arg_num
	Name     string
	Default  int64
	Min, Max int64
}

var periodArg = Arg{0, "period_ns", 1_000_000_000, 1_000_000, 1 << 62}

// Args returns the handler's own arguments, in the order of the channel's
// argument values (see Index): 0 and 1 first, at their own numbers.
func (t Type) Args() []Arg {
	switch t {
	case Median:
		return []Arg{{0, "window", 1000, 1, 100000}}
	case Downsample:
		return []Arg{{0, "n", 10, 1, 1 << 62}}
	case XoY:
		return []Arg{{0, "x", 1, 0, 1 << 62}, {1, "y", 1024, 1, 1 << 62}}
	case PeriodicCounter, FastPeriodicCounter:
		return []Arg{periodArg}
	case ServiceRate:
		// The estimator's (capi/cloudprofiler.h, CP_ARG_SR_*); the max
		// period's lower bound is the min period's (checked in CheckArg).
		return []Arg{periodArg,
			{ArgSRMinPeriodNs, "sr_min_period_ns", 100_000, 50_000, 1_000_000_000},
			{ArgSRMaxPeriodNs, "sr_max_period_ns", 16_000_000, 50_000, 1_000_000_000},
			{ArgSRWindow, "sr_window", 64, 8, 4096},
			{ArgSRWidenAfter, "sr_widen_after", 16, 1, 1_000_000},
			{ArgSRStablePPM, "sr_stable_ppm", 100_000, 1, 1_000_000},
			{ArgSRTolerancePPM, "sr_tolerance_ppm", 1000, 1, 1_000_000}}
	}
	return nil
}

// Index is where argument argNum is among Args() (and the channel's
// argument values), or -1 when the handler has no such argument.
func (t Type) Index(argNum int32) int {
	for i, a := range t.Args() {
		if a.Num == argNum {
			return i
		}
	}
	return -1
}

// Defaults returns the handler's default argument values.
func (t Type) Defaults() []int64 {
	var v []int64
	for _, a := range t.Args() {
		v = append(v, a.Default)
	}
	return v
}

// Ring says whether the handler's kept records go through the ring of blocks
// (and so may be compressed, and may drop when configured to).
func (t Type) Ring() bool {
	switch t {
	case BufferIdentity, BufferIdentityComp, Median, Downsample, XoY, FoxStart, FoxEnd, Lineage:
		return true
	}
	return false
}

// Counter says whether the handler writes counter records (SERVICERATE
// writes them as FASTPERIODICCOUNTER does, next to its estimates).
func (t Type) Counter() bool {
	return t == PeriodicCounter || t == FastPeriodicCounter || t == ServiceRate
}

// CheckOpen says whether a channel of this handler can be opened in a format
// that is compressed (compressed) here and now.
func (t Type) CheckOpen(compressed bool) error {
	switch {
	case !t.Valid():
		return ErrUnknown
	case t == GPIORTT:
		return fmt.Errorf("%w: %s needs an aarch64 board with GPIO", ErrPlatform, t)
	case compressed && t == Identity:
		return fmt.Errorf("%w: IDENTITY writes each record as it comes; use BUFFER_IDENTITY to compress", ErrFormat)
	}
	return nil
}

// CheckArg validates ParameterizeChannel(argNum, val) against the current
// argument values cur, in the order of Args() (for cross-argument rules such
// as x <= y).
func (t Type) CheckArg(argNum int32, val int64, cur []int64) error {
	if argNum == ArgDropWhenFull {
		if !t.Ring() {
			return fmt.Errorf("%w: %s has no ring to drop from", ErrArgNum, t)
		}
		if val != 0 && val != 1 {
			return fmt.Errorf("%w: drop_when_full is 0 or 1, got %d", ErrArgValue, val)
		}
		return nil
	}
	args := t.Args()
	i := t.Index(argNum)
	if i < 0 {
		nums := make([]int32, len(args))
		for k, a := range args {
			nums[k] = a.Num
		}
		return fmt.Errorf("%w: %s has %d argument(s) %v, got arg %d", ErrArgNum, t, len(args), nums, argNum)
	}
	a := args[i]
	if val < a.Min || val > a.Max {
		return fmt.Errorf("%w: %s %s must be in [%d, %d], got %d", ErrArgValue, t, a.Name, a.Min, a.Max, val)
	}
	if t == ServiceRate && (argNum == ArgSRMinPeriodNs || argNum == ArgSRMaxPeriodNs) {
		lo, hi := cur[t.Index(ArgSRMinPeriodNs)], cur[t.Index(ArgSRMaxPeriodNs)]
		if argNum == ArgSRMinPeriodNs {
			lo = val
		} else {
			hi = val
		}
		if hi < lo {
			return fmt.Errorf("%w: SERVICERATE needs sr_min_period_ns <= sr_max_period_ns, got %d and %d", ErrArgValue, lo, hi)
		}
	}
	if t == XoY {
		x, y := cur[0], cur[1]
		if argNum == 0 {
			x = val
		} else {
			y = val
		}
		if x > y {
			return fmt.Errorf("%w: XOY needs x <= y, got x=%d y=%d", ErrArgValue, x, y)
		}
	}
	return nil
}
