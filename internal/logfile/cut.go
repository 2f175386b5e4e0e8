package logfile

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// A cut is a time range of a log (cloudprofiler export --format logs): the
// same header, Cut added, and the records, counter periods and service-
// rate events of the range, written by CutWriter as a binary file
// (version 2) that analyze reads as it reads any log. What the
// source lost or had damaged is in Cut.Problems, said again by every
// reader of the cut.

// Cut is what a cut file's header says of its source.
type Cut struct {
	Source string `json:"source"`           // the file cut
	FromNs int64  `json:"from_realtime_ns"` // the range, wall clock (the export's --from, --to)
	ToNs   int64  `json:"to_realtime_ns"`
	// Records is how many records (counter periods for a counter) the
	// source held; the cut's trailer says how many it kept.
	Records uint64 `json:"records"`
	// PeriodStartTSC (counters) is where the first period kept began:
	// the end of the period before it, cut off (0: at the channel's open,
	// OpenSync).
	PeriodStartTSC uint64   `json:"period_start_tsc,omitempty"`
	Problems       []string `json:"problems,omitempty"` // the source's damage and losses, as read
}

// PeriodStart is where a counter channel's first period began: its open,
// or in a cut the end of the period before the first one kept.
func (h *Header) PeriodStart() uint64 {
	if h.Cut != nil && h.Cut.PeriodStartTSC != 0 {
		return h.Cut.PeriodStartTSC
	}
	return h.OpenSync.TSC
}

// cutBlock is a cut's records per frame when its source's header names
// none (an ASCII source).
const cutBlock = 4096

// CutWriter writes a cut file. Its frames go to path.body.partial while
// the source is read; Close, when the source's problems and the first
// period are known, writes the header (with Cut), the frames and the
// trailer to path.partial, renamed to path.
type CutWriter struct {
	path    string
	h       Header
	f       *os.File // the frames
	w       *bufio.Writer
	mono    bool
	codec   int
	cols    []byte // the column encoding (scratch)
	zbuf    []byte // the compressed payload (scratch)
	frame   []byte // the frame (scratch)
	recSize int
	block   int
	pos     uint64 // records written
	buf     []byte // the frame being filled: its rows (CodecRaw)
	// or its columns, encoded as the records come (the other codecs:
	// EncodeColumns of the rows, without the rows), with each column's
	// last value.
	col  [3][]byte
	prev [3]uint64
	n    int // records in the frame being filled
	err  error
}

// CreateCut starts the cut of a file whose header is src into path, its
// records framed in the source's codec (an ASCII source's: ZSTD or
// ZSTD_TSC, the same columns), a range being what goes over the network.
func CreateCut(path string, src Header) (*CutWriter, error) {
	h := src
	h.Version, h.ByteOrder = Version, "little"
	f := Format(h.FormatID)
	if !f.Valid() {
		return nil, fmt.Errorf("%s: format %d", path, h.FormatID)
	}
	switch f {
	case ASCII:
		f = Zstd
	case ASCIITSC:
		f = ZstdTSC
	}
	h.Format, h.FormatID = f.String(), int32(f)
	if !h.Counter() {
		h.RecordSize = f.RecordSize()
	}
	if h.BlockRecords < 2 {
		h.BlockRecords = cutBlock
	}
	file, err := os.Create(path + ".body.partial")
	if err != nil {
		return nil, err
	}
	return &CutWriter{path: path, h: h, f: file, w: bufio.NewWriterSize(file, 1<<16), mono: f.HasMono(), codec: f.Codec(), recSize: f.RecordSize(),
		block: min(h.BlockRecords, MaxBlockRecords, cutBlock)}, nil
}

func (w *CutWriter) write(b []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}

// Records adds tuple records, in the order of the source.
func (w *CutWriter) Records(rs []Record) error {
	waits := w.h.Waits != ""
	if w.codec == CodecRaw {
		buf := w.buf
		for _, r := range rs {
			t := r.TSC
			if waits && r.Waited { // the source's note, as the reader took it off
				t |= WaitedBit
			}
			buf = binary.LittleEndian.AppendUint64(buf, uint64(r.TupleID))
			buf = binary.LittleEndian.AppendUint64(buf, t)
			if w.mono {
				buf = binary.LittleEndian.AppendUint64(buf, r.MonoNs)
			}
			if w.n++; w.n == w.block {
				w.buf = buf
				w.flush()
				buf = w.buf
			}
		}
		w.buf = buf
		return w.err
	}
	// A column at a time, up to the end of the frame being filled: one
	// column and its last value in registers (the field itself appended
	// to would be stored into the heap for every record, a write barrier
	// each while the collector runs).
	for len(rs) > 0 {
		chunk := rs[:min(len(rs), w.block-w.n)]
		rs = rs[len(chunk):]
		col, prev := w.col[0], w.prev[0]
		for i := range chunk {
			v := uint64(chunk[i].TupleID)
			col, prev = appendDelta(col, v, prev), v
		}
		w.col[0], w.prev[0] = col, prev
		col, prev = w.col[1], w.prev[1]
		for i := range chunk {
			v := chunk[i].TSC
			if waits && chunk[i].Waited { // the source's note, as the reader took it off
				v |= WaitedBit
			}
			col, prev = appendDelta(col, v, prev), v
		}
		w.col[1], w.prev[1] = col, prev
		if w.mono {
			col, prev = w.col[2], w.prev[2]
			for i := range chunk {
				v := chunk[i].MonoNs
				col, prev = appendDelta(col, v, prev), v
			}
			w.col[2], w.prev[2] = col, prev
		}
		if w.n += len(chunk); w.n == w.block {
			w.flush()
		}
	}
	return w.err
}

// appendDelta appends v's column entry after prev, as EncodeColumns
// writes it: the zigzag varint of the difference (binary.AppendUvarint,
// its one- and two-byte forms written at once: ids counting up and close
// readings take one or two).
func appendDelta(dst []byte, v, prev uint64) []byte {
	d := int64(v - prev)
	u := uint64(d<<1) ^ uint64(d>>63)
	if u < 1<<7 {
		return append(dst, byte(u))
	}
	if u < 1<<14 {
		return append(dst, byte(u)|0x80, byte(u>>7))
	}
	return binary.AppendUvarint(dst, u)
}

// flush writes the records gathered as one frame.
func (w *CutWriter) flush() {
	if w.n == 0 {
		return
	}
	fh := FrameHeader{Kind: KindRecords, Codec: uint8(w.codec), N: uint32(w.n), FirstPos: w.pos, RawLen: uint32(w.n * w.recSize)}
	payload := w.buf
	if w.codec != CodecRaw {
		// EncodeColumns' layout: every id, then every TSC, then every
		// mono. Cuts of several channels at once compress at once.
		w.cols = append(append(append(w.cols[:0], w.col[0]...), w.col[1]...), w.col[2]...)
		w.zbuf = compressMany(w.zbuf[:0], w.cols, w.codec)
		fh.RawLen, payload = uint32(len(w.cols)), w.zbuf
		w.col, w.prev = [3][]byte{w.col[0][:0], w.col[1][:0], w.col[2][:0]}, [3]uint64{}
	}
	w.frame = AppendFrame(w.frame[:0], fh, payload)
	w.write(w.frame)
	w.pos += uint64(w.n)
	w.buf, w.n = w.buf[:0], 0
}

// Counter adds a counter period.
func (w *CutWriter) Counter(r CounterRecord) error {
	var rec [CounterRecordSize]byte
	binary.LittleEndian.PutUint64(rec[0:], r.TSC)
	binary.LittleEndian.PutUint64(rec[8:], r.MonoNs)
	binary.LittleEndian.PutUint64(rec[16:], r.Count)
	binary.LittleEndian.PutUint64(rec[24:], r.Skipped)
	w.write(AppendFrame(nil, FrameHeader{Kind: KindCounter, N: 1, RawLen: CounterRecordSize}, rec[:]))
	return w.err
}

// Event adds an event (a service-rate estimate).
func (w *CutWriter) Event(e Event) error {
	w.flush()
	return w.meta(KindEvent, e)
}

func (w *CutWriter) meta(kind uint8, v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.write(AppendFrame(nil, FrameHeader{Kind: kind, RawLen: uint32(len(js))}, js))
	return w.err
}

// Close writes the cut: its header with cut, the frames, and the trailer
// (t, its positions the records written, its losses cleared: they are
// the source's, in cut.Problems); then puts it at its path.
func (w *CutWriter) Close(cut Cut, t Trailer) error {
	w.flush()
	t.Reason, t.Positions, t.Dropped, t.Holes, t.Unwritten, t.WriteError = "close", w.pos, 0, 0, 0, ""
	w.meta(KindTrailer, t)
	if w.err == nil {
		w.err = w.w.Flush()
	}
	defer w.Abort()
	if w.err != nil {
		return w.err
	}
	h := w.h
	h.Cut = &cut
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	out, err := os.Create(w.path + ".partial")
	if err != nil {
		return err
	}
	var pre [16]byte
	copy(pre[:], Magic)
	binary.LittleEndian.PutUint16(pre[8:], Version)
	binary.LittleEndian.PutUint16(pre[10:], ByteOrderMark)
	binary.LittleEndian.PutUint32(pre[12:], uint32(len(js)))
	_, err = out.Write(append(pre[:], js...))
	if err == nil {
		_, err = w.f.Seek(0, io.SeekStart)
	}
	if err == nil {
		_, err = io.Copy(out, w.f)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.path+".partial", w.path)
	}
	if err != nil {
		os.Remove(w.path + ".partial")
	}
	return err
}

// Abort removes what was written (after Close: the frames' file).
func (w *CutWriter) Abort() {
	w.f.Close()
	os.Remove(w.path + ".body.partial")
}
