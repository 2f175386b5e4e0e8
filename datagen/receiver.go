package datagen

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Report is what a receiver saw of one connection (one sending thread):
// the REPORT frame's body (FRAMING.md).
type Report struct {
	RunID         uint64      `json:"run_id"`
	Sender        string      `json:"sender"`
	Thread        uint32      `json:"thread"`
	Threads       uint32      `json:"threads"`
	FirstID       uint64      `json:"first_id"`
	Sent          uint64      `json:"sent"` // from END (or HELLO's plan when the connection broke)
	Received      uint64      `json:"received"`
	Lost          uint64      `json:"lost"`
	OutOfOrder    uint64      `json:"out_of_order"`
	Duplicates    uint64      `json:"duplicates"`
	OutOfRange    uint64      `json:"out_of_range"`
	Dropped       uint64      `json:"dropped"`
	Bytes         uint64      `json:"bytes"`
	Gaps          [][2]uint64 `json:"gaps"`
	GapsTruncated bool        `json:"gaps_truncated"`
	Seconds       float64     `json:"seconds"` // first bucket to END
	Error         string      `json:"error,omitempty"`
}

const maxGaps = 100

// ReceiverConfig configures a receiver (cloudprofiler gen recv).
type ReceiverConfig struct {
	Listen string
	// Capacity, when > 0, makes the receiver a stand-in system under test:
	// it processes at most Capacity tuples per second (all connections
	// together), buffers at most Queue tuples (default 10000) and drops
	// whole buckets that do not fit, as a system that sheds load does. The
	// drops are counted, and their ids come out as gaps. A bucket larger
	// than the whole queue is taken when the queue is empty.
	Capacity float64
	Queue    int
	// MaxConns bounds concurrent connections (default 1024): more are
	// closed at once and counted (Refused).
	MaxConns int
	// HelloTimeout: a connection must send its whole HELLO within this
	// (default 10 s, in all, not per read); IdleTimeout: after the HELLO,
	// each frame must arrive whole within this, so a connection that sends
	// nothing for this long is closed, its report saying so (default 5 min).
	HelloTimeout, IdleTimeout time.Duration
	// OnReport is called once per connection, when its stream ends.
	OnReport func(Report)
	// Logf, if set, says why a connection closed before its stream began
	// (a malformed or missing HELLO); a stream's own end is in its Report.
	Logf func(format string, args ...any)
}

// Receiver accepts sender connections and accounts for every tuple id.
type Receiver struct {
	cfg     ReceiverConfig
	ln      net.Listener
	queue   chan item // the stand-in SUT's queue (Capacity > 0)
	queued  atomic.Int64
	closing atomic.Bool
	refused atomic.Uint64
	// malformed counts connections closed for a frame that could not be parsed.
	malformed atomic.Uint64
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]bool
	closed    bool
	stop      chan struct{} // closed when Close begins
	done      chan struct{}
}

type item struct {
	s     *stream
	ids   []uint64
	bytes int
	end   chan struct{} // an end marker: closed when everything before it is processed
}

// stream is one connection's accounting. Without a queue only its reader
// goroutine touches acc; with one, only the processing goroutine until the
// end marker has passed.
type stream struct {
	acc     *accounting
	bytes   uint64
	dropped atomic.Uint64
	firstAt time.Time
}

// NewReceiver listens on cfg.Listen.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	switch {
	case cfg.Capacity < 0:
		return nil, fmt.Errorf("gen recv: --capacity must be >= 0, not %g", cfg.Capacity)
	case cfg.Queue < 0:
		return nil, fmt.Errorf("gen recv: --queue must be > 0, not %d", cfg.Queue)
	}
	if cfg.Queue == 0 {
		cfg.Queue = 10000
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 1024
	}
	if cfg.HelloTimeout <= 0 {
		cfg.HelloTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 5 * time.Minute
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("gen recv: %w", err)
	}
	r := &Receiver{cfg: cfg, ln: ln, conns: map[net.Conn]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.Capacity > 0 {
		r.queue = make(chan item, 1<<12)
		r.wg.Add(1)
		go r.process()
	}
	return r, nil
}

// Addr is the address it listens on.
func (r *Receiver) Addr() net.Addr { return r.ln.Addr() }

// Refused counts connections closed at once because MaxConns were open.
func (r *Receiver) Refused() uint64 { return r.refused.Load() }

// Malformed counts connections closed because of a frame that could not
// be parsed (before or after the HELLO).
func (r *Receiver) Malformed() uint64 { return r.malformed.Load() }

// Serve accepts connections until ctx ends or Close. Accept errors (out of
// file descriptors...) are retried after a pause that grows to 1 s.
func (r *Receiver) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer stop()
	backoff := 5 * time.Millisecond
	for {
		c, err := r.ln.Accept()
		if err != nil {
			if r.isClosed() {
				return nil
			}
			select {
			case <-time.After(backoff):
			case <-r.done:
				return nil
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return nil
		}
		if len(r.conns) >= r.cfg.MaxConns {
			r.mu.Unlock()
			r.refused.Add(1)
			c.Close()
			continue
		}
		r.conns[c] = true
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serveConn(c)
	}
}

func (r *Receiver) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// Close stops accepting, closes every connection, discards what the
// stand-in queue holds, and waits for all of it to end.
func (r *Receiver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.done
		return nil
	}
	r.closed = true
	r.closing.Store(true)
	close(r.stop)
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	if r.queue != nil {
		// The processing goroutine ends when every connection has: wait for
		// them (each passes its end marker), then close its queue.
		go func() {
			for {
				r.mu.Lock()
				n := len(r.conns)
				r.mu.Unlock()
				if n == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			close(r.queue)
		}()
	}
	r.wg.Wait()
	close(r.done)
	return err
}

func (r *Receiver) serveConn(c net.Conn) {
	defer func() {
		c.Close()
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		r.wg.Done()
	}()
	// A bug in a decoder must cost this connection only, never the
	// receiver (the fuzz tests call the decoders without this net).
	defer func() {
		if p := recover(); p != nil {
			r.malformed.Add(1)
			r.logf("gen recv: %s: internal error, connection closed: %v", c.RemoteAddr(), p)
		}
	}()
	br := bufio.NewReaderSize(c, 64<<10)
	c.SetReadDeadline(time.Now().Add(r.cfg.HelloTimeout))
	typ, body, err := readFrame(br, nil, senderFrames)
	if err == nil && typ != frameHello {
		err = malformedf("first frame of type %d, want HELLO", typ)
	}
	var h Hello
	if err == nil {
		h, err = decodeHello(body)
	}
	if err != nil { // not a sender: nothing to account for
		if errors.Is(err, errMalformed) {
			r.malformed.Add(1)
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("no HELLO within %s", r.cfg.HelloTimeout)
		}
		if !r.closing.Load() && !errors.Is(err, io.EOF) {
			r.logf("gen recv: %s: closed before a stream: %v", c.RemoteAddr(), err)
		}
		return
	}
	s := &stream{acc: newAccounting(h.FirstID, h.Tuples)}
	rep := Report{RunID: h.RunID, Sender: h.Name, Thread: h.Thread, Threads: h.Threads, FirstID: h.FirstID, Sent: h.Tuples}
	var buf []byte
	var end *End
	for end == nil && err == nil {
		c.SetReadDeadline(time.Now().Add(r.cfg.IdleTimeout))
		typ, buf, err = readFrame(br, buf, senderFrames)
		if err == nil {
			end, err = r.handleFrame(&h, s, typ, buf)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, errMalformed):
		r.malformed.Add(1)
	case r.closing.Load():
		err = errors.New("receiver closed")
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		err = errors.New("connection closed before END")
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("nothing received for %s: closed", r.cfg.IdleTimeout)
	}
	if r.queue != nil { // wait until the processing goroutine is past this stream
		done := make(chan struct{})
		r.queue <- item{s: s, end: done}
		<-done
	}
	if end != nil {
		rep.Sent = end.Tuples
	}
	if err != nil {
		rep.Error = err.Error()
	}
	s.acc.finish(rep.Sent)
	s.acc.report(&rep)
	rep.Dropped, rep.Bytes = s.dropped.Load(), s.bytes
	if !s.firstAt.IsZero() {
		rep.Seconds = time.Since(s.firstAt).Seconds()
	}
	if end != nil {
		js, _ := json.Marshal(rep)
		frame := appendFrameHeader(nil, len(js)+1, frameReport)
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write(append(frame, js...))
	}
	if r.cfg.OnReport != nil {
		r.cfg.OnReport(rep)
	}
}

// handleFrame takes one frame of a stream past its HELLO: a BUCKET is
// accounted for (or queued for the stand-in), END ends the stream (its
// End is returned). An error ends the connection.
func (r *Receiver) handleFrame(h *Hello, s *stream, typ byte, body []byte) (*End, error) {
	switch typ {
	case frameBucket:
		if s.firstAt.IsZero() {
			s.firstAt = time.Now()
		}
		if r.queue != nil {
			return nil, r.enqueue(s, body)
		}
		_, err := forEachTuple(body, func(id uint64, p []byte) { s.acc.add(id); s.bytes += uint64(len(p)) + recordHeader })
		return nil, err
	case frameEnd:
		e, err := decodeEnd(body)
		if err != nil {
			return nil, err
		}
		if e.Tuples > h.Tuples {
			return nil, malformedf("END says %d tuples sent, HELLO planned %d", e.Tuples, h.Tuples)
		}
		return &e, nil
	}
	return nil, malformedf("unexpected frame type %d", typ)
}

func (r *Receiver) logf(format string, a ...any) {
	if r.cfg.Logf != nil {
		r.cfg.Logf(format, a...)
	}
}

// enqueue hands a bucket to the stand-in SUT, or drops it when its queue is
// full (the ids then come out as a gap).
func (r *Receiver) enqueue(s *stream, body []byte) error {
	var ids []uint64
	var bytes int
	if _, err := forEachTuple(body, func(id uint64, p []byte) { ids = append(ids, id); bytes += len(p) + recordHeader }); err != nil {
		return err
	}
	n := int64(len(ids))
	for {
		q := r.queued.Load()
		if q > 0 && q+n > int64(r.cfg.Queue) {
			s.dropped.Add(uint64(n))
			return nil
		}
		if r.queued.CompareAndSwap(q, q+n) {
			break
		}
	}
	r.queue <- item{s: s, ids: ids, bytes: bytes}
	return nil
}

// process is the stand-in SUT: at most Capacity tuples per second. Once
// the receiver is closing it discards what is left without waiting.
func (r *Receiver) process() {
	defer r.wg.Done()
	free := time.Now()
	for it := range r.queue {
		if it.end != nil {
			close(it.end)
			continue
		}
		if !r.closing.Load() {
			// A token bucket: free is when the capacity spent so far is
			// used up. It may lag now by up to 5 ms, so a sleep that
			// overshoots is made up by the next buckets instead of lowering
			// the capacity.
			now := time.Now()
			if lag := now.Add(-5 * time.Millisecond); free.Before(lag) {
				free = lag
			}
			free = free.Add(time.Duration(float64(len(it.ids)) / r.cfg.Capacity * 1e9))
			if d := free.Sub(now); d > 0 {
				t := time.NewTimer(d) // Close does not wait for a slow bucket
				select {
				case <-t.C:
				case <-r.stop:
					t.Stop()
				}
			}
		}
		for _, id := range it.ids {
			it.s.acc.add(id)
		}
		it.s.bytes += uint64(it.bytes)
		r.queued.Add(-int64(len(it.ids)))
	}
}
