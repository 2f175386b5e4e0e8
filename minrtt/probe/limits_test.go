package probe

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"cloudprofiler/datagen/nettest"
	"cloudprofiler/minrtt"

	"github.com/stretchr/testify/require"
)

// A caller has HelloTimeout in all for its first message (a byte now and
// then does not keep it open); a registered node may idle between rounds,
// but a message it begins must arrive whole within MessageTimeout.
func TestServerTimeouts(t *testing.T) {
	s := startServer(t, &Server{HelloTimeout: 300 * time.Millisecond, MessageTimeout: 300 * time.Millisecond})

	silent, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer silent.Close()
	nettest.ClosedByPeer(t, silent)

	// A hello trickled a byte every 20 ms (several seconds), never the last.
	tr, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer tr.Close()
	hello := frame([]byte(`{"v":1,"type":"hello","node":{"name":"` + strings.Repeat("n", 200) +
		`","addr":"127.0.0.1:9","tsc_hz":1e9}}`))
	stop := nettest.Trickle(tr, hello, 20*time.Millisecond)
	nettest.ClosedByPeer(t, tr)
	require.Less(t, stop(), len(hello)-1, "closed only when the trickle ended")
	require.Empty(t, s.Nodes())

	// A registered node that idles stays registered...
	raw, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, WriteMessage(raw, &Message{Type: MsgHello, Node: &minrtt.Node{Name: "raw", Addr: "127.0.0.1:9", TSCHz: 1e9}}))
	require.Equal(t, MsgWelcome, readReply(t, raw).Type)
	time.Sleep(1 * time.Second) // more than three message timeouts, idle
	require.Len(t, s.Nodes(), 1, "idle between rounds is not a timeout")
	// ... until it starts a message and stops halfway.
	half := binary.BigEndian.AppendUint32(nil, 100)
	_, err = raw.Write(append(half, `{"v":1,"type":`...))
	require.NoError(t, err)
	nettest.ClosedByPeer(t, raw)
	require.Eventually(t, func() bool { return len(s.Nodes()) == 0 }, 30*time.Second, 5*time.Millisecond)
	require.Zero(t, s.Malformed(), "slow is not malformed")
}

// A round request may not hold its connection longer than MaxWait, however
// long it asks to wait for nodes.
func TestRoundRequestWaitIsCapped(t *testing.T) {
	s := startServer(t, &Server{MaxWait: 200 * time.Millisecond})
	c, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, WriteMessage(c, &Message{Type: MsgRoundRequest, Label: "x", WaitNodes: 5, WaitTimeoutNs: int64(time.Hour)}))
	c.SetReadDeadline(time.Now().Add(time.Minute)) // a bound for a hung test; the hour would fail it
	body, err := ReadFrame(c)
	require.NoError(t, err)
	m, err := DecodeMessage(body)
	require.NoError(t, err)
	require.Equal(t, MsgRoundDone, m.Type)
	require.Contains(t, m.Error, "waiting for nodes: 0 of 5 nodes registered")
}

// A length prefix that claims a megabyte costs nothing until its bytes
// come: 200 such frames cut after 10 bytes allocate far less than 200 MiB.
func TestReadFrameGrowsAsBytesArrive(t *testing.T) {
	claim := append(binary.BigEndian.AppendUint32(nil, MaxMessage), make([]byte, 10)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 200; i++ {
		_, err := ReadFrame(strings.NewReader(string(claim)))
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	}
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(20<<20))

	// And a body arriving a byte at a time, or a whole megabyte, is read whole.
	body := make([]byte, MaxMessage)
	for i := range body {
		body[i] = byte(i)
	}
	got, err := ReadFrame(iotest.OneByteReader(bytes.NewReader(frame(body[:5000]))))
	require.NoError(t, err)
	require.Equal(t, body[:5000], got)
	got, err = ReadFrame(bytes.NewReader(frame(body)))
	require.NoError(t, err)
	require.Equal(t, body, got)
}
