package capacity

import (
	"math"

	"cloudprofiler/internal/logfile"
)

// Estimate is one converged Beard & Chamberlain estimate in a count
// channel's file ("service_rate" event).
type Estimate struct {
	Est      float64 // when it converged, reference cycles (relative to the model's origin)
	Rate     float64 // items per second
	PeriodNs int64   // the sampling period then
	Samples  uint64  // the estimates averaged into it
}

// Period is one counter record of a count channel: items taken in it.
type Period struct {
	Start, End float64 // reference cycles
	Count      uint64
}

// CountSeries is what a count channel's file holds.
type CountSeries struct {
	Estimates []Estimate
	Periods   []Period
}

// EventServiceRate is the event a CP_SERVICERATE channel writes at each
// convergence of its estimate.
const EventServiceRate = "service_rate"

// ReadCount reads a CP_SERVICERATE channel's file (opened: its events are
// indexed): its converged estimates and its counter records, translated
// into the reference counter by translate. The error is the counter read's:
// logfile.ErrDamaged after a read of every valid record of a damaged or
// cut file (what was read is returned all the same).
func ReadCount(lf *logfile.File, translate func(tsc uint64) float64) (*CountSeries, error) {
	s := &CountSeries{}
	for _, e := range lf.Summary.Events {
		if e.Event != EventServiceRate || e.Sync == nil || !(e.Rate > 0) || math.IsInf(e.Rate, 0) {
			continue
		}
		s.Estimates = append(s.Estimates, Estimate{Est: translate(e.Sync.TSC), Rate: e.Rate, PeriodNs: e.PeriodNs, Samples: e.Samples})
	}
	prev := math.NaN()
	if start := lf.Header.PeriodStart(); start != 0 {
		prev = translate(start)
	}
	err := lf.Counters(func(r logfile.CounterRecord) error {
		end := translate(r.TSC)
		start := prev
		if !(start <= end) {
			start = end - float64(lf.Header.CounterPeriod)*1e-9*lf.Header.TSCHz
		}
		s.Periods = append(s.Periods, Period{Start: start, End: end, Count: r.Count})
		prev = end
		return nil
	})
	return s, err
}
