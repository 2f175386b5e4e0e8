// Package servicerate estimates the non-blocking service rate of a stream
// processing operator at run time, after Beard & Chamberlain, "Run Time
// Approximation of Non-blocking Service Rates for Streaming Systems".
//
// (Skeleton: the behaviour is being filled in.)
package servicerate

import (
	"errors"
	"time"
)

// Params are the estimator's parameters (spec section 3, CP_ARG_SR_*).
type Params struct {
	MinPeriod, MaxPeriod time.Duration // first sampling period T; the largest T widening reaches
	Window, WidenAfter   int           // |S|; k, stable non-blocked periods before T doubles
	StablePPM            int64         // ε: realized periods within ε of their mean (ppm)
	TolerancePPM         int64         // convergence tolerance on the filtered relative σ(q̄) (ppm)
}

// DefaultParams returns 1 ms, 16 ms, 64, 16, 100000, 1000.
func DefaultParams() Params {
	return Params{MinPeriod: time.Millisecond, MaxPeriod: 16 * time.Millisecond,
		Window: 64, WidenAfter: 16, StablePPM: 100000, TolerancePPM: 1000}
}

// Validate checks the ranges of the spec.
func (p Params) Validate() error { return errors.New("servicerate: TODO") }

// Estimator is one channel's estimator. Not safe for concurrent use.
type Estimator struct {
	p Params
}

// New returns an estimator with parameters p (which should be valid).
func New(p Params) *Estimator { return &Estimator{p: p} }

// Sample takes one sampling period: items counted in it, its realized length
// in seconds, and whether a blocked mark was set during it. It returns the
// period to use next and, when the estimate converged at this sample, the
// converged rate.
func (e *Estimator) Sample(items uint64, seconds float64, blocked bool) (next time.Duration, converged bool, rate float64) {
	return e.p.MinPeriod, false, 0
}

// State is a snapshot of the estimator (cp_service_rate_t).
type State struct {
	Rate, Running                  float64
	Period                         time.Duration
	Samples, Periods, Convergences int64
	Converged                      bool
}

// State returns the current estimate and counters.
func (e *Estimator) State() State { return State{Period: e.p.MinPeriod} }
