package datagen

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startReceiver runs a real receiver on loopback and collects its reports.
func startReceiver(t *testing.T, cfg ReceiverConfig) (*Receiver, func() []Report) {
	t.Helper()
	var mu sync.Mutex
	var reps []Report
	cfg.Listen = "127.0.0.1:0"
	cfg.OnReport = func(r Report) { mu.Lock(); reps = append(reps, r); mu.Unlock() }
	r, err := NewReceiver(cfg)
	require.NoError(t, err)
	go r.Serve(context.Background())
	t.Cleanup(func() { r.Close() })
	return r, func() []Report { mu.Lock(); defer mu.Unlock(); return append([]Report(nil), reps...) }
}

// Every planned tuple is sent and received, whatever the machine's load.
// Whether the rate was reached depends on that load: BenchmarkSendRate
// reports it (make bench-gen).
func TestSendExactCounts(t *testing.T) {
	r, reports := startReceiver(t, ReceiverConfig{})
	res, err := Send(context.Background(), SendConfig{To: r.Addr().String(), Rate: 50000, Duration: time.Second,
		Threads: 3, Payloads: Synthetic(500, 1)})
	require.NoError(t, err)
	require.EqualValues(t, 50000, res.Planned)
	require.EqualValues(t, 50000, res.Tuples)
	for _, tr := range res.Threads {
		require.NoError(t, tr.Err)
	}
	require.True(t, res.ReceiverSaw)
	require.EqualValues(t, 50000, res.Received)
	require.Zero(t, res.Lost)
	require.Zero(t, res.OutOfOrder)
	require.Eventually(t, func() bool { return len(reports()) == 3 }, 5*time.Second, 10*time.Millisecond)
	var sum uint64
	for _, rep := range reports() {
		require.Empty(t, rep.Error)
		require.Equal(t, uint64(rep.Thread)<<threadIDShift, rep.FirstID)
		require.Equal(t, rep.Sent, rep.Received)
		sum += rep.Received
	}
	require.EqualValues(t, 50000, sum)
}

func TestSendToNobodyFailsClearly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	_, err = Send(context.Background(), SendConfig{To: addr, Rate: 10, Duration: time.Second, Threads: 1, Payloads: Synthetic(1, 1)})
	require.ErrorContains(t, err, "connecting thread 0 to "+addr)
	for _, bad := range []SendConfig{
		{Rate: 1, Duration: time.Second, Threads: 1, Payloads: Synthetic(1, 1)},
		{To: addr, Rate: 0, Duration: time.Second, Threads: 1, Payloads: Synthetic(1, 1)},
		{To: addr, Rate: 1, Duration: 0, Threads: 1, Payloads: Synthetic(1, 1)},
		{To: addr, Rate: 1, Duration: time.Second, Threads: 0, Payloads: Synthetic(1, 1)},
		{To: addr, Rate: 1, Duration: time.Second, Threads: 1},
	} {
		_, err := Send(context.Background(), bad)
		require.Error(t, err)
	}
}

// A receiver that processes 40k tuples/s with a queue of 2000 tuples, fed
// 120k/s: it drops whole buckets, and the report says exactly which ids.
func TestLossIsReportedExactly(t *testing.T) {
	r, _ := startReceiver(t, ReceiverConfig{Capacity: 40000, Queue: 2000})
	res, err := Send(context.Background(), SendConfig{To: r.Addr().String(), Rate: 120000, Duration: 500 * time.Millisecond,
		Threads: 2, Payloads: Synthetic(100, 2)})
	require.NoError(t, err)
	require.True(t, res.ReceiverSaw)
	require.Greater(t, res.Lost, uint64(0))
	require.Equal(t, res.Lost, res.Dropped, "every lost tuple was one the receiver dropped")
	require.Equal(t, res.Tuples, res.Received+res.Lost)
	for _, tr := range res.Threads {
		var inGaps uint64
		for _, g := range tr.Report.Gaps {
			require.LessOrEqual(t, g[0], g[1])
			require.GreaterOrEqual(t, g[0], tr.FirstID)
			require.Less(t, g[1], tr.FirstID+tr.Tuples)
			inGaps += g[1] - g[0] + 1
		}
		if !tr.Report.GapsTruncated {
			require.Equal(t, tr.Report.Lost, inGaps)
		}
	}
}

// frames writes raw frames, as a sender (or a broken one) would.
func rawConn(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func bucket(ids ...uint64) []byte {
	var body []byte
	body = binary.BigEndian.AppendUint32(body, uint32(len(ids)))
	for _, id := range ids {
		body = binary.BigEndian.AppendUint64(body, id)
		body = binary.BigEndian.AppendUint32(body, 3)
		body = append(body, "abc"...)
	}
	return append(appendFrameHeader(nil, len(body)+1, frameBucket), body...)
}

func readReport(t *testing.T, c net.Conn) Report {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [5]byte
	_, err := c.Read(hdr[:])
	require.NoError(t, err)
	require.EqualValues(t, frameReport, hdr[4])
	body := make([]byte, binary.BigEndian.Uint32(hdr[:])-1)
	_, err = ioReadFull(c, body)
	require.NoError(t, err)
	var rep Report
	require.NoError(t, json.Unmarshal(body, &rep))
	return rep
}

func ioReadFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestGapsReorderingAndTheTail(t *testing.T) {
	r, _ := startReceiver(t, ReceiverConfig{})
	c := rawConn(t, r.Addr().String())
	h := Hello{RunID: 9, Thread: 0, Threads: 1, FirstID: 100, Tuples: 20, Rate: 1, Name: "hand"}
	c.Write(h.encode())
	c.Write(bucket(100, 101, 102, 105, 106)) // 103-104 lost
	c.Write(bucket(104, 107, 110))           // 104 late (out of order), 108-109 lost
	c.Write(End{Tuples: 20, Buckets: 2}.encode())
	rep := readReport(t, c)
	require.Equal(t, "hand", rep.Sender)
	require.EqualValues(t, 20, rep.Sent)
	require.EqualValues(t, 8, rep.Received)
	require.EqualValues(t, 1, rep.OutOfOrder, "104 came late and repaid its gap")
	// 103, 108-109, and 111-119 never sent after 110
	require.Equal(t, [][2]uint64{{103, 103}, {108, 109}, {111, 119}}, rep.Gaps)
	require.EqualValues(t, 12, rep.Lost)
	require.Equal(t, rep.Sent, rep.Received+rep.Lost)
}

// FRAMING.md's accounting, case by case.
func TestAccounting(t *testing.T) {
	a := newAccounting(0, 3)
	for _, id := range []uint64{0, 2, 1} {
		a.add(id)
	}
	a.finish(3)
	require.Equal(t, [5]uint64{3, 0, 1, 0, 0}, [5]uint64{a.received, a.lost, a.outOfOrder, a.duplicates, a.outOfRange})

	// A stray id far off, and ids around the 64-bit edge, touch nothing else.
	a = newAccounting(0, 3)
	for _, id := range []uint64{1 << 50, 0, ^uint64(0), 1, 2, 1} {
		a.add(id)
	}
	a.finish(3)
	require.Equal(t, [5]uint64{3, 0, 0, 1, 2}, [5]uint64{a.received, a.lost, a.outOfOrder, a.duplicates, a.outOfRange})

	// A range at the top of the id space.
	top := ^uint64(0) - 10 // the highest range HELLO allows: [top, 2^64-1)
	a = newAccounting(top, 10)
	a.add(top)
	a.add(top + 8)
	a.add(^uint64(0)) // past the range
	a.finish(10)
	var r Report
	a.report(&r)
	require.EqualValues(t, 8, r.Lost)
	require.EqualValues(t, 1, r.OutOfRange)
	require.Equal(t, [][2]uint64{{top + 1, top + 7}, {top + 9, top + 9}}, r.Gaps)
	_, err := decodeHello(Hello{FirstID: top + 1, Tuples: 10, Threads: 1, Name: "x"}.encode()[5:])
	require.ErrorContains(t, err, "overflows")

	// A late id splits a gap; the ends shrink it.
	a = newAccounting(0, 10)
	a.add(9)
	for _, id := range []uint64{4, 0, 8, 8} {
		a.add(id)
	}
	a.finish(10)
	r = Report{}
	a.report(&r)
	require.Equal(t, [][2]uint64{{1, 3}, {5, 7}}, r.Gaps)
	require.EqualValues(t, 6, r.Lost)
	require.EqualValues(t, 4, r.Received)
	require.EqualValues(t, 1, r.Duplicates)

	// More gaps than are recorded: flagged, and the count stays exact
	// while nothing comes late.
	a = newAccounting(0, 3*maxRecordedGaps+10)
	for i := uint64(0); i < 2*maxRecordedGaps+4; i++ {
		a.add(2 * i)
	}
	a.finish(3*maxRecordedGaps + 10)
	r = Report{}
	a.report(&r)
	require.True(t, r.GapsTruncated)
	require.Len(t, r.Gaps, maxGaps)
	require.Equal(t, uint64(3*maxRecordedGaps+10), r.Received+r.Lost)
}

func TestMalformedInputIsRefusedNotFatal(t *testing.T) {
	r, reports := startReceiver(t, ReceiverConfig{})
	addr := r.Addr().String()
	// Not a sender at all: dropped without a report.
	c := rawConn(t, addr)
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	// A bad HELLO magic.
	c2 := rawConn(t, addr)
	bad := Hello{Threads: 1, Name: "x"}.encode()
	copy(bad[5:9], "NOPE")
	c2.Write(bad)
	// A good HELLO, then a bucket whose count lies: the stream ends with an error.
	c3 := rawConn(t, addr)
	c3.Write(Hello{RunID: 1, Threads: 1, Tuples: 5, Name: "liar"}.encode())
	b := bucket(0, 1)
	binary.BigEndian.PutUint32(b[5:], 7)
	c3.Write(b)
	// A frame length past the limit.
	c4 := rawConn(t, addr)
	c4.Write(Hello{RunID: 2, Threads: 1, Tuples: 5, Name: "huge"}.encode())
	c4.Write([]byte{0xff, 0xff, 0xff, 0xff, frameBucket})
	require.Eventually(t, func() bool { return len(reports()) == 2 }, 5*time.Second, 10*time.Millisecond)
	for _, rep := range reports() {
		require.NotEmpty(t, rep.Error, "%+v", rep)
		require.EqualValues(t, 5, rep.Lost, "nothing accounted from a refused bucket: %+v", rep)
	}
	// The receiver still serves.
	res, err := Send(context.Background(), SendConfig{To: addr, Rate: 1000, Duration: 100 * time.Millisecond, Threads: 1, Payloads: Synthetic(3, 1)})
	require.NoError(t, err)
	require.EqualValues(t, 100, res.Received)
}

// A receiver that stands in for a system under test of known capacity: the
// search must find it, within the queue's slack and the resolution.
func TestMaxRateFindsTheCapacity(t *testing.T) {
	const capacity, queue = 60000.0, 3000
	d := 500 * time.Millisecond
	r, _ := startReceiver(t, ReceiverConfig{Capacity: capacity, Queue: queue})
	var steps []Step
	res, err := MaxRate(context.Background(), MaxRateConfig{
		Send:  SendConfig{To: r.Addr().String(), Duration: d, Threads: 2, Payloads: Synthetic(100, 3)},
		Start: 10000, Resolution: 2000, Pause: 100 * time.Millisecond,
		OnStep: func(s Step) { steps = append(steps, s) },
	})
	require.NoError(t, err)
	t.Logf("max %.0f, first failure %.0f, %d steps", res.Max, res.FirstFail, len(res.Steps))
	for _, s := range steps {
		t.Logf("%2d %-7s %8.0f ok=%v %s", s.N, s.Phase, s.Rate, s.OK, s.Why)
	}
	require.Equal(t, res.Steps, steps)
	// The bounds that hold however busy the machine is (a busy machine only
	// lowers what is reached); how close Max comes to the capacity is
	// BenchmarkMaxRateCapacity's ratio.
	require.Greater(t, res.FirstFail, 0.0, "the stand-in cannot take 1e9 tuples/s")
	require.LessOrEqual(t, res.FirstFail-res.Max, 2000.0)
	require.LessOrEqual(t, res.Max, capacity+queue/d.Seconds()+2000, "above what the queue can absorb")
	require.LessOrEqual(t, res.FirstFail, 2*(capacity+queue/d.Seconds()), "doubling past a failure it had to see")
	require.Less(t, len(res.Steps), 12, "bracket and bisect, not a linear walk")
	for _, s := range res.Steps {
		require.Equal(t, s.OK, s.Why == "", "%+v", s)
	}
}

func TestTuplesFile(t *testing.T) {
	dir := t.TempDir()
	p := Payloads{[]byte("a"), {}, bytes.Repeat([]byte{7}, 1000)}
	var buf bytes.Buffer
	require.NoError(t, WriteTuples(&buf, p))
	path := filepath.Join(dir, "t.bin")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	got, err := LoadTuples(path)
	require.NoError(t, err)
	require.Equal(t, len(p), len(got))
	for i := range p {
		require.True(t, bytes.Equal(p[i], got[i]))
	}
	require.NoError(t, os.WriteFile(path, buf.Bytes()[:buf.Len()-1], 0o644))
	_, err = LoadTuples(path)
	require.ErrorContains(t, err, "record 2 at byte 9: 999 of 1000 bytes")
	require.NoError(t, os.WriteFile(path, []byte{0xff, 0, 0, 0}, 0o644))
	_, err = LoadTuples(path)
	require.ErrorContains(t, err, "over the")
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	_, err = LoadTuples(path)
	require.ErrorContains(t, err, "no records")
	// The synthetic events are JSON with the benchmark's fields.
	var ev map[string]string
	require.NoError(t, json.Unmarshal(Synthetic(1, 5)[0], &ev))
	for _, k := range []string{"user_id", "page_id", "ad_id", "ad_type", "event_type", "event_time", "ip_address"} {
		require.NotEmpty(t, ev[k], k)
	}
}

// A client cannot make the receiver allocate what a header claims, nor
// hold more than MaxConns connections.
func TestHostileClientsCostLittle(t *testing.T) {
	r, reports := startReceiver(t, ReceiverConfig{MaxConns: 60})
	addr := r.Addr().String()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < 50; i++ {
		c := rawConn(t, addr)
		c.Write(Hello{RunID: uint64(i), Threads: 1, Tuples: 5, Name: "big"}.encode())
		c.Write([]byte{0x04, 0x00, 0x00, 0x00, frameBucket, 1, 2, 3}) // claims 64 MiB, sends 3 bytes
	}
	// A HELLO that claims more than a HELLO can be is refused before its body.
	c := rawConn(t, addr)
	c.Write([]byte{0x04, 0x00, 0x00, 0x00, frameHello})
	time.Sleep(300 * time.Millisecond)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	require.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(64<<20), "50 claims of 64 MiB")
	// Past MaxConns, connections are closed at once.
	for i := 0; i < 20; i++ {
		rawConn(t, addr)
	}
	require.Eventually(t, func() bool { return r.Refused() >= 9 }, 5*time.Second, 10*time.Millisecond)
	require.Empty(t, reports(), "no stream has ended")
}

// A receiver slower than the report timeout fails that step; the search
// goes on instead of giving up.
func TestMaxRateSurvivesALateReport(t *testing.T) {
	r, _ := startReceiver(t, ReceiverConfig{Capacity: 2000, Queue: 5000})
	res, err := MaxRate(context.Background(), MaxRateConfig{
		// Tolerance: a rate missed on a busy machine does not fail a step;
		// only loss and late REPORTs do.
		Send: SendConfig{To: r.Addr().String(), Duration: 300 * time.Millisecond, Threads: 1, Payloads: Synthetic(10, 1),
			ReportTimeout: 300 * time.Millisecond, Tolerance: 0.9},
		Start: 1000, Max: 64000, Resolution: 4000, Pause: 50 * time.Millisecond,
	})
	require.NoError(t, err)
	require.Greater(t, res.Max, 0.0)
	var late bool
	for _, s := range res.Steps {
		late = late || strings.Contains(s.Why, "no REPORT")
	}
	require.True(t, late, "%+v", res.Steps)
}

// Closing a stand-in with a long backlog does not wait for it: at 1 tuple
// a second, its 1000+ queued tuples would take more than 15 minutes.
func TestCloseDiscardsTheBacklog(t *testing.T) {
	var mu sync.Mutex
	var reps []Report
	r, err := NewReceiver(ReceiverConfig{Listen: "127.0.0.1:0", Capacity: 1, Queue: 4000,
		OnReport: func(rep Report) { mu.Lock(); reps = append(reps, rep); mu.Unlock() }})
	require.NoError(t, err)
	go r.Serve(context.Background())
	sent := make(chan *SendResult, 1)
	go func() {
		res, _ := Send(context.Background(), SendConfig{To: r.Addr().String(), Rate: 40000, Duration: 200 * time.Millisecond,
			Threads: 1, Payloads: Synthetic(10, 1), ReportTimeout: time.Hour})
		sent <- res
	}()
	require.Eventually(t, func() bool { return r.queued.Load() >= 1000 }, 30*time.Second, 5*time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- r.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(time.Minute): // a bound for a hung test, not a measurement
		t.Fatal("Close waited for the backlog")
	}
	res := <-sent // the sender's connection closed: it stops waiting for its REPORT
	require.NotNil(t, res)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reps, 1, "the stream's report is made at Close")
}

// Tuples of 16 MiB among small ones: buckets stay within the frame limit.
func TestHugeTuplesStayWithinTheFrameLimit(t *testing.T) {
	r, _ := startReceiver(t, ReceiverConfig{})
	p := Payloads{bytes.Repeat([]byte{1}, 16<<20), bytes.Repeat([]byte{2}, 16<<20)}
	for i := 0; i < 50; i++ {
		p = append(p, []byte{byte(i)})
	}
	res, err := Send(context.Background(), SendConfig{To: r.Addr().String(), Rate: 100, Duration: 200 * time.Millisecond, Threads: 1, Payloads: p})
	require.NoError(t, err)
	require.EqualValues(t, 20, res.Received, "%+v", res.Threads[0])
	require.Zero(t, res.Lost)
}
