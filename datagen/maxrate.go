package datagen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// MaxRateConfig configures the search for the highest rate the receiver
// (the system under test) sustains without losing a tuple (Fig. 9a).
type MaxRateConfig struct {
	Send SendConfig // To, Duration, Threads, Payloads, ...; Rate is set per step
	// Start is the first rate tried (tuples/s); Max the highest tried
	// (default 1e9); Min the lowest (default 1).
	Start, Max, Min float64
	// Resolution: bisection stops when the bracket is at most this many
	// tuples/s wide; or, when 0, RelResolution of the rate found so far
	// (default 0.01: 1%).
	Resolution, RelResolution float64
	// Pause between steps, so the system under test drains (default 1 s).
	Pause time.Duration
	// OnStep is called after each step (to print the table as it grows).
	OnStep func(Step)
}

// Step is one run of the search.
type Step struct {
	N        int
	Phase    string // "bracket" or "bisect"
	Rate     float64
	Achieved float64
	Sent     uint64
	Received uint64
	Lost     uint64
	OK       bool
	Why      string // why it failed: lost tuples, or the rate was not reached
}

// MaxRateResult is the answer: the highest rate that lost nothing (0 if
// none did) and the lowest that failed above it, at most Resolution apart.
type MaxRateResult struct {
	Max       float64
	FirstFail float64 // 0 if the search never failed (Max is the configured ceiling)
	Steps     []Step
}

// MaxRate brackets (doubling up from Start while runs succeed, halving down
// while they fail), then bisects to the resolution: about log2(range /
// resolution) runs instead of the paper's linear 1K steps.
func MaxRate(ctx context.Context, cfg MaxRateConfig) (*MaxRateResult, error) {
	if !(cfg.Start > 0) {
		return nil, fmt.Errorf("gen maxrate: --start must be > 0 tuples/s, not %g", cfg.Start)
	}
	if cfg.Max <= 0 {
		cfg.Max = 1e9
	}
	if cfg.Min <= 0 {
		cfg.Min = 1
	}
	if math.IsNaN(cfg.Max) || math.IsNaN(cfg.Min) || math.IsInf(cfg.Max, 0) {
		return nil, errors.New("gen maxrate: --min and --max must be finite rates")
	}
	if cfg.Start > cfg.Max || cfg.Start < cfg.Min {
		return nil, fmt.Errorf("gen maxrate: --start %g outside [--min %g, --max %g]", cfg.Start, cfg.Min, cfg.Max)
	}
	if cfg.Pause <= 0 {
		cfg.Pause = time.Second
	}
	s := cfg.Send
	s.Rate = cfg.Start
	if err := s.Check(); err != nil {
		return nil, err
	}
	res := &MaxRateResult{}
	sawReport := false // the receiver has answered some run: a missing REPORT is then a late one
	run := func(phase string, rate float64) (bool, error) {
		if len(res.Steps) > 0 {
			select {
			case <-time.After(cfg.Pause):
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		sc := cfg.Send
		sc.Rate = rate
		sc.RunID = 0
		out, err := Send(ctx, sc)
		if err != nil {
			return false, err
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		st := Step{N: len(res.Steps) + 1, Phase: phase, Rate: rate, Achieved: out.Achieved, Sent: out.Tuples,
			Received: out.Received, Lost: out.Lost}
		threadErr := ""
		for _, t := range out.Threads {
			if t.Err != nil && threadErr == "" {
				threadErr = t.Err.Error()
			}
		}
		if out.Reports > 0 {
			sawReport = true
		}
		switch {
		case out.Reports == 0 && threadErr == "" && !sawReport:
			return false, errors.New("gen maxrate: the receiver did not answer END with a REPORT: the search needs a receiver that says what it got (gen recv, or one that speaks FRAMING.md's REPORT), or a longer --report-timeout")
		case threadErr != "":
			st.Why = threadErr
		case !out.ReceiverSaw:
			st.Why = fmt.Sprintf("no REPORT from %d of %d threads within the report timeout (the receiver is behind)",
				len(out.Threads)-out.Reports, len(out.Threads))
		case out.Lost > 0 || out.Received < out.Tuples:
			st.Why = fmt.Sprintf("lost %d (dropped %d)", out.Lost, out.Dropped)
		case !out.Reached:
			st.Why = fmt.Sprintf("sent at %.1f%% of the rate (max lag %s): backpressure or the sender's limit",
				100*out.Achieved/rate, out.MaxLag.Round(time.Microsecond))
		default:
			st.OK = true
		}
		res.Steps = append(res.Steps, st)
		if cfg.OnStep != nil {
			cfg.OnStep(st)
		}
		return st.OK, nil
	}

	lo, hi := 0.0, 0.0 // lo: highest success; hi: lowest failure (0: none yet)
	rate := cfg.Start
	for {
		ok, err := run("bracket", rate)
		if err != nil {
			return res, err
		}
		if ok {
			lo = rate
			if hi > 0 || rate >= cfg.Max {
				break
			}
			rate = math.Min(rate*2, cfg.Max)
		} else {
			hi = rate
			if lo > 0 {
				break
			}
			if rate <= cfg.Min {
				res.FirstFail = hi
				return res, nil // nothing succeeded, not even the minimum
			}
			rate = math.Max(rate/2, cfg.Min)
		}
	}
	for hi > 0 {
		width := cfg.Resolution
		if width <= 0 {
			rel := cfg.RelResolution
			if rel <= 0 {
				rel = 0.01
			}
			width = rel * lo
		}
		if hi-lo <= width {
			break
		}
		mid := math.Round((lo + hi) / 2)
		if mid <= lo || mid >= hi {
			break
		}
		ok, err := run("bisect", mid)
		if err != nil {
			return res, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	res.Max, res.FirstFail = lo, hi
	return res, nil
}
