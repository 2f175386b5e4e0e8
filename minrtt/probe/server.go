package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloudprofiler/minrtt"
)

// Server is the TSC server: it accepts client registrations and round
// requests on one TCP listener and runs rounds, writing each into OutDir.
type Server struct {
	Listen       string        // TCP address, e.g. "10.0.0.1:7071" or "127.0.0.1:0"
	OutDir       string        // where rounds files go
	Probes       int           // probes per direction, default 100
	Interval     time.Duration // between probe sends, default 200us
	ProbeTimeout time.Duration // how long an origin awaits one reply, default 50ms
	// RoundTimeout is how long the server waits for one origin's result in
	// a step of a round before it lists that node as missing; it is also
	// the budget the origin gets for its probes. Default 10s.
	RoundTimeout time.Duration
	Every        time.Duration // run a round labelled "during" this often; 0: never
	Name         string        // Round.Server; default the listen address
	MaxConns     int           // open control connections at most; default DefaultMaxConns
	// HelloTimeout: a connection's first message (a hello or a round
	// request) must arrive whole within this (in all; default 10 s).
	HelloTimeout time.Duration
	// MessageTimeout: a registered node's later messages may be far apart
	// (a node idles between rounds), but each must arrive whole within this
	// of its first byte (default 30 s), else the node's connection closes.
	MessageTimeout time.Duration
	// MaxWait caps what a round request may ask to wait for its nodes
	// (default 10 min).
	MaxWait time.Duration
	Logf    func(format string, args ...any)

	ln        net.Listener
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	mu        sync.Mutex
	peers     map[string]*peer
	conns     map[net.Conn]struct{}
	changed   chan struct{} // closed and replaced when peers change
	pending   map[uint64]pendingTask
	nextTask  uint64
	roundMu   sync.Mutex // one round at a time
	round     int
	malformed atomic.Uint64
	stale     atomic.Uint64
}

// peer is a registered client's control connection.
type peer struct {
	node minrtt.Node
	conn net.Conn
	wmu  sync.Mutex
	gone chan struct{} // closed when the connection ended
	why  string        // set before gone closes
}

func (p *peer) send(m *Message) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return WriteMessage(p.conn, m)
}

func (p *peer) goneWhy() (string, bool) {
	select {
	case <-p.gone:
		return p.why, true
	default:
		return "", false
	}
}

// Start listens and serves in the background until ctx ends or Close.
func (s *Server) Start(ctx context.Context) error {
	if s.OutDir == "" {
		return errors.New("tsc server: no output directory")
	}
	if s.Probes <= 0 {
		s.Probes = 100
	}
	if s.Probes > MaxProbes {
		return fmt.Errorf("tsc server: %d probes per direction, at most %d", s.Probes, MaxProbes)
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&s.Interval, 200 * time.Microsecond}, {&s.ProbeTimeout, 50 * time.Millisecond}, {&s.RoundTimeout, 10 * time.Second},
		{&s.HelloTimeout, 10 * time.Second}, {&s.MessageTimeout, 30 * time.Second}, {&s.MaxWait, 10 * time.Minute},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if s.Logf == nil {
		s.Logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(s.OutDir, 0o755); err != nil {
		return err
	}
	// Continue numbering after the rounds already in OutDir, so that a
	// restarted server never overwrites an earlier round's file.
	s.round = lastRound(s.OutDir)
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return err
	}
	s.ln = ln
	if s.Name == "" {
		s.Name = ln.Addr().String()
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.peers = map[string]*peer{}
	s.conns = map[net.Conn]struct{}{}
	s.changed = make(chan struct{})
	s.pending = map[uint64]pendingTask{}
	// Task ids are the UDP session ids: a random start keeps a restarted
	// server's sessions apart from a previous run's; < 2^53 keeps them
	// exact in JSON for any reader.
	s.nextTask = rand.Uint64N(1 << 50)
	context.AfterFunc(s.ctx, func() { ln.Close() })
	s.wg.Add(1)
	go s.accept()
	if s.Every > 0 {
		s.wg.Add(1)
		go s.periodic()
	}
	return nil
}

// lastRound is the highest round number among dir's rounds files.
func lastRound(dir string) int {
	names, _ := filepath.Glob(filepath.Join(dir, "round-*.json"))
	last := 0
	for _, n := range names {
		v, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(n), "round-"), ".json"))
		if err == nil && v > last {
			last = v
		}
	}
	return last
}

// Addr is the address the server listens on (after Start).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Malformed is how many control messages the server dropped as malformed,
// oversized or of another version since it started.
func (s *Server) Malformed() uint64 { return s.malformed.Load() }

// Close stops the server: the listener and every connection close, a round
// in progress ends with an error, and Close waits for the goroutines.
func (s *Server) Close() error {
	if s.cancel == nil {
		return nil // never started
	}
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Nodes returns the registered nodes, ordered by name.
func (s *Server) Nodes() []minrtt.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ns []minrtt.Node
	for _, p := range s.peers {
		ns = append(ns, p.node)
	}
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	return ns
}

// WaitNodes blocks until at least n nodes are registered or ctx ends.
func (s *Server) WaitNodes(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		have, ch := len(s.peers), s.changed
		s.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes registered: %w", have, n, ctx.Err())
		case <-s.ctx.Done():
			return errors.New("server closed")
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) periodic() {
	defer s.wg.Done()
	t := time.NewTicker(s.Every)
	defer t.Stop()
	last := "" // say each new reason for skipping once, not every tick
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			_, _, err := s.RequestRound("during")
			why := ""
			if err != nil {
				why = err.Error()
			}
			if why != last && why != "" && s.ctx.Err() == nil {
				s.Logf("tsc-server: periodic round: %v", err)
			}
			last = why
		}
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			s.Logf("tsc-server: accept: %v", err)
			time.Sleep(50 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		s.mu.Lock()
		if s.ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			return
		}
		if len(s.conns) >= s.maxConns() {
			s.mu.Unlock()
			s.malformed.Add(1)
			refuse(c, CodeRefused, fmt.Sprintf("too many connections (%d): try again later", s.maxConns()))
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			c.Close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// openConns is how many control connections are open now.
func (s *Server) openConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// pendingTask is a probe task a round waits for: its result comes only from
// the node it was given to.
type pendingTask struct {
	ch     chan *Message
	origin string
}

// DefaultMaxConns bounds the server's open control connections (nodes,
// round requests and callers that have not said who they are yet).
const DefaultMaxConns = 1024

func (s *Server) maxConns() int {
	if s.MaxConns > 0 {
		return s.MaxConns
	}
	return DefaultMaxConns
}

// refuse answers with an error message; the caller closes the connection.
func refuse(c net.Conn, code, why string) {
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	WriteMessage(c, &Message{Type: MsgError, Code: code, Error: why})
}

// next reads the next message for the server. Malformed bodies are counted
// and skipped (the framing is intact); an oversized one or another version
// gets an error answer and ends the connection (returned as an error).
// With idle, the wait for a message's first byte is unbounded and the
// message then has MessageTimeout to arrive whole; without, the caller's
// deadline stands.
func (s *Server) next(c net.Conn, r *bufio.Reader, max uint32, idle bool) (*Message, error) {
	for {
		if idle {
			c.SetReadDeadline(time.Time{})
			if _, err := r.Peek(1); err != nil {
				return nil, err
			}
			c.SetReadDeadline(time.Now().Add(s.MessageTimeout))
		}
		body, err := ReadFrameMax(r, max)
		if err != nil {
			var tl *TooLargeError
			if errors.As(err, &tl) {
				s.malformed.Add(1)
				refuse(c, CodeTooLarge, tl.Error())
			}
			return nil, err
		}
		m, err := DecodeMessage(body)
		if err != nil {
			s.malformed.Add(1)
			s.Logf("tsc-server: %s: dropped: %v", c.RemoteAddr(), err)
			continue
		}
		if m.V != ProtocolVersion {
			s.malformed.Add(1)
			why := versionError("client", m.V)
			refuse(c, CodeVersion, why)
			return nil, errors.New(why)
		}
		return m, nil
	}
}

func (s *Server) serveConn(c net.Conn) {
	r := bufio.NewReader(c)
	// The first message says who is calling; it must come soon.
	c.SetReadDeadline(time.Now().Add(s.HelloTimeout))
	var m *Message
	for {
		var err error
		if m, err = s.next(c, r, MaxFirstMessage, false); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.Logf("tsc-server: %s: no hello or round request within %s: closed", c.RemoteAddr(), s.HelloTimeout)
			}
			return
		}
		if m.Type == MsgHello || m.Type == MsgRoundRequest {
			break
		}
		s.malformed.Add(1) // nothing else may come first
	}
	c.SetReadDeadline(time.Time{})
	if m.Type == MsgRoundRequest {
		s.serveRoundRequest(c, m)
		return
	}
	p, code, err := s.register(c, m)
	if err != nil {
		if code != CodeDuplicate { // a taken name is a setup mistake, not a bad message
			s.malformed.Add(1)
		}
		refuse(c, code, err.Error())
		s.Logf("tsc-server: %s: registration refused: %v", c.RemoteAddr(), err)
		return
	}
	// register returned with p.wmu held: a round that picked the node up
	// already cannot send it a task before the welcome.
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	err = WriteMessage(c, &Message{Type: MsgWelcome, Server: s.Name})
	p.wmu.Unlock()
	if err != nil {
		s.unregister(p, "welcome: "+err.Error())
		return
	}
	s.Logf("tsc-server: node %s registered from %s (pid %d, probes on %s, TSC %.6f GHz from %s)",
		p.node.Name, p.node.Host, p.node.PID, p.node.Addr, p.node.TSCHz/1e9, p.node.TSCHzSource)
	why := "connection closed"
	for {
		m, err := s.next(c, r, MaxMessage, true)
		if err != nil {
			switch {
			case s.ctx.Err() != nil:
				why = "server closing"
			case errors.Is(err, os.ErrDeadlineExceeded):
				why = fmt.Sprintf("a message not in whole within %s of its first byte: closed", s.MessageTimeout)
			case !errors.Is(err, io.EOF):
				why = "connection lost: " + err.Error()
			}
			break
		}
		if m.Type != MsgResult {
			s.malformed.Add(1)
			continue
		}
		s.mu.Lock()
		pt, ok := s.pending[m.Task]
		s.mu.Unlock()
		if !ok {
			s.stale.Add(1) // a result the round stopped waiting for
			continue
		}
		if pt.origin != p.node.Name {
			s.malformed.Add(1) // only the node given the task answers it
			s.Logf("tsc-server: node %s sent a result for task %d, given to %s: dropped", p.node.Name, m.Task, pt.origin)
			continue
		}
		select {
		case pt.ch <- m:
		default:
			s.stale.Add(1) // a second result for one task
		}
	}
	s.unregister(p, why)
	s.Logf("tsc-server: node %s left: %s", p.node.Name, why)
}

// register adds a node; a refusal comes with its error code. On success the
// peer's write lock is held, for the caller to send the welcome first.
func (s *Server) register(c net.Conn, m *Message) (*peer, string, error) {
	if err := checkHello(m); err != nil {
		return nil, CodeRefused, err
	}
	n := m.Node
	p := &peer{node: *n, conn: c, gone: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.peers[n.Name]; old != nil {
		if o, d := old.node.TSCDomain, n.TSCDomain; o != "" && d != "" && o != d {
			s.Logf("tsc-server: node name %q claimed by host %s pid %d (clock %s) while host %s pid %d (clock %s) holds it: refused",
				n.Name, n.Host, n.PID, d, old.node.Host, old.node.PID, o)
			return nil, CodeConflict, fmt.Errorf("node name %q is held by host %s, pid %d, whose TSC is another clock (%s; yours: %s): two machines under one node name: give each its own --node (and CP_NODE)",
				n.Name, old.node.Host, old.node.PID, o, d)
		}
		return nil, CodeDuplicate, fmt.Errorf("node name %q is registered already (host %s, pid %d, probes on %s): give each node its own --node",
			n.Name, old.node.Host, old.node.PID, old.node.Addr)
	}
	p.wmu.Lock()
	s.peers[n.Name] = p
	s.notifyLocked()
	return p, "", nil
}

// checkHello says what makes a hello unusable, if anything: no node name,
// no TSC frequency, a probe address that is not a usable ip:port.
func checkHello(m *Message) error {
	n := m.Node
	if n == nil || n.Name == "" {
		return errors.New("hello without a node name")
	}
	if !(n.TSCHz > 0) {
		return fmt.Errorf("node %s: TSC frequency %v", n.Name, n.TSCHz)
	}
	ap, err := netip.ParseAddrPort(n.Addr)
	if err != nil || ap.Addr().IsUnspecified() || ap.Port() == 0 {
		return fmt.Errorf("node %s: probe address %q is not a usable ip:port", n.Name, n.Addr)
	}
	return nil
}

func (s *Server) unregister(p *peer, why string) {
	s.mu.Lock()
	if s.peers[p.node.Name] == p {
		delete(s.peers, p.node.Name)
		s.notifyLocked()
	}
	s.mu.Unlock()
	p.why = why
	close(p.gone)
	p.conn.Close()
}

// serveRoundRequest runs a round for a remote requester (tsc-round).
func (s *Server) serveRoundRequest(c net.Conn, m *Message) {
	reply := &Message{Type: MsgRoundDone}
	if m.WaitNodes > 0 {
		wait := time.Duration(m.WaitTimeoutNs)
		if wait <= 0 {
			wait = 10 * time.Second
		}
		wait = min(wait, s.MaxWait)
		ctx, cancel := context.WithTimeout(s.ctx, wait)
		err := s.WaitNodes(ctx, m.WaitNodes)
		cancel()
		if err != nil {
			reply.Error = "waiting for nodes: " + err.Error()
			WriteMessage(c, reply)
			return
		}
	}
	r, path, err := s.RequestRound(m.Label)
	if err != nil {
		reply.Error = err.Error()
	} else {
		reply.Path, reply.Summary = path, Summarize(r)
	}
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := WriteMessage(c, reply); err != nil {
		s.Logf("tsc-server: round request from %s: the requester is gone: %v", c.RemoteAddr(), err)
	}
}

// Summarize condenses a round for a requester.
func Summarize(r *minrtt.Round) *RoundSummary {
	hz := map[string]float64{}
	for _, n := range r.Nodes {
		hz[n.Name] = n.TSCHz
	}
	sum := &RoundSummary{Round: r.Round, Label: r.Label, Nodes: len(r.Nodes), PerDir: r.PerDir,
		Missing: r.Missing, Malformed: r.Malformed}
	for _, d := range r.Dirs {
		ds := DirSummary{Origin: d.Origin, Responder: d.Responder, Sent: d.Sent, Probes: len(d.Probes),
			TSCHz: hz[d.Origin], Error: d.Error, Timestamps: d.Timestamps}
		for i, p := range d.Probes {
			if i == 0 || p.RTT() < ds.MinRTT {
				ds.MinRTT = p.RTT()
			}
		}
		for i, p := range d.UserProbes {
			if i == 0 || p.RTT() < ds.MinRTTUser {
				ds.MinRTTUser = p.RTT()
			}
		}
		sum.Dirs = append(sum.Dirs, ds)
	}
	return sum
}

// ErrTooFewNodes: a round needs two registered nodes.
var ErrTooFewNodes = errors.New("a round needs at least 2 registered nodes")

// roundState is what the steps of one round share.
type roundState struct {
	mu        sync.Mutex
	missing   map[string]string
	malformed map[string]uint64
}

func (rs *roundState) miss(node, why string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, ok := rs.missing[node]; !ok {
		rs.missing[node] = why
	}
}

// absent says why a node can no longer take part, if it cannot.
func (rs *roundState) absent(p *peer) (string, bool) {
	if why, gone := p.goneWhy(); gone {
		rs.miss(p.node.Name, why)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	why, ok := rs.missing[p.node.Name]
	return why, ok
}

// RequestRound runs one round now (after any round in progress) over the
// nodes registered at its start, writes it and returns it with its path.
func (s *Server) RequestRound(label string) (*minrtt.Round, string, error) {
	s.roundMu.Lock()
	defer s.roundMu.Unlock()
	if s.ctx.Err() != nil {
		return nil, "", errors.New("server closed")
	}
	s.mu.Lock()
	var peers []*peer
	for _, p := range s.peers {
		peers = append(peers, p)
	}
	s.mu.Unlock()
	if len(peers) < 2 {
		return nil, "", fmt.Errorf("%w, have %d", ErrTooFewNodes, len(peers))
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].node.Name < peers[j].node.Name })
	s.round++
	r := &minrtt.Round{Round: s.round, Label: label, Server: s.Name, StartedNs: time.Now().UnixNano(),
		PerDir: s.Probes}
	n := len(peers)
	for _, p := range peers {
		r.Nodes = append(r.Nodes, p.node)
	}
	// Directions ordered by origin, then responder.
	r.Dirs = make([]minrtt.Direction, 0, n*(n-1))
	index := map[[2]int]int{}
	for a := range peers {
		for b := range peers {
			if a != b {
				index[[2]int{a, b}] = len(r.Dirs)
				r.Dirs = append(r.Dirs, minrtt.Direction{Origin: peers[a].node.Name,
					Responder: peers[b].node.Name, Probes: []minrtt.Probe{}})
			}
		}
	}
	rs := &roundState{missing: map[string]string{}, malformed: map[string]uint64{}}
	m0 := s.malformed.Load()
	for _, st := range schedule(n) {
		var wg sync.WaitGroup
		for _, d := range st {
			dir := &r.Dirs[index[d]]
			o, q := peers[d[0]], peers[d[1]]
			if why, ok := rs.absent(o); ok {
				dir.Error = fmt.Sprintf("origin %s missing: %s", o.node.Name, why)
				continue
			}
			if why, ok := rs.absent(q); ok {
				dir.Error = fmt.Sprintf("responder %s missing: %s", q.node.Name, why)
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.runDirection(r.Round, rs, o, q, dir)
			}()
		}
		wg.Wait()
		if s.ctx.Err() != nil {
			return nil, "", errors.New("server closed during the round")
		}
	}
	r.EndedNs = time.Now().UnixNano()
	for name, why := range rs.missing {
		r.Missing = append(r.Missing, minrtt.Missing{Node: name, Why: why})
	}
	sort.Slice(r.Missing, func(i, j int) bool { return r.Missing[i].Node < r.Missing[j].Node })
	if d := s.malformed.Load() - m0; d > 0 {
		rs.malformed["server"] += d
	}
	if len(rs.malformed) > 0 {
		r.Malformed = rs.malformed
	}
	path, err := minrtt.WriteRound(s.OutDir, r)
	if err != nil {
		return nil, "", fmt.Errorf("round %d: %w", r.Round, err)
	}
	s.Logf("tsc-server: round %d (%s): %d nodes, %d directions, %d missing -> %s",
		r.Round, label, n, len(r.Dirs), len(r.Missing), path)
	return r, path, nil
}

// runDirection has the origin probe the responder and fills dir.
func (s *Server) runDirection(round int, rs *roundState, o, q *peer, dir *minrtt.Direction) {
	ch := make(chan *Message, 1)
	s.mu.Lock()
	s.nextTask++
	task := s.nextTask
	s.pending[task] = pendingTask{ch, o.node.Name}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.pending, task)
		s.mu.Unlock()
	}()
	err := o.send(&Message{Type: MsgProbe, Round: round, Task: task, Responder: q.node.Name, Addr: q.node.Addr,
		Count: s.Probes, IntervalNs: int64(s.Interval), TimeoutNs: int64(s.ProbeTimeout), BudgetNs: int64(s.RoundTimeout),
		ProbeVersion: q.node.ProbeVersion})
	if err != nil {
		why := "sending it a probe task failed: " + err.Error()
		rs.miss(o.node.Name, why)
		dir.Error = "origin " + o.node.Name + ": " + why
		return
	}
	t := time.NewTimer(s.RoundTimeout + time.Second) // the origin's budget, and slack to report
	defer t.Stop()
	select {
	case m := <-ch:
		s.takeResult(rs, o, m, dir)
	case <-o.gone:
		rs.miss(o.node.Name, "left mid-round: "+o.why)
		dir.Error = fmt.Sprintf("origin %s left mid-round: %s", o.node.Name, o.why)
	case <-t.C:
		why := fmt.Sprintf("no result within the round timeout (%v)", s.RoundTimeout)
		rs.miss(o.node.Name, why)
		dir.Error = "origin " + o.node.Name + ": " + why
	case <-s.ctx.Done():
		dir.Error = "server closing"
	}
	if why, gone := q.goneWhy(); gone {
		rs.miss(q.node.Name, "left mid-round: "+why)
		if len(dir.Probes) < s.Probes {
			dir.Error = strings.TrimSuffix(fmt.Sprintf("responder %s left mid-round (%s); %s", q.node.Name, why, dir.Error), "; ")
		}
	}
}

// takeResult checks an origin's result before it goes into the file: a
// probe that does not fit (received before sent) would make the whole file
// unreadable, so it is dropped and said so.
func (s *Server) takeResult(rs *roundState, o *peer, m *Message, dir *minrtt.Direction) {
	rs.mu.Lock()
	if m.Malformed > 0 {
		rs.malformed[o.node.Name] += m.Malformed
	}
	rs.mu.Unlock()
	dir.Sent, dir.Error = m.Sent, m.Error
	dir.Timestamps = m.Timestamps
	// The same probes as the origin's process timed them, when it sent
	// them all (else the file has none: they would not pair up).
	user := m.UserProbes
	if len(user) != len(m.Probes) {
		user = nil
	}
	bad, replaced := 0, 0
	for i, p := range m.Probes {
		if p.Recv < p.Send || len(dir.Probes) >= s.Probes || user != nil && user[i].Recv < user[i].Send {
			bad++
			continue
		}
		if user != nil && p != user[i] && (p.Recv > user[i].Recv || p.Resp > user[i].Resp) {
			// The kernels' receipts come before the processes' readings
			// of them: a kernel-timed probe that says otherwise is not
			// one, and its twin stands.
			p = user[i]
			replaced++
		}
		dir.Probes = append(dir.Probes, p)
		if user != nil {
			dir.UserProbes = append(dir.UserProbes, user[i])
			if p != user[i] {
				dir.KernelProbes++
			}
		}
	}
	if dir.Sent < len(dir.Probes) {
		dir.Sent = len(dir.Probes)
	}
	if bad > 0 {
		dir.Error = strings.TrimPrefix(dir.Error+fmt.Sprintf("; server dropped %d impossible or surplus probes", bad), "; ")
	}
	if replaced > 0 {
		dir.Error = strings.TrimPrefix(dir.Error+fmt.Sprintf("; server took %d probes as the origin's process timed them: their kernel timing came after it", replaced), "; ")
	}
}
