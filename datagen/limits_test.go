package datagen

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"cloudprofiler/datagen/nettest"

	"github.com/stretchr/testify/require"
)

// END frames shorter than their two u64 (the receiver used to index past
// them and exit): each closes its own connection with a clear error, while
// a stream under way on another connection carries on to its REPORT.
func TestShortEndClosesOnlyItsConnection(t *testing.T) {
	r, reports := startReceiver(t, ReceiverConfig{})
	addr := r.Addr().String()
	b := rawConn(t, addr)
	_, err := b.Write(append(Hello{RunID: 2, Threads: 1, Tuples: 3, Name: "b"}.encode(), bucket(0)...))
	require.NoError(t, err)

	shorts := [][]byte{nil, {1, 2, 3}, make([]byte, 8), make([]byte, 15)}
	for i, body := range shorts {
		a := rawConn(t, addr)
		a.Write(Hello{RunID: 1, Threads: 1, Tuples: 2, Name: fmt.Sprintf("a%d", i)}.encode())
		a.Write(bucket(0, 1))
		a.Write(append(appendFrameHeader(nil, len(body)+1, frameEnd), body...))
		nettest.ClosedByPeer(t, a)
	}
	require.Eventually(t, func() bool { return len(reports()) == len(shorts) }, 30*time.Second, 5*time.Millisecond)
	for _, rep := range reports() {
		require.True(t, strings.HasPrefix(rep.Sender, "a"), "%+v", rep)
		require.Contains(t, rep.Error, "malformed: END of ")
		require.Contains(t, rep.Error, "bytes, want 16")
		require.EqualValues(t, 2, rep.Received, "the buckets before it are accounted for")
	}
	require.EqualValues(t, len(shorts), r.Malformed())

	_, err = b.Write(append(bucket(1, 2), End{Tuples: 3, Buckets: 2}.encode()...))
	require.NoError(t, err)
	rep := readReport(t, b)
	require.Empty(t, rep.Error)
	require.EqualValues(t, 3, rep.Received)
	require.Zero(t, rep.Lost)
}

// A connection has HelloTimeout in all to send its HELLO (a byte now and
// then does not keep it open), and after it IdleTimeout per frame.
func TestHelloAndIdleTimeouts(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	r, reports := startReceiver(t, ReceiverConfig{HelloTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond,
		Logf: func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }})
	addr := r.Addr().String()

	// Says nothing.
	nettest.ClosedByPeer(t, rawConn(t, addr))

	// Trickles a HELLO of 306 bytes, a byte every 20 ms (6 s in all), never
	// the last one: closed while it trickles, so the deadline is not per read.
	tr := rawConn(t, addr)
	h := Hello{RunID: 3, Threads: 1, Tuples: 1, Name: strings.Repeat("n", maxNameLen)}.encode()
	stop := nettest.Trickle(tr, h, 20*time.Millisecond)
	nettest.ClosedByPeer(t, tr)
	require.Less(t, stop(), len(h)-1, "closed only when the trickle ended")

	// A HELLO and a bucket, then nothing.
	idle := rawConn(t, addr)
	idle.Write(Hello{RunID: 4, Threads: 1, Tuples: 5, Name: "idle"}.encode())
	idle.Write(bucket(0))
	nettest.ClosedByPeer(t, idle)
	require.Eventually(t, func() bool { return len(reports()) == 1 }, 30*time.Second, 5*time.Millisecond)
	rep := reports()[0]
	require.Equal(t, "nothing received for 300ms: closed", rep.Error)
	require.EqualValues(t, 1, rep.Received)
	require.EqualValues(t, 4, rep.Lost)

	mu.Lock()
	require.Equal(t, 2, strings.Count(strings.Join(logs, "\n"), "no HELLO within 300ms"), "%q", logs)
	mu.Unlock()
	require.Zero(t, r.Malformed(), "a slow or silent peer is not a malformed one")

	// It still serves (one write: no pause for the short timeouts to catch).
	c := rawConn(t, addr)
	frames := Hello{RunID: 5, Threads: 1, Tuples: 2, Name: "ok"}.encode()
	frames = append(append(frames, bucket(0, 1)...), End{Tuples: 2, Buckets: 1}.encode()...)
	_, err := c.Write(frames)
	require.NoError(t, err)
	rep = readReport(t, c)
	require.Empty(t, rep.Error)
	require.EqualValues(t, 2, rep.Received)
}
