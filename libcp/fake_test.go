package main

import (
	"math"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/tsc"

	"github.com/stretchr/testify/require"
)

// The library reads CP_* once, at its first successful OpenChannel, so the
// CP_FAKE_TSC and CP_NODE tests run this test binary again with the
// variables set and the child test selected.
func runChild(t *testing.T, test string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), append(env, "CP_TEST_CHILD=1")...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child %s:\n%s", test, out)
	require.Contains(t, string(out), "--- PASS: "+test, "child %s did not run:\n%s", test, out)
}

func TestFakeTSCAndNode(t *testing.T) {
	for _, fake := range []string{"1.0002:-5000000000", "0.5:1000000000000000", "3.25:0"} {
		t.Run(fake, func(t *testing.T) {
			runChild(t, "TestFakeTSCChild", "CP_FAKE_TSC="+fake, "CP_NODE=node-b.2_x")
		})
	}
}

func TestConfigErrors(t *testing.T) {
	runChild(t, "TestConfigErrorsChild", "CP_FAKE_TSC=", "CP_NODE=")
}

func child(t *testing.T) {
	if os.Getenv("CP_TEST_CHILD") != "1" {
		t.Skip("run by its parent test in a process of its own")
	}
}

// Under CP_FAKE_TSC every TSC the library writes (records of every handler,
// counter period ends, sync points) is Fake.Apply of a raw value read
// between the bounds, and the header gives the fake counter's frequency.
func TestFakeTSCChild(t *testing.T) {
	child(t)
	f, err := tsc.ParseFake(os.Getenv("CP_FAKE_TSC"))
	require.NoError(t, err)

	type tc struct {
		name   string
		format logfile.Format
		h      handlers.Type
		arg    int32
		val    int64
		n      int
		want   int // records expected
	}
	cases := []tc{
		{"bi owned-or-shared", logfile.BinaryTSC, handlers.BufferIdentity, -1, 0, 3000, 3000},
		{"bi zstd", logfile.ZstdTSC, handlers.BufferIdentity, -1, 0, 3000, 3000},
		{"bi mono", logfile.Binary, handlers.BufferIdentity, -1, 0, 3000, 3000},
		{"bi drop", logfile.BinaryTSC, handlers.BufferIdentity, handlers.ArgDropWhenFull, 1, 500, 500},
		{"identity", logfile.ASCIITSC, handlers.Identity, -1, 0, 200, 200},
		{"firstlast", logfile.BinaryTSC, handlers.FirstLast, -1, 0, 200, 2},
		{"median", logfile.BinaryTSC, handlers.Median, 0, 10, 200, 20},
		{"downsample", logfile.BinaryTSC, handlers.Downsample, 0, 3, 300, 100},
		{"xoy", logfile.BinaryTSC, handlers.XoY, 0, 1024, 300, 300},
	}
	for _, k := range cases {
		raw0 := tsc.Raw()
		ch, c := open(t, "fake "+k.name, k.format, k.h)
		if k.arg >= 0 {
			require.NoError(t, parameterize(ch, k.arg, k.val))
		}
		lo := f.Apply(tsc.Raw())
		for i := 0; i < k.n; i++ {
			require.Zero(t, logTS(ch, int64(i)))
		}
		hi := f.Apply(tsc.Raw())
		require.NoError(t, closeChannel(ch, "close"))
		raw1 := tsc.Raw()
		recs, lf := readRecords(t, c.path)
		require.Len(t, recs, k.want, k.name)
		prev := uint64(0)
		for _, r := range recs {
			require.GreaterOrEqual(t, r.TSC, lo, "%s: record below Fake.Apply(raw before)", k.name)
			require.LessOrEqual(t, r.TSC, hi, "%s: record above Fake.Apply(raw after)", k.name)
			if k.h != handlers.Median {
				require.GreaterOrEqual(t, r.TSC, prev, k.name)
			}
			prev = r.TSC
		}
		h := lf.Header
		require.Equal(t, "node-b.2_x", h.Node)
		require.InDelta(t, tsc.HardwareFreq().Hz*f.Rate(), h.TSCHz, 1)
		require.Contains(t, h.TSCHzSource, "fake rate")
		require.GreaterOrEqual(t, h.OpenSync.TSC, f.Apply(raw0))
		require.LessOrEqual(t, h.OpenSync.TSC, lo)
		require.GreaterOrEqual(t, lf.Summary.Trailer.CloseSync.TSC, hi)
		require.LessOrEqual(t, lf.Summary.Trailer.CloseSync.TSC, f.Apply(raw1))
	}

	// Counter period ends are sync points: fake too.
	raw0 := tsc.Raw()
	ch, c := open(t, "fake counter", logfile.BinaryTSC, handlers.PeriodicCounter)
	require.NoError(t, parameterize(ch, 0, 1_000_000))
	for end := time.Now().Add(5 * time.Millisecond); time.Now().Before(end); {
		require.Zero(t, logTS(ch, 1))
	}
	require.NoError(t, closeChannel(ch, "close"))
	raw1 := tsc.Raw()
	crecs, _ := readCounters(t, c.path)
	require.NotEmpty(t, crecs)
	for _, r := range crecs {
		require.GreaterOrEqual(t, r.TSC, f.Apply(raw0))
		require.LessOrEqual(t, r.TSC, f.Apply(raw1))
	}

	// FOX: the return log's arrival stamps are on the fake counter too.
	os.Setenv("CP_RET_LISTEN", "127.0.0.1:0")
	raw0 = tsc.Raw()
	st, sc := open(t, "fake fox start", logfile.BinaryTSC, handlers.FoxStart)
	os.Setenv("CP_RET_START", sc.fox.listen)
	en, ec := open(t, "fake fox end", logfile.BinaryTSC, handlers.FoxEnd)
	for i := 0; i < 200; i++ {
		require.Zero(t, logTS(st, int64(i)))
		require.Zero(t, logTS(en, int64(i)))
	}
	for end := time.Now().Add(5 * time.Second); sc.retLog.recv.received.Load() < 200 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, closeChannel(en, "close"))
	require.NoError(t, closeChannel(st, "close"))
	raw1 = tsc.Raw()
	erecs, _ := readRecords(t, ec.path)
	rrecs, _ := readRecords(t, sc.retLog.path)
	require.Len(t, rrecs, 200)
	endTSC := byID(t, erecs)
	for _, r := range rrecs {
		require.GreaterOrEqual(t, r.TSC, endTSC[r.TupleID])
		require.GreaterOrEqual(t, r.TSC, f.Apply(raw0))
		require.LessOrEqual(t, r.TSC, f.Apply(raw1))
	}

	// The C mapping is Go's, bit for bit, over the whole range.
	rng := rand.New(rand.NewSource(1))
	vals := []uint64{0, 1, 1 << 32, math.MaxUint64, math.MaxUint64 - 1, 1 << 63, tsc.Raw()}
	for i := 0; i < 100000; i++ {
		vals = append(vals, rng.Uint64(), rng.Uint64()>>uint(rng.Intn(64)))
	}
	for _, v := range vals {
		require.Equal(t, f.Apply(v), fakeApplyC(v), "raw %d", v)
	}
	a, now, b := f.Apply(tsc.Raw()), tscNowC(), f.Apply(tsc.Raw())
	require.True(t, a <= now && now <= b)
	g, ok := tsc.ActiveFake()
	require.True(t, ok)
	require.Equal(t, f, g)
}

// Bad CP_FAKE_TSC and CP_NODE values fail OpenChannel with CP_ERR_CONFIG and
// a message naming the variable; once fixed, the next OpenChannel works.
func TestConfigErrorsChild(t *testing.T) {
	child(t)
	for _, bad := range [][2]string{
		{"CP_FAKE_TSC", "fast"}, {"CP_FAKE_TSC", "1.0"}, {"CP_FAKE_TSC", "0:0"}, {"CP_FAKE_TSC", "1:x"},
		{"CP_FAKE_TSC", "1:-9000000000000000000"}, {"CP_NODE", "bad name"}, {"CP_NODE", strings.Repeat("n", 65)},
		{"CP_NODE", "a/b"},
	} {
		os.Setenv(bad[0], bad[1])
		_, err := openChannel("cfg", logfile.BinaryTSC, handlers.BufferIdentity)
		require.Error(t, err, "%s=%s", bad[0], bad[1])
		require.Equal(t, int32(-16), codeOf(err), "%s=%s: %v", bad[0], bad[1], err)
		require.Contains(t, err.Error(), bad[0])
		os.Setenv(bad[0], "")
	}
	require.Contains(t, errorString(-16), "configuration")
	os.Setenv("CP_NODE", strings.Repeat("n", 64))
	ch, c := open(t, "cfg ok", logfile.BinaryTSC, handlers.BufferIdentity)
	require.Zero(t, logTS(ch, 1))
	require.NoError(t, closeChannel(ch, "close"))
	_, lf := readRecords(t, c.path)
	require.Equal(t, strings.Repeat("n", 64), lf.Header.Node)
	_, ok := tsc.ActiveFake()
	require.False(t, ok)
}
