package probe

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"cloudprofiler/minrtt"
	"cloudprofiler/tsc"
)

// Client is the TSC client that runs on every node: it registers with the
// server, answers probes on its UDP socket at any time, and probes another
// node when the server asks. Between rounds it is blocked reading the
// control connection and its UDP socket: it neither spins nor polls.
type Client struct {
	Server    string  // server control address, host:port
	Node      string  // this node's name, unique among the server's nodes
	ListenUDP string  // probe address; "" = the IP used to reach the server, port 0
	Inject    *Inject // emulated network delay, nil for none
	// UserTimestamps times probes by reading the counter in the process
	// around each send and receive only (protocol version 1), without
	// the kernel's timestamps.
	UserTimestamps bool
	Clock          func() uint64 // the node's counter; nil = tsc.Read
	// Freq is the frequency of Clock; zero = tsc.Freq() (which follows
	// CP_FAKE_TSC). In-process clients with their own fake counter set it.
	Freq tsc.Frequency
	// Domain names the counter Clock reads (tsc.Domain); "" = tsc.Domain()
	// when Clock is nil, else unknown.
	Domain     string
	Host       string // default os.Hostname()
	PID        int    // default os.Getpid()
	MinBackoff time.Duration
	MaxBackoff time.Duration // reconnect backoff, default 50ms doubling to 2s
	Logf       func(format string, args ...any)

	once      sync.Once
	ctx       context.Context
	cancel    context.CancelFunc
	udp       *net.UDPConn
	udpAddr   atomic.Value  // string
	malformed atomic.Uint64 // total dropped UDP packets and control messages
	stale     atomic.Uint64 // total late or duplicate replies
	reported  uint64        // malformed count at the last report (session goroutine only)
	reportedS uint64
	wg        sync.WaitGroup
}

// ErrVersion is returned by Run when the server speaks another protocol
// version: retrying cannot help.
var ErrVersion = errors.New("protocol version mismatch")

// ErrConflict is returned by Run when another machine's client holds the
// node name: retrying would only wait for the impostor to leave, while its
// clock is measured under this node's name.
var ErrConflict = errors.New("node name held by another machine")

func (c *Client) init() {
	c.once.Do(func() {
		c.ctx, c.cancel = context.WithCancel(context.Background())
		if c.Clock == nil {
			c.Clock = tsc.Read
			if c.Domain == "" {
				c.Domain = tsc.Domain()
			}
		}
		if c.Freq.Hz == 0 {
			c.Freq = tsc.Freq()
		}
		if c.Host == "" {
			c.Host, _ = os.Hostname()
		}
		if c.PID == 0 {
			c.PID = os.Getpid()
		}
		if c.MinBackoff <= 0 {
			c.MinBackoff = 50 * time.Millisecond
		}
		if c.MaxBackoff < c.MinBackoff {
			c.MaxBackoff = 2 * time.Second
		}
		if c.Logf == nil {
			c.Logf = func(string, ...any) {}
		}
	})
}

// Close stops the client at once: the control connection and the UDP
// socket close, so the server sees the node leave. Run returns nil.
func (c *Client) Close() {
	c.init()
	c.cancel()
}

// UDPAddr is the probe address once the client has connected, else "".
func (c *Client) UDPAddr() string {
	s, _ := c.udpAddr.Load().(string)
	return s
}

// Malformed is how many UDP packets and control messages the client dropped
// as unknown or malformed; Stale how many late or duplicate replies.
func (c *Client) Malformed() uint64 { return c.malformed.Load() }
func (c *Client) Stale() uint64     { return c.stale.Load() }

// Run connects, registers and serves until ctx ends or Close is called
// (then it returns nil). It reconnects with backoff when the server goes
// away. It returns an error only for what retrying cannot fix: bad
// settings, a UDP address it cannot bind, a server of another version.
func (c *Client) Run(ctx context.Context) error {
	c.init()
	if c.Node == "" || c.Server == "" {
		return errors.New("tsc client: server address and node name are required")
	}
	if c.Freq.Hz <= 0 {
		return errors.New("tsc client: no TSC frequency")
	}
	stop := context.AfterFunc(ctx, c.cancel)
	defer stop()
	defer c.wg.Wait()
	defer c.cancel()
	backoff := c.MinBackoff
	for {
		registered, err := c.session()
		if c.ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrVersion) || errors.Is(err, ErrConflict) || errors.Is(err, errBind) {
			return err
		}
		if registered {
			backoff = c.MinBackoff
		}
		c.Logf("tsc-client %s: %v; retrying in %v", c.Node, err, backoff)
		t := time.NewTimer(backoff)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, c.MaxBackoff)
	}
}

var errBind = errors.New("cannot open the UDP probe socket")

// session is one control connection: dial, register, then read and execute
// tasks until the connection fails. It reports whether it got registered.
func (c *Client) session() (bool, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(c.ctx, "tcp", c.Server)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	// Closing the connection is what unblocks the read below on shutdown.
	stop := context.AfterFunc(c.ctx, func() { conn.Close() })
	defer stop()

	if c.udp == nil {
		if err := c.openUDP(conn.LocalAddr().(*net.TCPAddr).AddrPort().Addr()); err != nil {
			return false, err
		}
	}
	node := minrtt.Node{Name: c.Node, Host: c.Host, PID: c.PID, Addr: c.UDPAddr(),
		TSCHz: c.Freq.Hz, TSCHzSource: c.Freq.Source, TSCDomain: c.Domain}
	stamps := "timed by this process (--timestamps user)"
	if !c.UserTimestamps {
		node.ProbeVersion = PacketVersionKernel
		node.Timestamping = interfaceTimestamping(c.udp.LocalAddr().(*net.UDPAddr).IP)
		stamps = "timed by the kernels where both nodes' give timestamps"
		if node.Timestamping != "" {
			stamps += " (" + node.Timestamping + ")"
		}
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := WriteMessage(conn, &Message{Type: MsgHello, Node: &node}); err != nil {
		return false, err
	}
	r := bufio.NewReader(conn)
	m, err := c.readMessage(r)
	if err != nil {
		return false, err
	}
	switch m.Type {
	case MsgWelcome:
	case MsgError:
		if m.Code == CodeVersion {
			return false, fmt.Errorf("%w: server says: %s", ErrVersion, m.Error)
		}
		if m.Code == CodeConflict {
			return false, fmt.Errorf("%w: server says: %s", ErrConflict, m.Error)
		}
		return false, fmt.Errorf("server refused registration: %s", m.Error)
	default:
		return false, fmt.Errorf("server answered hello with %q", m.Type)
	}
	conn.SetDeadline(time.Time{})
	c.Logf("tsc-client %s: registered with %s (%s), probes on %s, TSC %.6f GHz (%s); probes %s",
		c.Node, c.Server, m.Server, node.Addr, c.Freq.Hz/1e9, c.Freq.Source, stamps)
	for {
		m, err := c.readMessage(r)
		if err != nil {
			if errors.Is(err, ErrVersion) {
				return true, err
			}
			var tl *TooLargeError
			if errors.As(err, &tl) {
				c.malformed.Add(1)
			}
			return true, fmt.Errorf("control connection: %w", err)
		}
		switch m.Type {
		case MsgProbe:
			res := c.originate(m)
			conn.SetWriteDeadline(time.Now().Add(10 * time.Second)) // a stuck server must not hang the client
			if err := WriteMessage(conn, res); err != nil {
				return true, fmt.Errorf("sending result: %w", err)
			}
		case MsgError:
			return true, fmt.Errorf("server: %s", m.Error)
		default:
			c.malformed.Add(1) // a type a client does not handle
		}
	}
}

// readMessage reads the next well-formed message, counting and skipping
// malformed ones; a message of another version is ErrVersion.
func (c *Client) readMessage(r *bufio.Reader) (*Message, error) {
	for {
		body, err := ReadFrame(r)
		if err != nil {
			return nil, err
		}
		m, err := DecodeMessage(body)
		if err != nil {
			c.malformed.Add(1)
			continue
		}
		if m.V != ProtocolVersion {
			return nil, fmt.Errorf("%w: %s", ErrVersion, versionError("server", m.V))
		}
		return m, nil
	}
}

// openUDP binds the probe socket and starts the responder. An unspecified
// IP in ListenUDP is replaced by ip, the address that reaches the server,
// so that the registered address is one other nodes can use.
func (c *Client) openUDP(ip netip.Addr) error {
	listen := c.ListenUDP
	if listen == "" {
		listen = netip.AddrPortFrom(ip, 0).String()
	}
	ap, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		return fmt.Errorf("%w: %v", errBind, err)
	}
	if ap.IP == nil || ap.IP.IsUnspecified() {
		ap.IP = net.IP(ip.AsSlice())
	}
	u, err := net.ListenUDP("udp", ap)
	if err != nil {
		return fmt.Errorf("%w: %v", errBind, err)
	}
	c.udp = u
	c.udpAddr.Store(u.LocalAddr().String())
	c.wg.Add(1)
	go c.respond(u)
	context.AfterFunc(c.ctx, func() { u.Close() })
	return nil
}

// respond answers probe requests until the socket closes. The read blocks
// (the goroutine is parked in the netpoller between probes); the path from
// the read returning to the reply is: read Resp, check the packet, wait the
// injected reverse delay, send.
//
// A version-2 request is answered with the kernel's timestamps as well
// (when the kernel gives them): where the request came in, on the counter
// (KRecv), and how long at least the reply took to leave (TurnNs, up to the
// reading just before the send; the injected reverse delay comes after it,
// so it counts as time on the wire, as in version 1). The transmit
// timestamp of each reply tells the next reply of the session how long
// that one took in fact (PrevTurnNs): the responder keeps that one entry.
func (c *Client) respond(u *net.UDPConn) {
	defer c.wg.Done()
	rev := c.Inject.reverse()
	buf := make([]byte, 64) // larger than a packet, so oversize ones show as such
	st := c.respStamper(u)
	cm := newClockMap(c.Freq.Hz)
	var last struct { // the previous reply, for PrevTurnNs
		session uint64
		seq     uint32
		krecv   uint32 // its KRecv's low 32 bits
		turnNs  uint32 // 0: none
	}
	// The kernel's clock discipline, read after each reply (off the
	// timed path) and when it is older than steadyFor: a receipt is
	// placed only if CLOCK_REALTIME was slewed within maxSlew then and
	// not stepped since.
	var steady struct {
		at  time.Time
		off int64 // realOffset then
		why string
	}
	check := func() {
		steady.at, steady.off, steady.why = time.Now(), realOffset(), clockSteady()
	}
	if st != nil {
		check()
	}
	failed := 0 // reads failed in a row
	for {
		var (
			n    int
			from netip.AddrPort
			rx   int64
			err  error
		)
		if st != nil {
			n, from, err = st.read(buf)
		} else {
			n, from, err = u.ReadFromUDPAddrPort(buf)
		}
		resp := c.Clock()
		var br bracket
		if st != nil && err == nil {
			br, rx = takeBracket(c.Clock), st.rxStamp()
		}
		if err != nil {
			if c.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// e.g. ICMP-induced errors: keep answering. Errors in a row
			// (an error queue the poller keeps reporting) wait a little:
			// nothing spins.
			if st != nil {
				st.drain()
			}
			if failed++; failed > 1 {
				time.Sleep(time.Millisecond)
			}
			continue
		}
		failed = 0
		p, err := ParsePacket(buf[:n])
		if err != nil || p.Type != PacketRequest {
			c.malformed.Add(1)
			continue
		}
		p.Type, p.TSC = PacketReply, resp
		if p.Kernel {
			prevOff := steady.off
			if rx != 0 && time.Since(steady.at) > steadyFor {
				check() // the first probe after a pause: on its path
			}
			if rx != 0 && steady.why == "" && !stepped(prevOff, realOffset()) {
				if lo, hi, ok := receipt(cm, br, rx, resp); ok {
					if w := growNs(int64(cm.nsAtMost(hi - lo))); w <= math.MaxUint32 {
						p.Flags |= FlagKernelRecv
						p.KRecv, p.KRecvWidthNs = lo, uint32(w)
					}
				}
			}
			if last.session == p.Session && last.seq+1 == p.Seq && last.turnNs != 0 {
				p.Flags |= FlagPrevTurn
				p.PrevTurnNs, p.PrevKRecvLow = last.turnNs, last.krecv
			}
			last.session, last.seq, last.krecv, last.turnNs = p.Session, p.Seq, uint32(p.KRecv), 0
			if p.Flags&FlagKernelRecv != 0 {
				p.TurnNs = turnNs(rx, time.Now().UnixNano())
			}
			// The reply as this process times it leaves now: the work
			// above goes to the request's way (the reply's stays what it
			// was in version 1, a Put and a send), and the probe as the
			// process timed it stays whole (Resp between the read and the
			// send). With resp, the race detector's build on a busy
			// machine put 20 to 45 us on the reply's way, 15 to 25 before.
			p.TSC = c.Clock()
		}
		p.Put(buf)
		rev.wait()
		if _, err := u.WriteToUDPAddrPort(buf[:p.Size()], from); err != nil || st == nil || !st.tx {
			continue
		}
		// The reply's transmit timestamp, for the session's next reply,
		// if the clock was not stepped meanwhile.
		tx, err := st.txStamp()
		prevOff := steady.off
		check()
		if err == nil && p.Flags&FlagKernelRecv != 0 && steady.why == "" && !stepped(prevOff, steady.off) {
			last.turnNs = turnNs(rx, tx)
		}
	}
}

// steadyFor is how old a check of the clock's discipline may be for the
// responder to place a receipt with it; within a task the check after the
// previous reply is one probe interval old.
const steadyFor = 50 * time.Millisecond

// clockSteady says why the kernel's timestamps cannot be placed on the
// counter now, or "": CLOCK_REALTIME slewed harder than maxSlew
// (clockSlew).
func clockSteady() string {
	dev, err := clockSlew()
	if err != nil {
		return "the kernel's discipline of CLOCK_REALTIME cannot be read (adjtimex: " + err.Error() + ")"
	}
	if dev > maxSlew {
		return fmt.Sprintf("CLOCK_REALTIME is being slewed at up to %.0f ppm (adjtimex), more than the %.0f ppm kernel timestamps allow", dev*1e6, maxSlew*1e6)
	}
	return ""
}

// receipt places a request's kernel receive timestamp rx on the counter
// with the bracket taken after the read returned (resp is the counter read
// before it): the counter at the receipt is within [lo, hi]. False without
// a timestamp, or with one the bracket cannot place.
func receipt(cm clockMap, br bracket, rx int64, resp uint64) (lo, hi uint64, ok bool) {
	if rx == 0 {
		return 0, 0, false
	}
	lo, ok1 := cm.lowerAt(br, rx)
	hi, ok2 := cm.upperAt(br, rx)
	hi = min(hi, resp) // the receipt came before the read returned
	if !ok1 || !ok2 || lo > hi {
		return 0, 0, false
	}
	return lo, hi, true
}

// respStamper turns kernel timestamps on for the responder's socket (its
// requests' receipts and its replies' transmissions), or says why not once
// and answers without them.
func (c *Client) respStamper(u *net.UDPConn) *stamper {
	if c.UserTimestamps {
		return nil
	}
	st, err := newStamper(u, true)
	if err != nil {
		c.Logf("tsc-client %s: kernel timestamps are off for this node's replies: %v", c.Node, err)
		return nil
	}
	return st
}

// maxLost is how many probes in a row may go unanswered before the origin
// gives up on a direction: the responder is gone, or the path is.
const maxLost = 5

// originate runs one probe task: Count probes to the responder, paced
// Interval apart, each awaited for at most Timeout, all within Budget.
func (c *Client) originate(m *Message) *Message {
	res := &Message{Type: MsgResult, Round: m.Round, Task: m.Task, Responder: m.Responder}
	defer func() {
		// Counts since the previous report ride on every result.
		mal, st := c.malformed.Load(), c.stale.Load()
		res.Malformed, res.Stale = mal-c.reported, st-c.reportedS
		c.reported, c.reportedS = mal, st
	}()
	if m.Count <= 0 || m.Count > MaxProbes || m.TimeoutNs <= 0 || m.BudgetNs <= 0 || m.IntervalNs < 0 {
		res.Error = fmt.Sprintf("bad probe task: count %d (1..%d), timeout %dns, budget %dns, interval %dns",
			m.Count, MaxProbes, m.TimeoutNs, m.BudgetNs, m.IntervalNs)
		return res
	}
	raddr, err := net.ResolveUDPAddr("udp", m.Addr)
	if err != nil {
		res.Error = "responder address: " + err.Error()
		return res
	}
	// A fresh connected socket per task: the kernel passes only the
	// responder's packets, and no late reply of an earlier task can arrive.
	laddr := &net.UDPAddr{IP: c.udp.LocalAddr().(*net.UDPAddr).IP}
	conn, err := net.DialUDP("udp", laddr, raddr)
	if err != nil {
		res.Error = "probe socket: " + err.Error()
		return res
	}
	defer conn.Close()
	stop := context.AfterFunc(c.ctx, func() { conn.Close() })
	defer stop()

	// Kernel timestamps where the responder answers version 2: the
	// probes as the kernels timed them, and as this process did.
	var st *stamper
	taskOff := realOffset()
	if m.ProbeVersion >= PacketVersionKernel && !c.UserTimestamps {
		if why := clockSteady(); why != "" {
			res.Timestamps = "user: " + why
		} else if st, err = newStamper(conn, true); err != nil {
			res.Timestamps = "user: the kernel refused timestamps on the probe socket: " + err.Error()
		}
	} else if !c.UserTimestamps {
		res.Timestamps = "user: the responder answers probe version 1 only"
	}
	var kts []kernelTimes // with st, one per answered probe
	defer func() {
		// The clock held still enough through the task, or none of its
		// kernel timestamps are placed.
		if len(kts) > 0 {
			why := clockSteady()
			if off := realOffset(); stepped(taskOff, off) {
				why = fmt.Sprintf("CLOCK_REALTIME was stepped by %d ns", off-taskOff)
			}
			if why != "" {
				kts, res.Timestamps = nil, "user: during the task, "+why
			}
		}
		c.finish(res, kts)
	}()

	fwd := c.Inject.forward()
	interval := time.Duration(m.IntervalNs)
	timeout := time.Duration(m.TimeoutNs)
	deadline := time.Now().Add(time.Duration(m.BudgetNs))
	out := make([]byte, PacketSizeKernel)
	in := make([]byte, 64)
	res.Probes = make([]minrtt.Probe, 0, m.Count)
	lost := 0
	var next time.Time
	for seq := uint32(1); int(seq) <= m.Count; seq++ {
		if c.ctx.Err() != nil {
			res.Error = "client closing"
			return res
		}
		if d := time.Until(next); d > 0 {
			// Pacing parks, never spins, and gives way to shutdown and
			// to the task's budget (the interval comes off the wire).
			if next.After(deadline) {
				res.Error = fmt.Sprintf("budget of %v used up after %d probes (interval %v)", time.Duration(m.BudgetNs), res.Sent, interval)
				return res
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-c.ctx.Done():
				t.Stop()
				res.Error = "client closing"
				return res
			}
		}
		now := time.Now()
		if now.After(deadline) {
			res.Error = fmt.Sprintf("budget of %v used up after %d probes", time.Duration(m.BudgetNs), res.Sent)
			return res
		}
		next = now.Add(interval)
		conn.SetReadDeadline(now.Add(timeout)) // before Send: keep it off the timed path
		req := Packet{Type: PacketRequest, Session: m.Task, Seq: seq, Kernel: st != nil}
		req.Put(out)
		send := c.Clock()
		binary.BigEndian.PutUint64(out[24:32], send)
		fwd.wait()
		// The bracket that places the transmit timestamp: after the
		// injected delay (which lands before the kernel's timestamp, off
		// the kernel-timed probe), just before the send.
		var b1 bracket
		if st != nil {
			b1 = takeBracket(c.Clock)
		}
		if _, err := conn.Write(out[:req.Size()]); err != nil {
			res.Error = "send: " + err.Error()
			return res
		}
		res.Sent++
		got := false
		var kt kernelTimes
		for {
			var (
				n   int
				rx  int64
				err error
			)
			if st != nil {
				n, _, err = st.read(in)
			} else {
				n, err = conn.Read(in)
			}
			recv := c.Clock()
			var b2 bracket
			if st != nil && err == nil {
				b2, rx = takeBracket(c.Clock), st.rxStamp()
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				if c.ctx.Err() != nil {
					res.Error = "client closing"
					return res
				}
				// ECONNREFUSED from an ICMP port-unreachable: nobody is
				// listening there any more. Count it as a lost probe.
				if errors.Is(err, net.ErrClosed) {
					res.Error = "probe socket closed"
					return res
				}
				time.Sleep(time.Until(now.Add(timeout)))
				break
			}
			p, err := ParsePacket(in[:n])
			if err != nil || p.Type != PacketReply || p.Kernel != req.Kernel {
				c.malformed.Add(1)
				continue
			}
			if p.Session != m.Task || p.Seq != seq {
				c.stale.Add(1) // a reply we gave up on, or a duplicate
				continue
			}
			res.Probes = append(res.Probes, minrtt.Probe{Send: send, Resp: p.TSC, Recv: recv})
			if st != nil {
				kt = kernelTimes{seq: seq, b1: b1, b2: b2, rx: rx, reply: p}
				if p.Flags&FlagPrevTurn != 0 && len(kts) > 0 && kts[len(kts)-1].seq == seq-1 {
					// The previous reply's transmit timestamp: its turn,
					// measured; of the reply kept (a duplicated request
					// has a reply of its own, with its own receipt).
					if prev := &kts[len(kts)-1].reply; prev.Flags&FlagKernelRecv != 0 && uint32(prev.KRecv) == p.PrevKRecvLow {
						prev.TurnNs = max(prev.TurnNs, p.PrevTurnNs)
					}
				}
			}
			got = true
			break
		}
		if st != nil {
			// Off the timed path: the request's transmit timestamp.
			if tx, err := st.txStamp(); err == nil {
				kt.tx = tx
			}
			if got {
				kts = append(kts, kt)
			}
		}
		if got {
			lost = 0
		} else if lost++; lost >= maxLost {
			res.Error = fmt.Sprintf("responder stopped answering: %d probes in a row lost (timeout %v each)", lost, timeout)
			return res
		}
	}
	if len(res.Probes) < res.Sent {
		res.Error = fmt.Sprintf("%d of %d probes lost", res.Sent-len(res.Probes), res.Sent)
	}
	return res
}

// kernelTimes is what an answered probe's kernel timestamps are made of:
// the request's transmit timestamp (tx) and the bracket before it (b1),
// the reply's receive timestamp (rx) and the bracket after it (b2), and
// the reply with the responder's.
type kernelTimes struct {
	seq    uint32
	b1, b2 bracket
	tx, rx int64 // CLOCK_REALTIME ns; 0: none came
	reply  Packet
}

// kernelProbe is the probe as the kernels timed it: the responder's
// counter KRecv at (or a little before) the request's receipt, between the
// origin's counter at the request's transmission, less KRecv's width, and
// at the reply's receipt, less the responder's turn. False when a
// timestamp is missing or does not place.
func (kt *kernelTimes) kernelProbe(cm clockMap, user minrtt.Probe) (minrtt.Probe, bool) {
	r := &kt.reply
	if kt.tx == 0 || kt.rx == 0 || r.Flags&FlagKernelRecv == 0 {
		return minrtt.Probe{}, false
	}
	send, ok1 := cm.lowerAt(kt.b1, kt.tx-int64(r.KRecvWidthNs))
	recv, ok2 := cm.upperAt(kt.b2, kt.rx-int64(r.TurnNs))
	recv = min(recv, user.Recv)
	if !ok1 || !ok2 || send > recv {
		return minrtt.Probe{}, false
	}
	return minrtt.Probe{Send: send, Resp: r.KRecv, Recv: recv}, true
}

// finish puts the kernel-timed probes into the result, where there are
// any: Probes as the kernels timed them (each that they timed whole, the
// rest as before) and UserProbes as this process timed them.
func (c *Client) finish(res *Message, kts []kernelTimes) {
	if len(kts) == 0 || len(kts) != len(res.Probes) {
		return
	}
	cm := newClockMap(c.Freq.Hz)
	user := res.Probes
	res.Probes = make([]minrtt.Probe, len(user))
	for i := range kts {
		p, ok := kts[i].kernelProbe(cm, user[i])
		if !ok {
			p = user[i]
		} else {
			res.KernelProbes++
		}
		res.Probes[i] = p
	}
	res.UserProbes = user
	res.Timestamps = "kernel"
	if res.KernelProbes < len(user) {
		res.Timestamps = fmt.Sprintf("kernel: %d of %d probes without every kernel timestamp, timed by the processes", len(user)-res.KernelProbes, len(user))
	}
}
