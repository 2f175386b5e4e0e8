package logfile

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// ErrForeign is returned for a file that is not a Cloudprofiler log.
var ErrForeign = errors.New("not a Cloudprofiler log file")

// ErrDamaged is returned after a full read of a file in which some frames
// were damaged, or in which records that were accepted are known to be
// missing: every whole, valid frame was still decoded (see Summary and
// Summary.Problems).
var ErrDamaged = errors.New("damaged or incomplete log file")

var errDamagedFrame = errors.New("damaged frame (checksum or encoding)")

// Limits on what a file's own headers can make the decoder allocate: a
// frame header is believed only as far as these go (and, version 2, only
// once its checksum matched), so memory is bounded by the file header's
// block size, never by what a damaged or hostile frame header claims.
const (
	MaxHeaderJSON   = 1 << 20 // the file header
	MaxMetaLen      = 1 << 20 // an event or the trailer
	MaxBlockRecords = 1 << 22 // CP_BLOCK_RECORDS' upper bound: records in one frame
	maxCounterBytes = CounterRecordSize * 4096
	maxASCIILine    = 1 << 16
)

// Summary is what a full read learned about the file.
type Summary struct {
	Version        int      // the file's format version
	Read           string   // what the last full read decoded: "records" or "counters" ("" before one)
	Records        uint64   // tuple or counter records decoded
	Holes          uint64   // positions reserved but never written (skipped)
	Duplicates     uint64   // records seen twice (SIGTERM flush and drainer) and dropped
	MissingPos     uint64   // ring positions no frame covers (gaps between frames)
	EndPos         uint64   // one past the last position a frame covers
	Frames         int      // record/counter frames or blocks read
	SignalFrames   int      // of which written by the SIGTERM flusher
	TruncatedBytes int64    // bytes after the last whole frame (a cut-off file)
	CorruptBytes   int64    // bytes skipped to find the next frame after damage
	CorruptFrames  int      // frames whose checksum or encoding did not hold (skipped)
	CorruptLines   int      // ASCII lines that did not parse (skipped)
	Events         []Event  // parameter changes, SIGTERM flushes
	Trailer        *Trailer // nil if the file was not closed normally
	Status         *Status  // the newest valid status slot (version 2), nil in v1 files
	// RingBound is how many more records a process killed before closing
	// may have accepted after the last status update: its ring's capacity
	// (block_records x ring_blocks), 0 when the file was closed.
	RingBound uint64
	// Counted is what the counter records of the last Counters add up to
	// (events); countedAll says that read went through every record (fn
	// stopped it nowhere), countedOver that they add up to more than
	// 2^64-1 (Counted is then 2^64-1). Problems checks them against the
	// trailer's total.
	Counted     uint64
	countedAll  bool
	countedOver bool
	// trailerTotal: the trailer names its total (every library's does; a
	// trailer without one says nothing to check the periods against).
	trailerTotal bool
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
	Header    Header
	Summary   Summary
	path      string
	f         *os.File
	ascii     bool
	version   int
	entries   []entry
	recSize   int
	maxN      uint64        // records one frame may hold (from the file header, capped)
	frameBufs               // what loading a frame reuses
	ahead     chan struct{} // tokens for loading frames ahead (LoadAhead); nil: none
	loadErr   error         // the first read error that was not a frame's own damage
	loadErrs  int
	indexed   Summary // as Open left it: each full read starts from it
	// lines reads an ASCII entry's lines (loadASCII), one reader for all:
	// a new one an entry allocated 4 KiB a line (IDENTITY's records and
	// counter records are an entry each), 500 times the file's size.
	lines   *bufio.Reader
	linesAt atReader
	// scan is nextFrame's window, allocated once: one a call allocated
	// 64 KiB at every damaged spot, a thousand times the file's size.
	scan []byte
	// MaxRecords and MaxCounters bound what Records and Counters return,
	// known once Open indexed the file (every frame's count verified, or,
	// ASCII, one per line): size an output buffer with them.
	MaxRecords, MaxCounters uint64
}

// Open reads the header and indexes every frame, verifying each one (the
// payload is read once here for its checksum, and again when decoded).
// Errors name the file and say what is wrong; a file cut short or damaged
// is not an error here (Summary says so; Records and Counters return
// ErrDamaged after reading everything that is whole).
func Open(path string) (*File, error) {
	// O_NONBLOCK: a FIFO (or a device) under a log's name must not hang
	// the reader until someone writes to it; it is refused below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w (a %s)", path, ErrNotRegular, FileKind(st.Mode()))
	}
	lf := &File{path: path, f: f}
	if err := lf.index(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	lf.Summary.Version = lf.version
	lf.indexed = lf.Summary
	if lf.Summary.Trailer == nil && lf.Header.BlockRecords > 0 && lf.Header.RingBlocks > 0 &&
		(lf.Summary.Status == nil || lf.Summary.Status.State == StateOpen) {
		lf.Summary.RingBound = uint64(min(lf.Header.BlockRecords, MaxBlockRecords)) * uint64(min(lf.Header.RingBlocks, 1<<20))
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
	if lf.Header.Version != lf.version {
		return fmt.Errorf("header JSON says version %d, the file's magic says %d", lf.Header.Version, lf.version)
	}
	if !lf.Header.Format2().Valid() {
		return fmt.Errorf("format id %d in header", lf.Header.FormatID)
	}
	// A tuple file's record_size is its records' (16, or 24 with mono_ns);
	// a counter file's is its columns' (24 or 32) since library 2026-11,
	// the tuple size before.
	lf.recSize = lf.Header.Format2().RecordSize()
	rs := lf.Header.RecordSize
	if rs != lf.recSize && !(lf.Header.Counter() && rs == 8*len(lf.Header.Columns) && (rs == 24 || rs == 32)) {
		return fmt.Errorf("record size %d in header, for format %s with columns %v", rs, lf.Header.Format, lf.Header.Columns)
	}
	// FIRSTLAST frames hold 2 records; IDENTITY's hold 1.
	lf.maxN = uint64(min(max(lf.Header.BlockRecords, 2), MaxBlockRecords))
	return nil
}

func (lf *File) indexBinary(br *bufio.Reader) error {
	var pre [16]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil {
		return fmt.Errorf("header cut short")
	}
	v := int(binary.LittleEndian.Uint16(pre[8:]))
	if v < MinVersion || v > Version {
		return fmt.Errorf("log version %d, this decoder reads versions %d to %d", v, MinVersion, Version)
	}
	lf.version = v
	if bom := binary.LittleEndian.Uint16(pre[10:]); bom != ByteOrderMark {
		return fmt.Errorf("byte order mark %#x: file written big-endian, not supported", bom)
	}
	hl := binary.LittleEndian.Uint32(pre[12:])
	if hl > MaxHeaderJSON {
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
	var payload []byte
	for off < size {
		fh, state := lf.frameAt(off, size, &payload)
		if state == frameOK {
			lf.addFrame(fh, off, payload)
			off += FrameHeaderSize + int64(fh.StoredLen)
			continue
		}
		// Damage, or a frame cut short: go on from the next valid frame. A
		// frame that runs past the end with nothing valid after it is where
		// the file was cut (a crash); anything else is damage.
		next, ok := lf.nextFrame(off+1, size, &payload)
		switch {
		case ok:
			lf.Summary.CorruptBytes += next - off
			lf.Summary.CorruptFrames++
			off = next
		case state == frameCut:
			lf.Summary.TruncatedBytes = size - off
			off = size
		default:
			lf.Summary.CorruptBytes += size - off
			lf.Summary.CorruptFrames++
			off = size
		}
	}
	return nil
}

type frameState int

const (
	frameOK  frameState = iota
	frameCut            // a plausible header whose payload runs past the end of the file
	frameBad            // implausible header, or a checksum that does not match
)

// frameAt reads and verifies the frame at off, leaving its payload in *buf.
func (lf *File) frameAt(off, size int64, buf *[]byte) (FrameHeader, frameState) {
	var hb [FrameHeaderSize]byte
	if size-off < FrameHeaderSize {
		return FrameHeader{}, frameCut
	}
	if _, err := lf.f.ReadAt(hb[:], off); err != nil {
		return FrameHeader{}, frameBad
	}
	fh, err := parseFrameHeader(hb[:])
	if err != nil || !lf.plausible(&fh) {
		return fh, frameBad
	}
	if int64(fh.StoredLen) > size-off-FrameHeaderSize {
		return fh, frameCut
	}
	*buf = append((*buf)[:0], make([]byte, fh.StoredLen)...)
	if _, err := lf.f.ReadAt(*buf, off+FrameHeaderSize); err != nil {
		return fh, frameBad
	}
	if !lf.checksumOK(&fh, hb[:], *buf) {
		return fh, frameBad
	}
	return fh, frameOK
}

func (lf *File) checksumOK(fh *FrameHeader, hb, payload []byte) bool {
	if lf.version >= 2 {
		return fh.Flags&FlagCRC != 0 && FrameCRC(hb, payload) == fh.CRC
	}
	return fh.Flags&FlagCRC == 0 || CRC(payload) == fh.CRC
}

// plausible checks a frame header against what a writer of this file can
// write: known kind, codec and flags, a count within the file's block size
// and a length that fits the count. It bounds every allocation the frame
// can cause before its checksum is even looked at.
func (lf *File) plausible(fh *FrameHeader) bool {
	if fh.Flags&^(FlagSignal|FlagCRC) != 0 {
		return false
	}
	stored, raw := uint64(fh.StoredLen), uint64(fh.RawLen)
	switch fh.Kind {
	case KindRecords:
		n, rs := uint64(fh.N), uint64(lf.recSize)
		if n == 0 || n > lf.maxN {
			return false
		}
		switch fh.Codec {
		case CodecRaw:
			return stored%rs == 0 && stored <= n*rs
		case CodecColumns:
			return stored == raw && raw >= n*rs/8 && raw <= n*rs/8*binary.MaxVarintLen64
		case CodecZstd, CodecS2:
			return int(fh.Codec) == lf.Header.Format2().Codec() && raw >= n*rs/8 &&
				raw <= n*rs/8*binary.MaxVarintLen64 && stored > 0 && stored <= raw+raw/6+1024
		}
		return false
	case KindCounter:
		return fh.Codec == CodecRaw && stored > 0 && stored%CounterRecordSize == 0 && stored <= maxCounterBytes
	case KindEvent, KindTrailer:
		return fh.Codec == CodecRaw && stored > 0 && stored <= MaxMetaLen
	case KindStatus:
		return lf.version >= 2 && fh.Codec == CodecRaw && stored == StatusSize
	}
	return false
}

// addFrame indexes a verified frame; metadata frames are parsed now.
func (lf *File) addFrame(fh FrameHeader, off int64, payload []byte) {
	e := entry{kind: fh.Kind, codec: fh.Codec, flags: fh.Flags, n: uint64(fh.N), firstPos: fh.FirstPos,
		off: off + FrameHeaderSize, length: int64(fh.StoredLen), rawLen: fh.RawLen, crc: fh.CRC, seq: len(lf.entries)}
	switch fh.Kind {
	case KindRecords:
		e.positions = true
		lf.entries = append(lf.entries, e)
		lf.MaxRecords += e.n
	case KindCounter:
		lf.entries = append(lf.entries, e)
		lf.MaxCounters += uint64(fh.StoredLen) / CounterRecordSize
	case KindEvent, KindTrailer:
		if err := lf.addMeta(fh.Kind, payload); err != nil {
			lf.Summary.CorruptFrames++
		}
	case KindStatus:
		st, err := parseStatusPayload(payload)
		if err != nil {
			lf.Summary.CorruptFrames++
			return
		}
		lf.addStatus(st)
	}
}

func (lf *File) addStatus(st Status) {
	if lf.Summary.Status == nil || st.Seq > lf.Summary.Status.Seq {
		lf.Summary.Status = &st
	}
}

// nextFrame finds the next offset at or after from that holds a valid frame
// (plausible header, payload inside the file, checksum matching).
func (lf *File) nextFrame(from, size int64, payload *[]byte) (int64, bool) {
	if lf.scan == nil {
		lf.scan = make([]byte, 1<<16+FrameHeaderSize)
	}
	buf := lf.scan
	magic := []byte{0x43, 0x50, 0x46, 0x52} // FrameMagic, little endian
	for off := from; off+FrameHeaderSize <= size; {
		n, _ := lf.f.ReadAt(buf, off)
		if n < FrameHeaderSize {
			break
		}
		for i := 0; i+FrameHeaderSize <= n; i++ {
			j := bytes.Index(buf[i:n], magic)
			if j < 0 || i+j+FrameHeaderSize > n {
				break
			}
			i += j
			if _, st := lf.frameAt(off+int64(i), size, payload); st == frameOK {
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
		var named struct {
			Total *uint64 `json:"total"`
		}
		_ = json.Unmarshal(js, &named) // it parsed just above
		lf.Summary.Trailer, lf.Summary.trailerTotal = &t, named.Total != nil
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
	damaged := func(n int64) { lf.Summary.CorruptLines++; lf.Summary.CorruptBytes += n }
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A line longer than any the writer makes: damage. Skip to its end.
			n := int64(len(line))
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				n += int64(len(line))
			}
			off += n
			lineNo++
			if lineNo == 1 {
				return fmt.Errorf("%w (first line of %d bytes)", ErrForeign, n)
			}
			if err == io.EOF {
				lf.Summary.TruncatedBytes += n
				break
			}
			damaged(n)
			cur = nil
			continue
		}
		if err == io.EOF {
			if len(line) > 0 {
				lf.Summary.TruncatedBytes += int64(len(line))
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
			switch s {
			case ASCIIMagic:
				lf.version = Version
			case ASCIIMagicV1:
				lf.version = 1
			default:
				return fmt.Errorf("%w (first line %q)", ErrForeign, s)
			}
		case strings.HasPrefix(s, "#header "):
			if lf.recSize != 0 {
				damaged(int64(len(line))) // a second header
				break
			}
			if err := lf.setHeader([]byte(s[8:])); err != nil {
				return err
			}
		case strings.HasPrefix(s, "#status "):
			st, err := ParseStatusLine(s)
			if err != nil || lf.version < 2 {
				damaged(int64(len(line)))
				break
			}
			lf.addStatus(st)
		case strings.HasPrefix(s, "#block "):
			f := strings.Fields(s[7:])
			first, e1 := strconv.ParseUint(at(f, 0), 10, 64)
			n, e2 := strconv.ParseUint(at(f, 1), 10, 64)
			if len(f) < 2 || len(f) > 3 || e1 != nil || e2 != nil || n == 0 || n > lf.maxN ||
				len(f) == 3 && f[2] != "signal" || lf.recSize == 0 {
				damaged(int64(len(line))) // its lines then count as records outside a block
				cur = nil
				break
			}
			var flags uint16
			if len(f) == 3 {
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
				damaged(int64(len(line)))
			}
		case strings.HasPrefix(s, "#trailer "):
			if err := lf.addMeta(KindTrailer, []byte(s[9:])); err != nil {
				damaged(int64(len(line)))
			}
		case strings.HasPrefix(s, "#hole"), !strings.HasPrefix(s, "#"):
			if lf.recSize == 0 {
				damaged(int64(len(line))) // a record before the header
				break
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
		lf.Summary.TruncatedBytes++ // a block cut short: its lines are still read
	}
	for _, e := range lf.entries { // one record per line at most
		if e.kind == KindRecords {
			lf.MaxRecords += uint64(e.length)
		} else {
			lf.MaxCounters += uint64(e.length)
		}
	}
	return nil
}

func at(f []string, i int) string {
	if i < len(f) {
		return f[i]
	}
	return ""
}

// Records calls fn for every tuple record in logged order (RecordBatches,
// one record at a time).
func (lf *File) Records(fn func(Record) error) error {
	return lf.RecordBatches(func(rs []Record) error {
		for _, r := range rs {
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	})
}

// batchRecords is how many records RecordBatches hands over at a time.
const batchRecords = 4096

// RecordBatches calls fn with every tuple record in logged order (ring
// position order), a batch at a time; the slice is reused after fn returns.
// Frames may overlap: the SIGTERM flusher can write positions the
// background writer also writes, before or after it, and may have found some
// of them not yet written (holes). Overlaps are merged position by position:
// a written record beats a hole, and a frame written in the normal course
// beats one the flusher wrote. A frame that overlaps no other (the normal
// case) goes straight from its decoded bytes to the batch. It also completes
// lf.Summary. A damaged frame or line is skipped (its positions stay
// uncovered unless another frame has them); after everything whole was read,
// damage or records known to be lost make it return an error wrapping
// ErrDamaged.
func (lf *File) RecordBatches(fn func([]Record) error) error {
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
	sum.EndPos, sum.Read = 0, "records"
	lf.restart()
	batch := make([]Record, 0, batchRecords)
	// put adds one decoded record to the batch (a hole is counted instead).
	waits := lf.Header.Waits != ""
	put := func(r Record) error {
		if r.TSC == 0 {
			sum.Holes++
			return nil
		}
		if waits && r.TSC&WaitedBit != 0 {
			r.TSC &^= WaitedBit
			r.Waited = true
		}
		sum.Records++
		batch = append(batch, r)
		if len(batch) == batchRecords {
			err := fn(batch)
			batch = batch[:0]
			return err
		}
		return nil
	}
	// pending holds the decoded positions [base, base+len(pending)) that a
	// later frame (sorted by first position) may still overlap.
	type slot struct {
		r      Record
		signal bool
		bad    bool // a damaged ASCII line: no record
	}
	var pending []slot
	var base uint64
	emit := func(upTo uint64) error {
		k := 0
		for ; k < len(pending) && base+uint64(k) < upTo; k++ {
			if pending[k].bad { // counted when its frame was loaded
				continue
			}
			if err := put(pending[k].r); err != nil {
				return err
			}
		}
		pending = append(pending[:0], pending[k:]...)
		base += uint64(k)
		return nil
	}
	var raw []byte
	var bad []uint32
	rs := uint64(lf.recSize)
	ld := lf.newAhead(ents)
	defer ld.stop()
	for ei, e := range ents {
		if err := emit(e.firstPos); err != nil {
			return err
		}
		var err error
		raw, bad, err = ld.load(ei, raw[:0], bad[:0])
		if err != nil {
			lf.frameFailed(err)
			continue // its positions stay uncovered unless another frame has them
		}
		sum.Frames++
		sum.CorruptLines += len(bad)
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
		// A frame that holds fewer records than it covers (an ASCII block
		// cut short) leaves the rest of its positions uncovered: the next
		// frame's gap, or the end (below), counts them, once.
		got := uint64(len(raw)) / rs
		sum.EndPos = max(sum.EndPos, e.firstPos+e.n)
		if len(pending) == 0 && len(bad) == 0 && (ei+1 == len(ents) || ents[ei+1].firstPos >= e.firstPos+got) {
			// Nothing before it is pending and no later frame overlaps it:
			// its records go out as they are.
			for off := uint64(0); off < got*rs; off += rs {
				r := Record{TupleID: int64(binary.LittleEndian.Uint64(raw[off:])), TSC: binary.LittleEndian.Uint64(raw[off+8:])}
				if rs == 24 {
					r.MonoNs = binary.LittleEndian.Uint64(raw[off+16:])
				}
				if err := put(r); err != nil {
					return err
				}
			}
			base = e.firstPos + got
			continue
		}
		nextBad := 0
		for i := uint64(0); i < got; i++ {
			off := i * rs
			r := Record{TupleID: int64(binary.LittleEndian.Uint64(raw[off:])), TSC: binary.LittleEndian.Uint64(raw[off+8:])}
			if rs == 24 {
				r.MonoNs = binary.LittleEndian.Uint64(raw[off+16:])
			}
			isBad := nextBad < len(bad) && uint64(bad[nextBad]) == i
			if isBad {
				nextBad++
			}
			pos := e.firstPos + i
			k := pos - base
			if k < uint64(len(pending)) {
				old := &pending[k]
				switch {
				case isBad:
				case old.bad || r.TSC != 0 && (old.r.TSC == 0 || (old.signal && !signal)):
					*old = slot{r: r, signal: signal}
				}
				if !isBad && !old.bad && (r.TSC != 0 || old.r.TSC != 0) {
					sum.Duplicates++
				}
				continue
			}
			pending = append(pending, slot{r: r, signal: signal, bad: isBad}) // k == len(pending): frames start where pending does
		}
	}
	if err := emit(^uint64(0)); err != nil {
		return err
	}
	if sum.EndPos > base {
		sum.MissingPos += sum.EndPos - base
	}
	if len(batch) > 0 {
		if err := fn(batch); err != nil {
			return err
		}
	}
	return lf.damage()
}

// restart resets what a full read counts to what Open found.
func (lf *File) restart() {
	lf.Summary.CorruptFrames, lf.Summary.CorruptLines = lf.indexed.CorruptFrames, lf.indexed.CorruptLines
	lf.loadErr, lf.loadErrs = nil, 0
}

// frameFailed counts a frame that could not be decoded; a read error that is
// not the frame's own fault is kept for damage() to report.
func (lf *File) frameFailed(err error) {
	lf.Summary.CorruptFrames++
	if !errors.Is(err, errDamagedFrame) {
		lf.loadErrs++
		if lf.loadErr == nil {
			lf.loadErr = err
		}
	}
}

// damage reports, after everything whole was read, what was damaged or is
// known to be lost (Summary.Problems), as an error wrapping ErrDamaged.
func (lf *File) damage() error {
	probs := lf.Summary.Problems(&lf.Header)
	if len(probs) == 0 {
		return nil
	}
	msg := strings.Join(probs, "; ")
	if lf.loadErr != nil {
		msg += fmt.Sprintf(" (first read error: %v)", lf.loadErr)
	}
	return fmt.Errorf("%s: %w: %s", lf.path, ErrDamaged, msg)
}

// frameBufs are the buffers loading a binary frame reuses: its payload,
// its column encoding, its header.
type frameBufs struct {
	buf  []byte
	cols []byte
	hb   [FrameHeaderSize]byte
}

// loadRecords returns the raw (fixed-size) records of one entry, and for
// ASCII the indexes of lines that did not parse (zero records stand there).
func (lf *File) loadRecords(dst []byte, bad []uint32, e entry) ([]byte, []uint32, error) {
	if lf.ascii {
		return lf.loadASCII(dst, bad, e, false)
	}
	return lf.loadBinary(&lf.frameBufs, dst, e)
}

// loadBinary is loadRecords for a binary entry, with fb's buffers: frames
// loaded ahead (ahead.go) each have their own.
func (lf *File) loadBinary(fb *frameBufs, dst []byte, e entry) ([]byte, []uint32, error) {
	var bad []uint32
	payload, err := lf.payload(fb, e)
	if err != nil {
		return dst, bad, err
	}
	at := func(err error) error {
		return fmt.Errorf("%s: frame at byte %d: %w: %v", lf.path, e.off-FrameHeaderSize, errDamagedFrame, err)
	}
	switch e.codec {
	case CodecRaw:
		return append(dst, payload...), bad, nil
	case CodecZstd, CodecS2, CodecColumns:
		cols, err := Decompress(fb.cols[:0], payload, int(e.codec), int(e.rawLen))
		if err != nil {
			return dst, bad, at(err)
		}
		fb.cols = cols
		out, err := DecodeColumns(dst, cols, int(e.n), lf.recSize)
		if err != nil {
			return dst, bad, at(err)
		}
		return out, bad, nil
	}
	return dst, bad, at(fmt.Errorf("unknown codec %d", e.codec))
}

// payload reads an entry's payload again (Open verified it) into a buffer
// reused from frame to frame, and checks it still matches its checksum.
func (lf *File) payload(fb *frameBufs, e entry) ([]byte, error) {
	fb.buf = append(fb.buf[:0], make([]byte, e.length)...)
	if _, err := lf.f.ReadAt(fb.buf, e.off); err != nil {
		return nil, fmt.Errorf("%s: frame at byte %d: %v", lf.path, e.off-FrameHeaderSize, err)
	}
	ok := true
	if lf.version >= 2 {
		fh := FrameHeader{Kind: e.kind, Codec: e.codec, Flags: e.flags, N: uint32(e.n), StoredLen: uint32(e.length),
			FirstPos: e.firstPos, RawLen: e.rawLen}
		ok = FrameCRC(fh.Append(fb.hb[:0]), fb.buf) == e.crc
	} else if e.flags&FlagCRC != 0 {
		ok = CRC(fb.buf) == e.crc
	}
	if !ok { // changed since Open (a writer, or the disk)
		return nil, fmt.Errorf("%s: frame at byte %d: %w", lf.path, e.off-FrameHeaderSize, errDamagedFrame)
	}
	return fb.buf, nil
}

// loadASCII parses e.length lines at e.off into raw records (16/24 bytes, or
// 32-byte counter records). "#hole" lines become records with TSC 0; lines
// that do not parse become zero records listed in bad.
func (lf *File) loadASCII(dst []byte, bad []uint32, e entry, counter bool) ([]byte, []uint32, error) {
	lf.linesAt = atReader{f: lf.f, off: e.off}
	if lf.lines == nil {
		lf.lines = bufio.NewReader(&lf.linesAt)
	} else {
		lf.lines.Reset(&lf.linesAt)
	}
	br := lf.lines
	want := 3
	if !lf.Header.Format2().HasMono() {
		want = 2
	}
	if counter {
		want++
	}
	size := lf.recSize
	if counter {
		size = CounterRecordSize
	}
	var vals [4]uint64
	for i := int64(0); i < e.length; i++ {
		line, err := readLine(br)
		if err != nil {
			return dst, bad, fmt.Errorf("%s: block at byte %d: %v", lf.path, e.off, err)
		}
		if strings.HasPrefix(line, "#hole") && !counter {
			dst = append(dst, make([]byte, size)...)
			continue
		}
		if !parseFields(line, want, !counter, vals[:]) {
			dst = append(dst, make([]byte, size)...)
			bad = append(bad, uint32(i))
			continue
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
		if vals[1] == 0 { // a TSC of 0 would read as a hole: the writer never writes one
			dst = append(dst, make([]byte, size)...)
			bad = append(bad, uint32(i))
			continue
		}
		for k := 0; k < lf.recSize/8; k++ {
			dst = binary.LittleEndian.AppendUint64(dst, vals[k])
		}
	}
	return dst, bad, nil
}

// atReader reads a file from off on (io.SectionReader without a limit, and
// kept in the File: no allocation an entry).
type atReader struct {
	f   *os.File
	off int64
}

func (r *atReader) Read(p []byte) (int, error) {
	n, err := r.f.ReadAt(p, r.off)
	r.off += int64(n)
	return n, err
}

// readLine reads one line of at most maxASCIILine bytes (a longer one is
// returned cut, and will not parse).
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(b) < maxASCIILine {
			b = append(b, part[:min(len(part), maxASCIILine-len(b))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("cut short")
		}
		return strings.TrimSuffix(string(b), "\n"), nil
	}
}

// parseFields parses want comma-separated decimal numbers (the first signed
// if signedFirst) into vals.
func parseFields(line string, want int, signedFirst bool, vals []uint64) bool {
	for k := 0; k < want; k++ {
		f, rest, found := strings.Cut(line, ",")
		if found != (k < want-1) {
			return false
		}
		line = rest
		var err error
		if k == 0 && signedFirst {
			var v int64
			v, err = strconv.ParseInt(f, 10, 64)
			vals[k] = uint64(v)
		} else {
			vals[k], err = strconv.ParseUint(f, 10, 64)
		}
		if err != nil {
			return false
		}
	}
	return true
}

// Format2 is the header's format as a Format.
func (h *Header) Format2() Format { return Format(h.FormatID) }

// Counters calls fn for every counter record in file order. Damage is
// handled as in Records; a counter channel's periods that do not add up
// to its trailer's total are damage too (Summary.Problems).
func (lf *File) Counters(fn func(CounterRecord) error) error {
	if !lf.Header.Counter() && lf.Header.Handler != "NET_CONF" {
		return fmt.Errorf("%s: not a counter channel; use Records", lf.path)
	}
	lf.Summary.Records, lf.Summary.Frames, lf.Summary.Read = 0, 0, "counters"
	lf.Summary.Counted, lf.Summary.countedAll, lf.Summary.countedOver = 0, false, false
	lf.restart()
	var raw []byte
	var bad []uint32
	for _, e := range lf.entries {
		if e.kind != KindCounter {
			continue
		}
		var err error
		if lf.ascii {
			raw, bad, err = lf.loadASCII(raw[:0], bad[:0], e, true)
		} else {
			var p []byte
			p, err = lf.payload(&lf.frameBufs, e)
			raw = append(raw[:0], p...)
		}
		if err != nil {
			lf.frameFailed(err)
			continue
		}
		lf.Summary.Frames++
		nextBad := 0
		for i := 0; i+CounterRecordSize <= len(raw); i += CounterRecordSize {
			if nextBad < len(bad) && int(bad[nextBad]) == i/CounterRecordSize {
				nextBad++
				lf.Summary.CorruptLines++
				continue
			}
			c := CounterRecord{TSC: binary.LittleEndian.Uint64(raw[i:]), MonoNs: binary.LittleEndian.Uint64(raw[i+8:]),
				Count: binary.LittleEndian.Uint64(raw[i+16:]), Skipped: binary.LittleEndian.Uint64(raw[i+24:])}
			lf.Summary.Records++
			if sum := lf.Summary.Counted + c.Count; sum >= c.Count {
				lf.Summary.Counted = sum
			} else {
				lf.Summary.Counted, lf.Summary.countedOver = math.MaxUint64, true
			}
			if err := fn(c); err != nil {
				return err
			}
		}
	}
	lf.Summary.countedAll = true
	return lf.damage()
}

// ErrNotRegular: a path that is no regular file (a FIFO, a socket, a
// device, a directory) is never read as a log.
var ErrNotRegular = errors.New("not a regular file")

// FileKind names what a file that is not regular is.
func FileKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}
