package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

var logDir string

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "cplibtest")
	if err != nil {
		panic(err)
	}
	logDir = d
	os.Setenv("CP_LOG_DIR", d)
	// Children of this test binary (runChild, the SIGTERM children) and
	// t.TempDir make their directories in here: a child killed by a signal
	// never reaches its own cleanup, this process's RemoveAll takes them.
	os.Setenv("TMPDIR", d)
	os.Setenv("CP_BLOCK_RECORDS", "1024") // many blocks, many laps of the ring
	os.Setenv("CP_RING_BLOCKS", "4")
	os.Setenv("CP_QUIET", "1")
	// NET_CONF tests run a configuration server on this loopback port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	os.Setenv("CP_CONF_SERVER", l.Addr().String())
	l.Close()
	os.Setenv("CP_CONF_TIMEOUT_MS", "500")
	code := m.Run()
	stopConfServer()
	if conf.bin != "" {
		os.RemoveAll(filepath.Dir(conf.bin)) // the configuration server built for the NET_CONF tests
	}
	os.RemoveAll(d)
	os.Exit(code)
}

var allFormats = []logfile.Format{logfile.ASCII, logfile.ASCIITSC, logfile.Binary, logfile.BinaryTSC,
	logfile.Zstd, logfile.ZstdTSC, logfile.S2, logfile.S2TSC}

func open(t *testing.T, name string, f logfile.Format, h handlers.Type) (int64, *channel) {
	t.Helper()
	ch, err := openChannel(name, f, h)
	require.NoError(t, err)
	require.Greater(t, ch, int64(0))
	c, err := lookup(ch)
	require.NoError(t, err)
	return ch, c
}

func readRecords(t *testing.T, path string) ([]logfile.Record, *logfile.File) {
	t.Helper()
	lf, err := logfile.Open(path)
	require.NoError(t, err)
	defer lf.Close()
	var recs []logfile.Record
	require.NoError(t, lf.Records(func(r logfile.Record) error { recs = append(recs, r); return nil }))
	return recs, lf
}

// readOpenRecords reads the file of a channel still open: the reader says
// so (no trailer, status open: ErrDamaged), and nothing else may be wrong.
func readOpenRecords(t *testing.T, path string) []logfile.Record {
	t.Helper()
	lf, err := logfile.Open(path)
	require.NoError(t, err)
	defer lf.Close()
	var recs []logfile.Record
	err = lf.Records(func(r logfile.Record) error { recs = append(recs, r); return nil })
	require.ErrorIs(t, err, logfile.ErrDamaged, "open: no trailer")
	require.Nil(t, lf.Summary.Trailer)
	require.NotNil(t, lf.Summary.Status)
	require.Equal(t, uint32(logfile.StateOpen), lf.Summary.Status.State)
	require.Zero(t, lf.Summary.CorruptFrames+lf.Summary.CorruptLines)
	require.Zero(t, lf.Summary.CorruptBytes+lf.Summary.TruncatedBytes)
	return recs
}

func readCounters(t *testing.T, path string) ([]logfile.CounterRecord, *logfile.File) {
	t.Helper()
	lf, err := logfile.Open(path)
	require.NoError(t, err)
	defer lf.Close()
	var recs []logfile.CounterRecord
	require.NoError(t, lf.Counters(func(r logfile.CounterRecord) error { recs = append(recs, r); return nil }))
	return recs, lf
}

func TestBufferedEveryFormatRoundTrips(t *testing.T) {
	for _, f := range allFormats {
		t.Run(f.String(), func(t *testing.T) {
			ch, c := open(t, "rt "+f.String(), f, handlers.BufferIdentity)
			const n = 10_000 // ~10 blocks of 1024, 2.5 laps of the ring
			for i := 0; i < n; i++ {
				require.Zero(t, logTS(ch, int64(i*7-5000)))
			}
			require.NoError(t, closeChannel(ch, "close"))
			recs, lf := readRecords(t, c.path)
			require.Len(t, recs, n)
			var prevTSC uint64
			for i, r := range recs {
				require.Equal(t, int64(i*7-5000), r.TupleID)
				require.GreaterOrEqual(t, r.TSC, prevTSC, "one thread: TSC never goes back")
				prevTSC = r.TSC
				if f.HasMono() {
					require.NotZero(t, r.MonoNs)
				} else {
					require.Zero(t, r.MonoNs)
				}
			}
			require.NotNil(t, lf.Summary.Trailer)
			require.Equal(t, uint64(n), lf.Summary.Trailer.Positions)
			require.Zero(t, lf.Summary.Holes)
			require.Equal(t, f.String(), lf.Header.Format)
			require.Equal(t, "BUFFER_IDENTITY", lf.Header.Handler)
			require.Equal(t, os.Getpid(), lf.Header.PID)
			require.Greater(t, lf.Header.TSCHz, 1e8)
			require.NotEmpty(t, lf.Header.TSCHzSource)
			require.NotZero(t, lf.Header.OpenSync.RealtimeNs)
			require.Greater(t, lf.Summary.Trailer.CloseSync.TSC, lf.Header.OpenSync.TSC)
		})
	}
}

func TestIdentityWritesAtOnce(t *testing.T) {
	for _, f := range []logfile.Format{logfile.ASCII, logfile.BinaryTSC} {
		ch, c := open(t, "identity", f, handlers.Identity)
		for i := 0; i < 100; i++ {
			require.Zero(t, logTS(ch, int64(i)))
		}
		// Unbuffered: the records are in the file before close.
		require.Len(t, readOpenRecords(t, c.path), 100)
		require.NoError(t, closeChannel(ch, "close"))
		recs, lf := readRecords(t, c.path)
		require.Len(t, recs, 100)
		require.Equal(t, int64(99), recs[99].TupleID)
		require.NotNil(t, lf.Summary.Trailer)
	}
	_, err := openChannel("identity zstd", logfile.ZstdTSC, handlers.Identity)
	require.Equal(t, int32(-8), codeOf(err), "IDENTITY cannot compress: %v", err)
}

func TestXoYKeepsIdsModYBelowX(t *testing.T) {
	for _, y := range []int64{1024, 1000, 7, 1 << 33} {
		ch, c := open(t, "xoy", logfile.BinaryTSC, handlers.XoY)
		require.NoError(t, parameterize(ch, 1, y))
		require.NoError(t, parameterize(ch, 0, 3))
		var want []int64
		ids := []int64{-1, -2, -3, -4, -1 << 40, 1<<40 + 1, 1<<62 + 5, 0, 1, 2, 3, 4}
		for i := int64(0); i < 5000; i++ {
			ids = append(ids, i*13-20000, (1<<35)+i)
		}
		for _, id := range ids {
			require.Zero(t, logTS(ch, id))
			if ((id%y)+y)%y < 3 {
				want = append(want, id)
			}
		}
		require.NoError(t, closeChannel(ch, "close"))
		recs, lf := readRecords(t, c.path)
		got := make([]int64, len(recs))
		for i, r := range recs {
			got[i] = r.TupleID
		}
		require.Equal(t, want, got, "y=%d", y)
		require.Len(t, lf.Summary.Events, 2, "both parameter changes recorded")
	}
}

func TestXoYArgumentsValidated(t *testing.T) {
	ch, _ := open(t, "xoy args", logfile.BinaryTSC, handlers.XoY)
	require.Equal(t, int32(-10), codeOf(parameterize(ch, 0, 2000)), "x > y")
	require.Equal(t, int32(-10), codeOf(parameterize(ch, 1, 0)), "y = 0")
	require.Equal(t, int32(-9), codeOf(parameterize(ch, 2, 1)))
	require.Equal(t, int32(-9), codeOf(parameterize(ch, -1, 1)))
	require.NoError(t, closeChannel(ch, "close"))
}

func TestDownsampleKeepsEveryNth(t *testing.T) {
	ch, c := open(t, "down", logfile.S2TSC, handlers.Downsample)
	require.NoError(t, parameterize(ch, 0, 10))
	for i := 0; i < 10_000; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	require.NoError(t, closeChannel(ch, "close"))
	recs, _ := readRecords(t, c.path)
	require.Len(t, recs, 1000)
	for i, r := range recs {
		require.Equal(t, int64(i*10), r.TupleID)
	}
	ch, _ = open(t, "down bad", logfile.S2TSC, handlers.Downsample)
	require.Equal(t, int32(-10), codeOf(parameterize(ch, 0, 0)))
	require.Equal(t, int32(-10), codeOf(parameterize(ch, 0, -3)))
	require.NoError(t, closeChannel(ch, "close"))
}

func TestMedianLogsTheMedianOfEachWindow(t *testing.T) {
	ch, c := open(t, "median", logfile.BinaryTSC, handlers.Median)
	require.NoError(t, parameterize(ch, 0, 5))
	for i := 0; i < 23; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	require.NoError(t, closeChannel(ch, "close"))
	recs, _ := readRecords(t, c.path)
	// One thread: TSCs grow with ids, so each window's median is its middle id.
	require.Equal(t, []int64{2, 7, 12, 17}, ids(recs))
}

func ids(recs []logfile.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.TupleID
	}
	return out
}

func TestFirstLast(t *testing.T) {
	for _, f := range []logfile.Format{logfile.ASCII, logfile.ZstdTSC} {
		ch, c := open(t, "fl", f, handlers.FirstLast)
		for i := 100; i < 200; i++ {
			require.Zero(t, logTS(ch, int64(i)))
		}
		require.NoError(t, closeChannel(ch, "close"))
		recs, lf := readRecords(t, c.path)
		require.Equal(t, []int64{100, 199}, ids(recs))
		require.Less(t, recs[0].TSC, recs[1].TSC)
		require.Equal(t, uint64(100), lf.Summary.Trailer.Total)
	}
}

func TestNullDiscardsButValidates(t *testing.T) {
	ch, c := open(t, "null", logfile.BinaryTSC, handlers.Null)
	for i := 0; i < 1000; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	require.NoError(t, closeChannel(ch, "close"))
	require.Equal(t, int32(-2), logTS(ch, 1))
	recs, _ := readRecords(t, c.path)
	require.Empty(t, recs)
}

func TestPeriodicCountersCountExactly(t *testing.T) {
	for _, h := range []handlers.Type{handlers.PeriodicCounter, handlers.FastPeriodicCounter} {
		for _, f := range []logfile.Format{logfile.ASCII, logfile.BinaryTSC} {
			ch, c := open(t, "pc", f, h)
			require.NoError(t, parameterize(ch, 0, 20_000_000)) // 20 ms
			require.Equal(t, int32(-10), codeOf(parameterize(ch, 0, 10)), "period below 1 ms")
			total := 0
			deadline := time.Now().Add(150 * time.Millisecond)
			for time.Now().Before(deadline) {
				for i := 0; i < 1000; i++ {
					require.Zero(t, logTS(ch, int64(i)))
				}
				total += 1000
				time.Sleep(time.Millisecond)
			}
			require.NoError(t, closeChannel(ch, "close"))
			recs, lf := readCounters(t, c.path)
			sum := uint64(0)
			for _, r := range recs {
				sum += r.Count
			}
			require.Equal(t, uint64(total), sum, "%s %s: periods add up to the events", h, f)
			require.Equal(t, uint64(total), lf.Summary.Trailer.Total)
			require.GreaterOrEqual(t, len(recs), 5, "about 7 periods of 20 ms plus the last")
			for i := 1; i < len(recs); i++ {
				require.Greater(t, recs[i].TSC, recs[i-1].TSC)
			}
		}
	}
}

// FASTPERIODICCOUNTER with eight writers on two CPUs (preempted between
// the load and the store): the count is a plain load and
// store, so increments are lost and the count can step back; no period
// wraps (one read 18446744073705152100), the periods add up to the
// trailer's total, and that is at most the events logged.
func TestFastCounterWithSeveralWriters(t *testing.T) {
	ch, c := open(t, "fpc writers", logfile.BinaryTSC, handlers.FastPeriodicCounter)
	require.NoError(t, parameterize(ch, 0, 1_000_000)) // 1 ms
	const writers, rounds, batch = 8, 400, 5000
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := seqIDs(0, batch)
			for r := 0; r < rounds; r++ {
				for _, id := range ids {
					if logTS(ch, id) != 0 {
						t.Error("LogTS refused an event")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readCounters(t, c.path)
	var sum uint64
	for _, r := range recs {
		require.Less(t, r.Count, uint64(writers*rounds*batch), "a period counts more events than were logged: %d", r.Count)
		sum += r.Count
	}
	require.Equal(t, lf.Summary.Trailer.Total, sum, "the periods add up to the trailer's total")
	require.LessOrEqual(t, sum, uint64(writers*rounds*batch))
	t.Logf("%d events logged by %d threads, %d counted (%.2f%%) in %d periods", writers*rounds*batch, writers, sum,
		100*float64(sum)/float64(writers*rounds*batch), len(recs))
}

// The step back itself, made on purpose: the count is stored below what a
// period already read, as a writer preempted between its load and its
// store does. The next period counts nothing rather than 2^64 minus the
// step, and the periods add up to the trailer's total.
func TestFastCounterStepsBack(t *testing.T) {
	ch, c := open(t, "fpc step back", logfile.BinaryTSC, handlers.FastPeriodicCounter)
	require.NoError(t, parameterize(ch, 0, 1_000_000)) // 1 ms
	cc, err := lookup(ch)
	require.NoError(t, err)
	count := (*uint64)(unsafe.Pointer(&cc.slot.fpc_count))
	for i := 0; i < 5000; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	time.Sleep(5 * time.Millisecond) // a period read 5000
	atomic.StoreUint64(count, 4000)  // a stale store: 1000 increments lost
	time.Sleep(5 * time.Millisecond)
	for i := 0; i < 3000; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readCounters(t, c.path)
	var sum uint64
	for _, r := range recs {
		require.LessOrEqual(t, r.Count, uint64(8000), "a period wrapped")
		sum += r.Count
	}
	require.Equal(t, uint64(7000), sum, "the count climbed to 5000, stepped back to 4000 and climbed to 7000")
	require.Equal(t, sum, lf.Summary.Trailer.Total)
}

// The counter files internal/logfile's tests read (its testdata/counters),
// written by the library and read back clean: every period, adding up to
// the trailer's total, no problem. A PERIODICCOUNTER in BINARY_TSC, a
// FASTPERIODICCOUNTER in BINARY with four writers (it may count fewer
// events than they logged: its periods add up to what it counted), a
// SERVICERATE in ASCII_TSC. CP_COUNTER_TESTDATA=DIR copies them into DIR:
//
//	CP_COUNTER_TESTDATA=$PWD/internal/logfile/testdata/counters go test ./libcp -run TestCounterTestdata
func TestCounterTestdata(t *testing.T) {
	for _, f := range []struct {
		name   string
		format logfile.Format
		h      handlers.Type
	}{
		{"periodic.cplog", logfile.BinaryTSC, handlers.PeriodicCounter},
		{"fast-4-writers.cplog", logfile.Binary, handlers.FastPeriodicCounter},
		{"servicerate.cplog.txt", logfile.ASCIITSC, handlers.ServiceRate},
	} {
		ch, c := open(t, "counter testdata", f.format, f.h)
		require.NoError(t, parameterize(ch, 0, 10_000_000)) // 10 ms
		writers := 1
		if f.h == handlers.FastPeriodicCounter {
			writers = 4
		}
		var logged atomic.Uint64
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := 0; round < 40; round++ {
					for i := 0; i < 500+100*w; i++ {
						if logTS(ch, int64(i)) != 0 {
							t.Error("LogTS refused an event")
							return
						}
						logged.Add(1)
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
		wg.Wait()
		require.NoError(t, closeChannel(ch, "close"))
		recs, lf := readCounters(t, c.path)
		require.Empty(t, lf.Summary.Problems(&lf.Header))
		var sum uint64
		for _, r := range recs {
			sum += r.Count
		}
		require.Equal(t, lf.Summary.Trailer.Total, sum, "%s: the periods add up to the trailer's total", f.name)
		require.Equal(t, sum, lf.Summary.Counted)
		require.LessOrEqual(t, sum, logged.Load())
		if writers == 1 {
			require.Equal(t, logged.Load(), sum)
		}
		t.Logf("%s: %d events logged, %d counted in %d periods", f.name, logged.Load(), sum, len(recs))
		if dir := os.Getenv("CP_COUNTER_TESTDATA"); dir != "" {
			b, err := os.ReadFile(c.path)
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, f.name), b, 0o644))
		}
	}
}

func TestCountersShareBoundaries(t *testing.T) {
	a, ca := open(t, "pc a", logfile.BinaryTSC, handlers.PeriodicCounter)
	b, cb := open(t, "pc b", logfile.Binary, handlers.FastPeriodicCounter)
	require.NoError(t, parameterize(a, 0, 10_000_000))
	require.NoError(t, parameterize(b, 0, 10_000_000))
	time.Sleep(65 * time.Millisecond)
	require.NoError(t, closeChannel(a, "close"))
	require.NoError(t, closeChannel(b, "close"))
	ra, _ := readCounters(t, ca.path)
	rb, _ := readCounters(t, cb.path)
	// Same sampling pass: the period-end TSCs of the two channels coincide.
	sa := map[uint64]bool{}
	for _, r := range ra[:len(ra)-1] {
		sa[r.TSC] = true
	}
	shared := 0
	for _, r := range rb[:len(rb)-1] {
		if sa[r.TSC] {
			shared++
		}
		require.NotZero(t, r.MonoNs, "BINARY counters carry CLOCK_MONOTONIC_RAW")
	}
	require.GreaterOrEqual(t, shared, 3, "periods in lock step")
}

func TestBadInput(t *testing.T) {
	_, err := openChannel("", logfile.BinaryTSC, handlers.Null)
	require.Equal(t, int32(-3), codeOf(err))
	_, err = openChannel(strings.Repeat("x", 5000), logfile.BinaryTSC, handlers.Null)
	require.Equal(t, int32(-3), codeOf(err))
	_, err = openChannel("x", 8, handlers.Null)
	require.Equal(t, int32(-4), codeOf(err))
	_, err = openChannel("x", -1, handlers.Null)
	require.Equal(t, int32(-4), codeOf(err))
	_, err = openChannel("x", logfile.BinaryTSC, 16)
	require.Equal(t, int32(-5), codeOf(err))
	_, err = openChannel("x", logfile.BinaryTSC, -2)
	require.Equal(t, int32(-5), codeOf(err))
	os.Setenv("CP_RET_START", "")
	_, err = openChannel("x", logfile.BinaryTSC, handlers.FoxEnd)
	require.Equal(t, int32(-16), codeOf(err), "FOX_END without CP_RET_START")
	_, err = openChannel("x", logfile.BinaryTSC, handlers.GPIORTT)
	require.Equal(t, int32(-7), codeOf(err))

	for _, h := range []int64{0, -1, 1, 1 << 20, 1<<20 | 16385, 1<<40 | 1, -(1 << 62), 1<<63 - 1} {
		require.Equal(t, int32(-1), logTS(h, 1), "handle %d", h)
		require.Equal(t, int32(-1), codeOf(closeChannel(h, "close")), "handle %d", h)
		require.Equal(t, int32(-1), codeOf(parameterize(h, 0, 1)), "handle %d", h)
	}
	ch, _ := open(t, "bad input", logfile.BinaryTSC, handlers.BufferIdentity)
	forged := ch + 1<<20 // same slot, another generation
	require.Equal(t, int32(-1), logTS(forged, 1))
	require.Equal(t, int32(-9), codeOf(parameterize(ch, 0, 1)), "BUFFER_IDENTITY has no arguments")
	require.Equal(t, int32(-10), codeOf(parameterize(ch, 100, 2)))
	require.NoError(t, closeChannel(ch, "close"))
	require.Equal(t, int32(-2), codeOf(closeChannel(ch, "close")), "second close")
	require.Equal(t, int32(-2), logTS(ch, 1))
	require.Equal(t, int32(-2), codeOf(parameterize(ch, 100, 1)))
	require.Equal(t, "channel is closed", errorString(-2))
	require.Equal(t, "unknown error code", errorString(-999))
}

func TestNamesNeverLeaveTheLogDirectory(t *testing.T) {
	for _, name := range []string{"../../etc/passwd", "/abs/path", "..", ".", "a/../../b", "\x00\xff\n\t", "名前"} {
		ch, c := open(t, name, logfile.BinaryTSC, handlers.Null)
		require.NoError(t, closeChannel(ch, "close"))
		rel, err := filepath.Rel(logDir, c.path)
		require.NoError(t, err)
		require.False(t, strings.Contains(rel, string(filepath.Separator)), "%q -> %s", name, c.path)
		require.False(t, strings.HasPrefix(rel, ".."), "%q -> %s", name, c.path)
		_, lf := readRecords(t, c.path)
		require.Equal(t, fmt.Sprintf("%x", name), lf.Header.NameHex, "the name survives byte for byte")
	}
}

func TestManyThreadsOneChannelLoseNothing(t *testing.T) {
	for _, f := range []logfile.Format{logfile.ZstdTSC, logfile.Binary} {
		for _, h := range []handlers.Type{handlers.BufferIdentity, handlers.Identity} {
			if h == handlers.Identity && f.Codec() != logfile.CodecRaw {
				continue
			}
			ch, c := open(t, "threads", f, h)
			const threads, per = 8, 20_000
			var wg sync.WaitGroup
			for g := 0; g < threads; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < per; i++ {
						if rc := logTS(ch, int64(g*per+i)); rc != 0 {
							t.Errorf("LogTS: %d", rc)
							return
						}
					}
				}(g)
			}
			wg.Wait()
			require.NoError(t, closeChannel(ch, "close"))
			requireIDsUpTo(t, c.path, threads*per)
		}
	}
}

// Close races with logging: every LogTS that returned 0 has its record in
// the file; every later one fails with CLOSED.
func TestCloseRacesWithLogging(t *testing.T) {
	// FIRSTLAST several times: a call that took the slot's lock after
	// CloseChannel's snapshot was answered 0 and counted nowhere.
	hs := []handlers.Type{handlers.BufferIdentity, handlers.Identity, handlers.PeriodicCounter}
	for k := 0; k < 10; k++ {
		hs = append(hs, handlers.FirstLast)
	}
	for _, h := range hs {
		ch, c := open(t, "race", logfile.BinaryTSC, h)
		const threads = 6
		accepted := make([][]int64, threads)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < threads; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				<-start
				for i := 0; ; i++ {
					id := int64(g)<<32 | int64(i)
					rc := logTS(ch, id)
					if rc == -2 {
						return
					}
					if rc != 0 {
						t.Errorf("LogTS: %d", rc)
						return
					}
					accepted[g] = append(accepted[g], id)
				}
			}(g)
		}
		close(start)
		time.Sleep(20 * time.Millisecond)
		require.NoError(t, closeChannel(ch, "close"))
		wg.Wait()
		n := 0
		for _, a := range accepted {
			n += len(a)
		}
		require.Greater(t, n, 1000)
		if h == handlers.PeriodicCounter {
			recs, lf := readCounters(t, c.path)
			sum := uint64(0)
			for _, r := range recs {
				sum += r.Count
			}
			require.Equal(t, uint64(n), sum)
			require.Equal(t, uint64(n), lf.Summary.Trailer.Total)
			continue
		}
		recs, lf := readRecords(t, c.path)
		if h == handlers.FirstLast {
			require.Equal(t, uint64(n), lf.Summary.Trailer.Total, "FIRSTLAST: calls answered 0, and the count at close")
			require.Len(t, recs, 2)
			continue
		}
		in := map[int64]bool{}
		for _, r := range recs {
			in[r.TupleID] = true
		}
		require.Len(t, recs, n, "%s: exactly the accepted records", h)
		for _, a := range accepted {
			for _, id := range a {
				require.True(t, in[id])
			}
		}
	}
}

// One owner thread logs on a biased channel, then others join: the owner is
// revoked and nothing is lost or doubled.
func TestOwnerBiasRevocation(t *testing.T) {
	ch, c := open(t, "owned", logfile.BinaryTSC, handlers.BufferIdentity)
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			time.Sleep(time.Duration(g) * 3 * time.Millisecond)
			local := []int64{}
			for i := 0; i < 30_000; i++ {
				id := int64(g*1_000_000 + i)
				if rc := logTS(ch, id); rc != 0 {
					t.Errorf("LogTS: %d", rc)
					return
				}
				local = append(local, id)
			}
			mu.Lock()
			all = append(all, local...)
			mu.Unlock()
		}(g)
	}
	wg.Wait()
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readRecords(t, c.path)
	require.Len(t, recs, len(all))
	require.Zero(t, lf.Summary.Holes)
	seen := map[int64]bool{}
	for _, r := range recs {
		require.False(t, seen[r.TupleID], "duplicate %d", r.TupleID)
		seen[r.TupleID] = true
	}
}

func TestDropWhenFullCountsDrops(t *testing.T) {
	ch, c := open(t, "drop", logfile.ZstdTSC, handlers.BufferIdentity)
	require.NoError(t, parameterize(ch, 100, 1))
	accepted, dropped := 0, 0
	for i := 0; i < 200_000; i++ {
		switch rc := logTS(ch, int64(i)); rc {
		case 0:
			accepted++
		case -13:
			dropped++
		default:
			t.Fatalf("LogTS: %d", rc)
		}
	}
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readRecords(t, c.path)
	require.Len(t, recs, accepted)
	require.Equal(t, uint64(dropped), lf.Summary.Trailer.Dropped)
	t.Logf("accepted %d, dropped %d (ring of 4 x 1024)", accepted, dropped)
}

func TestCloseAllIsIdempotent(t *testing.T) {
	a, ca := open(t, "all a", logfile.ZstdTSC, handlers.BufferIdentity)
	b, _ := open(t, "all b", logfile.ASCII, handlers.FirstLast)
	require.Zero(t, logTS(a, 1))
	require.Zero(t, logTS(b, 1))
	require.NoError(t, closeAll("close_all"))
	require.NoError(t, closeAll("close_all"))
	require.Equal(t, int32(-2), logTS(a, 1))
	_, lf := readRecords(t, ca.path)
	require.Equal(t, "close_all", lf.Summary.Trailer.Reason)
}

func TestSlotsAreReusedWithNewGenerations(t *testing.T) {
	seen := map[int64]bool{}
	for i := 0; i < 50; i++ {
		ch, _ := open(t, "reuse", logfile.BinaryTSC, handlers.Null)
		require.False(t, seen[ch])
		seen[ch] = true
		require.NoError(t, closeChannel(ch, "close"))
	}
}

// A channel that goes quiet has its partly filled block on disk within
// about a second, before any close: a crash then loses nothing it logged.
func TestQuietChannelIsFlushedWithoutClose(t *testing.T) {
	for _, f := range []logfile.Format{logfile.ZstdTSC, logfile.ASCII} {
		ch, c := open(t, "quiet", f, handlers.BufferIdentity)
		for i := 0; i < 1500; i++ { // one full block of 1024 and a partial one
			require.Zero(t, logTS(ch, int64(i)))
		}
		var recs []logfile.Record
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if recs = readOpenRecords(t, c.path); len(recs) == 1500 {
				break
			}
		}
		require.Len(t, recs, 1500, "%s: on disk before close", f)
		for i := 1500; i < 3000; i++ {
			require.Zero(t, logTS(ch, int64(i)))
		}
		require.NoError(t, closeChannel(ch, "close"))
		recs, lf := readRecords(t, c.path)
		require.Equal(t, 3000, len(recs))
		for i, r := range recs {
			require.Equal(t, int64(i), r.TupleID)
		}
		require.Zero(t, lf.Summary.Duplicates)
	}
}

// A full disk: LogTS refuses new events with CP_ERR_IO instead of hanging,
// every event it accepted reaches the file once there is room again, and a
// close that cannot write says how many records it could not write.
func TestFullDiskLosesNothingAccepted(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=96k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v)", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	require.NoError(t, initLibrary())
	old := cfg.logDir
	cfg.logDir = dir
	defer func() { cfg.logDir = old }()

	ch, c := open(t, "full", logfile.BinaryTSC, handlers.BufferIdentity)
	filler := filepath.Join(dir, "filler")
	require.Error(t, os.WriteFile(filler, make([]byte, 200<<10), 0o644), "the filler fills the disk")
	accepted, refused := 0, 0
	deadline := time.Now().Add(10 * time.Second)
	for refused == 0 && time.Now().Before(deadline) {
		for i := 0; i < 512; i++ {
			switch rc := logTS(ch, int64(accepted)); rc {
			case 0:
				accepted++
			case -12:
				refused++
			default:
				t.Fatalf("LogTS: %d", rc)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Greater(t, refused, 0, "a full disk makes LogTS fail fast")
	require.NoError(t, os.Remove(filler)) // room again
	require.Eventually(t, func() bool { return logTS(ch, int64(accepted)) == 0 }, 5*time.Second, 50*time.Millisecond,
		"the channel takes events again once the spilled blocks are written")
	accepted++
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readRecords(t, c.path)
	require.Len(t, recs, accepted)
	for i, r := range recs {
		require.Equal(t, int64(i), r.TupleID)
	}
	require.Zero(t, lf.Summary.Trailer.Unwritten)
	t.Logf("accepted %d, refused %d while full", accepted, refused)

	// Still full at close: the close reports what it could not write.
	ch, _ = open(t, "full at close", logfile.BinaryTSC, handlers.BufferIdentity)
	for i := 0; i < 3000; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	require.Error(t, os.WriteFile(filler, make([]byte, 200<<10), 0o644))
	err := closeChannel(ch, "close")
	require.Equal(t, int32(-12), codeOf(err), "%v", err)
	require.Contains(t, err.Error(), "could not be written")
}

// Switching drop-when-full on and off while threads log never re-enables the
// owner-biased path (a preempted old owner could then commit over a new one):
// every accepted event is in the file exactly once.
func TestFastPathChangesUnderLoadLoseNothing(t *testing.T) {
	ch, c := open(t, "toggle", logfile.BinaryTSC, handlers.BufferIdentity)
	var mu sync.Mutex
	var accepted []int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var local []int64
			for i := 0; ; i++ {
				select {
				case <-stop:
					mu.Lock()
					accepted = append(accepted, local...)
					mu.Unlock()
					return
				default:
				}
				id := int64(g)<<40 | int64(i)
				switch rc := logTS(ch, id); rc {
				case 0:
					local = append(local, id)
				case -13:
				default:
					t.Errorf("LogTS: %d", rc)
				}
			}
		}(g)
	}
	for i := 0; i < 20; i++ {
		require.NoError(t, parameterize(ch, 100, int64(i%2)))
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readRecords(t, c.path)
	require.Len(t, recs, len(accepted))
	require.Zero(t, lf.Summary.Holes)
	require.Zero(t, lf.Summary.Duplicates)
}

// A burst of 512 laps of the ring (4 blocks of 1024 here) keeps half the
// ring waiting through most of its blocks. A logging thread wakes the
// drainer (writes the eventfd) only when it takes back the drainer's parked
// flag, so there is at most one write per sleep of the drainer, not one per
// block; and every record is kept, by one thread (the owner's path) and by
// two (the shared path).
func TestDrainWakesAtMostOncePerSleep(t *testing.T) {
	const n = 1 << 21
	for _, threads := range []int{1, 2} {
		ch, c := open(t, "wakes", logfile.ZstdTSC, handlers.BufferIdentity)
		var wg sync.WaitGroup
		for g := 0; g < threads; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				per := int64(n / threads)
				if rc := logBurstC(ch, int64(g)*per, per); rc != 0 {
					t.Errorf("LogTS: %s", errorString(rc))
				}
			}(g)
		}
		wg.Wait()
		require.NoError(t, closeChannel(ch, "close"))
		wakes, sleeps := c.drainWakes(), c.sleeps.Load()
		t.Logf("%d thread(s): %d blocks, %d eventfd writes, %d sleeps of the drainer", threads, n/1024, wakes, sleeps)
		require.LessOrEqual(t, wakes, sleeps)
		requireIDsUpTo(t, c.path, n)
	}
}

// A burst that fits the ring (all but its last block) is written after it,
// not beside it: no logging thread wakes the drainer (before, half the ring
// waiting did). A longer burst wakes it (the test above).
func TestBurstThatFitsTheRingWakesNoDrain(t *testing.T) {
	ch, c := open(t, "fits", logfile.ZstdTSC, handlers.BufferIdentity)
	fits := int64((c.ringBlocks - 1) * c.blockRecs) // the last block is never entered
	// The drainer parks (and may be woken) once it has started.
	require.Eventually(t, func() bool { return c.sleeps.Load() > 0 }, 10*time.Second, time.Millisecond)
	require.Zero(t, logBurstC(ch, 0, fits))
	require.Zero(t, c.drainWakes(), "a burst of %d records in a ring of %d woke the drainer", fits, c.ringBlocks*c.blockRecs)
	require.NoError(t, closeChannel(ch, "close"))
	requireIDsUpTo(t, c.path, int(fits))
}

// requireIDsUpTo says the file at path holds the ids 0..n-1, each once (in
// any order: several threads logged them), and no hole; it returns the ids
// in the file's order.
func requireIDsUpTo(t *testing.T, path string, n int) []int64 {
	t.Helper()
	recs, lf := readRecords(t, path)
	got := ids(recs)
	sorted := slices.Clone(got)
	slices.Sort(sorted)
	require.Len(t, sorted, n)
	for i, id := range sorted {
		if int64(i) != id {
			t.Fatalf("the %d-th smallest id is %d", i, id)
		}
	}
	require.Zero(t, lf.Summary.Holes)
	return got
}
