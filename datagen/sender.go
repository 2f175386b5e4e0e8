package datagen

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sync"
	"time"
)

// SendConfig is one run of the sender (cloudprofiler gen send).
type SendConfig struct {
	To       string        // receiver address host:port
	Rate     float64       // target tuples per second, all threads together
	Duration time.Duration // the run's length: Rate*Duration tuples are sent
	Threads  int           // connections, one thread each; each sends Rate/Threads
	Payloads Payloads      // serialized tuples, cycled (LoadTuples, Synthetic)
	// BucketInterval is the time one bucket's tuples span at the target
	// rate (default 1 ms): a thread wakes once per bucket, so it sleeps,
	// never spins, and the rate stays exact over the run.
	BucketInterval time.Duration
	RunID          uint64        // default: the start time in ns
	Name           string        // default host-pid
	ReportTimeout  time.Duration // how long to wait for the receiver's REPORT (default 10 s)
	// Tolerance is how far below the target the achieved rate may be and
	// still count as reached (default 0.005: 0.5%).
	Tolerance float64
	// WriteTimeout: a bucket whose write blocks this long (the receiver
	// stopped reading) ends the thread with an error (default 10 s).
	WriteTimeout time.Duration
}

// ThreadResult is what one sending thread did.
type ThreadResult struct {
	Thread          int
	FirstID         uint64
	Planned         uint64
	Tuples, Buckets uint64
	Bytes           uint64
	Elapsed         time.Duration // from the common start to its last write
	MaxLag          time.Duration // how late, at most, a bucket was written
	Report          *Report       // the receiver's; nil if it sent none
	Err             error         `json:"-"`
	Error           string        `json:"error,omitempty"` // Err's text
}

// SendResult is a run's outcome.
type SendResult struct {
	RunID    uint64
	Target   float64
	Planned  uint64
	Tuples   uint64        // sent
	Elapsed  time.Duration // the slowest thread's
	Achieved float64       // Tuples / max(Duration, Elapsed)
	// Reached: every planned tuple was sent, without error, at a rate at
	// least Target*(1-Tolerance).
	Reached bool
	MaxLag  time.Duration
	Threads []ThreadResult
	// Summed over the threads' REPORTs (Reports of them).
	Reports                             int
	Received, Lost, Dropped, OutOfOrder uint64
	ReceiverSaw                         bool // every thread got a REPORT
	GapsTruncated                       bool
	FirstGaps                           [][2]uint64
}

// Check validates the configuration.
func (c *SendConfig) Check() error {
	switch {
	case c.To == "":
		return errors.New("gen send: --to ADDR is required")
	case !(c.Rate > 0) || math.IsInf(c.Rate, 0):
		return fmt.Errorf("gen send: --rate must be > 0 tuples/s, not %g", c.Rate)
	case c.Duration <= 0:
		return fmt.Errorf("gen send: --duration must be > 0, not %s", c.Duration)
	case c.Threads < 1 || c.Threads > 1024:
		return fmt.Errorf("gen send: --threads must be 1..1024, not %d", c.Threads)
	case len(c.Payloads) == 0:
		return errors.New("gen send: no tuples (--tuples FILE or --synthetic)")
	case c.Rate*c.Duration.Seconds() > float64(c.Threads)*(1<<threadIDShift):
		return errors.New("gen send: more than 2^40 tuples per thread")
	}
	return nil
}

func (c *SendConfig) defaults() {
	if c.BucketInterval <= 0 {
		c.BucketInterval = time.Millisecond
	}
	if c.RunID == 0 {
		c.RunID = uint64(time.Now().UnixNano())
	}
	if c.Name == "" {
		h, _ := os.Hostname()
		c.Name = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if len(c.Name) > maxNameLen {
		c.Name = c.Name[:maxNameLen]
	}
	if c.ReportTimeout <= 0 {
		c.ReportTimeout = 10 * time.Second
	}
	if c.Tolerance <= 0 {
		c.Tolerance = 0.005
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
}

// Send runs the sender: every thread connects and says HELLO, then all
// start together; each sends its share as buckets on its own schedule
// (bucket k is due at start + k*B/r: a thread that wakes late catches up
// without sleeping, and the rate over the run is exact), then END, then
// waits for the receiver's REPORT. ctx cancels the run (what was sent is
// reported, END is still sent).
func Send(ctx context.Context, cfg SendConfig) (*SendResult, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	cfg.defaults()
	total := uint64(math.Round(cfg.Rate * cfg.Duration.Seconds()))
	if total == 0 {
		return nil, fmt.Errorf("gen send: %g tuples/s for %s is no tuple at all", cfg.Rate, cfg.Duration)
	}
	T := uint64(cfg.Threads)
	conns := make([]net.Conn, cfg.Threads)
	plans := make([]uint64, cfg.Threads)
	for t := range conns {
		plans[t] = total / T
		if uint64(t) < total%T {
			plans[t]++
		}
	}
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	for t := range conns {
		c, err := d.DialContext(ctx, "tcp", cfg.To)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("gen send: connecting thread %d to %s: %w", t, cfg.To, err)
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		conns[t] = c
		h := Hello{RunID: cfg.RunID, Thread: uint32(t), Threads: uint32(cfg.Threads), FirstID: uint64(t) << threadIDShift,
			Tuples: plans[t], Rate: cfg.Rate / float64(cfg.Threads), Name: cfg.Name}
		if _, err := c.Write(h.encode()); err != nil {
			closeAll()
			return nil, fmt.Errorf("gen send: HELLO to %s: %w", cfg.To, err)
		}
	}
	defer closeAll()
	// Cancelling ends blocked writes and reads at once.
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.SetDeadline(time.Now())
		}
	})
	defer stop()

	start := time.Now().Add(20 * time.Millisecond)
	res := &SendResult{RunID: cfg.RunID, Target: cfg.Rate, Planned: total, Threads: make([]ThreadResult, cfg.Threads)}
	var wg sync.WaitGroup
	for t := range conns {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			res.Threads[t] = sendThread(ctx, &cfg, conns[t], t, plans[t], start)
			if e := res.Threads[t].Err; e != nil {
				res.Threads[t].Error = e.Error()
			}
		}(t)
	}
	wg.Wait()

	res.ReceiverSaw = true
	for _, tr := range res.Threads {
		res.Tuples += tr.Tuples
		res.Elapsed = max(res.Elapsed, tr.Elapsed)
		res.MaxLag = max(res.MaxLag, tr.MaxLag)
		if tr.Report == nil {
			res.ReceiverSaw = false
			continue
		}
		res.Reports++
		r := tr.Report
		res.Received += r.Received
		res.Lost += r.Lost
		res.Dropped += r.Dropped
		res.OutOfOrder += r.OutOfOrder
		res.GapsTruncated = res.GapsTruncated || r.GapsTruncated
		for _, g := range r.Gaps {
			if len(res.FirstGaps) < 20 {
				res.FirstGaps = append(res.FirstGaps, g)
			}
		}
	}
	res.Achieved = float64(res.Tuples) / max(cfg.Duration, res.Elapsed).Seconds()
	res.Reached = res.Tuples == total && res.Achieved >= cfg.Rate*(1-cfg.Tolerance)
	for _, tr := range res.Threads {
		if tr.Err != nil {
			res.Reached = false
		}
	}
	return res, nil
}

func sendThread(ctx context.Context, cfg *SendConfig, c net.Conn, t int, n uint64, start time.Time) ThreadResult {
	tr := ThreadResult{Thread: t, FirstID: uint64(t) << threadIDShift, Planned: n}
	if n == 0 {
		tr.Report, tr.Err = finish(c, cfg, &tr)
		return tr
	}
	r := cfg.Rate / float64(cfg.Threads) // this thread's tuples per second
	// Bucket size: the tuples of one BucketInterval, at most 64Ki tuples,
	// and at most 4 MiB even if every tuple were the largest (a bucket of
	// one tuple of 16 MiB is the exception): always within FRAMING.md's
	// 64 MiB.
	biggest := 0
	for _, p := range cfg.Payloads {
		biggest = max(biggest, len(p))
	}
	B := int(math.Round(r * cfg.BucketInterval.Seconds()))
	B = max(1, min(B, 65536, (4<<20)/(biggest+recordHeader)))
	tmpl, offs := buildTemplate(cfg.Payloads, B, t)
	P := len(offs) - 1 // records in the template, a multiple of B

	if d := time.Until(start); d > 0 {
		time.Sleep(d)
	}
	var hdr [9]byte
	hdr[4] = frameBucket
	id := tr.FirstID
	for k := uint64(0); tr.Tuples < n; k++ {
		if ctx.Err() != nil {
			tr.Err = ctx.Err()
			break
		}
		cnt := int(min(uint64(B), n-tr.Tuples))
		due := start.Add(time.Duration(float64(tr.Tuples) / r * 1e9))
		now := time.Now()
		if now.Before(due) {
			time.Sleep(due.Sub(now))
			now = time.Now()
		}
		tr.MaxLag = max(tr.MaxLag, now.Sub(due))
		s := int((k * uint64(B)) % uint64(P))
		for i := 0; i < cnt; i++ { // the ids, patched into the preloaded records
			binary.BigEndian.PutUint64(tmpl[offs[s+i]:], id)
			id++
		}
		body := tmpl[offs[s]:offs[s+cnt]]
		binary.BigEndian.PutUint32(hdr[0:], uint32(1+4+len(body)))
		binary.BigEndian.PutUint32(hdr[5:], uint32(cnt))
		bufs := net.Buffers{hdr[:], body}
		c.SetWriteDeadline(now.Add(cfg.WriteTimeout))
		if ctx.Err() != nil { // cancelled meanwhile: the AfterFunc's deadline may have been overwritten
			tr.Err = ctx.Err()
			break
		}
		if _, err := bufs.WriteTo(c); err != nil {
			tr.Err = fmt.Errorf("thread %d: writing bucket %d: %w", t, k, err)
			break
		}
		tr.Tuples += uint64(cnt)
		tr.Buckets++
		tr.Bytes += uint64(len(body)) + 9
		tr.Elapsed = time.Since(start)
	}
	rep, err := finish(c, cfg, &tr)
	tr.Report = rep
	if tr.Err == nil {
		tr.Err = err
	}
	return tr
}

// finish sends END and waits for the REPORT. A receiver that closes the
// connection or says nothing within ReportTimeout gives no report (no
// error: not every receiver speaks REPORT).
func finish(c net.Conn, cfg *SendConfig, tr *ThreadResult) (*Report, error) {
	if tr.Err != nil && !errors.Is(tr.Err, context.Canceled) {
		return nil, nil // the connection is broken: no END, no report
	}
	c.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
	if _, err := c.Write(End{Tuples: tr.Tuples, Buckets: tr.Buckets}.encode()); err != nil {
		return nil, fmt.Errorf("thread %d: END: %w", tr.Thread, err)
	}
	wait := cfg.ReportTimeout
	if tr.Err != nil { // cancelled: what the receiver says is still worth a moment, no more
		wait = min(wait, time.Second)
	}
	c.SetReadDeadline(time.Now().Add(wait))
	typ, body, err := readFrame(bufio.NewReader(c), nil, receiverFrames)
	if err != nil {
		return nil, nil
	}
	if typ != frameReport {
		return nil, fmt.Errorf("thread %d: the receiver answered END with frame type %d", tr.Thread, typ)
	}
	rep, err := decodeReport(body)
	if err != nil {
		return nil, fmt.Errorf("thread %d: %w", tr.Thread, err)
	}
	return &rep, nil
}

// buildTemplate lays out records (id placeholder, length, payload) for a
// multiple of B tuples, at least as many as there are payloads, starting
// at payload t (threads send different tuples); offs[i] is record i's
// offset, offs[P] the end.
func buildTemplate(p Payloads, B, t int) ([]byte, []int) {
	P := (len(p) + B - 1) / B * B
	size := 0
	for i := 0; i < P; i++ {
		size += recordHeader + len(p[(i+t)%len(p)])
	}
	tmpl := make([]byte, 0, size)
	offs := make([]int, 0, P+1)
	for i := 0; i < P; i++ {
		b := p[(i+t)%len(p)]
		offs = append(offs, len(tmpl))
		tmpl = binary.BigEndian.AppendUint64(tmpl, 0)
		tmpl = binary.BigEndian.AppendUint32(tmpl, uint32(len(b)))
		tmpl = append(tmpl, b...)
	}
	return tmpl, append(offs, len(tmpl))
}
