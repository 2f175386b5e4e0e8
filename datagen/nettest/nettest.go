// Package nettest has test helpers for the servers' bounds (gen recv, the
// TSC server, the configuration server): a peer that trickles a message,
// and the check that the server closed a connection. Tests only.
package nettest

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// Bound is how long ClosedByPeer waits: a bound for a hung test, not a
// measurement.
const Bound = 30 * time.Second

// ClosedByPeer waits until the other end closes c, and fails the test if
// it wrote anything first or has not closed within Bound.
func ClosedByPeer(t testing.TB, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(Bound))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("still open after %s", Bound)
	}
	if len(b) > 0 {
		t.Fatalf("the peer answered %q instead of closing", b)
	}
}

// Trickle writes all of msg but its last byte to c, one byte every
// interval, in the background; stop ends it and returns how many bytes it
// wrote. A server that gives a message a deadline in all (not per read)
// closes c long before the trickle would end.
func Trickle(c net.Conn, msg []byte, every time.Duration) (stop func() int) {
	var written atomic.Int64
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < len(msg)-1; i++ {
			if _, err := c.Write(msg[i : i+1]); err != nil {
				return
			}
			written.Add(1)
			select {
			case <-time.After(every):
			case <-quit:
				return
			}
		}
	}()
	return func() int {
		close(quit)
		<-done
		return int(written.Load())
	}
}
