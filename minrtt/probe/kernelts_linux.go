package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel timestamps of the probe sockets (SO_TIMESTAMPING, software): the
// instant the kernel received a packet (taken as the packet enters the
// stack, before the socket's reader is woken) and the instant a sent packet
// left it (taken as the device driver takes the packet). Both are
// CLOCK_REALTIME; clockmap.go places them on the node's counter.

// stamper reads a UDP socket's packets with their kernel receive
// timestamps and, when asked for at open, the transmit timestamps of what
// the socket sent.
type stamper struct {
	tx     bool   // transmit timestamps too
	next   uint32 // the OPT_ID key of the next send
	conn   *net.UDPConn
	raw    syscall.RawConn
	oob    []byte // a received packet's control messages
	oobn   int    // their length
	errBuf []byte // the error queue's payload (none: OPT_TSONLY) and control messages
	errOob []byte
}

// Software timestamps, on receive, and on transmit when tx; OPT_ID numbers
// each send (from 0) so that a transmit timestamp names its packet, and
// OPT_TSONLY loops back the timestamp without the packet.
const (
	rxFlags = unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_SOFTWARE
	txFlags = rxFlags | unix.SOF_TIMESTAMPING_TX_SOFTWARE | unix.SOF_TIMESTAMPING_OPT_ID | unix.SOF_TIMESTAMPING_OPT_TSONLY
)

// newStamper turns kernel timestamps on for conn's packets (and, with tx,
// for what it sends), or says why the kernel would not.
func newStamper(conn *net.UDPConn, tx bool) (*stamper, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	flags := rxFlags
	if tx {
		flags = txFlags
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	return &stamper{tx: tx, conn: conn, raw: raw, oob: make([]byte, 256), errBuf: make([]byte, 64), errOob: make([]byte, 256)}, nil
}

// read reads one packet into buf like ReadFromUDPAddrPort and keeps its
// control messages for rxStamp: the caller reads its clocks between the
// two, so that parsing them stays off the probe's timed path.
func (s *stamper) read(buf []byte) (int, netip.AddrPort, error) {
	n, oobn, _, from, err := s.conn.ReadMsgUDPAddrPort(buf, s.oob)
	if err != nil {
		oobn = 0
	}
	s.oobn = oobn
	return n, from, err
}

// rxStamp is the kernel's receive timestamp of the packet read last, in
// CLOCK_REALTIME nanoseconds (0: none came with it).
func (s *stamper) rxStamp() int64 { return softwareStamp(s.oob[:s.oobn]) }

// softwareStamp is the software timestamp among a packet's control
// messages, in nanoseconds, or 0.
func softwareStamp(oob []byte) int64 {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPING && len(m.Data) >= int(unsafe.Sizeof(unix.ScmTimestamping{})) {
			// struct scm_timestamping: three timespecs, the first software.
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			if sec == 0 && nsec == 0 {
				return 0
			}
			return sec*1e9 + nsec
		}
	}
	return 0
}

// errNoStamp: the error queue holds no transmit timestamp (yet).
var errNoStamp = errors.New("no transmit timestamp")

// txStamp is the transmit timestamp of the packet the socket just sent
// (call it after each send that succeeded, and only then), taken off the
// error queue without waiting: errNoStamp when the kernel has not queued it
// (yet). The queue is emptied each time, older entries with it: left
// there, they would take the socket's receive buffer.
func (s *stamper) txStamp() (int64, error) {
	want := s.next
	s.next++
	found := int64(0)
	for {
		ts, key, ok, err := s.errEntry()
		if err != nil {
			if found != 0 {
				return found, nil
			}
			if errors.Is(err, unix.EAGAIN) {
				return 0, errNoStamp
			}
			return 0, err
		}
		switch {
		case !ok:
		case key == want:
			found = ts
		case key > want:
			// Sends the kernel numbered that this count missed (a send
			// that failed after it took a number): follow the kernel.
			s.next = key + 1
			found = 0
		}
	}
}

// drain empties the error queue, keeping the count of sends in step with
// the kernel's.
func (s *stamper) drain() {
	for i := 0; i < 64; i++ {
		_, key, ok, err := s.errEntry()
		if err != nil {
			return
		}
		if ok && key >= s.next {
			s.next = key + 1
		}
	}
}

// errEntry takes one entry off the error queue without waiting (EAGAIN:
// none) and reads it as txEntry does.
func (s *stamper) errEntry() (ts int64, key uint32, ok bool, err error) {
	var oobn int
	var rerr error
	if err := s.raw.Control(func(fd uintptr) {
		_, oobn, _, _, rerr = unix.Recvmsg(int(fd), s.errBuf, s.errOob, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
	}); err != nil {
		return 0, 0, false, err
	}
	if rerr != nil {
		return 0, 0, false, rerr
	}
	ts, key, ok = txEntry(s.errOob[:oobn])
	return ts, key, ok, nil
}

// txEntry reads an error-queue entry: its software timestamp and the OPT_ID
// key of the send it stamps, ok when it is a transmit timestamp.
func txEntry(oob []byte) (int64, uint32, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, 0, false
	}
	var (
		ts        int64
		key       uint32
		isStamp   bool
		haveStamp bool
	)
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPING:
			ts = softwareStamp(oob)
			haveStamp = ts != 0
		case (m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_RECVERR) ||
			(m.Header.Level == unix.SOL_IPV6 && m.Header.Type == unix.IPV6_RECVERR):
			if len(m.Data) < int(unsafe.Sizeof(unix.SockExtendedErr{})) {
				continue
			}
			e := (*unix.SockExtendedErr)(unsafe.Pointer(&m.Data[0]))
			if e.Errno == uint32(unix.ENOMSG) && e.Origin == unix.SO_EE_ORIGIN_TIMESTAMPING && e.Info == unix.SCM_TSTAMP_SND {
				isStamp, key = true, e.Data
			}
		}
	}
	return ts, key, isStamp && haveStamp
}

// interfaceTimestamping says what the network interface that holds ip can
// timestamp (ethtool's timestamping capabilities), for people reading a
// rounds file: whether the probes could get the kernel's transmit
// timestamps there, and whether hardware timestamps, which the probes do
// not use, are there to take.
func interfaceTimestamping(ip net.IP) string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	name := ""
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				name = ifc.Name
			}
		}
	}
	if name == "" {
		return ""
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	info, err := unix.IoctlGetEthtoolTsInfo(fd, name)
	if err != nil {
		return name + ": timestamping capabilities unknown (" + err.Error() + ")"
	}
	f := info.So_timestamping
	which := func(rx, tx uint32) string {
		switch {
		case f&rx != 0 && f&tx != 0:
			return "on receive and transmit"
		case f&rx != 0:
			return "on receive only"
		case f&tx != 0:
			return "on transmit only"
		}
		return ""
	}
	out := name + ": software timestamps "
	if sw := which(unix.SOF_TIMESTAMPING_RX_SOFTWARE, unix.SOF_TIMESTAMPING_TX_SOFTWARE); sw != "" {
		out += sw
	} else {
		out += "not listed (the kernel still stamps what it receives)"
	}
	if hw := which(unix.SOF_TIMESTAMPING_RX_HARDWARE, unix.SOF_TIMESTAMPING_TX_HARDWARE); hw != "" && f&unix.SOF_TIMESTAMPING_RAW_HARDWARE != 0 {
		out += "; hardware timestamps " + hw
		if info.Phc_index >= 0 {
			out += fmt.Sprintf(" (PTP clock /dev/ptp%d)", info.Phc_index)
		}
		out += ", not used by the probes"
	} else {
		out += "; no hardware timestamps"
	}
	return out
}

// clockSlew is how fast, at most, the kernel moves CLOCK_REALTIME's rate
// away from its clocksource's now, relative (adjtimex): its frequency
// offset, its tick's length off nominal, the phase-locked loop's
// correction of its remaining offset (offset/2^(2+constant) a second, the
// kernel's SHIFT_PLL) and an adjtime slew in progress (500 ppm). The
// kernel timestamps are placed only while it is within maxSlew: a clock
// being slewed harder (chrony's default allows 8.3%, an offset the
// phase-locked loop corrects fast) is timed by the processes.
func clockSlew() (float64, error) {
	var tx unix.Timex
	if _, err := unix.Adjtimex(&tx); err != nil {
		return 0, err
	}
	ss := unix.Timex{Modes: unix.ADJ_OFFSET_SS_READ}
	if _, err := unix.Adjtimex(&ss); err != nil {
		return 0, err
	}
	return slewOf(&tx, ss.Offset != 0), nil
}

// slewOf is clockSlew's figure from what adjtimex read (tx), and whether an
// adjtime slew is in progress.
func slewOf(tx *unix.Timex, adjtime bool) float64 {
	dev := math.Abs(float64(tx.Tick)*100-1e6) / 1e6 // tick: µs per 1/USER_HZ (100) s
	dev += math.Abs(float64(tx.Freq)) / 65536 / 1e6 // ppm with 16 fractional bits
	off := math.Abs(float64(tx.Offset))
	if tx.Status&unix.STA_NANO == 0 {
		off *= 1e3 // µs
	}
	dev += off / math.Ldexp(1, int(2+min(max(tx.Constant, 0), 30))) / 1e9
	if adjtime {
		dev += 500e-6 // the kernel's MAX_TICKADJ: 500 µs a second
	}
	return dev
}
