package analyze

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/logfile"
)

// inOutLines are the ASCII records of n tuples on an operator's in and out
// channels: tuple i's id and in time (seconds) from tuple(i), its out 2 us
// later, on a counter of hz.
func inOutLines(n int, hz float64, tuple func(i int) (id int, at float64)) (in, out []string) {
	for i := 0; i < n; i++ {
		id, at := tuple(i)
		in = append(in, fmt.Sprintf("%d,%d", id, uint64(at*hz)))
		out = append(out, fmt.Sprintf("%d,%d", id, uint64((at+2e-6)*hz)))
	}
	return in, out
}

// A channel's TSC that goes back a second is refused, with the file and the
// record; a record that trails by a few milliseconds (a writer preempted
// between reading the TSC and taking its place) is not.
func TestTSCStepBack(t *testing.T) {
	const hz = 1e9
	run := func(t *testing.T, back float64) error {
		dir := t.TempDir()
		logs := filepath.Join(dir, "logs")
		require.NoError(t, os.MkdirAll(logs, 0o755))
		in, out := inOutLines(100, hz, func(i int) (int, float64) {
			at := 1 + float64(i)*1e-3
			if i >= 60 {
				at -= back // from record 60 on, the counter reads `back` earlier
			}
			if back < 0.05 && i > 60 {
				at += back // a preempted writer: one record late
			}
			return i, at
		})
		h := logfile.Header{Node: "n", Host: "h", PID: 1, Handler: "IDENTITY", TSCHz: hz}
		h.Channel, h.Name = 1, "op in"
		writeASCII(t, logs, h, in)
		h.Channel, h.Name = 2, "op out"
		writeASCII(t, logs, h, out)
		o := filepath.Join(dir, "out")
		_, err := Run(Config{Logs: []string{logs}, Out: o, NoReport: true})
		if err != nil {
			ents, _ := os.ReadDir(o)
			require.Empty(t, ents, "a refused analysis writes nothing")
		}
		return err
	}
	require.NoError(t, run(t, 0.005))
	err := run(t, 1.0)
	require.True(t, errors.Is(err, ErrContradiction), "%v", err)
	require.Contains(t, err.Error(), "op_in.cplog.txt: the TSC goes back 0.9")
	require.Contains(t, err.Error(), "at record 60")
	require.Contains(t, err.Error(), "op_out.cplog.txt: the TSC goes back")
}

// Files without a tsc_domain (older ones) are checked by their open sync:
// the time between two opens by the wall clock and by the TSCs agree for
// one counter, and 770 s apart is another. With one tsc_domain they are
// one counter whatever the wall clock did.
func TestOpenTimesWithoutDomain(t *testing.T) {
	const hz = 2e9
	const wall0 = int64(1_790_000_000) * 1e9
	run := func(t *testing.T, domain string, tscLater float64) error {
		dir := t.TempDir()
		logs := filepath.Join(dir, "logs")
		require.NoError(t, os.MkdirAll(logs, 0o755))
		for k, s := range []logfile.Sync{
			{TSC: uint64(10 * hz), RealtimeNs: wall0},
			{TSC: uint64((10 + tscLater) * hz), RealtimeNs: wall0 + 5e9}, // opened 5 s later
		} {
			var recs []string
			for i := 0; i < 50; i++ {
				recs = append(recs, fmt.Sprintf("%d,%d", i, uint64((20+float64(i)*1e-3+float64(k)*1e-5)*hz)))
			}
			writeASCII(t, logs, logfile.Header{Node: "n", Host: "h", PID: 1 + k, Channel: 1, Name: fmt.Sprintf("c%d", k),
				Handler: "IDENTITY", TSCHz: hz, OpenSync: s, TSCDomain: domain}, recs)
		}
		_, err := Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "out"), NoReport: true, NoCapacity: true})
		return err
	}
	require.NoError(t, run(t, "", 5.2))
	err := run(t, "", 775)
	require.True(t, errors.Is(err, ErrContradiction), "%v", err)
	require.Contains(t, err.Error(), "opened 5.000 s after")
	require.Contains(t, err.Error(), "but 775.000 s after it by their TSCs")
	require.NoError(t, run(t, "boot x", 775))
}

// Files naming two runs (CP_RUN) are refused, with the way out when they
// are one run all the same (a launcher that named each process): --one-run.
func TestRunNamesSplitOneRun(t *testing.T) {
	const hz = 1e9
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	in, out := inOutLines(100, hz, func(i int) (int, float64) { return i, 1 + float64(i)*1e-3 })
	h := logfile.Header{Node: "n", Host: "h", PID: 1, Handler: "IDENTITY", TSCHz: hz, Run: "task-1"}
	h.Channel, h.Name = 1, "op in"
	writeASCII(t, logs, h, in)
	h.PID, h.Run, h.Channel, h.Name = 2, "task-2", 1, "op out"
	writeASCII(t, logs, h, out)
	cfg := Config{Logs: []string{logs}, Out: filepath.Join(dir, "out"), NoReport: true}
	_, err := Run(cfg)
	require.ErrorContains(t, err, `files of 2 runs (CP_RUN): "task-1"`)
	require.ErrorContains(t, err, "if these files are one run, --one-run takes them as one")
	cfg.OneRun = true
	res, err := Run(cfg)
	require.NoError(t, err)
	require.Equal(t, uint64(100), res.Tuples)
}

// Two processes on one node with channels of one name (two processes
// marking one OPERATOR#INSTANCE) are told apart: the process is in their
// labels, so no two rows carry one label.
func TestOneNameTwoProcessesLabelled(t *testing.T) {
	const hz = 1e9
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	for pid := 1; pid <= 2; pid++ {
		in, out := inOutLines(100, hz, func(i int) (int, float64) { return pid*1000 + i, 1 + float64(i)*1e-3 + float64(pid)*1e-4 })
		h := logfile.Header{Node: "n", Host: "h", PID: pid, Handler: "IDENTITY", TSCHz: hz}
		pdir := filepath.Join(logs, fmt.Sprint(pid)) // a directory per process, as CP_LOG_DIR per task
		require.NoError(t, os.MkdirAll(pdir, 0o755))
		h.Channel, h.Name = 1, "op#0 in"
		writeASCII(t, pdir, h, in)
		h.Channel, h.Name = 2, "op#0 out"
		writeASCII(t, pdir, h, out)
	}
	// One more channel, of one process only: its label stays node/name.
	h := logfile.Header{Node: "n", Host: "h", PID: 1, Handler: "IDENTITY", TSCHz: hz, Channel: 3, Name: "sink"}
	var sink []string
	for i := 0; i < 100; i++ {
		sink = append(sink, fmt.Sprintf("%d,%d", 1000+i, uint64((1+float64(i)*1e-3+1e-4+5e-6)*hz)))
	}
	writeASCII(t, logs, h, sink)
	out := filepath.Join(dir, "out")
	_, err := Run(Config{Logs: []string{logs}, Out: out, NoReport: true, NoCapacity: true})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(out, "summary.csv"))
	require.NoError(t, err)
	csv := string(b)
	require.Contains(t, csv, "n/1/op#0 in")
	require.Contains(t, csv, "n/2/op#0 in")
	require.NotContains(t, csv, ",n/op#0 in,")
	require.Contains(t, csv, ",n/sink")
}
