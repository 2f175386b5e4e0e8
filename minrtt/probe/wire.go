// Package probe is the TSC server and client of the MinRTT measurement
// (paper section 5.2): a client on every node registers with one server,
// and the server runs rounds in which every node pair exchanges UDP probes
// in both directions, each probe bracketed by the origin's TSC and stamped
// with the responder's. Every probe is kept and written as a minrtt.Round.
//
// The wire formats (PROTOCOL.md) are versioned and spell out their byte
// order: no host structs on the wire, no hard-coded addresses.
//
// In-process use, e.g. from a test with exact ground truth: start a Server,
// then several Clients, each with its own fake counter, and ask for rounds.
//
//	s := &probe.Server{Listen: "127.0.0.1:0", OutDir: dir, Probes: 100}
//	s.Start(ctx)
//	f, _ := tsc.ParseFake("1.0002:5000")
//	c := &probe.Client{Server: s.Addr(), Node: "a",
//		Clock: func() uint64 { return f.Apply(tsc.Raw()) },
//		Freq:  tsc.Frequency{Hz: tsc.HardwareFreq().Hz * f.Rate(), Source: "fake"}}
//	go c.Run(ctx)
//	... more clients ...
//	s.WaitNodes(ctx, 2)
//	round, path, err := s.RequestRound("before")
//
// From another process, RequestRound(ctx, addr, RoundRequest{...}) asks a
// running server (what `cloudprofiler tsc-round` does).
package probe

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"cloudprofiler/minrtt"
)

// ProtocolVersion is the version of both the control messages ("v") and the
// UDP probe packets (byte 4). A peer with another version is refused.
const ProtocolVersion = 1

// UDP probe packets: fixed big-endian layouts (PROTOCOL.md), 32 bytes in
// version 1, 56 in version 2, which carries the responder's kernel
// timestamps. An origin sends version 2 only to a responder that said it
// answers it (Node.ProbeVersion), and a responder answers in the version
// it was asked in.
const (
	PacketMagic         uint32 = 0x43505450 // "CPTP": Cloudprofiler TSC probe
	PacketSize                 = 32
	PacketSizeKernel           = 56
	PacketVersionKernel        = 2
	PacketRequest       uint8  = 1 // origin -> responder
	PacketReply         uint8  = 2 // responder -> origin
)

// Flags of a version-2 reply (byte 6).
const (
	FlagKernelRecv uint8 = 1 // KRecv, KRecvWidthNs and TurnNs hold
	FlagPrevTurn   uint8 = 2 // PrevTurnNs holds
)

// Packet is one UDP probe packet. Session names one direction of one round
// (the server's task id), Seq the probe within it. TSC is the origin's Send
// in a request (informational) and the responder's Resp in a reply.
type Packet struct {
	Type    uint8
	Session uint64
	Seq     uint32
	TSC     uint64
	// Version 2 (Kernel): a reply's kernel timestamps, when its Flags say
	// so. KRecv is the responder's counter at most KRecvWidthNs before the
	// kernel received the request (and not after); the reply left the
	// responder's kernel at least TurnNs after the request came in, and
	// the previous reply of the session (Seq-1, the one whose KRecv ends
	// in PrevKRecvLow) PrevTurnNs after its request, read from its
	// transmit timestamp once it was sent.
	Kernel       bool
	Flags        uint8
	KRecv        uint64
	KRecvWidthNs uint32
	TurnNs       uint32
	PrevTurnNs   uint32
	// PrevKRecvLow is the low 32 bits of the KRecv of the reply that
	// PrevTurnNs is of: the origin takes PrevTurnNs only for the reply it
	// kept (a duplicated request is answered twice, each with its own).
	PrevKRecvLow uint32
}

// Size is the packet's length on the wire.
func (p Packet) Size() int {
	if p.Kernel {
		return PacketSizeKernel
	}
	return PacketSize
}

// Put encodes p into b[:p.Size()].
func (p Packet) Put(b []byte) {
	_ = b[p.Size()-1]
	binary.BigEndian.PutUint32(b[0:4], PacketMagic)
	b[4] = ProtocolVersion
	b[5] = p.Type
	b[6], b[7] = 0, 0
	binary.BigEndian.PutUint64(b[8:16], p.Session)
	binary.BigEndian.PutUint32(b[16:20], p.Seq)
	binary.BigEndian.PutUint32(b[20:24], 0)
	binary.BigEndian.PutUint64(b[24:32], p.TSC)
	if !p.Kernel {
		return
	}
	b[4], b[6] = PacketVersionKernel, p.Flags
	binary.BigEndian.PutUint64(b[32:40], p.KRecv)
	binary.BigEndian.PutUint32(b[40:44], p.KRecvWidthNs)
	binary.BigEndian.PutUint32(b[44:48], p.TurnNs)
	binary.BigEndian.PutUint32(b[48:52], p.PrevTurnNs)
	binary.BigEndian.PutUint32(b[52:56], p.PrevKRecvLow)
}

// ParsePacket decodes a probe packet. Anything but a packet of either
// version's exact size with the magic, a known type and zero reserved
// bytes (a request's flags and fields of version 2 among them, and unknown
// flags) is an error: the caller drops the packet and counts it.
func ParsePacket(b []byte) (Packet, error) {
	if len(b) < 5 {
		return Packet{}, fmt.Errorf("probe packet of %d bytes, want %d or %d", len(b), PacketSize, PacketSizeKernel)
	}
	if m := binary.BigEndian.Uint32(b[0:4]); m != PacketMagic {
		return Packet{}, fmt.Errorf("bad magic %#08x", m)
	}
	want := 0
	switch b[4] {
	case ProtocolVersion:
		want = PacketSize
	case PacketVersionKernel:
		want = PacketSizeKernel
	default:
		return Packet{}, fmt.Errorf("probe packet version %d, this build speaks %d and %d", b[4], ProtocolVersion, PacketVersionKernel)
	}
	if len(b) != want {
		return Packet{}, fmt.Errorf("probe packet of version %d and %d bytes, want %d", b[4], len(b), want)
	}
	if b[5] != PacketRequest && b[5] != PacketReply {
		return Packet{}, fmt.Errorf("unknown probe packet type %d", b[5])
	}
	p := Packet{
		Type:    b[5],
		Session: binary.BigEndian.Uint64(b[8:16]),
		Seq:     binary.BigEndian.Uint32(b[16:20]),
		TSC:     binary.BigEndian.Uint64(b[24:32]),
	}
	if b[7] != 0 || binary.BigEndian.Uint32(b[20:24]) != 0 {
		return Packet{}, errors.New("reserved bytes not zero")
	}
	if want == PacketSize {
		if b[6] != 0 {
			return Packet{}, errors.New("reserved bytes not zero")
		}
		return p, nil
	}
	p.Kernel, p.Flags = true, b[6]
	p.KRecv = binary.BigEndian.Uint64(b[32:40])
	p.KRecvWidthNs = binary.BigEndian.Uint32(b[40:44])
	p.TurnNs = binary.BigEndian.Uint32(b[44:48])
	p.PrevTurnNs = binary.BigEndian.Uint32(b[48:52])
	p.PrevKRecvLow = binary.BigEndian.Uint32(b[52:56])
	if p.Flags&^(FlagKernelRecv|FlagPrevTurn) != 0 {
		return Packet{}, errors.New("unknown flags")
	}
	if p.Type == PacketRequest && (p.Flags != 0 || p.KRecv != 0 || p.KRecvWidthNs != 0 || p.TurnNs != 0 || p.PrevTurnNs != 0 || p.PrevKRecvLow != 0) {
		return Packet{}, errors.New("a version-2 request carries no timestamps")
	}
	return p, nil
}

// MaxMessage bounds a control message body; anything longer is refused
// before it is read. MaxProbes bounds a task so that its result fits: a
// probe takes at most 63 bytes of JSON, 10,000 of them about 630 KB.
const (
	MaxMessage = 1 << 20
	MaxProbes  = 10000
)

// Control message types (PROTOCOL.md describes each one's fields).
const (
	MsgHello        = "hello"         // client -> server: registration
	MsgWelcome      = "welcome"       // server -> client: registered
	MsgError        = "error"         // either way: refused, with why
	MsgProbe        = "probe"         // server -> client: probe a responder
	MsgResult       = "result"        // client -> server: the probes
	MsgRoundRequest = "round_request" // requester -> server: run a round
	MsgRoundDone    = "round_done"    // server -> requester: written (or not)
)

// Error codes in an "error" message.
const (
	CodeVersion   = "version"   // the peer speaks another protocol version
	CodeTooLarge  = "too_large" // a message exceeded MaxMessage
	CodeDuplicate = "duplicate" // the node name is registered already (by this machine's clock, or one unknown)
	CodeConflict  = "conflict"  // the node name is held by another machine's clock: retrying cannot help
	CodeRefused   = "refused"   // a hello the server cannot use (no name, bad address)
)

// Message is every control message: one JSON object with "v" and "type";
// the other fields belong to particular types and are omitted when empty.
type Message struct {
	V    int    `json:"v"`
	Type string `json:"type"`

	// hello
	Node *minrtt.Node `json:"node,omitempty"`
	// welcome
	Server string `json:"server,omitempty"`
	// error
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"` // also: why a result or a round fell short

	// probe (and result: Round, Task, Responder echoed)
	Round      int    `json:"round,omitempty"`
	Task       uint64 `json:"task,omitempty"` // the UDP session id, < 2^53
	Responder  string `json:"responder,omitempty"`
	Addr       string `json:"addr,omitempty"`
	Count      int    `json:"count,omitempty"`
	IntervalNs int64  `json:"interval_ns,omitempty"`
	TimeoutNs  int64  `json:"timeout_ns,omitempty"`
	BudgetNs   int64  `json:"budget_ns,omitempty"`
	// The packet version the responder answers (its hello's
	// node.probe_version): 2 takes kernel timestamps.
	ProbeVersion int `json:"probe_version,omitempty"`

	// result
	Sent   int            `json:"sent,omitempty"`
	Probes []minrtt.Probe `json:"probes,omitempty"`
	// With kernel timestamps: how the probes were timed, how many of
	// Probes the kernels timed, and every probe as the processes timed
	// it (Probes' order), for comparison (minrtt.Direction).
	Timestamps   string         `json:"timestamps,omitempty"`
	KernelProbes int            `json:"kernel_probes,omitempty"`
	UserProbes   []minrtt.Probe `json:"user_probes,omitempty"`
	Malformed    uint64         `json:"malformed,omitempty"` // dropped since the previous report
	Stale        uint64         `json:"stale,omitempty"`     // late or duplicate replies, same

	// round_request
	Label         string `json:"label,omitempty"`
	WaitNodes     int    `json:"wait_nodes,omitempty"`
	WaitTimeoutNs int64  `json:"wait_timeout_ns,omitempty"`

	// round_done
	Path    string        `json:"path,omitempty"`
	Summary *RoundSummary `json:"summary,omitempty"`
}

// RoundSummary is what a requester learns of a written round without
// reading the file (it may run on another machine).
type RoundSummary struct {
	Round     int               `json:"round"`
	Label     string            `json:"label"`
	Nodes     int               `json:"nodes"`
	PerDir    int               `json:"probes_per_direction"`
	Dirs      []DirSummary      `json:"directions"`
	Missing   []minrtt.Missing  `json:"missing,omitempty"`
	Malformed map[string]uint64 `json:"malformed,omitempty"`
}

// DirSummary is one direction: probes answered of sent, the minimum RTT in
// the origin's cycles and the origin's TSC frequency to turn it into time.
type DirSummary struct {
	Origin    string  `json:"origin"`
	Responder string  `json:"responder"`
	Sent      int     `json:"sent"`
	Probes    int     `json:"probes"`
	MinRTT    uint64  `json:"min_rtt_cycles"`
	TSCHz     float64 `json:"tsc_hz"`
	Error     string  `json:"error,omitempty"`
	// How the probes were timed (minrtt.Direction.Timestamps) and, with
	// kernel timestamps, the minimum RTT as the processes timed them.
	Timestamps string `json:"timestamps,omitempty"`
	MinRTTUser uint64 `json:"min_rtt_user_cycles,omitempty"`
}

// MinRTTUserMicros is MinRTTUser in microseconds (0 without).
func (d DirSummary) MinRTTUserMicros() float64 {
	if d.MinRTTUser == 0 || d.TSCHz <= 0 {
		return 0
	}
	return float64(d.MinRTTUser) / d.TSCHz * 1e6
}

// MinRTTMicros is the minimum RTT in microseconds (0 without probes).
func (d DirSummary) MinRTTMicros() float64 {
	if d.Probes == 0 || d.TSCHz <= 0 {
		return 0
	}
	return float64(d.MinRTT) / d.TSCHz * 1e6
}

// MaxFirstMessage bounds the first message on a connection (a hello or a
// round request, a few hundred bytes): a caller that has not said who it is
// gets no megabyte buffers.
const MaxFirstMessage = 64 << 10

// TooLargeError is a control message whose length prefix exceeds the limit.
type TooLargeError struct{ Len, Max uint32 }

func (e *TooLargeError) Error() string {
	max := e.Max
	if max == 0 {
		max = MaxMessage
	}
	return fmt.Sprintf("control message of %d bytes exceeds the limit of %d", e.Len, max)
}

// WriteMessage frames m: 4-byte big-endian body length, then the JSON body.
// V is set to ProtocolVersion unless the caller set it (tests speak others).
func WriteMessage(w io.Writer, m *Message) error {
	if m.V == 0 {
		m.V = ProtocolVersion
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(body) > MaxMessage {
		return &TooLargeError{uint32(len(body)), MaxMessage}
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	_, err = w.Write(buf) // one write: frames from concurrent writers never interleave
	return err
}

// ReadFrame reads one length-prefixed body of at most MaxMessage bytes. A
// *TooLargeError leaves the stream unsynchronised: the caller closes the
// connection.
func ReadFrame(r io.Reader) ([]byte, error) { return ReadFrameMax(r, MaxMessage) }

// ReadFrameMax is ReadFrame with a smaller limit. The body's buffer grows
// as its bytes arrive (it doubles when they fill it): a prefix that claims
// a megabyte costs nothing until the megabyte comes.
func ReadFrameMax(r io.Reader, max uint32) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > max {
		return nil, &TooLargeError{n, max}
	}
	body := make([]byte, 0, min(int(n), 4<<10))
	for len(body) < int(n) {
		if len(body) == cap(body) {
			body = slices.Grow(body, min(int(n)-len(body), len(body)))
		}
		k, err := io.ReadFull(r, body[len(body):min(int(n), cap(body))])
		body = body[:len(body)+k]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

// DecodeMessage parses a body. The version is not checked here: a
// well-formed message with another "v" is reported by the caller, so that it
// can answer with a clear version error rather than "malformed".
func DecodeMessage(body []byte) (*Message, error) {
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("malformed control message: %v", err)
	}
	if m.V == 0 || m.Type == "" {
		return nil, errors.New(`malformed control message: no "v" or "type"`)
	}
	return &m, nil
}

// versionError is the text both sides use for a version mismatch.
func versionError(peer string, v int) string {
	return fmt.Sprintf("%s speaks protocol version %d, this build speaks version %d: upgrade the older side", peer, v, ProtocolVersion)
}
