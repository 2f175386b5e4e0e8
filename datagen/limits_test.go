package datagen

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// closedByPeer waits (30 s: a bound for a hung test, not a measurement)
// until the receiver closes c, and checks that it wrote nothing first.
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := c.Read(make([]byte, 1))
	require.Zero(t, n, "the receiver answered instead of closing")
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "still open after 30 s: %v", err)
}

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
		closedByPeer(t, a)
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
	closedByPeer(t, rawConn(t, addr))

	// Trickles a HELLO of 306 bytes, a byte every 20 ms (6 s in all), never
	// the last one: closed while it trickles, so the deadline is not per read.
	tr := rawConn(t, addr)
	h := Hello{RunID: 3, Threads: 1, Tuples: 1, Name: strings.Repeat("n", maxNameLen)}.encode()
	var written atomic.Int64
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		for i := 0; i < len(h)-1; i++ {
			if _, err := tr.Write(h[i : i+1]); err != nil {
				return
			}
			written.Add(1)
			select {
			case <-time.After(20 * time.Millisecond):
			case <-stop:
				return
			}
		}
	}()
	closedByPeer(t, tr)
	close(stop)
	<-trickled
	require.Less(t, written.Load(), int64(len(h)-1), "closed only when the trickle ended")

	// A HELLO and a bucket, then nothing.
	idle := rawConn(t, addr)
	idle.Write(Hello{RunID: 4, Threads: 1, Tuples: 5, Name: "idle"}.encode())
	idle.Write(bucket(0))
	closedByPeer(t, idle)
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
