package logfile

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// Status is what the writer knows about a channel's records that the frames
// alone cannot say: how many it accepted, how many it could not write. It is
// kept in two fixed slots right after the file header (version 2), written
// in place (pwrite, never appended, so it needs no free disk space) by the
// library: after each frame the background writer puts in the file, when a
// write fails, at close and by the SIGTERM flusher. Updates alternate between
// the slots (slot Seq%2) and each slot carries its own CRC, so a torn update
// leaves the other slot whole; readers take the valid slot with the higher Seq.
//
// A reader learns from it, even when the trailer could not be written (a full
// disk) or was never written (kill -9):
//   - Unwritten: records LogTS accepted that the library could not write;
//   - Accepted - (positions in the file): records accepted before the last
//     update that are not in the file (lost with a killed process);
//   - Refused: positions taken by records that LogTS refused with CP_ERR_IO
//     (an IDENTITY write that failed): not accepted, so not lost, but they
//     leave gaps in the positions that are not damage.
//
// Binary slot: a frame (KindStatus, codec raw, N 0, sealed like every v2
// frame) with a StatusSize-byte payload, little endian:
//
//	 0 u64 seq        8 u64 accepted   16 u64 written   24 u64 unwritten
//	32 u64 refused   40 u64 dropped    48 u32 errno     52 u32 state
//	56 u64 reserved (0)
//
// ASCII slot: one line of StatusLineSize bytes, every number zero-padded:
//
//	#status seq=%020d accepted=%020d written=%020d unwritten=%020d refused=%020d dropped=%020d errno=%010d state=%010d crc=%08x\n
//
// where crc is CRC-32C of the line up to (not including) " crc=".
type Status struct {
	Seq       uint64 `json:"seq"`
	Accepted  uint64 `json:"accepted"`  // positions (ring, IDENTITY) or events accepted so far
	Written   uint64 `json:"written"`   // positions below this are in the file (ring channels)
	Unwritten uint64 `json:"unwritten"` // accepted, held for a failing disk, not in the file
	Refused   uint64 `json:"refused"`   // positions of records refused with CP_ERR_IO (not accepted)
	Dropped   uint64 `json:"dropped"`   // events refused with CP_ERR_DROPPED
	Errno     uint32 `json:"errno"`     // the last write error (0: none)
	State     uint32 `json:"state"`     // StateOpen, StateClosed, StateClosedLoss, StateSignal
}

// Status states.
const (
	StateOpen       = 0 // the channel was open at the last update
	StateClosed     = 1 // closed, everything accepted is in the file
	StateClosedLoss = 2 // closed, Unwritten records could not be written
	StateSignal     = 3 // flushed by the SIGTERM handler, the process then died
)

var stateNames = [...]string{"open", "closed", "closed with loss", "flushed on SIGTERM"}

func (s *Status) StateName() string {
	if int(s.State) < len(stateNames) {
		return stateNames[s.State]
	}
	return "state " + strconv.FormatUint(uint64(s.State), 10)
}

const (
	StatusSize       = 64                           // binary payload
	StatusFrameSize  = FrameHeaderSize + StatusSize // one binary slot
	StatusSlots      = 2                            // slots, one after the other
	StatusLineSize   = 228                          // the line above, its newline included (checked by a test)
	statusLinePrefix = "#status seq="
)

// AppendStatusFrame appends s as a sealed binary slot.
func AppendStatusFrame(dst []byte, s Status) []byte {
	var p [StatusSize]byte
	binary.LittleEndian.PutUint64(p[0:], s.Seq)
	binary.LittleEndian.PutUint64(p[8:], s.Accepted)
	binary.LittleEndian.PutUint64(p[16:], s.Written)
	binary.LittleEndian.PutUint64(p[24:], s.Unwritten)
	binary.LittleEndian.PutUint64(p[32:], s.Refused)
	binary.LittleEndian.PutUint64(p[40:], s.Dropped)
	binary.LittleEndian.PutUint32(p[48:], s.Errno)
	binary.LittleEndian.PutUint32(p[52:], s.State)
	return AppendFrame(dst, FrameHeader{Kind: KindStatus, RawLen: StatusSize}, p[:])
}

// parseStatusPayload decodes a binary slot's payload (its frame already verified).
func parseStatusPayload(p []byte) (Status, error) {
	if len(p) != StatusSize {
		return Status{}, fmt.Errorf("status payload of %d bytes", len(p))
	}
	return Status{
		Seq: binary.LittleEndian.Uint64(p[0:]), Accepted: binary.LittleEndian.Uint64(p[8:]),
		Written: binary.LittleEndian.Uint64(p[16:]), Unwritten: binary.LittleEndian.Uint64(p[24:]),
		Refused: binary.LittleEndian.Uint64(p[32:]), Dropped: binary.LittleEndian.Uint64(p[40:]),
		Errno: binary.LittleEndian.Uint32(p[48:]), State: binary.LittleEndian.Uint32(p[52:]),
	}, nil
}

func appendPadded(dst []byte, v uint64, width int) []byte {
	var tmp [20]byte
	s := strconv.AppendUint(tmp[:0], v, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// AppendStatusLine appends s as an ASCII slot (StatusLineSize bytes).
func AppendStatusLine(dst []byte, s Status) []byte {
	start := len(dst)
	dst = append(dst, statusLinePrefix...)
	dst = appendPadded(dst, s.Seq, 20)
	for _, f := range []struct {
		name  string
		v     uint64
		width int
	}{{" accepted=", s.Accepted, 20}, {" written=", s.Written, 20}, {" unwritten=", s.Unwritten, 20},
		{" refused=", s.Refused, 20}, {" dropped=", s.Dropped, 20}, {" errno=", uint64(s.Errno), 10},
		{" state=", uint64(s.State), 10}} {
		dst = append(dst, f.name...)
		dst = appendPadded(dst, f.v, f.width)
	}
	crc := CRC(dst[start:])
	dst = append(dst, " crc="...)
	dst = append(dst, fmt.Sprintf("%08x", crc)...)
	return append(dst, '\n')
}

// ParseStatusLine decodes an ASCII slot (with or without its newline).
func ParseStatusLine(line string) (Status, error) {
	line = strings.TrimSuffix(line, "\n")
	if len(line) != StatusLineSize-1 || !strings.HasPrefix(line, statusLinePrefix) {
		return Status{}, fmt.Errorf("status line of %d bytes, want %d", len(line), StatusLineSize-1)
	}
	body, crcHex, ok := strings.Cut(line, " crc=")
	if !ok {
		return Status{}, fmt.Errorf("status line without crc")
	}
	crc, err := strconv.ParseUint(crcHex, 16, 32)
	if err != nil || uint32(crc) != CRC([]byte(body)) {
		return Status{}, fmt.Errorf("status line checksum mismatch")
	}
	var s Status
	fields := strings.Fields(body[1:]) // "status", "seq=...", ...
	want := []string{"seq", "accepted", "written", "unwritten", "refused", "dropped", "errno", "state"}
	if len(fields) != len(want)+1 {
		return Status{}, fmt.Errorf("status line has %d fields", len(fields))
	}
	vals := make([]uint64, len(want))
	for i, name := range want {
		k, v, ok := strings.Cut(fields[i+1], "=")
		if !ok || k != name {
			return Status{}, fmt.Errorf("status line field %q, want %s", fields[i+1], name)
		}
		bits := 64
		if name == "errno" || name == "state" {
			bits = 32
		}
		if vals[i], err = strconv.ParseUint(v, 10, bits); err != nil {
			return Status{}, fmt.Errorf("status line field %q: %v", fields[i+1], err)
		}
	}
	s.Seq, s.Accepted, s.Written, s.Unwritten, s.Refused, s.Dropped = vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	s.Errno, s.State = uint32(vals[6]), uint32(vals[7])
	return s, nil
}

// Problems lists, one sentence each, what a full read (Records or Counters)
// found damaged or knows to be lost. Empty means the file holds every
// record the channel accepted, undamaged. Readers print these loudly
// (dump, analyze, CP_LogSummary, the bindings' warnings).
func (s *Summary) Problems(h *Header) []string {
	var out []string
	if s.CorruptFrames > 0 || s.CorruptBytes > 0 {
		out = append(out, fmt.Sprintf("%d damaged frames skipped (%d unreadable bytes): every valid frame was decoded", s.CorruptFrames, s.CorruptBytes))
	}
	if s.CorruptLines > 0 {
		out = append(out, fmt.Sprintf("%d damaged lines skipped", s.CorruptLines))
	}
	if s.TruncatedBytes > 0 && !s.TornAfterSignal(h) {
		out = append(out, fmt.Sprintf("cut short: %d bytes after the last whole frame", s.TruncatedBytes))
	} else if s.TruncatedBytes > 0 {
		// A torn duplicate: nothing is missing (said below otherwise).
	} else if st := s.Status; s.Trailer == nil && st != nil && st.State == StateClosed && st.Errno == 0 {
		// Closed with every record written, so the trailer was written
		// after the last frame: the file was cut where a frame ended.
		out = append(out, "cut short: the channel was closed, yet the file ends after a whole frame, before its trailer")
	}
	unwritten, why := s.Unwritten()
	if unwritten > 0 {
		out = append(out, fmt.Sprintf("%d accepted records were never written (%s)", unwritten, why))
	}
	if accepted, covered, known := s.positions(h); known {
		if accepted > covered && accepted-covered > unwritten {
			lost := accepted - covered - unwritten
			msg := fmt.Sprintf("%d accepted records are not in the file (damaged, cut off, or never reached it)", lost)
			if s.Trailer == nil && (s.Status == nil || s.Status.State == StateOpen) {
				msg = fmt.Sprintf("%d records accepted by the last status update are not in the file (the process ended without closing the channel, or it is still open)", lost)
			}
			out = append(out, msg)
		}
	}
	if msg, ok := s.countsDisagree(h); ok {
		out = append(out, msg)
	}
	if s.Trailer == nil && (s.Status == nil || s.Status.State == StateOpen) {
		msg := "no trailer: the channel was not closed (the process was killed, or is still logging)"
		if s.RingBound > 0 {
			msg += fmt.Sprintf("; up to %d more records (its ring: %d blocks of %d) may have been accepted after the last update and are not in the file",
				s.RingBound, h.RingBlocks, h.BlockRecords)
		}
		out = append(out, msg)
	}
	return out
}

// countsDisagree says, after a full Counters read of a counter channel's
// file, whether its periods fail to add up to what its trailer says: the
// total the channel counted, less what it says was never written (a disk
// that refused the last records until the close). The library writes the
// periods so that they add up to it (libcp/sampler.go, emit),
// FASTPERIODICCOUNTER's with several writers too (it counts fewer events
// than were logged, and its total is what it counted), so anything else
// is a period lost or changed where no checksum sees it (an ASCII digit,
// a frame rewritten and sealed again). A file without a trailer (cut by a
// crash, still open) has nothing to compare; a cut (export --format logs)
// holds the periods of a range under its source's trailer, whose own
// check is among Cut.Problems.
func (s *Summary) countsDisagree(h *Header) (string, bool) {
	t := s.Trailer
	if t == nil || !s.trailerTotal || s.Read != "counters" || !s.countedAll || !h.Counter() || h.Cut != nil {
		return "", false
	}
	if !s.countedOver && s.Counted == t.Total-min(t.Unwritten, t.Total) {
		return "", false
	}
	sum := strconv.FormatUint(s.Counted, 10)
	if s.countedOver {
		sum = "more than " + sum
	}
	msg := fmt.Sprintf("the periods add up to %s events, the trailer says %d", sum, t.Total)
	if t.Unwritten > 0 {
		msg += fmt.Sprintf(" (%d of them never written)", t.Unwritten)
	}
	return msg, true
}

// TornAfterSignal says whether the bytes after the last whole frame are a
// write the process's death cut short after its SIGTERM flush had written
// every accepted record: a drainer's frame of records already in the file
// (a fatal signal ends a write to a file part way; the flush keeps the
// lock when it kills the process, but a program's own handler that exits
// may still cut one). That loses nothing, so it is no problem; a read that
// misses an accepted position is.
func (s *Summary) TornAfterSignal(h *Header) bool {
	if s.Status == nil || s.Status.State != StateSignal {
		return false
	}
	accepted, covered, known := s.positions(h)
	return known && covered >= accepted
}

// positions are, for a file whose records take ring positions (or
// IDENTITY's), the positions the channel accepted and those a read of its
// tuple records accounts for (records, holes, damaged lines, and calls the
// status counts as refused); known is false for any other file or read (a
// NET_CONF file's counter records are not positions).
func (s *Summary) positions(h *Header) (accepted, covered uint64, known bool) {
	accepted, known = s.accepted()
	if !known || !(h.BlockRecords > 0 || h.Handler == "IDENTITY") || s.Read != "records" {
		return 0, 0, false
	}
	covered = s.Records + s.Holes + uint64(s.CorruptLines)
	if s.Status != nil {
		covered += s.Status.Refused
	}
	return accepted, covered, true
}

// Unwritten is how many records the channel accepted and could not write
// (a failing disk), from the trailer, a SIGTERM event or the status, and why.
func (s *Summary) Unwritten() (uint64, string) {
	var n uint64
	why := "the disk was failing"
	if s.Status != nil && s.Status.Unwritten > 0 {
		n = s.Status.Unwritten
		if s.Status.Errno != 0 {
			why = syscall.Errno(s.Status.Errno).Error()
		}
	}
	for _, ev := range s.Events {
		n = max(n, ev.Unwritten)
	}
	if t := s.Trailer; t != nil && t.Unwritten > 0 {
		n = max(n, t.Unwritten)
		if t.WriteError != "" {
			why = t.WriteError
		}
	}
	return n, why
}

// accepted is how many positions the channel accepted, as far as the file knows.
func (s *Summary) accepted() (uint64, bool) {
	switch {
	case s.Trailer != nil && s.Status != nil:
		return max(s.Trailer.Positions, s.Status.Accepted), true
	case s.Trailer != nil:
		return s.Trailer.Positions, true
	case s.Status != nil:
		return s.Status.Accepted, true
	}
	return 0, false
}
