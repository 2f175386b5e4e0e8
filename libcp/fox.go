package main

/*
#include <stdlib.h>
#include "engine.h"
*/
import "C"

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"cloudprofiler/confserver"
	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"golang.org/x/sys/unix"
)

// The return-trip (ReT) method, paper sections 2.2 and 6.4: a FOX_START
// channel logs each tuple's start and, in its return log, the arrival of
// each ReTACK that FOX_END channels (on other nodes) send when they log the
// tuple. Start and return times are then read on one node's TSC.
//
//	FOX_START  file <stem>.cplog:      (tuple id, TSC) per LogTS, as BUFFER_IDENTITY
//	           file <stem>.ret.cplog:  (tuple id, TSC when its ReTACK arrived)
//	                                   written by a goroutine blocked in recvmsg on
//	                                   the UDP socket bound to CP_RET_LISTEN
//	FOX_END    file <stem>.cplog:      (tuple id, TSC) per LogTS, as BUFFER_IDENTITY,
//	                                   and one ReTACK per record to CP_RET_START,
//	                                   sent from LogTS (fastpath.c, log_fox_end)
//
// Finding the start node: with CP_CONF_SERVER set, a FOX_START channel
// registers its listen address with the configuration server under its
// channel name when it opens (confserver/retstarts.go; bounded by
// CP_CONF_TIMEOUT_MS, never failing the open) and removes it when it
// closes. A FOX_END channel without CP_RET_START asks the server for the
// start point named CP_RET_START_NAME, or for the only one registered.
//
// The ReTACK (engine.h) is 24 bytes, big-endian and versioned. The arrival
// TSC is the kernel's receive time (SO_TIMESTAMPNS), moved onto the TSC by
// a TSC and CLOCK_REALTIME read together right after the read returns
// (cp_fox_stamp): a goroutine that wakes late does not make returns look
// later than they were.

// defaultRetListen: any interface, a port the kernel picks; the port bound is
// in both FOX_START files' headers ("fox": {"listen": ...}).
const defaultRetListen = "0.0.0.0:0"

// foxOpen is what a FOX channel needs, prepared before its files exist.
type foxOpen struct {
	role string // "start", "return" or "end"

	// start and return
	conn       *net.UDPConn // start: handed to the receiver once the return log exists
	listen     string       // the address bound
	retPath    string       // start: the return log's path
	startFile  string       // return: the START channel's file (base name)
	registered string       // start: what the configuration server was told, or why nothing
	reg        *retReg      // start: the registration to remove at close

	// end
	start, startAddr, foundVia string
	cfox                       *C.struct_cp_fox
}

// retReg is a FOX_START channel's entry in the configuration server.
type retReg struct{ name, addr string }

func prepareFox(h handlers.Type, name string) (*foxOpen, error) {
	if h == handlers.FoxStart {
		f, err := listenFox()
		if err == nil {
			f.register(name)
		}
		return f, err
	}
	return dialFox()
}

// register tells the configuration server (CP_CONF_SERVER) where this
// FOX_START channel receives ReTACKs, under the channel's name, waiting at
// most CP_CONF_TIMEOUT_MS. It never fails the open: the header's
// "registered" says what the server was told, or why nothing was. A listen
// address on every interface (0.0.0.0 or ::) is registered with the
// source address this host uses to reach the server (the kernel's choice
// for a UDP socket connected to it, which sends nothing).
func (f *foxOpen) register(name string) {
	confInit()
	if confAddr == "" {
		f.registered = "no: CP_CONF_SERVER is not set"
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
	defer cancel()
	ap := f.conn.LocalAddr().(*net.UDPAddr).AddrPort()
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if ap.Addr().IsUnspecified() {
		var d net.Dialer
		u, err := d.DialContext(ctx, "udp", confAddr)
		if err != nil {
			f.registered = fmt.Sprintf("no: no route to configuration server %s to take this host's address from: %v", confAddr, err)
			return
		}
		ap = netip.AddrPortFrom(u.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), ap.Port())
		u.Close()
	}
	e, err := confClient.Load().RegisterRetStart(ctx, name,
		confserver.RetStart{Addr: ap.String(), Host: host, PID: os.Getpid(), Node: cfg.node})
	if err != nil {
		f.registered = fmt.Sprintf("no: configuration server %s: %v", confAddr, err)
		return
	}
	f.reg = &retReg{name: name, addr: e.Addr}
	f.registered = fmt.Sprintf("confserver %s name %q addr %s", confAddr, name, e.Addr)
}

// deregister removes the registration (best effort, bounded by
// CP_CONF_TIMEOUT_MS). The server keeps an entry that a later registration
// of the same name (another process) replaced.
func (f *foxOpen) deregister() {
	if f.reg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
	defer cancel()
	confClient.Load().DeregisterRetStart(ctx, f.reg.name, os.Getpid(), host, f.reg.addr)
	f.reg = nil
}

func listenFox() (*foxOpen, error) {
	addr := getenv("CP_RET_LISTEN")
	if addr == "" {
		addr = defaultRetListen
	}
	ap, err := resolveHostPort(addr, true)
	if err != nil {
		return nil, fail(C.CP_ERR_CONFIG, "FOX_START: CP_RET_LISTEN=%q: %v", addr, err)
	}
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, fail(C.CP_ERR_CONFIG, "FOX_START: CP_RET_LISTEN=%q: %v", addr, err)
	}
	// Kernel receive stamps, the count of datagrams the socket dropped, and
	// room for bursts of ReTACKs while the receiver is descheduled.
	if rc, err := conn.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RXQ_OVFL, 1)
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20) != nil {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20) // capped by rmem_max
			}
		})
	}
	return &foxOpen{role: "start", conn: conn, listen: conn.LocalAddr().String()}, nil
}

func dialFox() (*foxOpen, error) {
	v, via := getenv("CP_RET_START"), "CP_RET_START"
	what := fmt.Sprintf("CP_RET_START=%q", v)
	if v == "" {
		var err error
		if v, via, err = findStart(); err != nil {
			return nil, err
		}
		what = fmt.Sprintf("start point %s (%s)", v, via)
	}
	ap, err := resolveHostPort(v, false)
	if err != nil {
		return nil, fail(C.CP_ERR_CONFIG, "FOX_END: %s: %v", what, err)
	}
	family := unix.AF_INET
	var sa unix.Sockaddr = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	if !ap.Addr().Is4() {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fail(C.CP_ERR_IO, "FOX_END: socket: %v", err)
	}
	// Connected: each send(2) from LogTS names no address and reuses the route.
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fail(C.CP_ERR_CONFIG, "FOX_END: %s (%s): %v", what, ap, err)
	}
	cf := (*C.struct_cp_fox)(C.calloc(1, C.sizeof_struct_cp_fox))
	if cf == nil {
		unix.Close(fd)
		return nil, fail(C.CP_ERR_NO_MEMORY, "FOX_END")
	}
	cf.fd = C.int(fd)
	return &foxOpen{role: "end", start: v, startAddr: ap.String(), foundVia: via, cfox: cf}, nil
}

// findStart asks the configuration server, within CP_CONF_TIMEOUT_MS, for
// the start point named CP_RET_START_NAME, or the only one registered.
// Anything else is CP_ERR_CONFIG saying which server, what it has and what
// to set.
func findStart() (addr, via string, err error) {
	confInit()
	want := getenv("CP_RET_START_NAME")
	if confAddr == "" {
		return "", "", fail(C.CP_ERR_CONFIG, "FOX_END: set CP_RET_START=host:port, the address the FOX_START channel listens on (its CP_RET_LISTEN, in its file header), "+
			"or CP_CONF_SERVER=host:port, the configuration server the FOX_START channel registered with")
	}
	ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
	defer cancel()
	starts, err := confClient.Load().RetStarts(ctx)
	if err != nil {
		return "", "", fail(C.CP_ERR_CONFIG, "FOX_END: CP_RET_START is not set and the configuration server CP_CONF_SERVER=%s gave no answer within %v (%v); "+
			"start the server, or set CP_RET_START=host:port", confAddr, confTimeout, err)
	}
	var pick *confserver.RetStart
	switch {
	case want != "":
		for i := range starts {
			if starts[i].Name == want {
				pick = &starts[i]
			}
		}
		if pick == nil {
			return "", "", fail(C.CP_ERR_CONFIG, "FOX_END: the configuration server %s has no start point named CP_RET_START_NAME=%q (%s); "+
				"open that FOX_START channel first (with CP_CONF_SERVER set), or set CP_RET_START=host:port", confAddr, want, describeStarts(starts))
		}
	case len(starts) == 0:
		return "", "", fail(C.CP_ERR_CONFIG, "FOX_END: CP_RET_START is not set and the configuration server %s has no start point registered; "+
			"open the FOX_START channel first (with CP_CONF_SERVER set), or set CP_RET_START=host:port", confAddr)
	case len(starts) > 1:
		return "", "", fail(C.CP_ERR_CONFIG, "FOX_END: CP_RET_START is not set and the configuration server %s has %s; "+
			"set CP_RET_START_NAME to the name of the one to use, or CP_RET_START=host:port", confAddr, describeStarts(starts))
	default:
		pick = &starts[0]
	}
	return pick.Addr, fmt.Sprintf("confserver %s name %q", confAddr, pick.Name), nil
}

// describeStarts lists registered start points for an error message.
func describeStarts(starts []confserver.RetStart) string {
	if len(starts) == 0 {
		return "it has none"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d start points: ", len(starts))
	for i, s := range starts {
		if i == 10 {
			fmt.Fprintf(&b, "; and %d more", len(starts)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%q at %s (host %s, pid %d, registered %s)", s.Name, s.Addr, s.Host, s.PID, s.Registered.Format(time.RFC3339))
	}
	return b.String()
}

// resolveHostPort reads host:port; a host name is looked up within a second
// (OpenChannel never waits longer on the network). Port 0 only for listening.
func resolveHostPort(s string, listen bool) (netip.AddrPort, error) {
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return netip.AddrPort{}, errors.New("want host:port")
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || port == 0 && !listen {
		return netip.AddrPort{}, fmt.Errorf("bad port %q", ps)
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("cannot resolve %q: %v", host, err)
	}
	best := ips[0]
	for _, ip := range ips { // IPv4 first, as the listener's default is
		if ip.Unmap().Is4() {
			best = ip
			break
		}
	}
	return netip.AddrPortFrom(best.Unmap(), uint16(port)), nil
}

// release frees what prepareFox took (an open that failed, or a close).
func (f *foxOpen) release() {
	if f == nil {
		return
	}
	if f.conn != nil {
		f.conn.Close()
		f.conn = nil
	}
	f.deregister()
	if f.cfox != nil {
		unix.Close(int(f.cfox.fd))
		C.free(unsafe.Pointer(f.cfox))
		f.cfox = nil
	}
}

func (f *foxOpen) header() *logfile.Fox {
	switch f.role {
	case "start":
		return &logfile.Fox{Role: f.role, Listen: f.listen, ReturnFile: filepath.Base(f.retPath), Registered: f.registered}
	case "return":
		return &logfile.Fox{Role: f.role, Listen: f.listen, StartFile: f.startFile,
			Stamp: "kernel receive time (SO_TIMESTAMPNS) moved onto the TSC; TSC at read if the kernel gave none"}
	}
	return &logfile.Fox{Role: f.role, Start: f.start, StartAddr: f.startAddr, StartFoundVia: f.foundVia}
}

// openReturnLog creates a FOX_START channel's return log (another slot and
// file, never handed out) and starts its receiver (c.mu held).
func (c *channel) openReturnLog() error {
	f := c.fox
	if c.closed {
		return fail(C.CP_ERR_CLOSED, "channel %d was closed while it opened", c.handle)
	}
	r := &channel{number: c.number, htype: handlers.FoxStart, cur: handlers.FoxStart, format: c.format,
		recSize: c.recSize, name: c.name, path: f.retPath,
		fox: &foxOpen{role: "return", listen: f.listen, startFile: filepath.Base(c.path)}}
	regMu.Lock()
	err := r.create(false, 0)
	regMu.Unlock()
	if err != nil {
		return err
	}
	r.recv = &foxRecv{conn: f.conn, done: make(chan struct{})}
	f.conn = nil // the receiver's now: the return log's close closes it
	c.retLog = r
	go r.recv.run(r)
	return nil
}

// foxRecv is a return log's receiver: one goroutine blocked in recvmsg.
type foxRecv struct {
	conn                      *net.UDPConn
	done                      chan struct{}
	received, malformed, ovfl atomic.Uint64
	notLogged                 atomic.Uint64 // valid ReTACKs the return log refused (closing, failing disk)
}

func (rv *foxRecv) run(r *channel) {
	defer close(rv.done)
	buf := make([]byte, 2048)
	oob := make([]byte, 256)
	perNs := C.double(freq.Hz / 1e9)
	mono := r.format.HasMono()
	for {
		n, oobn, _, _, err := rv.conn.ReadMsgUDP(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(time.Millisecond) // never spin on a failing socket
			continue
		}
		krt := rv.control(oob[:oobn])
		id, ok := parseRetAck(buf[:n])
		if !ok {
			rv.malformed.Add(1)
			continue
		}
		var t, m C.uint64_t
		C.cp_fox_stamp(C.int64_t(krt), perNs, &t, &m)
		if !mono {
			m = 0
		}
		if C.cp_ring_put(r.slot, C.int64_t(id), t, m) != 0 {
			rv.notLogged.Add(1)
			continue
		}
		rv.received.Add(1)
	}
}

// control reads the kernel receive time (ns, CLOCK_REALTIME; 0 if none)
// and the socket's running count of dropped datagrams.
func (rv *foxRecv) control(oob []byte) int64 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	var krt int64
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET {
			continue
		}
		switch {
		case m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16:
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
			krt = sec*1e9 + nsec
		case m.Header.Type == unix.SO_RXQ_OVFL && len(m.Data) >= 4:
			rv.ovfl.Store(uint64(binary.NativeEndian.Uint32(m.Data)))
		}
	}
	return krt
}

// parseRetAck accepts a ReTACK v1 (engine.h): 24 bytes or more with the
// length field saying how many, magic "CPRA", version 1, type 1.
func parseRetAck(b []byte) (int64, bool) {
	if len(b) < C.CP_RETACK_SIZE || binary.BigEndian.Uint32(b) != C.CP_RETACK_MAGIC ||
		b[4] != C.CP_RETACK_VERSION || b[5] != C.CP_RETACK_TYPE || int(binary.BigEndian.Uint16(b[6:])) != len(b) {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(b[8:])), true
}

func (rv *foxRecv) stats() *logfile.FoxStats {
	return &logfile.FoxStats{Received: rv.received.Load(), Malformed: rv.malformed.Load(), KernelDrop: rv.ovfl.Load(),
		NotLogged: rv.notLogged.Load()}
}

// stopReceiver ends a return log's receiver before its ring is closed: no
// record is put after the final drain.
func (c *channel) stopReceiver() {
	if c.recv != nil {
		c.recv.conn.Close()
		<-c.recv.done
	}
}

// endFoxEnd, after the closed bit: waits for LogTS calls still sending (none
// can start: their reservation fails), then closes the socket.
func (c *channel) endFoxEnd() *logfile.FoxStats {
	for atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.slot.inflight))) != 0 {
		time.Sleep(50 * time.Microsecond)
	}
	cf := c.fox.cfox
	st := &logfile.FoxStats{Sent: uint64(atomic.LoadUint64((*uint64)(unsafe.Pointer(&cf.sent)))),
		SendFailed: uint64(atomic.LoadUint64((*uint64)(unsafe.Pointer(&cf.send_failed))))}
	c.slot.fox = nil
	c.fox.release()
	return st
}
