package confserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits bound what clients can hold of the server (API.md, "Limits").
// Zero fields take the defaults.
type Limits struct {
	// MaxConns: connections open at once (default 1024, and never more
	// than the process's file limit less 64). When a new connection comes
	// at the cap, the one that has waited longest for its client (to send
	// a request, or the rest of one) is closed to make room; when every
	// one is being answered (long-polling watches), the new one is closed
	// at once. So clients that never finish a request cannot lock others
	// out.
	MaxConns int
	// ReadHeaderTimeout: a request's line and headers must arrive within
	// this (default 5 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout: the whole request, headers and body, must arrive within
	// this of its first byte (default 15 s); a body still short then gets
	// 408.
	ReadTimeout time.Duration
	// WriteTimeout: writing an answer (default 30 s; a watch gets its
	// wait on top).
	WriteTimeout time.Duration
	// IdleTimeout: a kept-alive connection with no request for this long
	// is closed (default 60 s).
	IdleTimeout time.Duration
	// MaxHeaderBytes: a request's line and headers, at most (default 64
	// KiB: a channel name of MaxName bytes fits percent-encoded); more
	// gets 431.
	MaxHeaderBytes int
}

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if l.MaxConns <= 0 {
		l.MaxConns = 1024
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil && rl.Cur < uint64(l.MaxConns)+64 {
		l.MaxConns = max(16, int(rl.Cur)-64)
	}
	def(&l.ReadHeaderTimeout, 5*time.Second)
	def(&l.ReadTimeout, 15*time.Second)
	def(&l.WriteTimeout, 30*time.Second)
	def(&l.IdleTimeout, 60*time.Second)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
	return l
}

// Serve answers the API on ln with s.Limits until ctx ends, then shuts
// down: requests in flight get 2 s to finish, and Serve returns when they
// have (or were cut). It returns nil after a shutdown, else why it stopped.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	lim := s.Limits.withDefaults()
	cl := &connLimiter{Listener: ln, max: lim.MaxConns, conns: map[*limitedConn]struct{}{}}
	s.conns.Store(cl)
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if lc, ok := c.(*limitedConn); ok {
				return context.WithValue(ctx, connKey{}, lc)
			}
			return ctx
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if lc, ok := c.(*limitedConn); ok && st == http.StateIdle {
				lc.waiting()
			}
		},
	}
	shut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(shut)
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close() // the grace is over: what is left is cut
		}
	})
	err := srv.Serve(cl)
	if stop() { // not shut down: Serve failed
		return err
	}
	<-shut // Serve returns as Shutdown begins: wait for the requests in flight
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ConnStats counts what the connection cap did since Serve began.
type ConnStats struct {
	Open    int    // connections open now
	Waiting int    // of them, waiting for their client (a request, or the rest of one): evictable
	Evicted uint64 // closed to make room: they had waited longest for their client
	Refused uint64 // closed at once: every open one was being answered
}

// Conns says what the connection cap did (zero before Serve).
func (s *Server) Conns() ConnStats {
	cl := s.conns.Load()
	if cl == nil {
		return ConnStats{}
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	st := ConnStats{Open: len(cl.conns), Evicted: cl.evicted.Load(), Refused: cl.refused.Load()}
	for c := range cl.conns {
		if c.state.Load() == connWaiting {
			st.Waiting++
		}
	}
	return st
}

type connKey struct{}

// answering marks the request's connection as being answered: its request
// is in whole, so it no longer waits for its client and is not evicted.
func answering(r *http.Request) {
	if lc, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		lc.state.CompareAndSwap(connWaiting, connAnswering)
	}
}

// Connection states for the cap.
const (
	connWaiting   = iota // for its client: a request, or the rest of one
	connAnswering        // its request is in: being answered
	connEvicted
)

// connLimiter caps the connections its Accept hands out (Limits.MaxConns).
type connLimiter struct {
	net.Listener
	max              int
	mu               sync.Mutex
	conns            map[*limitedConn]struct{}
	evicted, refused atomic.Uint64
}

type limitedConn struct {
	net.Conn
	l     *connLimiter
	state atomic.Int32
	since atomic.Int64 // when it began waiting for its client (ns)
}

func (c *limitedConn) waiting() {
	c.since.Store(time.Now().UnixNano())
	c.state.CompareAndSwap(connAnswering, connWaiting)
}

func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l}
		lc.since.Store(time.Now().UnixNano())
		var victim *limitedConn
		l.mu.Lock()
		if len(l.conns) >= l.max {
			for o := range l.conns {
				if o.state.Load() == connWaiting && (victim == nil || o.since.Load() < victim.since.Load()) {
					victim = o
				}
			}
			// Claimed only if it still waits: one that just began to be
			// answered is left alone.
			if victim != nil && !victim.state.CompareAndSwap(connWaiting, connEvicted) {
				victim = nil
			}
			if victim != nil {
				delete(l.conns, victim)
			}
		}
		full := len(l.conns) >= l.max
		if !full {
			l.conns[lc] = struct{}{}
		}
		l.mu.Unlock()
		if victim != nil {
			l.evicted.Add(1)
			victim.Conn.Close()
		}
		if full {
			l.refused.Add(1)
			c.Close()
			continue
		}
		return lc, nil
	}
}
