package main

/*
#include "engine.h"
*/
import "C"

import (
	"sync"
	"time"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/servicerate"
	"cloudprofiler/tsc"
)

// SERVICERATE channels: LogTS counts items into the slot's fpc_count (C, a
// plain increment), CP_MarkBlocked sets bits of its sr_flags (C). The
// sampler goroutine samples each channel every T, the estimator's period:
// the count's delta since the last sample (never reset, so no increment is
// lost), the marks (taken), and the realized period on the TSC; it feeds
// the estimator and writes each converged estimate into the channel's file
// as a "service_rate" event. Counter records are written as for
// FASTPERIODICCOUNTER, by the same sampler.

// srState is one SERVICERATE channel's estimator and its sampling.
type srState struct {
	// the sampler's (sampler.mu)
	next      int64         // CLOCK_MONOTONIC_RAW ns of the next sample
	period    time.Duration // T of the period in progress
	lastCount uint64        // the count at the last sample
	lastTSC   uint64        // the TSC at the last sample

	// the estimator (mu): the sampler feeds it, CP_ServiceRate reads it;
	// params changes with sampler.mu held too
	mu     sync.Mutex
	params servicerate.Params
	est    *servicerate.Estimator
	base   servicerate.State // counts of estimators a parameter change replaced
}

// srParams reads the estimator's parameters from a SERVICERATE channel's
// argument values (in the order of handlers.ServiceRate.Args()).
func srParams(args []int64) servicerate.Params {
	at := func(n int32) int64 { return args[handlers.ServiceRate.Index(n)] }
	return servicerate.Params{
		MinPeriod:    time.Duration(at(handlers.ArgSRMinPeriodNs)),
		MaxPeriod:    time.Duration(at(handlers.ArgSRMaxPeriodNs)),
		Window:       int(at(handlers.ArgSRWindow)),
		WidenAfter:   int(at(handlers.ArgSRWidenAfter)),
		StablePPM:    at(handlers.ArgSRStablePPM),
		TolerancePPM: at(handlers.ArgSRTolerancePPM),
	}
}

func newSRState(args []int64) *srState {
	p := srParams(args)
	return &srState{params: p, est: servicerate.New(p)}
}

// restart begins a new sampling period now (sampler.mu held): the count
// and the TSC now are where it starts, marks set before it are dropped.
func (sr *srState) restart(c *channel, now int64) {
	var v [3]C.uint64_t
	C.cp_sr_sample(c.slot, &v[0])
	sr.lastCount, sr.lastTSC = uint64(v[0]), uint64(v[2])
	sr.period = sr.params.Start()
	sr.next = now + int64(sr.period)
}

// srSample ends the channel's sampling period (sampler.mu held): one sample
// into the estimator, the next period scheduled, and a converged estimate
// written into the file.
func (c *channel) srSample(now int64) {
	sr := c.sr
	var v [3]C.uint64_t
	C.cp_sr_sample(c.slot, &v[0])
	count, marks, t := uint64(v[0]), uint64(v[1]), uint64(v[2])
	items := count - sr.lastCount
	seconds := float64(t-sr.lastTSC) / freq.Hz
	sr.lastCount, sr.lastTSC = count, t
	ended := sr.period

	sr.mu.Lock()
	next, converged, rate := sr.est.Sample(items, seconds, marks != 0)
	var samples int64
	if converged {
		samples = sr.est.Averaged() // the q's averaged into rate
	}
	if next <= 0 { // never from a valid estimator; keep sampling anyway
		next = sr.params.Start()
	}
	sr.period = next
	sr.mu.Unlock()
	sr.next = now + int64(next)

	if converged {
		sp := readSync()
		ev := logfile.Event{Event: "service_rate", Sync: &sp, Rate: rate, PeriodNs: int64(ended), Samples: uint64(samples)}
		if err := c.writeMeta(logfile.KindEvent, ev); err != nil {
			c.setWriteErr(err)
		}
	}
}

// state is what CP_ServiceRate returns: the estimator's state, its counts
// over the channel's life (across parameter changes).
func (sr *srState) state() servicerate.State {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	st := sr.est.State()
	st.Samples += sr.base.Samples
	st.Periods += sr.base.Periods
	st.Convergences += sr.base.Convergences
	return st
}

// setSRParam sets an estimator parameter (c.mu held, the value checked
// against its range): the parameters must hold together, then the
// estimator starts again with them on a new period (its counts carry on).
func (s *counterSampler) setSRParam(c *channel, argNum int32, val int64) error {
	args := append([]int64(nil), c.args...)
	args[handlers.ServiceRate.Index(argNum)] = val
	p := srParams(args)
	if err := p.Validate(); err != nil {
		return fail(C.CP_ERR_BAD_ARG_VALUE, "SERVICERATE: %v", err)
	}
	s.mu.Lock()
	sr := c.sr
	sr.mu.Lock()
	old := sr.est.State()
	sr.base.Samples += old.Samples
	sr.base.Periods += old.Periods
	sr.base.Convergences += old.Convergences
	sr.params, sr.est = p, servicerate.New(p)
	sr.mu.Unlock()
	if s.chans[c] {
		sr.restart(c, tsc.MonoRaw())
	}
	s.mu.Unlock()
	s.poke()
	return nil
}

// serviceRate is CP_ServiceRate's answer for handle h.
func serviceRate(h int64) (servicerate.State, error) {
	c, err := lookup(h)
	if err != nil {
		return servicerate.State{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return servicerate.State{}, fail(C.CP_ERR_CLOSED, "channel %d is closed", h)
	}
	if c.cur != handlers.ServiceRate {
		return servicerate.State{}, fail(C.CP_ERR_BAD_HANDLER, "channel %d is %s, not SERVICERATE", h, c.cur)
	}
	return c.sr.state(), nil
}
