package probe

import (
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cloudprofiler/minrtt"
	"cloudprofiler/tsc"
)

// A timestamp placed from a bracket is bounded on both sides by the
// counter at its instant, for any counter whose rate is within the
// tolerance of the stated frequency, on either side of the bracket and up
// to the furthest it may be; the bounds are tight to within the bracket's
// width and the tolerance over the distance.
func TestClockMapBoundsTheCounter(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 20000; i++ {
		hz := 1e9 * (0.5 + 3*rng.Float64())
		k := hz / 1e9 * (1 + (2*rng.Float64()-1)*rateTolerance*0.999) // the counter's true cycles per ns
		c0 := uint64(1<<40) + rng.Uint64N(1<<50)
		at := func(ns float64) uint64 { return c0 + uint64(math.Floor(ns*k)) } // the counter at ns
		t0 := 1e6 + rng.Float64()*1e6                                          // the bracket's first reading
		w := 10 + rng.Float64()*200                                            // its width
		tr := t0 + rng.Float64()*w                                             // its CLOCK_REALTIME reading
		b := bracket{before: at(t0), after: at(t0 + w), rt: int64(math.Round(tr))}
		d := (2*rng.Float64() - 1) * 1e5 // the timestamp, up to 100 us either side
		if rng.IntN(10) == 0 {
			d = (2*rng.Float64() - 1) * 0.99 * float64(maxBracketNs) // or up to the furthest placed
		}
		tau := tr + d
		r := int64(math.Round(tau)) // its timestamp
		cm := newClockMap(hz)
		lo, ok1 := cm.lowerAt(b, r)
		hi, ok2 := cm.upperAt(b, r)
		require.True(t, ok1 && ok2)
		truth := at(tau)
		require.LessOrEqual(t, lo, truth, "case %d: hz %.0f k %.9f d %.0f", i, hz, k, d)
		require.GreaterOrEqual(t, hi, truth, "case %d: hz %.0f k %.9f d %.0f", i, hz, k, d)
		require.Less(t, float64(hi-lo), w*k+2*rateTolerance*math.Abs(d)*hz/1e9+4*stampSlackNs*k+4, "case %d: tight", i)
	}
	cm := newClockMap(3e9)
	_, ok := cm.lowerAt(bracket{rt: 0}, 2*maxBracketNs)
	require.False(t, ok, "a timestamp further from its bracket than maxBracketNs is not placed")
	_, ok = cm.lowerAt(bracket{before: 5, after: 9, rt: 1000}, 10)
	require.False(t, ok, "a counter below zero is not a reading")
	_, ok = cm.upperAt(bracket{before: 5, after: 9, rt: 1000}, 10)
	require.False(t, ok)
}

// Kernel timestamps need both nodes: toward a node that answers version 1
// only (an older client, or --timestamps user) the origin says so and the
// probes are the processes', as in version 1; between the others they are
// the kernels'. Every probe is causal either way.
func TestKernelTimestampsNeedBothNodes(t *testing.T) {
	s := startServer(t, &Server{Probes: 30, Interval: 100 * time.Microsecond})
	fakes := map[string]tsc.Fake{"a": mustFake(t, "1:1000000"), "b": mustFake(t, "1.0003:99"), "old": mustFake(t, "0.9998:5000")}
	for name, f := range fakes {
		startNode(t, s.Addr(), name, f, nil, func(c *Client) { c.UserTimestamps = name == "old" })
	}
	waitNodes(t, s, 3)
	r, _, err := s.RequestRound("mixed")
	require.NoError(t, err)
	checkCausality(t, r, fakes)
	checkCausality(t, r.UserTimed(), fakes)
	for _, n := range r.Nodes {
		if n.Name == "old" {
			require.Zero(t, n.ProbeVersion)
		} else {
			require.Equal(t, PacketVersionKernel, n.ProbeVersion)
		}
	}
	for _, d := range r.Dirs {
		require.Len(t, d.Probes, 30, d.Error)
		switch {
		case d.Responder == "old":
			require.Equal(t, "user: the responder answers probe version 1 only", d.Timestamps, "%s->%s", d.Origin, d.Responder)
			require.Nil(t, d.UserProbes)
		case d.Origin == "old":
			require.Empty(t, d.Timestamps, "old->%s: an origin timing with its process says nothing", d.Responder)
			require.Nil(t, d.UserProbes)
		default:
			require.Equal(t, "kernel", d.Timestamps, "%s->%s", d.Origin, d.Responder)
			require.Equal(t, 30, d.KernelProbes)
			require.Len(t, d.UserProbes, 30)
			for i, p := range d.Probes {
				u := d.UserProbes[i]
				require.Less(t, p.RTT(), u.RTT(), "%s->%s probe %d: the kernels' interval is inside the processes'", d.Origin, d.Responder, i)
			}
		}
	}
}

// A duplicated request is answered twice, each reply with its own receipt
// and turn; the next reply's PrevTurnNs is of the later one. The origin
// keeps the first reply and must not take the other's turn for it: every
// kernel-timed probe stays causal. A relay between the origin and the
// responder sends every request on twice, the copy 0-40 µs later, and
// every reply back.
func TestDuplicatedRequestsStayCausal(t *testing.T) {
	fakes := map[string]tsc.Fake{"o": mustFake(t, "1:1000000"), "r": mustFake(t, "1.0007:424242")}
	hw := tsc.HardwareFreq()
	clients := map[string]*Client{}
	for name, f := range fakes {
		c := &Client{Node: name, Clock: func() uint64 { return f.Apply(tsc.Raw()) },
			Freq: tsc.Frequency{Hz: hw.Hz * f.Rate(), Source: "test"}, Logf: t.Logf}
		c.init()
		require.NoError(t, c.openUDP(netip.MustParseAddr("127.0.0.1")))
		t.Cleanup(c.Close)
		clients[name] = c
	}
	relay, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	t.Cleanup(func() { relay.Close() })
	respAddr := netip.MustParseAddrPort(clients["r"].UDPAddr())
	go func() {
		buf := make([]byte, 64)
		var origin netip.AddrPort
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			n, from, err := relay.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			if from == respAddr {
				relay.WriteToUDPAddrPort(buf[:n], origin)
				continue
			}
			origin = from
			relay.WriteToUDPAddrPort(buf[:n], respAddr)
			time.Sleep(time.Duration(rng.IntN(40)) * time.Microsecond)
			relay.WriteToUDPAddrPort(buf[:n], respAddr)
		}
	}()
	res := clients["o"].originate(&Message{Type: MsgProbe, Round: 1, Task: 7, Responder: "r", Addr: relay.LocalAddr().String(),
		Count: 200, IntervalNs: int64(200 * time.Microsecond), TimeoutNs: int64(50 * time.Millisecond), BudgetNs: int64(5 * time.Second),
		ProbeVersion: PacketVersionKernel})
	require.True(t, strings.HasPrefix(res.Timestamps, "kernel"), "%s %s", res.Timestamps, res.Error)
	require.Greater(t, res.KernelProbes, 150, res.Timestamps)
	require.Positive(t, clients["o"].Stale(), "the duplicates' replies came and were dropped")
	r := &minrtt.Round{Dirs: []minrtt.Direction{{Origin: "o", Responder: "r", Probes: res.Probes, UserProbes: res.UserProbes}}}
	checkCausality(t, r, fakes)
	checkCausality(t, r.UserTimed(), fakes)
}
