package main

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
)

// A marked channel's records say whether the instance's thread waited since
// the instance's previous mark (marks.c): a sleep between two visits, or
// inside one, is noted on the mark after it; back-to-back visits, and work
// that spins (preempted or not: an involuntary switch is no wait), are not;
// a mark from another thread than the instance's last is (its count is
// another thread's). Both ways of seeing waits, rseq and getrusage alone.
var markRuns int

func TestMarksNoteTheirThreadsWaits(t *testing.T) {
	require.NoError(t, initLibrary())
	defer setWaitsMode(waitsWanted0())
	for _, want := range []int{waitsRSEQ, waitsGetrusage} {
		mode := setWaitsMode(want)
		if want == waitsRSEQ && mode != waitsRSEQ {
			require.Equal(t, waitsOff, mode, "without rseq, no notes unless getrusage is asked for")
			t.Logf("rseq: not usable here (mode %d); getrusage alone is tested", mode)
			continue
		}
		require.Equal(t, want, mode)
		t.Run(waitsName(), func(t *testing.T) {
			markRuns++ // each run its own instance (-count: the process keeps them)
			op := fmt.Sprintf("waitop%s%d", waitsName(), markRuns)
			in, inc := open(t, op+"#1 in", logfile.ZstdTSC, handlers.BufferIdentity)
			out, outc := open(t, op+"#1 out", logfile.ZstdTSC, handlers.BufferIdentity)
			other, otherc := open(t, "unmarked "+waitsName(), logfile.ZstdTSC, handlers.BufferIdentity)
			require.NotNil(t, inc.mark)
			require.Nil(t, otherc.mark, "a name that marks nothing notes nothing")
			cyc := uint64(20e-6 * freq.Hz) // 20 us of work
			type step struct {
				sleepBefore, sleepIn time.Duration
				spin                 uint64
				inWaited, outWaited  bool
			}
			steps := []step{
				{inWaited: true}, // the instance's first mark: no earlier count
				{},               // back to back
				{sleepBefore: time.Millisecond, inWaited: true},
				{},
				{sleepIn: time.Millisecond, outWaited: true},
				{spin: uint64(5e-3 * freq.Hz)}, // 5 ms of work: no wait, preempted or not
				{},
			}
			var cycles []uint64
			var before, sleep []time.Duration
			for _, s := range steps {
				c := cyc
				if s.spin > 0 {
					c = s.spin
				}
				cycles, before, sleep = append(cycles, c), append(before, s.sleepBefore), append(sleep, s.sleepIn)
			}
			runtime.LockOSThread()
			t0 := time.Now()
			require.Zero(t, visitsC(in, out, other, 0, cycles, before, sleep))
			wall := time.Since(t0).Seconds()
			// What the instance did: its visits, and its work: every in to
			// out (the sleep inside one too), no wait before an in.
			visits, busy, err := markStats(in)
			require.NoError(t, err)
			require.Equal(t, uint64(len(steps)), visits)
			var work, waits float64
			for i, s := range steps {
				work += float64(cycles[i])/freq.Hz + s.sleepIn.Seconds()
				waits += s.sleepBefore.Seconds()
			}
			require.GreaterOrEqual(t, busy, work)
			require.Less(t, busy, wall-waits, "the waits before an in are not work")
			_, _, err = markStats(other)
			require.ErrorContains(t, err, "notes no waits")
			// Another thread's mark of the same instance (this goroutine
			// keeps its thread meanwhile: the other one gets another).
			done := make(chan int32)
			go func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				done <- visitsC(in, out, 0, int64(len(steps)), cycles[:1], before[:1], sleep[:1])
			}()
			require.Zero(t, <-done)
			runtime.UnlockOSThread()
			steps = append(steps, step{inWaited: true})
			require.NoError(t, closeChannel(in, "test"))
			require.NoError(t, closeChannel(out, "test"))
			require.NoError(t, closeChannel(other, "test"))
			ins, lf := readRecords(t, inc.path)
			outs, _ := readRecords(t, outc.path)
			require.Equal(t, waitsName(), lf.Header.Waits)
			require.Len(t, ins, len(steps))
			require.Len(t, outs, len(steps))
			for i, s := range steps {
				require.Equal(t, int64(i), ins[i].TupleID)
				require.Equal(t, s.inWaited, ins[i].Waited, fmt.Sprintf("in %d", i))
				require.Equal(t, s.outWaited, outs[i].Waited, fmt.Sprintf("out %d", i))
				require.Less(t, ins[i].TSC, outs[i].TSC, "the bit is off the counter")
			}
			plain, pf := readRecords(t, otherc.path)
			require.Empty(t, pf.Header.Waits)
			for _, r := range plain {
				require.False(t, r.Waited)
			}
		})
	}
}

// Operators chained in one thread: b's gap before its in holds a's work on
// the next tuple (a marked in it), no work of b's; a's send holds b's call.
// b's busy is its own work, a's the thread's.
func TestMarksOfChainedOperators(t *testing.T) {
	require.NoError(t, initLibrary())
	if mode := setWaitsMode(waitsWanted0()); mode == waitsOff {
		t.Skip("no notes of waits here")
	}
	markRuns++
	a, b := fmt.Sprintf("chaina%d#0", markRuns), fmt.Sprintf("chainb%d#0", markRuns)
	ain, ainc := open(t, a+" in", logfile.ZstdTSC, handlers.BufferIdentity)
	aout, _ := open(t, a+" out", logfile.ZstdTSC, handlers.BufferIdentity)
	asent, _ := open(t, a+" sent", logfile.ZstdTSC, handlers.BufferIdentity)
	bin, binc := open(t, b+" in", logfile.ZstdTSC, handlers.BufferIdentity)
	bout, _ := open(t, b+" out", logfile.ZstdTSC, handlers.BufferIdentity)
	const n = 2000
	aWork, bWork := uint64(20e-6*freq.Hz), uint64(2e-6*freq.Hz)
	runtime.LockOSThread()
	require.Zero(t, chainC(ain, aout, asent, bin, bout, n, aWork, bWork))
	runtime.UnlockOSThread()
	av, abusy, err := markStats(ain)
	require.NoError(t, err)
	bv, bbusy, err := markStats(bin)
	require.NoError(t, err)
	t.Logf("a: %d visits, busy %.2f ms; b: %d visits, busy %.2f ms (own work %.2f ms)", av, abusy*1e3, bv, bbusy*1e3, n*float64(bWork)/freq.Hz*1e3)
	require.Equal(t, uint64(n), av)
	require.Equal(t, uint64(n), bv)
	require.GreaterOrEqual(t, bbusy, n*float64(bWork)/freq.Hz)
	require.GreaterOrEqual(t, abusy, n*float64(aWork+bWork)/freq.Hz, "a's send holds b's call")
	require.Less(t, bbusy, 0.3*abusy, "b's busy holds a's work")
	for _, h := range []int64{ain, aout, asent, bin, bout} {
		require.NoError(t, closeChannel(h, "test"))
	}
	// The records say the same to the reader: each of b's ins notes that
	// its gap was not b's work (a marked in it); a's ins note only a wait
	// of the thread (a preemption is none), so most do not.
	bins, _ := readRecords(t, binc.path)
	ains, _ := readRecords(t, ainc.path)
	require.Len(t, bins, n)
	require.Len(t, ains, n)
	noted := 0
	for i := range bins {
		require.True(t, bins[i].Waited, fmt.Sprintf("b's in %d", i))
		if ains[i].Waited {
			noted++
		}
	}
	require.Less(t, noted, n/10, "a's ins noted as not its work")
}
