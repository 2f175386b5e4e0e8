// Package logfile owns the on-disk format of Cloudprofiler channel logs: the
// self-describing header, the frames that carry records, and the decoder.
// The C side of libcp writes the same frames (engine.h keeps the constants in
// step); everything else goes through this package.
//
// Binary file (formats BINARY, ZSTD, S2 and their _TSC variants):
//
//	"CLOUDPRF" | u16 version | u16 0x0102 (byte-order mark) | u32 n | n bytes of header JSON
//	then (version 2) two status frames at fixed offsets (see Status)
//	then frames: 32-byte frame header (see FrameHeader) + payload
//
// Every frame decodes on its own, so a file cut by a crash decodes up to its
// last whole frame. Records frames carry the ring position of their first
// record; the decoder orders frames by it and drops duplicates (the SIGTERM
// flusher may write a block the background writer also wrote).
//
// Version 2 (this writer): every frame's CRC field is CRC-32C over the frame
// header's first 28 bytes followed by the payload (FrameCRC), so a flipped
// bit anywhere in a frame (its count, codec, first position, length) makes
// the frame damaged instead of decoding as records that were never logged.
// Version 1 files (CRC of the payload only, and only with FlagCRC) are still
// read, with every frame header checked for plausibility only.
//
// ASCII file (ASCII, ASCII_TSC): lines; '#' lines are metadata:
//
//	#CLOUDPROFILER-LOG v2           (v1 files are read too)
//	#header {json}
//	#columns ...
//	#status ... (two fixed-width lines, version 2: see Status)
//	#block FIRST_POS N [signal]     N lines follow (records, or #hole)
//	tuple_id,tsc[,mono_ns]          or for counters: period_end_tsc,count,skipped_periods[,mono_ns]
//	#event {json}
//	#trailer {json}
//
// ASCII lines carry no checksum: a line that does not parse is damage (it is
// skipped and counted), a digit changed in place is not detectable.
package logfile

import (
	"encoding/binary"
	"fmt"
)

const (
	Magic           = "CLOUDPRF"
	Version         = 2 // written; MinVersion..Version are read
	MinVersion      = 1
	ByteOrderMark   = 0x0102
	ASCIIMagic      = "#CLOUDPROFILER-LOG v2"
	ASCIIMagicV1    = "#CLOUDPROFILER-LOG v1"
	FrameMagic      = 0x52465043 // "CPFR" little endian
	FrameHeaderSize = 32
)

// Frame kinds.
const (
	KindRecords = 1 // tuple records: id, tsc[, mono]
	KindCounter = 2 // counter records: period end tsc, mono, count, skipped
	KindEvent   = 3 // JSON event (parameter change, sigterm flush, ...)
	KindTrailer = 4 // JSON trailer written at close
	KindStatus  = 5 // version 2: one of the two status slots (see Status)
)

// Codecs.
const (
	CodecRaw     = 0 // fixed-size little-endian records
	CodecZstd    = 1 // zstd frame of the column encoding
	CodecS2      = 2 // S2 block of the column encoding
	CodecColumns = 3 // column encoding, uncompressed
)

// Frame flags.
const (
	FlagSignal = 1 // written by the SIGTERM flusher: may contain holes
	FlagCRC    = 2 // CRC field is CRC-32C of the stored payload
)

// Format is a channel's log format; values match capi/cloudprofiler.h.
type Format int32

const (
	ASCII Format = iota
	ASCIITSC
	Binary
	BinaryTSC
	Zstd
	ZstdTSC
	S2
	S2TSC
	numFormats
)

var formatNames = [...]string{"ASCII", "ASCII_TSC", "BINARY", "BINARY_TSC", "ZSTD", "ZSTD_TSC", "S2", "S2_TSC"}

func (f Format) Valid() bool { return f >= 0 && f < numFormats }

func (f Format) String() string {
	if !f.Valid() {
		return fmt.Sprintf("Format(%d)", int32(f))
	}
	return formatNames[f]
}

// ParseFormat accepts a format's name as written in the C header (without CP_).
func ParseFormat(s string) (Format, error) {
	for i, n := range formatNames {
		if n == s {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("unknown log format %q", s)
}

// HasMono says whether records carry CLOCK_MONOTONIC_RAW next to the TSC.
func (f Format) HasMono() bool { return f%2 == 0 }

// IsASCII says whether the file is text.
func (f Format) IsASCII() bool { return f == ASCII || f == ASCIITSC }

// Codec is the codec used for records frames written in the background.
func (f Format) Codec() int {
	switch f {
	case Zstd, ZstdTSC:
		return CodecZstd
	case S2, S2TSC:
		return CodecS2
	}
	return CodecRaw
}

// RecordSize is the size of one tuple record in memory and in raw frames.
func (f Format) RecordSize() int {
	if f.HasMono() {
		return 24
	}
	return 16
}

// FrameHeader is the 32-byte header in front of every frame's payload.
type FrameHeader struct {
	Kind, Codec uint8
	Flags       uint16
	N           uint32 // positions covered (records, holes included)
	StoredLen   uint32
	FirstPos    uint64
	RawLen      uint32
	CRC         uint32
}

func (h *FrameHeader) Append(dst []byte) []byte {
	var b [FrameHeaderSize]byte
	binary.LittleEndian.PutUint32(b[0:], FrameMagic)
	b[4] = h.Kind
	b[5] = h.Codec
	binary.LittleEndian.PutUint16(b[6:], h.Flags)
	binary.LittleEndian.PutUint32(b[8:], h.N)
	binary.LittleEndian.PutUint32(b[12:], h.StoredLen)
	binary.LittleEndian.PutUint64(b[16:], h.FirstPos)
	binary.LittleEndian.PutUint32(b[24:], h.RawLen)
	binary.LittleEndian.PutUint32(b[28:], h.CRC)
	return append(dst, b[:]...)
}

// Seal sets FlagCRC and the CRC of a whole encoded frame in place: frame is
// the 32-byte header (every other field already set) followed by the
// payload. Version 2 writers seal every frame.
func Seal(frame []byte) {
	binary.LittleEndian.PutUint16(frame[6:], binary.LittleEndian.Uint16(frame[6:])|FlagCRC)
	binary.LittleEndian.PutUint32(frame[28:], FrameCRC(frame[:28], frame[FrameHeaderSize:]))
}

// AppendFrame appends a sealed frame: h (its StoredLen set from payload) and payload.
func AppendFrame(dst []byte, h FrameHeader, payload []byte) []byte {
	h.StoredLen = uint32(len(payload))
	start := len(dst)
	dst = append(h.Append(dst), payload...)
	Seal(dst[start:])
	return dst
}

func parseFrameHeader(b []byte) (FrameHeader, error) {
	if binary.LittleEndian.Uint32(b[0:]) != FrameMagic {
		return FrameHeader{}, fmt.Errorf("bad frame magic %#x", binary.LittleEndian.Uint32(b[0:]))
	}
	return FrameHeader{
		Kind: b[4], Codec: b[5], Flags: binary.LittleEndian.Uint16(b[6:]),
		N: binary.LittleEndian.Uint32(b[8:]), StoredLen: binary.LittleEndian.Uint32(b[12:]),
		FirstPos: binary.LittleEndian.Uint64(b[16:]), RawLen: binary.LittleEndian.Uint32(b[24:]),
		CRC: binary.LittleEndian.Uint32(b[28:]),
	}, nil
}

// Sync is a sync point: the TSC and two clocks read together. TSC is the
// midpoint of two TSC reads TSCWidth cycles apart that bracket both clocks.
type Sync struct {
	TSC        uint64 `json:"tsc"`
	TSCWidth   uint64 `json:"tsc_width"`
	MonoRawNs  int64  `json:"mono_raw_ns"`
	RealtimeNs int64  `json:"realtime_ns"`
}

// Header is the self-describing header at the start of every file.
type Header struct {
	Version      int              `json:"version"`
	ByteOrder    string           `json:"byte_order"`
	Format       string           `json:"format"`
	FormatID     int32            `json:"format_id"`
	Handler      string           `json:"handler"`
	HandlerID    int32            `json:"handler_id"`
	Args         map[string]int64 `json:"args"`
	Columns      []string         `json:"columns"`
	RecordSize   int              `json:"record_size"`
	BlockRecords int              `json:"block_records,omitempty"`
	RingBlocks   int              `json:"ring_blocks,omitempty"`
	DropWhenFull bool             `json:"drop_when_full"`
	Channel      int              `json:"channel"`
	Name         string           `json:"name"`
	NameHex      string           `json:"name_hex"`
	Host         string           `json:"host"`
	Node         string           `json:"node,omitempty"` // CP_NODE: the node whose TSC the file is in (default: host)
	// TSCDomain is the counter the file's TSCs come from (tsc.Domain: the
	// boot id, and CP_FAKE_TSC's RATE:OFFSET): one per node, or the node
	// name covers two clocks (analyze refuses that).
	TSCDomain     string  `json:"tsc_domain,omitempty"`
	Run           string  `json:"run,omitempty"` // CP_RUN: the run the file belongs to, when the launcher names it
	PID           int     `json:"pid"`
	TSCHz         float64 `json:"tsc_hz"`
	TSCHzSource   string  `json:"tsc_hz_source"`
	OpenSync      Sync    `json:"open_sync"`
	Library       string  `json:"library"`
	CounterPeriod int64   `json:"counter_period_ns,omitempty"`
	Conf          *Conf   `json:"conf,omitempty"` // NET_CONF channels
	Fox           *Fox    `json:"fox,omitempty"`  // FOX_START, FOX_END channels and the return log
	Cut           *Cut    `json:"cut,omitempty"`  // a time range of another file (cut.go)
	// Waits: the channel marks an operator instance (in, out or sent) and
	// each record says whether the instance's thread waited since its
	// previous mark, by bit 63 of its TSC (WaitedBit; the reader takes it
	// off into Record.Waited). The value says how the library saw the
	// waits: "rseq" or "getrusage" (libcp/marks.c). Empty: no such notes.
	Waits string `json:"waits,omitempty"`
}

// WaitedBit is the bit of a record's TSC that says, in a file whose header
// has Waits, that the thread waited since the instance's previous mark.
const WaitedBit = uint64(1) << 63

// Fox describes a return-trip (ReT) file. A FOX_START channel writes two
// files: its own (role "start": tuple starts, like BUFFER_IDENTITY) and the
// return log (role "return", same channel number and name, file name with
// ".ret" before ".cplog"): one record per ReTACK received, (tuple id, TSC
// when it arrived, in this node's counter). A FOX_END channel (role "end")
// logs like BUFFER_IDENTITY and sends one ReTACK per record to Start.
type Fox struct {
	Role       string `json:"role"`                  // "start", "return" or "end"
	Listen     string `json:"listen,omitempty"`      // start, return: UDP address ReTACKs are received on (the port bound)
	ReturnFile string `json:"return_file,omitempty"` // start: base name of its return log
	StartFile  string `json:"start_file,omitempty"`  // return: base name of its START channel's file
	Start      string `json:"start,omitempty"`       // end: CP_RET_START as given, or the address the configuration server gave
	StartAddr  string `json:"start_addr,omitempty"`  // end: the address it resolved to
	Stamp      string `json:"stamp,omitempty"`       // return: how the arrival TSC is taken
	// start: whether the listen address was registered with the configuration
	// server ("confserver ADDR name N addr IP:PORT") or why not ("no: ...").
	Registered string `json:"registered,omitempty"`
	// end: how the start node was found: "CP_RET_START" or "confserver ADDR name N".
	StartFoundVia string `json:"start_found_via,omitempty"`
}

// FoxStats are a FOX file's ReTACK counts, in its trailer.
type FoxStats struct {
	Received   uint64 `json:"retacks_received,omitempty"`    // start, return: ReTACKs logged in the return log
	Malformed  uint64 `json:"retacks_malformed,omitempty"`   // start, return: packets dropped as not a ReTACK v1
	KernelDrop uint64 `json:"kernel_drops,omitempty"`        // start, return: datagrams the socket dropped (SO_RXQ_OVFL)
	NotLogged  uint64 `json:"retacks_not_logged,omitempty"`  // start, return: valid ReTACKs the return log refused (closing, failing disk)
	Sent       uint64 `json:"retacks_sent,omitempty"`        // end: ReTACKs handed to the kernel
	SendFailed uint64 `json:"retacks_send_failed,omitempty"` // end: ReTACKs not sent (EAGAIN or another send error)
}

// Conf records how a NET_CONF channel was resolved when it opened. Later
// changes are "switch" events in the file.
type Conf struct {
	Server   string           `json:"server,omitempty"`
	Handler  string           `json:"handler"`
	Args     map[string]int64 `json:"args,omitempty"`
	Rule     string           `json:"rule,omitempty"`
	Version  uint64           `json:"version,omitempty"`
	Fallback string           `json:"fallback,omitempty"` // why the fallback handler was used
}

// Counter says whether the channel writes counter records only.
func (h *Header) Counter() bool {
	return h.Handler == "PERIODICCOUNTER" || h.Handler == "FASTPERIODICCOUNTER" || h.Handler == "SERVICERATE"
}

// Event is a JSON event frame or line: a parameter change, a SIGTERM flush.
type Event struct {
	Event string           `json:"event"`
	Sync  *Sync            `json:"sync,omitempty"`
	Total uint64           `json:"total,omitempty"`
	Args  map[string]int64 `json:"args,omitempty"`
	Pos   uint64           `json:"pos,omitempty"`
	// Switch events (NET_CONF): the handler from then on, and why.
	Handler string `json:"handler,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Version uint64 `json:"version,omitempty"`
	// Unwritten (SIGTERM event): records the channel held in memory for a
	// failing disk, lost with the process.
	Unwritten uint64 `json:"unwritten,omitempty"`
	// service_rate events (SERVICERATE channels): a converged estimate of
	// the Beard & Chamberlain estimator, items per second, at Sync's TSC;
	// the sampling period then and the estimates averaged into it.
	Rate     float64 `json:"rate,omitempty"`
	PeriodNs int64   `json:"period_ns,omitempty"`
	Samples  uint64  `json:"samples,omitempty"`
}

// Trailer is written by a normal close (CloseChannel, CloseAllChannels, exit).
type Trailer struct {
	Reason     string    `json:"reason"`
	CloseSync  Sync      `json:"close_sync"`
	Positions  uint64    `json:"positions"`           // ring positions / events accepted
	Dropped    uint64    `json:"dropped"`             // events refused with CP_ERR_DROPPED
	Holes      uint64    `json:"holes"`               // positions reserved but never written
	Total      uint64    `json:"total"`               // events seen (counters, FIRSTLAST, sampling handlers)
	Unwritten  uint64    `json:"unwritten,omitempty"` // accepted but lost to I/O errors
	WriteError string    `json:"write_error,omitempty"`
	Fox        *FoxStats `json:"fox,omitempty"` // FOX_START, FOX_END and return log files
}

// Record is one tuple record.
type Record struct {
	TupleID int64
	TSC     uint64
	MonoNs  uint64
	// Waited: the instance's thread gave the CPU up (a voluntary context
	// switch: it waited for input, for room downstream, in a sleep) since
	// the instance's previous mark; only in files whose Header.Waits is set.
	Waited bool
}

// A LINEAGE file's records are (out_id, in_id) pairs: TupleID is the output,
// the TSC column the input (capi/cloudprofiler.h, CP_LINEAGE). A TSC of 0
// marks a position never written, so input 0 is stored as 2^63 (and
// math.MinInt64, which would then read as 0, is refused by the writer).
const LineageHandler = "LINEAGE"

// LineageTSC is what the TSC column holds for input id in (in must not be
// math.MinInt64).
func LineageTSC(in int64) uint64 {
	if in == 0 {
		return 1 << 63
	}
	return uint64(in)
}

// LineageInput is the input id a LINEAGE record's TSC column holds.
func LineageInput(tsc uint64) int64 {
	if tsc == 1<<63 {
		return 0
	}
	return int64(tsc)
}

// CounterRecord is one period of a counter channel.
type CounterRecord struct {
	TSC     uint64 // period end
	MonoNs  uint64
	Count   uint64
	Skipped uint64 // periods the sampler missed before this one (their events are in Count)
}

const CounterRecordSize = 32
