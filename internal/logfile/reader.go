package logfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// ErrForeign is returned for a file that is not a Cloudprofiler log.
var ErrForeign = errors.New("not a Cloudprofiler log file")

// ErrDamaged is returned after a full read of a file in which some frames
// were damaged: every whole frame was still decoded (see Summary).
var ErrDamaged = errors.New("damaged log file")

var errDamagedFrame = errors.New("damaged frame (checksum or encoding)")

// Summary is what a full read learned about the file.
type Summary struct {
	Records        uint64   // tuple or counter records decoded
	Holes          uint64   // positions reserved but never written (skipped)
	Duplicates     uint64   // records seen twice (SIGTERM flush and drainer) and dropped
	MissingPos     uint64   // ring positions no frame covers
	Frames         int      // record/counter frames or blocks read
	SignalFrames   int      // of which written by the SIGTERM flusher
	TruncatedBytes int64    // bytes after the last whole frame (a cut-off file)
	CorruptBytes   int64    // bytes skipped to find the next frame after damage
	CorruptFrames  int      // frames whose checksum did not match (skipped)
	Events         []Event  // parameter changes, SIGTERM flushes
	Trailer        *Trailer // nil if the file was not closed normally
}

// entry is one indexed frame or ASCII block.
type entry struct {
	kind      uint8
	codec     uint8
	flags     uint16
	n         uint64
	firstPos  uint64
	positions bool  // firstPos is meaningful (ordered, deduplicated)
	off       int64 // payload (binary) or first line (ASCII)
	length    int64 // payload bytes (binary) or lines (ASCII)
	rawLen    uint32
	crc       uint32
	seq       int // file order
}

// File is an open log file, indexed.
type File struct {
	Header  Header
	Summary Summary
	path    string
	f       *os.File
	ascii   bool
	entries []entry
	recSize int
}

// Open reads the header and indexes every frame. Errors name the file and
// say what is wrong; a file cut short is not an error (Summary.TruncatedBytes).
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	lf := &File{path: path, f: f}
	if err := lf.index(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return lf, nil
}

func (lf *File) Close() error { return lf.f.Close() }

func (lf *File) index() error {
	br := bufio.NewReaderSize(lf.f, 1<<16)
	magic, err := br.Peek(len(Magic))
	if err != nil {
		return fmt.Errorf("%w (too short)", ErrForeign)
	}
	switch {
	case string(magic) == Magic:
		return lf.indexBinary(br)
	case bytes.HasPrefix([]byte(ASCIIMagic), magic):
		lf.ascii = true
		return lf.indexASCII(br)
	}
	return fmt.Errorf("%w (bad magic %q)", ErrForeign, magic)
}

func (lf *File) setHeader(js []byte) error {
	if err := json.Unmarshal(js, &lf.Header); err != nil {
		return fmt.Errorf("header JSON: %v", err)
	}
	if lf.Header.Version != Version {
		return fmt.Errorf("log version %d, this decoder reads %d", lf.Header.Version, Version)
	}
	lf.recSize = lf.Header.RecordSize
	if lf.recSize != 16 && lf.recSize != 24 {
		return fmt.Errorf("record size %d in header", lf.recSize)
	}
	return nil
}

func (lf *File) indexBinary(br *bufio.Reader) error {
	var pre [16]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil {
		return fmt.Errorf("header cut short")
	}
	if v := binary.LittleEndian.Uint16(pre[8:]); v != Version {
		return fmt.Errorf("log version %d, this decoder reads %d", v, Version)
	}
	if bom := binary.LittleEndian.Uint16(pre[10:]); bom != ByteOrderMark {
		return fmt.Errorf("byte order mark %#x: file written big-endian, not supported", bom)
	}
	hl := binary.LittleEndian.Uint32(pre[12:])
	if hl > 1<<20 {
		return fmt.Errorf("header length %d is not plausible", hl)
	}
	js := make([]byte, hl)
	if _, err := io.ReadFull(br, js); err != nil {
		return fmt.Errorf("header cut short")
	}
	if err := lf.setHeader(js); err != nil {
		return err
	}
	off := int64(16 + hl)
	st, err := lf.f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	var hb [FrameHeaderSize]byte
	for off < size {
		if size-off < FrameHeaderSize {
			lf.Summary.TruncatedBytes = size - off
			break
		}
		if _, err := lf.f.ReadAt(hb[:], off); err != nil {
			return err
		}
		fh, err := parseFrameHeader(hb[:])
		if err == nil && fh.Kind >= KindRecords && fh.Kind <= KindTrailer && int64(fh.StoredLen) > size-off-FrameHeaderSize {
			lf.Summary.TruncatedBytes = size - off
			break
		}
		if err != nil || fh.Kind < KindRecords || fh.Kind > KindTrailer {
			// Damage: find the next frame header and go on from there.
			next, ok := lf.nextFrame(off+1, size)
			lf.Summary.CorruptBytes += next - off
			if !ok {
				break
			}
			off = next
			continue
		}
		e := entry{kind: fh.Kind, codec: fh.Codec, flags: fh.Flags, n: uint64(fh.N), firstPos: fh.FirstPos,
			off: off + FrameHeaderSize, length: int64(fh.StoredLen), rawLen: fh.RawLen, crc: fh.CRC, seq: len(lf.entries)}
		switch fh.Kind {
		case KindRecords:
			e.positions = true
			lf.entries = append(lf.entries, e)
		case KindCounter:
			lf.entries = append(lf.entries, e)
		case KindEvent, KindTrailer:
			js := make([]byte, fh.StoredLen)
			if _, err := lf.f.ReadAt(js, e.off); err != nil {
				return err
			}
			if err := lf.addMeta(fh.Kind, js); err != nil {
				lf.Summary.CorruptFrames++
			}
		}
		off += FrameHeaderSize + int64(fh.StoredLen)
	}
	return nil
}

// nextFrame finds the next offset at or after from that holds a plausible
// frame header (magic, known kind, payload inside the file).
func (lf *File) nextFrame(from, size int64) (int64, bool) {
	buf := make([]byte, 1<<16+FrameHeaderSize)
	magic := []byte{0x43, 0x50, 0x46, 0x52} // FrameMagic, little endian
	for off := from; off+FrameHeaderSize <= size; {
		n, _ := lf.f.ReadAt(buf, off)
		if n < FrameHeaderSize {
			break
		}
		for i := 0; i+FrameHeaderSize <= n; i++ {
			if !bytes.Equal(buf[i:i+4], magic) {
				continue
			}
			fh, err := parseFrameHeader(buf[i : i+FrameHeaderSize])
			if err == nil && fh.Kind >= KindRecords && fh.Kind <= KindTrailer &&
				int64(fh.StoredLen) <= size-(off+int64(i))-FrameHeaderSize {
				return off + int64(i), true
			}
		}
		off += int64(n - FrameHeaderSize + 1)
	}
	return size, false
}

func (lf *File) addMeta(kind uint8, js []byte) error {
	if kind == KindTrailer {
		var t Trailer
		if err := json.Unmarshal(js, &t); err != nil {
			return fmt.Errorf("trailer JSON: %v", err)
		}
		lf.Summary.Trailer = &t
		return nil
	}
	var ev Event
	if err := json.Unmarshal(js, &ev); err != nil {
		return fmt.Errorf("event JSON: %v", err)
	}
	lf.Summary.Events = append(lf.Summary.Events, ev)
	return nil
}

func (lf *File) indexASCII(br *bufio.Reader) error {
	var off int64
	lineNo := 0
	var cur *entry
	implicitPos := uint64(0)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return fmt.Errorf("corrupt at byte %d: line too long", off)
		}
		if err == io.EOF {
			if len(line) > 0 {
				lf.Summary.TruncatedBytes = int64(len(line))
			}
			break
		}
		if err != nil {
			return err
		}
		lineNo++
		lineOff := off
		off += int64(len(line))
		s := strings.TrimRight(string(line), "\n")
		switch {
		case lineNo == 1:
			if s != ASCIIMagic {
				return fmt.Errorf("%w (first line %q)", ErrForeign, s)
			}
		case strings.HasPrefix(s, "#header "):
			if err := lf.setHeader([]byte(s[8:])); err != nil {
				return err
			}
		case strings.HasPrefix(s, "#block "):
			f := strings.Fields(s[7:])
			if len(f) < 2 {
				return fmt.Errorf("corrupt at line %d: %q", lineNo, s)
			}
			first, e1 := strconv.ParseUint(f[0], 10, 64)
			n, e2 := strconv.ParseUint(f[1], 10, 64)
			if e1 != nil || e2 != nil {
				return fmt.Errorf("corrupt at line %d: %q", lineNo, s)
			}
			var flags uint16
			if len(f) > 2 && f[2] == "signal" {
				flags = FlagSignal
			}
			lf.entries = append(lf.entries, entry{kind: KindRecords, flags: flags, n: n, firstPos: first,
				positions: true, off: off, seq: len(lf.entries)})
			cur = &lf.entries[len(lf.entries)-1]
		case strings.HasPrefix(s, "#counter "): // a counter line in a NET_CONF channel's file
			lf.entries = append(lf.entries, entry{kind: KindCounter, n: 1, off: lineOff + int64(len("#counter ")),
				length: 1, seq: len(lf.entries)})
		case strings.HasPrefix(s, "#event "):
			if err := lf.addMeta(KindEvent, []byte(s[7:])); err != nil {
				return fmt.Errorf("corrupt at line %d: %v", lineNo, err)
			}
		case strings.HasPrefix(s, "#trailer "):
			if err := lf.addMeta(KindTrailer, []byte(s[9:])); err != nil {
				return fmt.Errorf("corrupt at line %d: %v", lineNo, err)
			}
		case strings.HasPrefix(s, "#hole"), !strings.HasPrefix(s, "#"):
			if lf.recSize == 0 {
				return fmt.Errorf("corrupt at line %d: record before header", lineNo)
			}
			if cur != nil && uint64(cur.length) < cur.n {
				cur.length++
				break
			}
			// A record outside any block (IDENTITY writes them one by one).
			kind := uint8(KindRecords)
			if lf.Header.Counter() {
				kind = KindCounter
			}
			lf.entries = append(lf.entries, entry{kind: kind, n: 1, firstPos: implicitPos, off: lineOff,
				length: 1, seq: len(lf.entries)})
			implicitPos++
			cur = nil
		default:
			// other comment lines are for people
		}
	}
	if lf.recSize == 0 {
		return fmt.Errorf("no #header line")
	}
	if cur != nil && uint64(cur.length) < cur.n {
		lf.Summary.TruncatedBytes += 1 // a block cut short: its lines are still read
	}
	return nil
}

// Records calls fn for every tuple record in logged order (ring position
// order). Frames may overlap: the SIGTERM flusher can write positions the
// background writer also writes, before or after it, and may have found some
// of them not yet written (holes). Overlaps are merged position by position:
// a written record beats a hole, and a frame written in the normal course
// beats one the flusher wrote. It also completes lf.Summary.
func (lf *File) Records(fn func(Record) error) error {
	if lf.Header.Counter() {
		return fmt.Errorf("%s: a counter channel; use Counters", lf.path)
	}
	ents := make([]entry, 0, len(lf.entries))
	for _, e := range lf.entries {
		if e.kind == KindRecords {
			ents = append(ents, e)
		}
	}
	sort.SliceStable(ents, func(i, j int) bool {
		if ents[i].firstPos != ents[j].firstPos {
			return ents[i].firstPos < ents[j].firstPos
		}
		return ents[i].flags&FlagSignal < ents[j].flags&FlagSignal
	})
	sum := &lf.Summary
	sum.Records, sum.Holes, sum.Duplicates, sum.MissingPos, sum.Frames, sum.SignalFrames = 0, 0, 0, 0, 0, 0
	// pending holds the decoded positions [base, base+len(pending)) that a
	// later frame (sorted by first position) may still overlap.
	type slot struct {
		r      Record
		signal bool
	}
	var pending []slot
	var base uint64
	emit := func(upTo uint64) error {
		k := 0
		for ; k < len(pending) && base+uint64(k) < upTo; k++ {
			if pending[k].r.TSC == 0 {
				sum.Holes++
				continue
			}
			sum.Records++
			if err := fn(pending[k].r); err != nil {
				return err
			}
		}
		pending = append(pending[:0], pending[k:]...)
		base += uint64(k)
		return nil
	}
	var raw []byte
	for _, e := range ents {
		if err := emit(e.firstPos); err != nil {
			return err
		}
		var err error
		raw, err = lf.loadRecords(raw[:0], e)
		if errors.Is(err, errDamagedFrame) {
			sum.CorruptFrames++
			continue // its positions stay uncovered unless another frame has them
		}
		if err != nil {
			return err
		}
		sum.Frames++
		signal := e.flags&FlagSignal != 0
		if signal {
			sum.SignalFrames++
		}
		if len(pending) == 0 {
			if e.firstPos > base {
				sum.MissingPos += e.firstPos - base
			}
			base = e.firstPos
		}
		got := uint64(len(raw) / lf.recSize)
		if got < e.n {
			sum.MissingPos += e.n - got
		}
		for i := uint64(0); i < got; i++ {
			off := i * uint64(lf.recSize)
			r := Record{TupleID: int64(binary.LittleEndian.Uint64(raw[off:])), TSC: binary.LittleEndian.Uint64(raw[off+8:])}
			if lf.recSize == 24 {
				r.MonoNs = binary.LittleEndian.Uint64(raw[off+16:])
			}
			pos := e.firstPos + i
			k := pos - base
			if k < uint64(len(pending)) {
				old := &pending[k]
				if r.TSC != 0 && (old.r.TSC == 0 || (old.signal && !signal)) {
					*old = slot{r, signal}
				}
				if r.TSC != 0 || old.r.TSC != 0 {
					sum.Duplicates++
				}
				continue
			}
			pending = append(pending, slot{r, signal}) // k == len(pending): frames start where pending does
		}
	}
	if err := emit(^uint64(0)); err != nil {
		return err
	}
	return lf.damage()
}

// damage reports damage found while reading, after everything whole was read.
func (lf *File) damage() error {
	if lf.Summary.CorruptBytes == 0 && lf.Summary.CorruptFrames == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w: %d damaged frames and %d unreadable bytes skipped; every whole frame was decoded",
		lf.path, ErrDamaged, lf.Summary.CorruptFrames, lf.Summary.CorruptBytes)
}

// loadRecords returns the raw (fixed-size) records of one entry.
func (lf *File) loadRecords(dst []byte, e entry) ([]byte, error) {
	if lf.ascii {
		return lf.loadASCII(dst, e, false)
	}
	payload := make([]byte, e.length)
	if _, err := lf.f.ReadAt(payload, e.off); err != nil {
		return dst, err
	}
	if e.flags&FlagCRC != 0 && CRC(payload) != e.crc {
		return dst, fmt.Errorf("%s: frame at byte %d: %w", lf.path, e.off-FrameHeaderSize, errDamagedFrame)
	}
	switch e.codec {
	case CodecRaw:
		return append(dst, payload...), nil
	case CodecZstd, CodecS2, CodecColumns:
		cols, err := Decompress(nil, payload, int(e.codec), int(e.rawLen))
		if err != nil {
			return dst, fmt.Errorf("%s: frame at byte %d: %w: %v", lf.path, e.off-FrameHeaderSize, errDamagedFrame, err)
		}
		out, err := DecodeColumns(dst, cols, int(e.n), lf.recSize)
		if err != nil {
			return dst, fmt.Errorf("%s: frame at byte %d: %w: %v", lf.path, e.off-FrameHeaderSize, errDamagedFrame, err)
		}
		return out, nil
	}
	return dst, fmt.Errorf("%s: frame at byte %d: unknown codec %d", lf.path, e.off-FrameHeaderSize, e.codec)
}

// loadASCII parses e.length lines at e.off into raw records (16/24 bytes, or
// 32-byte counter records). "#hole" lines become records with TSC 0.
func (lf *File) loadASCII(dst []byte, e entry, counter bool) ([]byte, error) {
	sr := io.NewSectionReader(lf.f, e.off, 1<<62)
	br := bufio.NewReader(sr)
	want := 3
	if !lf.Header.Format2().HasMono() {
		want = 2
	}
	if counter {
		want++
	}
	var vals [4]uint64
	for i := int64(0); i < e.length; i++ {
		line, err := br.ReadString('\n')
		if err != nil {
			return dst, fmt.Errorf("%s: block at byte %d cut short", lf.path, e.off)
		}
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "#hole") {
			dst = append(dst, make([]byte, lf.recSize)...)
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != want {
			return dst, fmt.Errorf("%s: bad record line %q", lf.path, line)
		}
		for k, s := range f {
			var err error
			if k == 0 && !counter {
				var v int64
				v, err = strconv.ParseInt(s, 10, 64)
				vals[k] = uint64(v)
			} else {
				vals[k], err = strconv.ParseUint(s, 10, 64)
			}
			if err != nil {
				return dst, fmt.Errorf("%s: bad record line %q", lf.path, line)
			}
		}
		if counter { // text order: tsc,count,skipped[,mono]; raw order: tsc,mono,count,skipped
			vals[1], vals[2], vals[3] = vals[3], vals[1], vals[2]
			if want == 3 {
				vals[1] = 0
			}
			for k := 0; k < 4; k++ {
				dst = binary.LittleEndian.AppendUint64(dst, vals[k])
			}
			continue
		}
		for k := 0; k < lf.recSize/8; k++ {
			dst = binary.LittleEndian.AppendUint64(dst, vals[k])
		}
	}
	return dst, nil
}

// Format2 is the header's format as a Format.
func (h *Header) Format2() Format { return Format(h.FormatID) }

// Counters calls fn for every counter record in file order.
func (lf *File) Counters(fn func(CounterRecord) error) error {
	if !lf.Header.Counter() && lf.Header.Handler != "NET_CONF" {
		return fmt.Errorf("%s: not a counter channel; use Records", lf.path)
	}
	lf.Summary.Records, lf.Summary.Frames = 0, 0
	var raw []byte
	for _, e := range lf.entries {
		if e.kind != KindCounter {
			continue
		}
		lf.Summary.Frames++
		var err error
		if lf.ascii {
			raw, err = lf.loadASCII(raw[:0], e, true)
		} else {
			raw = append(raw[:0], make([]byte, e.length)...)
			_, err = lf.f.ReadAt(raw, e.off)
			if err == nil && e.flags&FlagCRC != 0 && CRC(raw) != e.crc {
				lf.Summary.CorruptFrames++
				continue
			}
		}
		if err != nil {
			return err
		}
		for i := 0; i+CounterRecordSize <= len(raw); i += CounterRecordSize {
			c := CounterRecord{TSC: binary.LittleEndian.Uint64(raw[i:]), MonoNs: binary.LittleEndian.Uint64(raw[i+8:]),
				Count: binary.LittleEndian.Uint64(raw[i+16:]), Skipped: binary.LittleEndian.Uint64(raw[i+24:])}
			lf.Summary.Records++
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	return lf.damage()
}
