package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloudprofiler/minrtt"
	"cloudprofiler/tsc"

	"github.com/stretchr/testify/require"
)

// node is an in-process client with its own fake counter: all fakes derive
// from the one hardware TSC, so the truth about every probe is exact.
type node struct {
	name string
	fake tsc.Fake
	c    *Client
	done chan error
}

func startServer(t *testing.T, s *Server) *Server {
	t.Helper()
	if s.Listen == "" {
		s.Listen = "127.0.0.1:0"
	}
	if s.OutDir == "" {
		s.OutDir = t.TempDir()
	}
	s.Logf = t.Logf
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() { s.Close() })
	return s
}

func mustFake(t *testing.T, spec string) tsc.Fake {
	f, err := tsc.ParseFake(spec)
	require.NoError(t, err)
	return f
}

func startNode(t *testing.T, addr, name string, fake tsc.Fake, inj *Inject, opts ...func(*Client)) *node {
	t.Helper()
	hw := tsc.HardwareFreq()
	n := &node{name: name, fake: fake, done: make(chan error, 1)}
	n.c = &Client{Server: addr, Node: name, Inject: inj,
		Clock:      func() uint64 { return fake.Apply(tsc.Raw()) },
		Freq:       tsc.Frequency{Hz: hw.Hz * fake.Rate(), Source: "test fake " + fake.String()},
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logf: t.Logf}
	for _, o := range opts {
		o(n.c)
	}
	go func() { n.done <- n.c.Run(context.Background()) }()
	t.Cleanup(func() { n.c.Close(); <-n.done })
	return n
}

func waitNodes(t *testing.T, s *Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, s.WaitNodes(ctx, n))
}

// invert returns the range of raw TSC values that f maps to v, or, for a
// v the fake counter steps over (a value placed from a kernel timestamp
// need not be one it reads), the two raw values it steps from and to.
func invert(t *testing.T, f tsc.Fake, v uint64) (lo, hi uint64) {
	const top = uint64(1) << 62
	lo = uint64(sortSearch(top, func(x uint64) bool { return f.Apply(x) >= v }))
	hi = uint64(sortSearch(top, func(x uint64) bool { return f.Apply(x) > v })) - 1
	if hi < lo { // hi+1 == lo: f(hi) < v < f(lo)
		return hi, lo
	}
	return lo, hi
}

// sortSearch is sort.Search over uint64.
func sortSearch(n uint64, pred func(uint64) bool) uint64 {
	lo, hi := uint64(0), n
	for lo < hi {
		mid := lo + (hi-lo)/2
		if !pred(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// checkCausality: the responder's Resp, taken back to the raw TSC and on
// into the origin's counter, lies within [Send, Recv].
func checkCausality(t *testing.T, r *minrtt.Round, fakes map[string]tsc.Fake) {
	t.Helper()
	for _, d := range r.Dirs {
		fo, fr := fakes[d.Origin], fakes[d.Responder]
		for i, p := range d.Probes {
			lo, hi := invert(t, fr, p.Resp)
			require.LessOrEqual(t, fo.Apply(lo), p.Recv, "%s->%s probe %d: responder after Recv", d.Origin, d.Responder, i)
			require.GreaterOrEqual(t, fo.Apply(hi), p.Send, "%s->%s probe %d: responder before Send", d.Origin, d.Responder, i)
		}
	}
}

func minRTTMicros(r *minrtt.Round, d minrtt.Direction) float64 {
	s := Summarize(r)
	for _, ds := range s.Dirs {
		if ds.Origin == d.Origin && ds.Responder == d.Responder {
			return ds.MinRTTMicros()
		}
	}
	return math.NaN()
}

func TestScheduleCoversEveryDirectionOnce(t *testing.T) {
	for n := 2; n <= 9; n++ {
		seen := map[[2]int]int{}
		for _, st := range schedule(n) {
			busy := map[int]bool{}
			for _, d := range st {
				require.NotEqual(t, d[0], d[1])
				require.False(t, busy[d[0]] || busy[d[1]], "n=%d: node twice in a step %v", n, st)
				busy[d[0]], busy[d[1]] = true, true
				seen[d]++
			}
		}
		require.Len(t, seen, n*(n-1), "n=%d", n)
		for d, k := range seen {
			require.Equal(t, 1, k, "n=%d: %v", n, d)
		}
	}
	require.Nil(t, schedule(1))
}

func TestPacketRoundTrip(t *testing.T) {
	b := make([]byte, PacketSize)
	p := Packet{Type: PacketReply, Session: 1<<50 + 3, Seq: 77, TSC: 1<<63 + 5}
	p.Put(b)
	require.Equal(t, []byte("CPTP"), b[:4])
	require.Equal(t, uint64(1<<63+5), binary.BigEndian.Uint64(b[24:]))
	q, err := ParsePacket(b)
	require.NoError(t, err)
	require.Equal(t, p, q)
	bad := func(f func([]byte) []byte) error {
		c := append([]byte(nil), b...)
		_, err := ParsePacket(f(c))
		return err
	}
	require.Error(t, bad(func(c []byte) []byte { return c[:31] }))
	require.Error(t, bad(func(c []byte) []byte { return append(c, 0) }))
	require.Error(t, bad(func(c []byte) []byte { c[0] = 'X'; return c }))
	require.ErrorContains(t, bad(func(c []byte) []byte { c[4] = 2; return c }), "version 2 and 32 bytes")
	require.ErrorContains(t, bad(func(c []byte) []byte { c[4] = 3; return c }), "version 3")
	require.Error(t, bad(func(c []byte) []byte { c[5] = 9; return c }))
	require.Error(t, bad(func(c []byte) []byte { c[21] = 1; return c }))
	require.Error(t, bad(func(c []byte) []byte { c[6] = 1; return c }))

	// Version 2: a reply with the responder's kernel timestamps.
	k := Packet{Type: PacketReply, Session: 9, Seq: 2, TSC: 1 << 40, Kernel: true, Flags: FlagKernelRecv | FlagPrevTurn,
		KRecv: 1<<40 - 7000, KRecvWidthNs: 31, TurnNs: 4100, PrevTurnNs: 3900, PrevKRecvLow: 0xdeadbeef}
	b = make([]byte, PacketSizeKernel)
	k.Put(b)
	require.Equal(t, byte(2), b[4])
	q, err = ParsePacket(b)
	require.NoError(t, err)
	require.Equal(t, k, q)
	require.ErrorContains(t, bad(func(c []byte) []byte { return c[:PacketSize] }), "version 2 and 32 bytes")
	require.Error(t, bad(func(c []byte) []byte { c[6] = 4; return c }), "an unknown flag")
	require.Error(t, bad(func(c []byte) []byte { c[4] = 1; return c }), "version 1 is 32 bytes")
	// A version-2 request carries nothing but the version-1 fields.
	k = Packet{Type: PacketRequest, Session: 9, Seq: 2, TSC: 5, Kernel: true}
	k.Put(b)
	q, err = ParsePacket(b)
	require.NoError(t, err)
	require.Equal(t, k, q)
	require.ErrorContains(t, bad(func(c []byte) []byte { c[45] = 1; return c }), "carries no timestamps")
	require.ErrorContains(t, bad(func(c []byte) []byte { c[53] = 1; return c }), "carries no timestamps")
}

func TestParseInject(t *testing.T) {
	in, err := ParseInject("fwd=40us,rev=10us,jitter=30us,spike=0.02:400us,seed=9")
	require.NoError(t, err)
	require.Equal(t, Inject{Fwd: 40 * time.Microsecond, Rev: 10 * time.Microsecond, Jitter: 30 * time.Microsecond,
		SpikeP: 0.02, Spike: 400 * time.Microsecond, Seed: 9}, *in)
	in, err = ParseInject("")
	require.NoError(t, err)
	require.Nil(t, in)
	for _, bad := range []string{"fwd", "fwd=x", "fwd=-1us", "spike=0.5", "spike=2:1us", "speed=1", "seed=-1", "fwd=2s"} {
		_, err := ParseInject(bad)
		require.Error(t, err, bad)
	}
	// Same seed, same delays.
	a, _ := ParseInject("fwd=1us,jitter=1ms,seed=3")
	x, y := a.forward(), a.forward()
	for i := 0; i < 10; i++ {
		require.Equal(t, x.rng.Int64(), y.rng.Int64())
	}
}

// Four nodes with different counters: every ordered pair, every probe kept,
// every probe causal against the truth, and the file reads back.
func TestRoundAllPairsCausal(t *testing.T) {
	s := startServer(t, &Server{Probes: 40, Interval: 100 * time.Microsecond})
	specs := map[string]string{"a": "1:1000000000000", "b": "1.0002:500000000000", "c": "0.9997:3000000000000", "d": "2.5:7"}
	fakes := map[string]tsc.Fake{}
	for name, spec := range specs {
		fakes[name] = mustFake(t, spec)
		startNode(t, s.Addr(), name, fakes[name], nil)
	}
	waitNodes(t, s, 4)
	r, path, err := s.RequestRound("before")
	require.NoError(t, err)
	require.Len(t, r.Nodes, 4)
	require.Len(t, r.Dirs, 12)
	require.Empty(t, r.Missing)
	pairs := map[string]bool{}
	for _, d := range r.Dirs {
		pairs[d.Origin+">"+d.Responder] = true
		require.Equal(t, 40, d.Sent, "%s->%s", d.Origin, d.Responder)
		require.Len(t, d.Probes, 40, "%s->%s: %s", d.Origin, d.Responder, d.Error)
		require.Empty(t, d.Error)
		t.Logf("%s->%s min RTT %.1f us", d.Origin, d.Responder, minRTTMicros(r, d))
	}
	require.Len(t, pairs, 12)
	for _, n := range r.Nodes {
		require.InEpsilon(t, tsc.HardwareFreq().Hz*fakes[n.Name].Rate(), n.TSCHz, 1e-9)
	}
	checkCausality(t, r, fakes)

	rs, err := minrtt.ReadRounds(s.OutDir)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, r.Dirs, rs[0].Dirs)
	require.Equal(t, "before", rs[0].Label)
	require.Contains(t, path, "round-000001.json")

	// A second round gets the next number; a restarted server continues it.
	_, path, err = s.RequestRound("after")
	require.NoError(t, err)
	require.Contains(t, path, "round-000002.json")
	require.Equal(t, 2, lastRound(s.OutDir))
}

// Forward 50us and reverse 5us injected: the RTT as the processes time
// the probes grows by both, and the truth shows the asymmetry in the
// one-way delays; as the kernels time them, it does not grow.
func TestInjectedAsymmetricDelay(t *testing.T) {
	// 200 probes: the one-way minima nearer their floor on a busy machine.
	const probes = 200
	s := startServer(t, &Server{Probes: probes, Interval: 100 * time.Microsecond})
	fakes := map[string]tsc.Fake{"a": mustFake(t, "1:1000000"), "b": mustFake(t, "1.5:99")}
	base := map[string]*node{}
	for name, f := range fakes {
		base[name] = startNode(t, s.Addr(), name, f, nil)
	}
	waitNodes(t, s, 2)
	r0, _, err := s.RequestRound("plain")
	require.NoError(t, err)
	for _, n := range base {
		n.c.Close()
	}
	require.Eventually(t, func() bool { return len(s.Nodes()) == 0 }, 5*time.Second, 5*time.Millisecond)

	inj, err := ParseInject("fwd=50us,rev=5us,seed=4")
	require.NoError(t, err)
	for name, f := range fakes {
		startNode(t, s.Addr(), name, f, inj)
	}
	waitNodes(t, s, 2)
	r1, _, err := s.RequestRound("injected")
	require.NoError(t, err)
	checkCausality(t, r1, fakes)

	hz := tsc.HardwareFreq().Hz
	us := func(raw uint64) float64 { return float64(raw) / hz * 1e6 }
	// The delays are injected in the processes, before the kernels'
	// transmit timestamps: the probes as the processes timed them see
	// them (as network delay), the same probes as the kernels timed them
	// do not.
	for _, d := range r1.Dirs {
		require.Len(t, d.Probes, probes, d.Error)
		require.Equal(t, "kernel", d.Timestamps, "%s->%s", d.Origin, d.Responder)
		require.Equal(t, probes, d.KernelProbes)
		require.Len(t, d.UserProbes, probes)
		kernel := minRTTMicros(r1, d)
		t.Logf("%s->%s: min RTT %.1f us as the kernels timed the probes", d.Origin, d.Responder, kernel)
		require.Less(t, kernel, 50.0, "the injected delays land outside the kernel's timestamps")
	}
	r0, r1 = r0.UserTimed(), r1.UserTimed()
	checkCausality(t, r1, fakes)
	for i, d := range r1.Dirs {
		require.Len(t, d.Probes, probes, d.Error)
		plain, injected := minRTTMicros(r0, r0.Dirs[i]), minRTTMicros(r1, d)
		fo, fr := fakes[d.Origin], fakes[d.Responder]
		minF, minR := math.Inf(1), math.Inf(1)
		for _, p := range d.Probes {
			send, _ := invert(t, fo, p.Send)
			resp, _ := invert(t, fr, p.Resp)
			recv, _ := invert(t, fo, p.Recv)
			minF = math.Min(minF, us(resp-send))
			minR = math.Min(minR, us(recv-resp))
		}
		t.Logf("%s->%s: min RTT %.1f us plain, %.1f us injected; true one-way minima: forward %.1f us, reverse %.1f us",
			d.Origin, d.Responder, plain, injected, minF, minR)
		require.GreaterOrEqual(t, injected, 55.0)
		require.GreaterOrEqual(t, minF, 50.0)
		require.GreaterOrEqual(t, minR, 5.0)
		// 45 us injected: 37 to 44 us in the truth with the race
		// detector's build and the other vCPU spinning, 33 once.
		require.Greater(t, minF-minR, 25.0, "the asymmetry shows in the truth")
	}
}

// A node that leaves mid-round is listed missing; the round finishes with
// the others and their directions are whole.
func TestNodeLeavesMidRound(t *testing.T) {
	s := startServer(t, &Server{Probes: 150, Interval: 400 * time.Microsecond})
	fakes := map[string]tsc.Fake{"a": mustFake(t, "1:5"), "b": mustFake(t, "1.1:5"), "c": mustFake(t, "0.9:5")}
	nodes := map[string]*node{}
	for name, f := range fakes {
		nodes[name] = startNode(t, s.Addr(), name, f, nil)
	}
	waitNodes(t, s, 3)
	go func() {
		time.Sleep(150 * time.Millisecond)
		nodes["c"].c.Close()
	}()
	start := time.Now()
	r, _, err := s.RequestRound("during")
	require.NoError(t, err)
	t.Logf("round took %v; missing %+v", time.Since(start), r.Missing)
	require.Len(t, r.Missing, 1)
	require.Equal(t, "c", r.Missing[0].Node)
	require.NotEmpty(t, r.Missing[0].Why)
	require.Len(t, r.Dirs, 6)
	for _, d := range r.Dirs {
		if d.Origin == "c" || d.Responder == "c" {
			if len(d.Probes) < 150 {
				require.NotEmpty(t, d.Error, "%s->%s", d.Origin, d.Responder)
			}
			continue
		}
		require.Len(t, d.Probes, 150, "%s->%s: %s", d.Origin, d.Responder, d.Error)
	}
	checkCausality(t, r, fakes)
	back, err := minrtt.ReadRound(s.OutDir + "/" + r.FileName())
	require.NoError(t, err)
	require.Equal(t, r.Missing, back.Missing)
}

// A node that registers but never reports a result is listed missing after
// the round timeout and skipped from then on; its probe socket never answers,
// so the directions towards it end after a few lost probes. A junk message
// it sends during the round is counted as the server's.
func TestSilentNodeTimesOut(t *testing.T) {
	s := startServer(t, &Server{Probes: 20, Interval: 100 * time.Microsecond,
		ProbeTimeout: 20 * time.Millisecond, RoundTimeout: 300 * time.Millisecond})
	fakes := map[string]tsc.Fake{"a": mustFake(t, "1:0"), "b": mustFake(t, "1.3:0")}
	for name, f := range fakes {
		startNode(t, s.Addr(), name, f, nil)
	}
	deaf, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer deaf.Close()
	mute, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer mute.Close()
	require.NoError(t, WriteMessage(mute, &Message{Type: MsgHello,
		Node: &minrtt.Node{Name: "mute", Addr: deaf.LocalAddr().String(), TSCHz: 1e9, TSCHzSource: "test"}}))
	require.Equal(t, MsgWelcome, readReply(t, mute).Type)
	tasks := make(chan *Message, 4)
	go func() {
		for {
			body, err := ReadFrame(mute)
			if err != nil {
				return
			}
			m, _ := DecodeMessage(body)
			tasks <- m
			mute.Write(frame([]byte(`{bad`))) // junk instead of a result
		}
	}()
	waitNodes(t, s, 3)
	start := time.Now()
	r, _, err := s.RequestRound("x")
	require.NoError(t, err)
	t.Logf("round took %v, missing %+v", time.Since(start), r.Missing)
	require.Len(t, tasks, 1, "mute gets one task, then it is missing")
	require.Equal(t, []minrtt.Missing{{Node: "mute", Why: "no result within the round timeout (300ms)"}}, r.Missing)
	require.Equal(t, uint64(1), r.Malformed["server"])
	for _, d := range r.Dirs {
		switch {
		case d.Origin == "mute":
			require.Empty(t, d.Probes)
			require.NotEmpty(t, d.Error)
		case d.Responder == "mute":
			require.Empty(t, d.Probes)
			require.NotEmpty(t, d.Error, "%s->mute", d.Origin)
		default:
			require.Len(t, d.Probes, 20, d.Error)
		}
	}
	checkCausality(t, r, fakes) // mute's directions hold no probes
}

func TestServerRefusesTooManyProbes(t *testing.T) {
	s := &Server{Listen: "127.0.0.1:0", OutDir: t.TempDir(), Probes: MaxProbes + 1}
	require.ErrorContains(t, s.Start(context.Background()), "at most")
	require.NoError(t, s.Close())
}

func TestTooFewNodes(t *testing.T) {
	s := startServer(t, &Server{})
	_, _, err := s.RequestRound("x")
	require.ErrorIs(t, err, ErrTooFewNodes)
	startNode(t, s.Addr(), "solo", mustFake(t, "1:0"), nil)
	waitNodes(t, s, 1)
	_, _, err = s.RequestRound("x")
	require.ErrorIs(t, err, ErrTooFewNodes)
}

// Garbage sent to a client's probe socket is dropped and counted; the
// count reaches the next round's Malformed, and the client keeps answering.
func TestMalformedUDPCounted(t *testing.T) {
	s := startServer(t, &Server{Probes: 10, Interval: 50 * time.Microsecond})
	a := startNode(t, s.Addr(), "a", mustFake(t, "1:0"), nil)
	startNode(t, s.Addr(), "b", mustFake(t, "1:0"), nil)
	waitNodes(t, s, 2)
	u, err := net.Dial("udp", a.c.UDPAddr())
	require.NoError(t, err)
	defer u.Close()
	good := make([]byte, PacketSize)
	Packet{Type: PacketRequest, Session: 1, Seq: 1}.Put(good)
	wrongVersion := append([]byte(nil), good...)
	wrongVersion[4] = 7
	reply := append([]byte(nil), good...)
	reply[5] = PacketReply
	for _, b := range [][]byte{[]byte("hello"), make([]byte, PacketSize), wrongVersion, reply, append(good, 1)} {
		_, err := u.Write(b)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return a.c.Malformed() == 5 }, 5*time.Second, 5*time.Millisecond)
	// A well-formed request still gets its answer.
	_, err = u.Write(good)
	require.NoError(t, err)
	u.SetReadDeadline(time.Now().Add(2 * time.Second))
	in := make([]byte, 64)
	n, err := u.Read(in)
	require.NoError(t, err)
	p, err := ParsePacket(in[:n])
	require.NoError(t, err)
	require.Equal(t, PacketReply, p.Type)
	require.Equal(t, uint32(1), p.Seq)

	r, _, err := s.RequestRound("x")
	require.NoError(t, err)
	require.Equal(t, uint64(5), r.Malformed["a"])
	require.Zero(t, r.Malformed["b"])
	for _, d := range r.Dirs {
		require.Len(t, d.Probes, 10)
	}
	// Reported once: the next round has none from a.
	r, _, err = s.RequestRound("y")
	require.NoError(t, err)
	require.Zero(t, r.Malformed["a"])
}

func frame(body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(b, body...)
}

func readReply(t *testing.T, c net.Conn) *Message {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := ReadFrame(c)
	require.NoError(t, err)
	m, err := DecodeMessage(body)
	require.NoError(t, err)
	return m
}

// Malformed, unknown, oversized and other-version control messages are
// dropped and counted; the server goes on serving rounds.
func TestMalformedControlMessages(t *testing.T) {
	s := startServer(t, &Server{Probes: 5, Interval: 50 * time.Microsecond})
	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c.Close()
	for _, body := range []string{`{not json`, `{"v":1}`, `{"v":1,"type":"bogus"}`, `[1,2]`, ``} {
		_, err := c.Write(frame([]byte(body)))
		require.NoError(t, err)
	}
	_, err = c.Write([]byte{0xff, 0xff, 0xff, 0xf0})
	require.NoError(t, err)
	m := readReply(t, c)
	require.Equal(t, MsgError, m.Type)
	require.Equal(t, CodeTooLarge, m.Code)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err, "the server closes after an oversized message")
	require.Equal(t, uint64(6), s.Malformed())

	// A client of another version gets told so.
	c2, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, WriteMessage(c2, &Message{V: 2, Type: MsgHello, Node: &minrtt.Node{Name: "new"}}))
	m = readReply(t, c2)
	require.Equal(t, CodeVersion, m.Code)
	require.Contains(t, m.Error, "protocol version 2")
	require.Contains(t, m.Error, "version 1")
	require.Equal(t, uint64(7), s.Malformed())

	// A registered client that sends junk stays registered.
	c3, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c3.Close()
	require.NoError(t, WriteMessage(c3, &Message{Type: MsgHello, Node: &minrtt.Node{Name: "raw", Addr: "127.0.0.1:9", TSCHz: 1e9}}))
	require.Equal(t, MsgWelcome, readReply(t, c3).Type)
	_, err = c3.Write(frame([]byte(`{"v":1,"type":"result","task":12345}`))) // no such task: stale, not malformed
	require.NoError(t, err)
	_, err = c3.Write(frame([]byte(`{"v":1,"type":"welcome"}`)))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Malformed() == 8 }, 5*time.Second, 5*time.Millisecond)
	require.Len(t, s.Nodes(), 1)
	c3.Close()
	require.Eventually(t, func() bool { return len(s.Nodes()) == 0 }, 5*time.Second, 5*time.Millisecond)

	// Duplicate node names are refused with a reason.
	startNode(t, s.Addr(), "a", mustFake(t, "1:0"), nil)
	startNode(t, s.Addr(), "b", mustFake(t, "1:0"), nil)
	waitNodes(t, s, 2)
	c4, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c4.Close()
	require.NoError(t, WriteMessage(c4, &Message{Type: MsgHello, Node: &minrtt.Node{Name: "a", Addr: "127.0.0.1:9", TSCHz: 1e9}}))
	m = readReply(t, c4)
	require.Equal(t, CodeDuplicate, m.Code)
	require.Contains(t, m.Error, "registered already")
	require.Equal(t, uint64(8), s.Malformed(), "a taken name is not a malformed message")
	// A hello the server cannot use is refused and counted.
	c5, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c5.Close()
	require.NoError(t, WriteMessage(c5, &Message{Type: MsgHello, Node: &minrtt.Node{Name: "z", Addr: "0.0.0.0:9", TSCHz: 1e9}}))
	m = readReply(t, c5)
	require.Equal(t, CodeRefused, m.Code)
	require.Contains(t, m.Error, "not a usable ip:port")
	require.Equal(t, uint64(9), s.Malformed())

	r, _, err := s.RequestRound("still serving")
	require.NoError(t, err)
	require.Len(t, r.Dirs, 2)
	for _, d := range r.Dirs {
		require.Len(t, d.Probes, 5)
	}
}

// A client whose server speaks another version stops with a clear error
// instead of retrying forever.
func TestClientRefusesOtherVersion(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		ReadFrame(c)
		WriteMessage(c, &Message{V: 3, Type: MsgWelcome})
		time.Sleep(time.Second)
	}()
	c := &Client{Server: ln.Addr().String(), Node: "x", Freq: tsc.Frequency{Hz: 1e9, Source: "test"}}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrVersion)
		require.Contains(t, err.Error(), "protocol version 3")
	case <-time.After(5 * time.Second):
		c.Close()
		t.Fatal("client did not stop")
	}
}

// Clients come back to a restarted server by themselves.
func TestClientsReconnect(t *testing.T) {
	dir := t.TempDir()
	s1 := startServer(t, &Server{OutDir: dir, Probes: 5})
	addr := s1.Addr()
	startNode(t, addr, "a", mustFake(t, "1:0"), nil)
	startNode(t, addr, "b", mustFake(t, "1:0"), nil)
	waitNodes(t, s1, 2)
	_, _, err := s1.RequestRound("one")
	require.NoError(t, err)
	s1.Close()
	s2 := startServer(t, &Server{Listen: addr, OutDir: dir, Probes: 5})
	waitNodes(t, s2, 2)
	r, path, err := s2.RequestRound("two")
	require.NoError(t, err)
	require.Equal(t, 2, r.Round, "numbering continues after the files in the directory")
	require.Contains(t, path, "round-000002.json")
	names := []string{}
	for _, n := range r.Nodes {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	require.Equal(t, []string{"a", "b"}, names)
}

func TestEveryRunsDuringRounds(t *testing.T) {
	s := startServer(t, &Server{Probes: 3, Every: 100 * time.Millisecond})
	startNode(t, s.Addr(), "a", mustFake(t, "1:0"), nil)
	startNode(t, s.Addr(), "b", mustFake(t, "1:0"), nil)
	waitNodes(t, s, 2)
	require.Eventually(t, func() bool {
		rs, err := minrtt.ReadRounds(s.OutDir)
		return err == nil && len(rs) >= 2
	}, 5*time.Second, 20*time.Millisecond)
	rs, err := minrtt.ReadRounds(s.OutDir)
	require.NoError(t, err)
	for _, r := range rs {
		require.Equal(t, "during", r.Label, fmt.Sprint(r.Round))
	}
}

// A client pacing a long interval (it comes off the wire) still closes at
// once: the pacing wait gives way to shutdown.
func TestCloseDuringLongPacing(t *testing.T) {
	s := startServer(t, &Server{Probes: 3, Interval: time.Hour, RoundTimeout: 2 * time.Hour})
	a := startNode(t, s.Addr(), "a", mustFake(t, "1:0"), nil)
	startNode(t, s.Addr(), "b", mustFake(t, "1:0"), nil)
	waitNodes(t, s, 2)
	round := make(chan struct{})
	go func() {
		s.RequestRound("slow") //nolint:errcheck // the server is closed under it
		close(round)
	}()
	time.Sleep(300 * time.Millisecond) // the first probe went out; the second waits an hour
	a.c.Close()
	select {
	case <-a.done: // long before the hour: the pacing gave way
	case <-time.After(time.Minute): // a bound for a hung test, not a measurement
		t.Fatal("Run did not return within a minute of Close while pacing an hour")
	}
	a.done <- nil // for the cleanup's receive
	// The round ends with the server, before the test's directory goes.
	s.Close()
	select {
	case <-round:
	case <-time.After(time.Minute): // a bound for a hung test
		t.Fatal("RequestRound did not return within a minute of the server's Close")
	}
}

// Before it says who it is, a caller gets no megabyte buffers; past the
// connection cap it is refused with a reason; a node may answer only its
// own tasks.
func TestServerLimitsAndForeignResults(t *testing.T) {
	s := startServer(t, &Server{Probes: 20, Interval: 2 * time.Millisecond, MaxConns: 4, RoundTimeout: 3 * time.Second})
	big, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer big.Close()
	_, err = big.Write(frame(make([]byte, MaxFirstMessage+1)))
	require.NoError(t, err)
	m := readReply(t, big)
	require.Equal(t, CodeTooLarge, m.Code)
	require.Contains(t, m.Error, fmt.Sprint(MaxFirstMessage))

	startNode(t, s.Addr(), "a", mustFake(t, "1:0"), nil)
	startNode(t, s.Addr(), "b", mustFake(t, "1.0001:7"), nil)
	waitNodes(t, s, 2)
	// "x" registers by hand, then sends results for the task ids the round
	// gives a and b (ids count up from 1), which must be dropped.
	x, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer x.Close()
	require.NoError(t, WriteMessage(x, &Message{Type: MsgHello, Node: &minrtt.Node{Name: "x", Addr: "127.0.0.1:9", TSCHz: 1e9}}))
	require.Equal(t, MsgWelcome, readReply(t, x).Type)
	// The cap: once the big caller's connection is gone, a, b and x hold
	// three; a fourth fills it and a fifth is refused, with a reason.
	require.Eventually(t, func() bool { return s.openConns() == 3 }, 30*time.Second, 5*time.Millisecond)
	fourth, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.openConns() == 4 }, 30*time.Second, 5*time.Millisecond)
	fifth, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	em := readReply(t, fifth)
	require.Equal(t, CodeRefused, em.Code)
	require.Contains(t, em.Error, "too many connections (4)")
	fifth.Close()
	fourth.Close()

	// A task the server gave node a (as a round would): x's result for it is
	// dropped and counted; a's own result still gets through.
	ch := make(chan *Message, 1)
	s.mu.Lock()
	s.pending[1<<40] = pendingTask{ch, "a"}
	s.mu.Unlock()
	before := s.Malformed()
	require.NoError(t, WriteMessage(x, &Message{Type: MsgResult, Task: 1 << 40, Probes: []minrtt.Probe{{Send: 1, Resp: 2, Recv: 3}}}))
	require.Eventually(t, func() bool { return s.Malformed() == before+1 }, 5*time.Second, 5*time.Millisecond)
	select {
	case m := <-ch:
		t.Fatalf("a forged result got through: %+v", m)
	default:
	}
	s.mu.Lock()
	delete(s.pending, 1<<40)
	s.mu.Unlock()
	x.Close()
	require.Eventually(t, func() bool { return len(s.Nodes()) == 2 }, 5*time.Second, 5*time.Millisecond)
	r, _, err := s.RequestRound("after the forgery")
	require.NoError(t, err)
	for _, d := range r.Dirs {
		if d.Origin != "x" && d.Responder != "x" {
			require.Len(t, d.Probes, 20, "%s->%s: %s", d.Origin, d.Responder, d.Error)
		}
	}
}

// Two machines under one node name: the second client (another tsc_domain)
// is refused with "conflict" and its Run stops with ErrConflict instead of
// retrying forever; a client of the holder's own clock (a restart racing
// its old connection) is told "duplicate", retries, and registers once the
// holder leaves. The server keeps each node's domain for the rounds.
func TestNodeNameConflict(t *testing.T) {
	s := startServer(t, &Server{})
	// client runs a client for node "m" of the given clock; its wait
	// returns what Run returned (the cleanup closes it first).
	client := func(domain string) (c *Client, wait func() error) {
		hw := tsc.HardwareFreq()
		c = &Client{Server: s.Addr(), Node: "m", Domain: domain, Clock: tsc.Raw,
			Freq: tsc.Frequency{Hz: hw.Hz, Source: "test"}, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logf: t.Logf}
		done := make(chan error, 1)
		go func() { done <- c.Run(context.Background()) }()
		wait = sync.OnceValue(func() error { return <-done })
		t.Cleanup(func() { c.Close(); wait() })
		return c, wait
	}
	holder, holderWait := client("boot aaaa")
	waitNodes(t, s, 1)

	impostor, impostorWait := client("boot bbbb")
	time.AfterFunc(10*time.Second, impostor.Close) // were it to retry forever
	err := impostorWait()
	require.ErrorIs(t, err, ErrConflict, "a client of another clock must stop, not retry for a name another machine holds")
	require.Contains(t, err.Error(), "two machines under one node name")
	require.Contains(t, err.Error(), "boot aaaa")

	restarted, restartedWait := client("boot aaaa")
	time.Sleep(300 * time.Millisecond) // several refused attempts ("duplicate"): it keeps trying
	holder.Close()
	require.NoError(t, holderWait())
	require.Eventually(t, func() bool {
		ns := s.Nodes()
		return len(ns) == 1 && ns[0].Addr == restarted.UDPAddr()
	}, 10*time.Second, 10*time.Millisecond, "the restarted client of the holder's clock never registered")
	require.Equal(t, "boot aaaa", s.Nodes()[0].TSCDomain)
	restarted.Close()
	require.NoError(t, restartedWait())
}

// A round requested with a wait for nodes before the server listens (a
// script that starts both in the background) waits for the server too;
// without a wait for nodes, a refused connection is an error at once.
func TestRoundRequestWaitsForServerToListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // the port is free again: nothing listens there yet

	_, _, err = RequestRound(context.Background(), addr, RoundRequest{Label: "now"})
	require.ErrorIs(t, err, syscall.ECONNREFUSED)

	type result struct {
		sum *RoundSummary
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, sum, err := RequestRound(context.Background(), addr, RoundRequest{Label: "before", WaitNodes: 2, WaitTimeout: 20 * time.Second})
		done <- result{sum, err}
	}()
	time.Sleep(300 * time.Millisecond) // the requester is refused at least once
	s := startServer(t, &Server{Listen: addr, Probes: 10})
	startNode(t, s.Addr(), "a", mustFake(t, "1:0"), nil)
	startNode(t, s.Addr(), "b", mustFake(t, "1:5"), nil)
	select {
	case r := <-done:
		require.NoError(t, r.err)
		require.Equal(t, 2, r.sum.Nodes)
		require.Equal(t, "before", r.sum.Label)
	case <-time.After(60 * time.Second):
		t.Fatal("the round request never returned")
	}

	// The wait is bounded by WaitTimeout, and says what it waited for.
	_, _, err = RequestRound(context.Background(), "127.0.0.1:1", RoundRequest{WaitNodes: 2, WaitTimeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.ErrorContains(t, err, "no server listening within 200ms")
}
