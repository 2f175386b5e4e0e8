package analyze

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/logfile"
)

// bufferedRun writes a run on one node as Flink's default output buffering
// makes one: a source marks a tuple out every 100 us (10,000/s), and the
// operator downstream gets them in batches every 10 ms (the sender's buffer
// flushed), 50 us after the flush (its wake-up), and works through each
// batch back to back: 5 us to take a tuple, 20 us of own work (in to out).
// Its capacity is 1/25 us = 40,000/s; it carried 10,000/s, a load of 0.25.
// With notes, the records say what the operator's thread did: the in of a
// batch's first tuple came after a wait (bit 63 of its TSC, the header's
// waits).
func bufferedRun(t *testing.T, notes bool) (dir, logs string) {
	t.Helper()
	dir = t.TempDir()
	logs = filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	node := simNode{"a", 2.4e9, 1e9}
	const n, gap, flush = 20000, 100e-6, 10e-3
	var src, in, out []string
	dep := 0.0
	for i := 0; i < n; i++ {
		at := 1 + float64(i)*gap
		src = append(src, fmt.Sprintf("%d,%d", i, node.at(at)))
		// The batch it leaves the sender in, and when the operator starts on it.
		flushAt := 1 + (math.Floor((at-1)/flush)+1)*flush
		waited := dep < flushAt+50e-6
		start := math.Max(dep, flushAt+50e-6)
		tin := start + 5e-6
		dep = tin + 20e-6
		tsc := node.at(tin)
		if notes && waited {
			tsc |= logfile.WaitedBit
		}
		in = append(in, fmt.Sprintf("%d,%d", i, tsc))
		out = append(out, fmt.Sprintf("%d,%d", i, node.at(dep)))
	}
	hdr := func(ch int, name string) logfile.Header {
		h := logfile.Header{Node: "a", Host: "h", PID: 10, Channel: ch, Name: name, Handler: "BUFFER_IDENTITY", TSCHz: node.hz}
		if notes && strings.HasPrefix(name, "op") {
			h.Waits = "rseq"
		}
		return h
	}
	writeASCII(t, logs, hdr(1, "src out"), src)
	writeASCII(t, logs, hdr(2, "op in"), in)
	writeASCII(t, logs, hdr(3, "op out"), out)
	return dir, logs
}

// An operator fed in batches, as Flink's default buffer timeout feeds it:
// with its records' notes of its thread's waits its capacity is what it
// does while it works through a batch, 40,000/s, and its load 0.25; without
// them the wait before each batch (its tuples handed off long before) is
// taken for work: its capacity falls to the offered rate, the issue's
// "load 1.00, saturated" at a quarter of its capacity.
func TestCapacityNotesOfWaits(t *testing.T) {
	for _, notes := range []bool{true, false} {
		dir, logs := bufferedRun(t, notes)
		res, err := Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "out"), NoDurations: true})
		require.NoError(t, err)
		rows := res.Capacity.Rows
		op := capRow(t, rows, "operator", "op", "", -1, capacity.MethodInOut)
		in := capRow(t, rows, "instance", "op", "a/10/", -1, capacity.MethodInOut)
		t.Logf("notes %v: capacity %.0f/s, load %.2f, busy share %.3f, backlogged %d of %d; %s", notes, op.Capacity, op.Load, in.BusyShare, in.Backlogged, in.TuplesIn, in.Note)
		if notes {
			require.InEpsilon(t, 40000, op.Capacity, 0.01, "its work a tuple: 25 us")
			require.InDelta(t, 0.25, op.Load, 0.01)
			// Its thread worked 25 us a tuple, 10,000 tuples a second.
			require.InDelta(t, 0.25, in.BusyShare, 0.01)
			require.Equal(t, "op", res.Capacity.Bottleneck)
			require.Empty(t, res.Capacity.Contradictions)
		} else {
			require.Less(t, op.Capacity, 12000.0, "without notes the waits count as takes")
		}
	}
}

// A capacity below what the instance carried is no finding: the operator
// takes tuples in pairs 1.1 ms apart, the second of each pair 50 us after
// the first, each in 20 us; the first of a pair was handed off 10 us before
// the operator's previous departure but sat in the sender's buffer, and
// without notes its 1.03 ms gap counts as taking it (the second, handed off
// after that departure, is not taken backlogged). Its capacity comes out
// near 950/s while it took 1,818 tuples a second: contradicted, in its rows
// and the verdict, and not named the bottleneck.
func TestCapacityBelowWhatItCarriedIsContradicted(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	node := simNode{"a", 2.4e9, 1e9}
	var src, in, out []string
	const pairs, period = 4000, 1.1e-3
	for j := 0; j < pairs; j++ {
		t0 := 1 + float64(j)*period
		for k, at := range []float64{t0, t0 + 50e-6} {
			id := 2*j + k
			sent := at - 1.04e-3 // the first of a pair: before the previous departure (t0 - 1.1 ms + 70 us)
			if k == 1 {
				sent = at - 5e-6 // the second: just before it is taken, after the first's departure
			}
			src = append(src, fmt.Sprintf("%d,%d", id, node.at(sent)))
			in = append(in, fmt.Sprintf("%d,%d", id, node.at(at)))
			out = append(out, fmt.Sprintf("%d,%d", id, node.at(at+20e-6)))
		}
	}
	hdr := func(ch int, name string) logfile.Header {
		return logfile.Header{Node: "a", Host: "h", PID: 10, Channel: ch, Name: name, Handler: "BUFFER_IDENTITY", TSCHz: node.hz}
	}
	writeASCII(t, logs, hdr(1, "src out"), src)
	writeASCII(t, logs, hdr(2, "op in"), in)
	writeASCII(t, logs, hdr(3, "op out"), out)
	res, err := Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "out"), NoDurations: true})
	require.NoError(t, err)
	rows := res.Capacity.Rows
	inst := capRow(t, rows, "instance", "op", "a/10/", -1, capacity.MethodInOut)
	t.Logf("capacity %.0f/s, took %d tuples in %.3f s; note: %s", inst.Capacity, inst.TuplesIn, inst.EndS-inst.StartS, inst.Note)
	require.Less(t, inst.Capacity, 1000.0)
	require.Contains(t, inst.Note, "contradicted: it took")
	require.NotEmpty(t, res.Capacity.Contradictions)
	require.Contains(t, res.Capacity.BottleneckDoubt, "op has the lowest capacity, but the run contradicts it")
	summary, err := os.ReadFile(filepath.Join(dir, "out", "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(summary), "Bottleneck: not named: op has the lowest capacity")
	require.NotContains(t, string(summary), "Highest sustainable source rate")
	// Named nowhere else either: the row's bottleneck column, the text's
	// table, the report's capacity section.
	op := capRow(t, rows, "operator", "op", "", -1, capacity.MethodInOut)
	require.False(t, op.Bottleneck, "the operator row's bottleneck column")
	require.Empty(t, res.Capacity.Bottleneck)
	csv, err := os.ReadFile(filepath.Join(dir, "out", "capacity.csv"))
	require.NoError(t, err)
	require.NotContains(t, string(csv), ",true,", "a row of capacity.csv marked the bottleneck")
	page, err := os.ReadFile(filepath.Join(dir, "out", "report.html"))
	require.NoError(t, err)
	require.True(t, strings.Contains(string(page), "<p>Bottleneck: not named: op has the lowest capacity"), "the report's capacity section")
	require.False(t, strings.Contains(string(page), "<p>Bottleneck: <b>"), "the report's capacity section names it")
}

// Operators chained in one thread, as Flink chains a filter behind a keyed
// function: the thread takes a tuple (5 us, no wait: backlogged), "work"
// works on it 40 us, marks out, calls the chained "keep" (in 1 us later,
// 2 us of its own, out) and returns (sent, 2 us after). keep's tuple comes
// from a call: the gap from its previous departure to its in holds work's
// 46 us on the next tuple, no work of keep's, and its hand-off (work's
// departure, sent) comes after its in. Its busy share is its own work's
// share of the run, 2 us of every 50 (a Flink run's chained filter had
// 0.97, its upstream's, for a load under 0.005); work's is the thread's, keep's call in its send, as in its
// capacity.
func TestChainedOperatorsBusyShare(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	node := simNode{"a", 2.4e9, 1e9}
	const n = 20000
	var src, win, wout, wsent, kin, kout []string
	at := 1.0
	for i := 0; i < n; i++ {
		src = append(src, fmt.Sprintf("%d,%d", i, node.at(at-1e-6))) // handed off just before work's previous departure
		at += 5e-6
		win = append(win, fmt.Sprintf("%d,%d", i, node.at(at)))
		at += 40e-6
		wout = append(wout, fmt.Sprintf("%d,%d", i, node.at(at)))
		at += 1e-6
		kin = append(kin, fmt.Sprintf("%d,%d", i, node.at(at)))
		at += 2e-6
		kout = append(kout, fmt.Sprintf("%d,%d", i, node.at(at)))
		at += 2e-6
		wsent = append(wsent, fmt.Sprintf("%d,%d", i, node.at(at)))
	}
	hdr := func(ch int, name string) logfile.Header {
		h := logfile.Header{Node: "a", Host: "h", PID: 10, Channel: ch, Name: name, Handler: "BUFFER_IDENTITY", TSCHz: node.hz}
		if name != "src out" {
			h.Waits = "rseq"
		}
		return h
	}
	writeASCII(t, logs, hdr(1, "src out"), src)
	writeASCII(t, logs, hdr(2, "work in"), win)
	writeASCII(t, logs, hdr(3, "work out"), wout)
	writeASCII(t, logs, hdr(4, "work sent"), wsent)
	writeASCII(t, logs, hdr(5, "keep in"), kin)
	writeASCII(t, logs, hdr(6, "keep out"), kout)
	res, err := Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "out"), NoDurations: true})
	require.NoError(t, err)
	rows := res.Capacity.Rows
	work := capRow(t, rows, "instance", "work", "a/10/", -1, capacity.MethodInOut)
	keep := capRow(t, rows, "instance", "keep", "a/10/", -1, capacity.MethodInOut)
	t.Logf("work: busy %.3f, capacity %.0f/s, load %.2f; keep: busy %.3f, capacity %.0f/s, load %.3f; %s",
		work.BusyShare, work.Capacity, work.Load, keep.BusyShare, keep.Capacity, keep.Load, keep.Note)
	require.InDelta(t, 1.0, work.BusyShare, 0.02, "work's thread never stopped: take, own work, send (keep's call in it)")
	require.InEpsilon(t, 20000, work.Capacity, 0.01, "work's cost: 5 + 40 + 5 us")
	require.InDelta(t, 0.04, keep.BusyShare, 0.005, "keep's own 2 us of every 50")
	require.InDelta(t, keep.Load, keep.BusyShare, 0.005, "keep's load is its busy share")
	require.Empty(t, res.Capacity.Contradictions)
}
