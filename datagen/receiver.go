package datagen

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
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
	// drops are counted, and their ids come out as gaps.
	Capacity float64
	Queue    int
	// OnReport is called once per connection, when its stream ends.
	OnReport func(Report)
}

// Receiver accepts sender connections and accounts for every tuple id.
type Receiver struct {
	cfg    ReceiverConfig
	ln     net.Listener
	queue  chan item // the stand-in SUT's queue (Capacity > 0)
	queued atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
}

type item struct {
	s       *stream
	ids     []uint64
	bytes   int
	dropped int           // a bucket dropped because the queue was full
	end     chan struct{} // an end marker: closed when everything before it is processed
}

// stream is one connection's accounting. Without a queue only its reader
// goroutine touches it; with one, only the processing goroutine (and the
// reader after the end marker).
type stream struct {
	h       Hello
	next    uint64
	rep     Report
	firstAt time.Time
}

// NewReceiver listens on cfg.Listen.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Capacity < 0 {
		return nil, fmt.Errorf("gen recv: --capacity must be >= 0, not %g", cfg.Capacity)
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 10000
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("gen recv: %w", err)
	}
	r := &Receiver{cfg: cfg, ln: ln, conns: map[net.Conn]bool{}}
	if cfg.Capacity > 0 {
		r.queue = make(chan item, 1<<16)
		r.wg.Add(1)
		go r.process()
	}
	return r, nil
}

// Addr is the address it listens on.
func (r *Receiver) Addr() net.Addr { return r.ln.Addr() }

// Serve accepts connections until ctx ends or Close.
func (r *Receiver) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { r.Close() })
	defer stop()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			r.mu.Lock()
			closed := r.closed
			r.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return nil
		}
		r.conns[c] = true
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serveConn(c)
	}
}

// Close stops accepting, closes every connection and waits for them.
func (r *Receiver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	err := r.ln.Close()
	if r.queue != nil {
		// The processing goroutine ends when every connection has: wait for
		// those, then close its queue.
		go func() {
			r.waitConns()
			close(r.queue)
		}()
	}
	r.wg.Wait()
	return err
}

func (r *Receiver) waitConns() {
	for {
		r.mu.Lock()
		n := len(r.conns)
		r.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *Receiver) serveConn(c net.Conn) {
	defer func() {
		c.Close()
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		r.wg.Done()
	}()
	br := bufio.NewReaderSize(c, 1<<20)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, body, err := readFrame(br, nil)
	if err != nil || typ != frameHello {
		return // not a sender: nothing to account for
	}
	h, err := decodeHello(body)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	s := &stream{h: h, next: h.FirstID}
	s.rep = Report{RunID: h.RunID, Sender: h.Name, Thread: h.Thread, Threads: h.Threads, FirstID: h.FirstID, Sent: h.Tuples}
	var buf []byte
	var end *End
	for end == nil {
		typ, buf, err = readFrame(br, buf)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("connection closed before END")
			}
			break
		}
		switch typ {
		case frameBucket:
			if s.firstAt.IsZero() {
				s.firstAt = time.Now()
			}
			if r.queue == nil {
				_, err = forEachTuple(buf, func(id uint64, p []byte) { s.account(id, len(p)) })
			} else {
				err = r.enqueue(s, buf)
			}
		case frameEnd:
			if len(buf) != 16 {
				err = fmt.Errorf("END of %d bytes, want 16", len(buf))
				break
			}
			end = &End{Tuples: binary.BigEndian.Uint64(buf), Buckets: binary.BigEndian.Uint64(buf[8:])}
		default:
			err = fmt.Errorf("unexpected frame type %d", typ)
		}
		if err != nil {
			break
		}
	}
	if r.queue != nil { // wait until the processing goroutine is past this stream
		done := make(chan struct{})
		r.queue <- item{s: s, end: done}
		<-done
	}
	if end != nil {
		s.rep.Sent = end.Tuples
	}
	if err != nil {
		s.rep.Error = err.Error()
	}
	if expected := s.rep.FirstID + s.rep.Sent; s.next < expected {
		s.gap(s.next, expected-1)
		s.next = expected
	}
	if !s.firstAt.IsZero() {
		s.rep.Seconds = time.Since(s.firstAt).Seconds()
	}
	if end != nil {
		js, _ := json.Marshal(s.rep)
		frame := appendFrameHeader(nil, len(js)+1, frameReport)
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write(append(frame, js...))
	}
	if r.cfg.OnReport != nil {
		r.cfg.OnReport(s.rep)
	}
}

// account one tuple id of the stream: in order, a gap, or out of order.
func (s *stream) account(id uint64, n int) {
	s.rep.Received++
	s.rep.Bytes += uint64(n) + recordHeader
	switch {
	case id == s.next:
		s.next++
	case id > s.next:
		s.gap(s.next, id-1)
		s.next = id + 1
	default:
		s.rep.OutOfOrder++
	}
}

func (s *stream) gap(from, to uint64) {
	s.rep.Lost += to - from + 1
	if len(s.rep.Gaps) < maxGaps {
		s.rep.Gaps = append(s.rep.Gaps, [2]uint64{from, to})
	} else {
		s.rep.GapsTruncated = true
	}
}

// enqueue hands a bucket to the stand-in SUT, or drops it when its queue is
// full (the ids then come out as a gap).
func (r *Receiver) enqueue(s *stream, body []byte) error {
	var ids []uint64
	var bytes int
	if _, err := forEachTuple(body, func(id uint64, p []byte) { ids = append(ids, id); bytes += len(p) }); err != nil {
		return err
	}
	if r.queued.Load()+int64(len(ids)) > int64(r.cfg.Queue) {
		// Only the processing goroutine touches the stream's counters:
		// tell it through the queue (an item without ids still counts).
		r.queue <- item{s: s, dropped: len(ids)}
		return nil
	}
	r.queued.Add(int64(len(ids)))
	r.queue <- item{s: s, ids: ids, bytes: bytes}
	return nil
}

// process is the stand-in SUT: at most Capacity tuples per second.
func (r *Receiver) process() {
	defer r.wg.Done()
	free := time.Now()
	for it := range r.queue {
		if it.end != nil {
			close(it.end)
			continue
		}
		if it.dropped > 0 {
			it.s.rep.Dropped += uint64(it.dropped)
			continue
		}
		// A token bucket: free is when the capacity spent so far is used
		// up. It may lag now by up to 5 ms, so a sleep that overshoots is
		// made up by the next buckets instead of lowering the capacity.
		now := time.Now()
		if lag := now.Add(-5 * time.Millisecond); free.Before(lag) {
			free = lag
		}
		free = free.Add(time.Duration(float64(len(it.ids)) / r.cfg.Capacity * 1e9))
		if d := free.Sub(now); d > 0 {
			time.Sleep(d)
		}
		for _, id := range it.ids {
			it.s.account(id, 0)
		}
		it.s.rep.Bytes += uint64(it.bytes)
		r.queued.Add(-int64(len(it.ids)))
	}
}
