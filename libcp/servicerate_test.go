package main

import (
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"cloudprofiler/confserver"
	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/servicerate"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The handler's argument defaults are the estimator's.
func TestServiceRateDefaultsAreTheEstimators(t *testing.T) {
	require.Equal(t, servicerate.DefaultParams(), srParams(handlers.ServiceRate.Defaults()))
	require.NoError(t, srParams(handlers.ServiceRate.Defaults()).Validate())
}

// openSR opens a SERVICERATE channel that is closed when the test ends,
// also when it fails (an open one would keep the sampler busy).
func openSR(t *testing.T, name string, f logfile.Format) (int64, *channel) {
	ch, c := open(t, name, f, handlers.ServiceRate)
	t.Cleanup(func() { closeChannel(ch, "cleanup") })
	return ch, c
}

// operator runs cp_test_operator on a thread of its own until stop is
// closed: items of cycles TSC cycles each, marking blocked with mark.
// wait returns the items counted and the share of the wall-clock time the
// thread had a CPU (the rest it was preempted: a busy machine).
func operator(t *testing.T, ch int64, cycles uint64, mark int32, stop chan struct{}) (wait func() (int64, float64)) {
	var wg sync.WaitGroup
	var n, bad int64
	var cpu, wall time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		slice := uint64(freq.Hz / 20) // 50 ms at a time
		var ts unix.Timespec
		for {
			select {
			case <-stop:
				return
			default:
			}
			unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
			c0, w0 := ts.Nano(), time.Now()
			k := srOperator(ch, cycles, slice, mark)
			unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
			cpu += time.Duration(ts.Nano() - c0)
			wall += time.Since(w0)
			if k < 0 {
				bad = k
				return
			}
			n += k
		}
	}()
	return func() (int64, float64) {
		wg.Wait()
		require.Zero(t, bad, "LogTS or CP_MarkBlocked failed")
		return n, cpu.Seconds() / max(wall.Seconds(), 1e-9)
	}
}

// A saturated operator that spins a known number of TSC cycles per item:
// the estimate converges to within 20% of 1/cost, each convergence is a
// service_rate event in the file (the tool shows it), and the counter
// records count every item.
func TestServiceRateConvergesOnASteadyLoad(t *testing.T) {
	ch, c := openSR(t, "steady#0 count", logfile.BinaryTSC)
	require.NoError(t, parameterize(ch, 0, 100_000_000)) // counter records every 100 ms
	// 1% (the default is 0.1%): with the other vCPU busy this thread shares
	// its CPU with the sampler and the test, and the default may take minutes.
	require.NoError(t, parameterize(ch, handlers.ArgSRTolerancePPM, 10_000))
	const cycles = 20_000 // ~7-10 us an item
	want := freq.Hz / cycles
	a, rc := serviceRateC(ch, false)
	require.Zero(t, rc)
	require.Equal(t, 0.001, a.PeriodS, "T = the min period")
	require.Zero(t, a.Convergences)
	require.Zero(t, a.Converged)

	stop := make(chan struct{})
	start := time.Now()
	wait := operator(t, ch, cycles, 0, stop)
	deadline := time.Now().Add(30 * time.Second) // generous: the other vCPU may be busy
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if a, rc = serviceRateC(ch, false); rc != 0 || a.Convergences >= 2 {
			break
		}
	}
	close(stop)
	items, share := wait()
	done := float64(items) / time.Since(start).Seconds()
	require.Zero(t, rc)
	t.Logf("after %d items: %+v; 1/cost %.0f items/s, done %.0f items/s; the operator had a CPU %.0f%% of the time", items, a, want, done, 100*share)
	// Mean: what it did a second in the window's periods (never blocked
	// here), against what it did over the whole run: the same load, so
	// within a factor of two even when the machine's other work comes and
	// goes between the window and the rest of the run.
	require.Greater(t, a.Mean, done/2, "the window's mean rate against the items done a second")
	require.Less(t, a.Mean, 2*done, "the window's mean rate against the items done a second")
	require.GreaterOrEqual(t, a.Convergences, int64(1), "converged within 30 s")
	require.EqualValues(t, 1, a.Converged)
	require.Greater(t, a.Samples, int64(64), "a window of unblocked periods at least")
	require.GreaterOrEqual(t, a.Periods, a.Samples)
	require.GreaterOrEqual(t, a.PeriodS, 0.001)
	require.LessOrEqual(t, a.PeriodS, 0.016)
	require.Zero(t, a.Reserved)
	// The load is steady only while the operator has a CPU: preempted (other
	// processes want both vCPUs), its periods' rates spread and the 95th
	// percentile of the paper's estimator lands anywhere around 1/cost. Then
	// only that it is a rate of this load is checked, and the log says why.
	steady := share >= 0.9
	if steady {
		require.InEpsilon(t, want, a.Rate, 0.2, "converged estimate within 20%% of 1/cost")
	} else {
		t.Logf("the machine is busy (the operator had a CPU %.0f%% of the time): 1/cost not checked", 100*share)
		require.Greater(t, a.Rate, 0.0)
		require.Less(t, a.Rate, 3*want)
	}
	require.NoError(t, closeChannel(ch, "close"))

	recs, lf := readCounters(t, c.path)
	sum := uint64(0)
	for _, r := range recs {
		sum += r.Count
	}
	require.Equal(t, uint64(items), sum, "counter records add up to the items")
	require.Equal(t, uint64(items), lf.Summary.Trailer.Total)
	require.True(t, lf.Header.Counter())
	require.Equal(t, "SERVICERATE", lf.Header.Handler)
	require.Equal(t, int64(1_000_000_000), lf.Header.CounterPeriod, "the period at open")
	require.Equal(t, int64(100_000), lf.Header.Args["sr_min_period_ns"])
	var evs []logfile.Event
	for _, ev := range lf.Summary.Events {
		if ev.Event == "service_rate" {
			evs = append(evs, ev)
		}
	}
	// One event a convergence, in order: the a.Convergences-th is the one
	// CP_ServiceRate gave (more may have come before the close, when the
	// operator had stopped: their rates are not this load's).
	require.GreaterOrEqual(t, len(evs), int(a.Convergences))
	require.Equal(t, a.Rate, evs[a.Convergences-1].Rate, "the converged estimate CP_ServiceRate gave is in the file")
	for i, ev := range evs {
		// The converged estimate CP_ServiceRate gave is checked against
		// 1/cost above; an earlier convergence's window may have come while
		// the operator was preempted even in a run that had a CPU 90% of
		// the time (share is over the whole run; CI saw 0.21 off once with
		// 97%), so it need only be a rate of this load.
		if i < int(a.Convergences) {
			require.Greater(t, ev.Rate, 0.0, "event %d", i)
			require.Less(t, ev.Rate, 3*want, "event %d", i)
		}
		require.GreaterOrEqual(t, ev.PeriodNs, int64(1_000_000))
		require.LessOrEqual(t, ev.PeriodNs, int64(16_000_000))
		require.GreaterOrEqual(t, ev.Samples, uint64(1))
		require.NotNil(t, ev.Sync)
		require.Greater(t, ev.Sync.TSC, lf.Header.OpenSync.TSC)
		require.Less(t, ev.Sync.TSC, lf.Summary.Trailer.CloseSync.TSC)
		if i > 0 {
			require.Greater(t, ev.Sync.TSC, evs[i-1].Sync.TSC)
		}
	}

	confSetup(t) // builds the tool
	out, err := exec.Command(conf.bin, "dump", c.path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "handler:    SERVICERATE")
	require.Equal(t, len(evs), strings.Count(string(out), "event:      service_rate"), "%s", out)
}

// Marks reach the estimator: an operator that marks every item blocked
// gives it no sample, only periods; one that marks nothing gives samples.
func TestServiceRateBlockedPeriodsAreLeftOut(t *testing.T) {
	ch, c := openSR(t, "blocked count", logfile.BinaryTSC)
	stop := make(chan struct{})
	wait := operator(t, ch, 20_000, int32(1|2), stop)
	for c.count() == 0 { // the periods before it ran have no mark
		time.Sleep(time.Millisecond)
	}
	a0, rc := serviceRateC(ch, false)
	require.Zero(t, rc)
	time.Sleep(300 * time.Millisecond)
	a, rc := serviceRateC(ch, false)
	close(stop)
	items, _ := wait()
	require.Greater(t, items, int64(0))
	require.Zero(t, rc)
	require.Equal(t, a0.Samples, a.Samples, "every period had a mark")
	require.Greater(t, a.Periods-a0.Periods, int64(10), "300 ms of 1 ms periods, the sampler late at times")
	require.Zero(t, a.Convergences)
	require.LessOrEqual(t, a.PeriodS, 0.001, "blocked periods never widen T (busy ones may narrow it)")
	require.NoError(t, closeChannel(ch, "close"))
}

// Every code of CP_MarkBlocked and CP_ServiceRate.
func TestServiceRateCodes(t *testing.T) {
	for _, h := range []int64{0, -1, 1, 1 << 20, 1<<20 | 16385, 1<<40 | 1, -(1 << 62), 1<<63 - 1} {
		require.Equal(t, int32(-1), markBlockedC(h, 1), "handle %d", h)
		_, rc := serviceRateC(h, false)
		require.Equal(t, int32(-1), rc, "handle %d", h)
	}
	ch, _ := openSR(t, "codes count", logfile.Binary)
	require.Equal(t, int32(-1), markBlockedC(ch+1<<20, 1), "another generation")
	for _, w := range []int32{1, 2, 3, 3, 1} {
		require.Zero(t, markBlockedC(ch, w), "which %d", w)
	}
	for _, w := range []int32{0, 4, 7, -1, -2147483648} {
		require.Equal(t, int32(-10), markBlockedC(ch, w), "which %d", w)
	}
	_, rc := serviceRateC(ch, true)
	require.Equal(t, int32(-10), rc, "out NULL")
	require.Zero(t, logTS(ch, 5))
	got, rc := logTSMany(ch, seqIDs(0, 1000), 1000)
	require.Equal(t, int64(1000), got)
	require.Zero(t, rc)

	fpc, _ := open(t, "codes fpc", logfile.Binary, handlers.FastPeriodicCounter)
	require.Equal(t, int32(-5), markBlockedC(fpc, 1), "not SERVICERATE")
	_, rc = serviceRateC(fpc, false)
	require.Equal(t, int32(-5), rc)
	require.Equal(t, int32(-5), markBlockedC(fpc, 0), "the handler is checked before which")
	require.NoError(t, closeChannel(fpc, "close"))

	require.NoError(t, closeChannel(ch, "close"))
	require.Equal(t, int32(-2), markBlockedC(ch, 1))
	require.Equal(t, int32(-2), markBlockedC(ch, 0), "the handle is checked first")
	_, rc = serviceRateC(ch, false)
	require.Equal(t, int32(-2), rc)
	_, rc = serviceRateC(ch, true)
	require.Equal(t, int32(-2), rc)
	require.Equal(t, int32(-2), logTS(ch, 1))
}

// The estimator's arguments: ranges, min <= max, each change an event in
// the file; the counter period as for the counters; no others.
func TestServiceRateParameters(t *testing.T) {
	ch, c := openSR(t, "params count", logfile.ASCII)
	for _, bad := range []struct {
		arg int32
		val int64
	}{
		{0, 999_999}, {200, 49_999}, {200, 1_000_000_001}, {201, 49_999}, {201, 1_000_000_001},
		{202, 7}, {202, 4097}, {203, 0}, {203, 1_000_001}, {204, 0}, {204, 1_000_001}, {205, 0}, {205, 1_000_001},
		{200, 17_000_000}, // above the max period (16 ms)
	} {
		require.Equal(t, int32(-10), codeOf(parameterize(ch, bad.arg, bad.val)), "arg %d = %d", bad.arg, bad.val)
	}
	for _, arg := range []int32{1, 2, 99, 100, 199, 206} {
		require.Equal(t, int32(-9), codeOf(parameterize(ch, arg, 1)), "arg %d", arg)
	}
	require.NoError(t, parameterize(ch, 201, 1_000_000_000))
	require.NoError(t, parameterize(ch, 200, 2_000_000))
	require.NoError(t, parameterize(ch, 202, 8))
	require.NoError(t, parameterize(ch, 203, 1_000_000))
	require.NoError(t, parameterize(ch, 204, 1))
	require.NoError(t, parameterize(ch, 205, 1_000_000))
	require.NoError(t, parameterize(ch, 0, 1_000_000))
	require.Equal(t, int32(-10), codeOf(parameterize(ch, 201, 1_000_000)), "below the min period now")
	a, rc := serviceRateC(ch, false)
	require.Zero(t, rc)
	require.InDelta(t, 0.002, a.PeriodS, 1e-12, "the new min period")
	require.NoError(t, closeChannel(ch, "close"))

	_, lf := readCounters(t, c.path)
	var last map[string]int64
	n := 0
	for _, ev := range lf.Summary.Events {
		if ev.Event == "parameterize" {
			last = ev.Args
			n++
		}
	}
	require.Equal(t, 7, n, "each change recorded")
	require.Equal(t, map[string]int64{"period_ns": 1_000_000, "sr_min_period_ns": 2_000_000,
		"sr_max_period_ns": 1_000_000_000, "sr_window": 8, "sr_widen_after": 1_000_000, "sr_stable_ppm": 1,
		"sr_tolerance_ppm": 1_000_000}, last)
}

// The sampler sleeps between periods: a SERVICERATE channel wakes it about
// once a period (never spinning), and once it is closed the sampler is back
// to the counters' pace.
func TestServiceRateSamplerSleeps(t *testing.T) {
	ch, _ := openSR(t, "sleeps count", logfile.BinaryTSC)
	p0 := sampler.passes.Load()
	time.Sleep(300 * time.Millisecond)
	p1 := sampler.passes.Load()
	require.NoError(t, closeChannel(ch, "close"))
	t.Logf("%d passes in 300 ms with a SERVICERATE channel", p1-p0)
	require.GreaterOrEqual(t, p1-p0, uint64(20), "sampled every T (1 ms, the sampler late at times)")
	require.LessOrEqual(t, p1-p0, uint64(600), "at most about one pass a period")
	time.Sleep(20 * time.Millisecond)
	p2 := sampler.passes.Load()
	time.Sleep(300 * time.Millisecond)
	require.LessOrEqual(t, sampler.passes.Load()-p2, uint64(3), "no SERVICERATE channel: nothing wakes it")
}

// NET_CONF cannot give a channel SERVICERATE: the server refuses such a
// rule, and the library an answer naming it, as for IDENTITY.
func TestServiceRateNotThroughNetConf(t *testing.T) {
	for _, h := range []string{"SERVICERATE", "IDENTITY"} {
		_, err := check(confserver.Decision{Handler: h})
		require.ErrorContains(t, err, "cannot be given to a NET_CONF channel", h)
		r := confserver.Rule{ID: "sr", Name: "*", Handler: h}
		require.ErrorContains(t, r.Validate(), "cannot be given to a NET_CONF channel", h)
	}
}
