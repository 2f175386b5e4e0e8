package main

import (
	"errors"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
)

// lineagePairs is what a test logs: output ids 1_000_000+k from four inputs
// each, the inputs anywhere (negative, 0, huge, going back): the TSC column
// of the file holds them, so its encoding must not assume a clock.
func lineagePairs(n int, seed int64) [][2]int64 {
	r := rand.New(rand.NewSource(seed))
	p := make([][2]int64, n)
	for i := range p {
		in := r.Int63() - r.Int63()
		switch i % 7 {
		case 0:
			in = 0
		case 1:
			in = int64(i)
		case 2:
			in = math.MaxInt64
		case 3:
			in = math.MinInt64 + 1
		}
		p[i] = [2]int64{1_000_000 + int64(i/4), in}
	}
	return p
}

func TestLineageEveryFormatRoundTrips(t *testing.T) {
	for _, f := range allFormats {
		t.Run(f.String(), func(t *testing.T) {
			ch, c := open(t, "win lineage "+f.String(), f, handlers.Lineage)
			pairs := lineagePairs(10_000, int64(f)) // ~10 blocks of 1024, laps of the ring
			for _, p := range pairs {
				require.Zero(t, logLineageC(ch, p[0], p[1]))
			}
			require.NoError(t, closeChannel(ch, "close"))
			recs, lf := readRecords(t, c.path)
			require.Equal(t, "LINEAGE", lf.Header.Handler)
			require.Equal(t, logfile.LineageHandler, lf.Header.Handler)
			require.Equal(t, int32(handlers.Lineage), lf.Header.HandlerID)
			require.Len(t, recs, len(pairs))
			for i, r := range recs {
				require.Equal(t, pairs[i][0], r.TupleID, "record %d", i)
				require.Equal(t, pairs[i][1], logfile.LineageInput(r.TSC), "record %d", i)
				require.Equal(t, f.HasMono(), r.MonoNs != 0)
			}
			require.NotNil(t, lf.Summary.Trailer)
			require.Equal(t, uint64(len(pairs)), lf.Summary.Trailer.Positions)
			require.Zero(t, lf.Summary.Holes)
		})
	}
}

func TestLineageCodes(t *testing.T) {
	ch, _ := open(t, "codes lineage", logfile.ZstdTSC, handlers.Lineage)
	require.Equal(t, int32(-5), logTS(ch, 1), "LogTS on LINEAGE")
	n, rc := logTSMany(ch, []int64{1, 2, 3}, 3)
	require.Equal(t, int64(0), n)
	require.Equal(t, int32(-5), rc, "LogTSMany on LINEAGE")
	require.Equal(t, int32(-10), logLineageC(ch, 5, math.MinInt64), "in_id INT64_MIN")
	require.Zero(t, logLineageC(ch, 5, 4))
	require.Equal(t, int32(-1), logLineageC(ch+1<<20, 5, 4), "other generation")
	for _, h := range []int64{0, -1, 1 << 20, 1<<63 - 1} {
		require.Equal(t, int32(-1), logLineageC(h, 5, 4), "handle %d", h)
	}
	require.Equal(t, int32(-9), codeOf(parameterize(ch, 0, 1)), "LINEAGE has no arguments")
	require.NoError(t, parameterize(ch, handlers.ArgDropWhenFull, 1), "a ring: it may drop")
	require.NoError(t, closeChannel(ch, "close"))
	require.Equal(t, int32(-2), logLineageC(ch, 5, 4))

	for _, h := range []handlers.Type{handlers.BufferIdentity, handlers.Null, handlers.FastPeriodicCounter, handlers.ServiceRate} {
		other, _ := open(t, "not lineage", logfile.BinaryTSC, h)
		require.Equal(t, int32(-5), logLineageC(other, 5, 4), "%s", h)
		require.NoError(t, closeChannel(other, "close"))
	}
}

const lineageSigN = 900 // less than a block: the SIGTERM flush writes them

// The SIGTERM flush writes a LINEAGE channel's pairs as it writes a
// BUFFER_IDENTITY channel's records.
func TestLineageSigtermFlush(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLineageSigtermChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "CP_TEST_CHILD=1", "CP_TEST_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "the child dies of SIGTERM: %v\n%s", err, out)
	ws := ee.Sys().(syscall.WaitStatus)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGTERM, "%v\n%s", err, out)
	m, err := filepath.Glob(filepath.Join(dir, "*-sig_lineage.cplog"))
	require.NoError(t, err)
	require.Len(t, m, 1)
	recs, lf := readRecordsAllowOpen(t, m[0])
	require.Equal(t, "LINEAGE", lf.Header.Handler)
	pairs := lineagePairs(lineageSigN, 7)
	require.Len(t, recs, lineageSigN)
	for i, r := range recs {
		require.Equal(t, pairs[i][0], r.TupleID)
		require.Equal(t, pairs[i][1], logfile.LineageInput(r.TSC))
	}
	st := newestStatus(t, m[0])
	require.Equal(t, logfile.StateSignal, int(st.State))
	require.Equal(t, uint64(lineageSigN), st.Accepted)
}

func readRecordsAllowOpen(t *testing.T, path string) ([]logfile.Record, *logfile.File) {
	t.Helper()
	lf, err := logfile.Open(path)
	require.NoError(t, err)
	defer lf.Close()
	var recs []logfile.Record
	err = lf.Records(func(r logfile.Record) error { recs = append(recs, r); return nil })
	if err != nil {
		require.ErrorIs(t, err, logfile.ErrDamaged, "no trailer after SIGTERM, nothing else")
	}
	require.Zero(t, lf.Summary.CorruptFrames)
	require.Zero(t, lf.Summary.CorruptBytes+lf.Summary.TruncatedBytes)
	return recs, lf
}

func TestLineageSigtermChild(t *testing.T) {
	child(t)
	sigtermDefault()
	require.NoError(t, initLibrary())
	cfg.logDir = os.Getenv("CP_TEST_DIR")
	ch, _ := open(t, "sig lineage", logfile.BinaryTSC, handlers.Lineage)
	for _, p := range lineagePairs(lineageSigN, 7) {
		require.Zero(t, logLineageC(ch, p[0], p[1]))
	}
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	time.Sleep(10 * time.Second)
	t.Fatal("still alive after SIGTERM")
}
