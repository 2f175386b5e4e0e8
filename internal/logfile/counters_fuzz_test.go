package logfile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloudprofiler/internal/fuzzin"
)

// FuzzCounters: counter files (PERIODICCOUNTER, FASTPERIODICCOUNTER,
// SERVICERATE; NET_CONF's counter lines; IDENTITY, which has none) crafted
// from the input, binary (versions 1 and 2) or ASCII (v1 and v2 magic), with
// a header of 3 or 4 columns and a record size of 24 or 32, or the old 16
// (24 with mono_ns); then a sequence of items: counter frames or lines of
// any values (0, 2^63, 2^64-1, zero-padded), lines that do not parse (a
// number past 2^64-1, a sign, a field too many or too few), "#counter"
// lines, blocks (whose lines are positions, not periods), holes, events,
// trailers, status slots, tuple frames, frames whose payload was damaged,
// implausible frames, garbage, an endless line, and a last item cut short.
//
// It reads each file as every reader does (Open, Counters twice, Records,
// Summary.Problems) and asserts: no panic; at most MaxCounters records, and
// no more than the file's bytes can hold; exactly the counter records the
// file holds, in order, with their values (nothing wrapped, nothing made
// up, nothing valid lost); damage never silent (ErrDamaged); a counter
// channel's periods that do not add up to its trailer's total said, and
// never periods that do; a second read the same as the first; allocation
// bounded by the file's size.
func FuzzCounters(f *testing.F) {
	for _, s := range counterFuzzSeeds {
		f.Add(s)
	}
	p := filepath.Join(f.TempDir(), "c.cplog") // one worker, one file at a time
	f.Fuzz(func(t *testing.T, in []byte) {
		cf := craftCounterFile(in)
		if err := os.WriteFile(p, cf.bytes, 0o644); err != nil {
			t.Fatal(err)
		}
		done := make(chan *counterRead, 1)
		go func() { done <- readCounterFile(p) }()
		select {
		case r := <-done:
			checkCounterFile(t, cf, r)
		case <-time.After(20 * time.Second):
			t.Fatalf("reading a file of %d bytes takes more than 20 s\nitems: %.2000q", len(cf.bytes), cf.items)
		}
	})
}

// counterFuzzSeeds (craftCounterFile's layout): the file's kind, handler,
// columns and record size, block size and cut, then items.
var counterFuzzSeeds = [][]byte{
	// Binary v2, PERIODICCOUNTER, 3 columns (24): a frame of 3, a trailer.
	{0, 0, 0, 0, 0, 0, 2, 7, 1, 3, 0, 5, 3, 7, 2, 3, 0, 6, 0, 1, 7, 3, 3, 0, 7, 3, 4, 0, 3, 0, 18},
	// Binary v2, FASTPERIODICCOUNTER, 4 columns (32): counts of 2^64-1 and
	// 2^63, a damaged frame, an event, a status slot, a trailer.
	{0, 1, 1, 0, 0, 0, 1, 7, 1, 0, 7, 1, 3, 7, 2, 0, 8, 2, 6, 2, 0, 7, 3, 3, 0, 1, 3, 5, 3, 3, 0, 0, 50, 0, 3, 1, 7, 4, 5, 2, 0, 3, 0, 3, 0, 3, 1, 4, 0, 3, 1},
	// Binary v2, SERVICERATE, the old record size: an implausible frame,
	// garbage with a frame's magic, a tuple frame, a frame header that claims
	// 128 KiB, a frame of 4097 records, then a good frame.
	{0, 2, 2, 0, 0, 7, 5, 9, 4, 67, 80, 70, 82, 6, 1, 2, 10, 8, 0, 0, 7, 9, 0, 1, 0, 2, 0, 3},
	// Binary v1, PERIODICCOUNTER: a frame, a status slot (damage in v1), a
	// trailer.
	{1, 0, 0, 0, 0, 0, 0, 7, 1, 3, 0, 4, 3, 5, 1, 0, 1, 0, 1, 0, 3, 1, 4, 0, 1, 0, 4},
	// Binary v2: the last frame cut short by 6 bytes.
	{0, 0, 0, 0, 23, 0, 0, 7, 1, 3, 0, 1, 3, 0, 0, 7, 2, 3, 0, 2, 3},
	// BINARY (with mono_ns), 4 columns: a mono_ns of 8 raw bytes, a count
	// of 2^64-1, a trailer.
	{10, 0, 1, 0, 0, 0, 1, 7, 1, 4, 1, 2, 3, 4, 5, 6, 7, 8, 0, 3, 3, 7, 2, 0, 99, 5, 0, 3, 4, 0, 2, 0, 3},
	// ASCII_TSC v2, PERIODICCOUNTER, blocks of 64: lines, a zero-padded one,
	// every kind of line that does not parse, a block of 3 (a line, a hole, a
	// bad line: positions), a line, a hole outside any block, a trailer.
	{2, 0, 0, 2, 0, 0, 7, 1, 0, 5, 3, 1, 7, 2, 1, 3, 2, 0, 2, 1, 2, 2, 2, 3, 2, 4, 2, 5, 2, 6, 2, 7, 2, 8, 4, 2, 0, 2, 0, 7, 3, 0, 1, 0, 1, 5, 2, 0, 0, 7, 4, 0, 2, 3, 5, 6, 0, 9, 0, 9, 1},
	// ASCII (with mono_ns) v2, SERVICERATE, 4 columns: an event, a status
	// line, garbage, a comment, the last line without its newline.
	{3, 2, 1, 0, 3, 0, 7, 1, 0, 3, 3, 0, 77, 7, 0, 50, 7, 1, 8, 1, 0, 5, 1, 1, 10, 2, 120, 121, 9, 0, 7, 2, 0, 4, 3, 0, 1},
	// ASCII_TSC v2, NET_CONF: "#counter" lines among tuple lines, one that
	// does not parse.
	{2, 3, 0, 0, 0, 3, 7, 1, 0, 5, 3, 1, 0, 7, 1, 0, 2, 3, 3, 7, 1, 0, 5, 3, 0, 0},
	// ASCII_TSC v1 magic, FASTPERIODICCOUNTER: a status line (damage in v1), a
	// line.
	{4, 1, 0, 0, 0, 8, 1, 0, 5, 1, 0, 7, 1, 0, 2, 3},
	// IDENTITY: no counter records, Counters refuses.
	{0, 4, 0, 0, 0, 0, 0, 7, 1, 3, 0, 5, 3},
	// ASCII: an endless line, then a line.
	{2, 0, 0, 0, 0, 11, 0, 7, 1, 0, 1, 0, 1},
	// ASCII: a block of more lines than a block holds (damage: its lines are
	// periods), a line, then a block cut short at the end.
	{2, 0, 0, 0, 0, 4, 0, 0, 0, 0, 7, 1, 0, 1, 0, 1, 4, 1, 0, 2, 0, 7, 2, 0, 1, 0, 1},
	// Every field at 2^64-1, then at 2^63: binary (4 columns), then ASCII
	// with mono_ns.
	{0, 0, 1, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 0, 2, 1},
	{3, 0, 1, 0, 0, 0, 1, 1, 1, 1, 0, 2, 2, 2, 2},
	// Binary v2, PERIODICCOUNTER: a period of 42 events, a trailer whose
	// total is 42 (no problem), then the same with 43 (damage).
	{0, 0, 0, 0, 0, 0, 0, 0, 7, 3, 0, 42, 3, 4, 3, 0, 42},
	{0, 0, 0, 0, 0, 0, 0, 0, 7, 3, 0, 42, 3, 4, 3, 0, 43},
	// A record size its columns do not have: refused.
	{0, 0, 3, 0, 0, 0, 0, 7, 1, 3, 0, 5, 3},
}

// counterFile is a crafted file and what a reader must find in it.
type counterFile struct {
	bytes    []byte
	header   Header
	ascii    bool
	want     []CounterRecord // the counter records it holds, in file order
	damaged  bool            // an item the reader must call damage
	readable bool            // Counters reads it (a counter handler or NET_CONF)
	trailer  *Trailer        // the last whole trailer (nil: none)
	items    []string        // what was written, for messages
}

// fuzzVal is a uint64 of the kind the input says.
func fuzzVal(fb *fuzzin.Bytes) uint64 {
	switch fb.Next() % 8 {
	case 0:
		return uint64(fb.Next())
	case 1:
		return math.MaxUint64
	case 2:
		return 1 << 63
	case 3:
		return 0
	case 4:
		var b [8]byte
		copy(b[:], fb.Take(8))
		return binary.LittleEndian.Uint64(b[:])
	case 5:
		return math.MaxUint64 - uint64(fb.Next())
	case 6:
		return 1 << 32
	}
	return 1e9 + uint64(fb.Next())*1e6
}

var counterHandlers = []string{"PERIODICCOUNTER", "FASTPERIODICCOUNTER", "SERVICERATE", "NET_CONF", "IDENTITY"}

// craftCounterFile reads: the kind (mod 5: binary v2, binary v1, ASCII_TSC
// v2, ASCII v2, ASCII_TSC v1; a binary file's format BINARY_TSC or, bit 3,
// BINARY), the handler, the columns (3 or 4 with their record size, the
// old tuple size, or a size that does not match), the block size, whether
// the last item is cut short (3 mod 4: by 1 + the rest/4 bytes); then
// items until the input ends (binaryItem, asciiItem).
func craftCounterFile(in []byte) *counterFile {
	fb := fuzzin.New(in)
	cf := &counterFile{}
	kind := fb.Next()
	version := Version
	switch kind % 5 {
	case 1, 4:
		version = 1
	}
	cf.ascii = kind%5 >= 2
	h := Header{Version: version, ByteOrder: "little", Format: "BINARY_TSC", FormatID: int32(BinaryTSC), Channel: 1, Name: "c", TSCHz: 2.4e9}
	switch {
	case cf.ascii && kind%5 == 3:
		h.Format, h.FormatID = "ASCII", int32(ASCII)
	case cf.ascii:
		h.Format, h.FormatID = "ASCII_TSC", int32(ASCIITSC)
	case kind&8 != 0:
		h.Format, h.FormatID = "BINARY", int32(Binary)
	}
	h.Handler = counterHandlers[int(fb.Next())%len(counterHandlers)]
	cols3 := []string{"period_end_tsc", "count", "skipped_periods"}
	switch fb.Next() % 4 {
	case 0:
		h.Columns, h.RecordSize = cols3, 24
	case 1:
		h.Columns, h.RecordSize = append(cols3, "mono_ns"), 32
	case 2: // the library before 2026-11: the tuple record's size
		h.Columns, h.RecordSize = cols3, h.Format2().RecordSize()
	case 3: // a size its columns do not have
		h.Columns, h.RecordSize = cols3, 32
	}
	if h.Handler == "IDENTITY" || h.Handler == "NET_CONF" {
		h.Columns, h.RecordSize = []string{"tuple_id", "tsc"}, h.Format2().RecordSize()
	}
	h.BlockRecords = []int{0, 2, 64, 1 << 20}[fb.Next()%4]
	cutSel := int(fb.Next())
	cf.header = h
	cf.readable = h.Counter() || h.Handler == "NET_CONF"
	var body []byte
	var last []byte // the last item's bytes, which may be cut
	var lastWant int
	asc := &asciiState{}
	var trailerBefore *Trailer // before the last item
	for fb.Len() > 0 && len(cf.items) < 200 {
		body = append(body, last...)
		n := len(cf.want)
		trailerBefore = cf.trailer
		if cf.ascii {
			last = cf.asciiItem(fb, asc)
		} else {
			last = cf.binaryItem(fb)
		}
		lastWant = len(cf.want) - n
	}
	// The last item cut short: its records are not in the file (a block
	// of lines is cut only after its first line, then nothing is lost).
	if c := cutSel; len(last) > 1 && c%4 == 3 {
		cut := 1 + c/4%(len(last)-1)
		last = last[:len(last)-cut]
		cf.want = cf.want[:len(cf.want)-lastWant]
		cf.trailer = trailerBefore
		cf.damaged = true
		cf.items = append(cf.items, fmt.Sprintf("the last cut by %d bytes", cut))
	}
	body = append(body, last...)
	if cf.ascii {
		if asc.left > 0 {
			cf.damaged = true // a block cut short
		}
		js, _ := json.Marshal(h)
		magic := ASCIIMagic
		if version == 1 {
			magic = ASCIIMagicV1
		}
		cf.bytes = append([]byte(magic+"\n#header "+string(js)+"\n"), body...)
	} else {
		cf.bytes = fileBytes(h, body)
	}
	return cf
}

// seal makes a frame as a writer of the file's version does: sealed (v2),
// or with the CRC of its payload (v1).
func (cf *counterFile) seal(fh FrameHeader, payload []byte) []byte {
	fh.RawLen = uint32(len(payload))
	if cf.header.Version >= 2 {
		return AppendFrame(nil, fh, payload)
	}
	fh.Flags |= FlagCRC
	fh.StoredLen, fh.CRC = uint32(len(payload)), CRC(payload)
	return append(fh.Append(nil), payload...)
}

// binaryItem appends nothing and returns the next item's bytes.
func (cf *counterFile) binaryItem(fb *fuzzin.Bytes) []byte {
	readable := cf.readable
	switch item := fb.Next() % 11; item {
	case 0, 1, 2: // a counter frame of 1 to 8 records (2: damaged)
		n := 1 + int(fb.Next()%8)
		var raw []byte
		var recs []CounterRecord
		for i := 0; i < n; i++ {
			r := CounterRecord{TSC: fuzzVal(fb), MonoNs: fuzzVal(fb), Count: fuzzVal(fb), Skipped: fuzzVal(fb)}
			recs = append(recs, r)
			for _, v := range []uint64{r.TSC, r.MonoNs, r.Count, r.Skipped} {
				raw = binary.LittleEndian.AppendUint64(raw, v)
			}
		}
		fr := cf.seal(FrameHeader{Kind: KindCounter, N: uint32(n)}, raw)
		if item == 2 {
			fr[FrameHeaderSize+int(fb.Next())%len(raw)] ^= 1 << (fb.Next() % 8)
			cf.damaged = cf.damaged || readable
			cf.items = append(cf.items, fmt.Sprintf("damaged counter frame of %d", n))
			return fr
		}
		if readable {
			cf.want = append(cf.want, recs...)
		}
		cf.items = append(cf.items, fmt.Sprintf("counter frame %v", recs))
		return fr
	case 3: // an event
		ev := Event{Event: []string{"service_rate", "sigterm", "param"}[fb.Next()%3], Rate: float64(fuzzVal(fb)), Samples: fuzzVal(fb),
			Unwritten: uint64(fb.Next()) % 3, Sync: &Sync{TSC: fuzzVal(fb)}}
		js, _ := json.Marshal(ev)
		cf.items = append(cf.items, "event "+string(js))
		return cf.seal(FrameHeader{Kind: KindEvent}, js)
	case 4: // a trailer
		tr := Trailer{Reason: "close", Positions: fuzzVal(fb), Total: fuzzVal(fb)}
		js, _ := json.Marshal(tr)
		cf.trailer = &tr
		cf.items = append(cf.items, "trailer "+string(js))
		return cf.seal(FrameHeader{Kind: KindTrailer}, js)
	case 5: // a status slot (a version 1 file has none: damage)
		st := Status{Seq: uint64(fb.Next()), Accepted: fuzzVal(fb), Written: fuzzVal(fb), Unwritten: uint64(fb.Next() % 2),
			Refused: fuzzVal(fb), State: uint32(fb.Next() % 5)}
		cf.items = append(cf.items, fmt.Sprintf("status %+v", st))
		if cf.header.Version < 2 {
			cf.damaged = cf.damaged || readable
		}
		return AppendStatusFrame(nil, st)
	case 6: // a tuple records frame: positions, no periods
		cf.items = append(cf.items, "records frame")
		return recordsFrame(uint64(fb.Next()), int64(fb.Next()))
	case 7: // an implausible counter frame: a size no counter record has
		raw := make([]byte, 1+int(fb.Next()%40))
		if len(raw)%CounterRecordSize == 0 {
			raw = append(raw, 0)
		}
		cf.damaged = cf.damaged || readable
		cf.items = append(cf.items, fmt.Sprintf("implausible counter frame of %d bytes", len(raw)))
		return cf.seal(FrameHeader{Kind: KindCounter, N: 1}, raw)
	case 8: // a counter frame of more records than a frame may hold
		raw := make([]byte, CounterRecordSize*4097)
		binary.LittleEndian.PutUint64(raw, 1)
		cf.damaged = cf.damaged || readable
		cf.items = append(cf.items, "counter frame of 4097 records")
		return cf.seal(FrameHeader{Kind: KindCounter, N: 4097}, raw)
	case 9: // garbage: bytes as they come, at least one (never a frame: no seal)
		g := append([]byte{0}, fb.Take(int(fb.Next()%64))...)
		cf.damaged = cf.damaged || readable
		cf.items = append(cf.items, fmt.Sprintf("garbage %q", g))
		return g
	default: // a frame header claiming a huge payload the file does not have
		fh := FrameHeader{Kind: KindCounter, N: 1, StoredLen: CounterRecordSize * 4096, Flags: FlagCRC}
		cf.damaged = cf.damaged || readable
		cf.items = append(cf.items, "frame header claiming 128 KiB")
		return fh.Append(nil)
	}
}

// asciiState is what the reader keeps between lines: the lines left in the
// current block.
type asciiState struct{ left int }

// counterText writes a counter line's fields in text order (tsc, count,
// skipped[, mono]); pad zero-pads the count.
func counterText(r CounterRecord, mono, pad bool) string {
	count := strconv.FormatUint(r.Count, 10)
	if pad {
		count = "000" + count
	}
	s := fmt.Sprintf("%d,%s,%d", r.TSC, count, r.Skipped)
	if mono {
		s += fmt.Sprintf(",%d", r.MonoNs)
	}
	return s
}

// badCounterText: a counter line that does not parse.
func badCounterText(fb *fuzzin.Bytes, mono bool) string {
	good := counterText(CounterRecord{TSC: 5, Count: 6, Skipped: 7, MonoNs: 8}, mono, false)
	switch fb.Next() % 9 {
	case 0:
		return "18446744073709551616,1,0" + map[bool]string{true: ",1"}[mono] // past 2^64-1: must not wrap
	case 1:
		return "5,-1,0" + map[bool]string{true: ",1"}[mono] // a count below 0: must not wrap
	case 2:
		return good + ",9" // a field too many
	case 3:
		return good[:strings.LastIndexByte(good, ',')] // a field too few
	case 4:
		return "+5,1,0" + map[bool]string{true: ",1"}[mono]
	case 5:
		return " " + good
	case 6:
		return "0x5,1,0" + map[bool]string{true: ",1"}[mono]
	case 7:
		return ""
	}
	return strings.Replace(good, ",", ",,", 1)
}

// asciiItem returns the next item's line(s).
func (cf *counterFile) asciiItem(fb *fuzzin.Bytes, st *asciiState) []byte {
	h := &cf.header
	mono := h.Format2().HasMono()
	readable := cf.readable
	// A line that is no metadata: a position of the current block, else a
	// period (counter channels) or a tuple record (NET_CONF).
	plain := func(s string, rec *CounterRecord) []byte {
		switch {
		case st.left > 0:
			st.left--
		case h.Counter() && rec != nil:
			cf.want = append(cf.want, *rec)
		case h.Counter():
			cf.damaged = true
		}
		cf.items = append(cf.items, strconv.Quote(s))
		return []byte(s + "\n")
	}
	switch item := fb.Next() % 12; item {
	case 0, 1: // a counter line, zero-padded (1)
		r := CounterRecord{TSC: fuzzVal(fb), Count: fuzzVal(fb), Skipped: fuzzVal(fb)}
		if mono {
			r.MonoNs = fuzzVal(fb)
		}
		return plain(counterText(r, mono, item == 1), &r)
	case 2: // a line that does not parse
		return plain(badCounterText(fb, mono), nil)
	case 3: // "#counter": a period whatever the handler (NET_CONF's way)
		r := CounterRecord{TSC: fuzzVal(fb), Count: fuzzVal(fb), Skipped: fuzzVal(fb)}
		if mono {
			r.MonoNs = fuzzVal(fb)
		}
		s := "#counter " + counterText(r, mono, false)
		if fb.Next()%4 == 0 {
			s = "#counter " + badCounterText(fb, mono)
			cf.damaged = cf.damaged || readable
		} else if readable {
			cf.want = append(cf.want, r)
		}
		cf.items = append(cf.items, strconv.Quote(s))
		return []byte(s + "\n")
	case 4: // a block: its lines are positions, not periods
		maxN := min(max(h.BlockRecords, 2), MaxBlockRecords)
		n := min(1+int(fb.Next()%4), maxN)
		s := fmt.Sprintf("#block %d %d", fb.Next(), n)
		st.left = n
		switch fb.Next() % 4 {
		case 0: // a count past the block size: damage, its lines are periods
			s = fmt.Sprintf("#block 0 %d", maxN+1)
			cf.damaged = cf.damaged || readable
			st.left = 0
		case 1: // written by the SIGTERM flusher
			s += " signal"
		}
		cf.items = append(cf.items, s)
		return []byte(s + "\n")
	case 5: // a hole: never a period
		return plain("#hole", nil)
	case 6: // a trailer, or one that does not parse
		tr := Trailer{Reason: "close", Positions: fuzzVal(fb), Total: fuzzVal(fb)}
		js, _ := json.Marshal(tr)
		if fb.Next()%4 == 0 {
			js = js[:len(js)/2]
			cf.damaged = cf.damaged || readable
		} else {
			cf.trailer = &tr
		}
		cf.items = append(cf.items, "#trailer "+string(js))
		return []byte("#trailer " + string(js) + "\n")
	case 7: // an event
		js, _ := json.Marshal(Event{Event: "service_rate", Rate: float64(fuzzVal(fb)), Sync: &Sync{TSC: fuzzVal(fb)}})
		cf.items = append(cf.items, "#event "+string(js))
		return []byte("#event " + string(js) + "\n")
	case 8: // a status line (damage in a version 1 file, or torn)
		s := string(AppendStatusLine(nil, Status{Seq: uint64(fb.Next()), Accepted: fuzzVal(fb), State: uint32(fb.Next() % 4)}))
		if h.Version < 2 || fb.Next()%4 == 0 {
			s = strings.Replace(s, "seq=0", "seq=9", 1)
			if !strings.HasPrefix(s, "#status seq=9") {
				s = "#status seq=x" + s[len("#status seq=x"):]
			}
			cf.damaged = cf.damaged || readable
		}
		cf.items = append(cf.items, "status line")
		return []byte(s)
	case 9: // a comment
		cf.items = append(cf.items, "comment")
		return []byte("#columns period_end_tsc,count,skipped_periods\n")
	case 10: // garbage that is no metadata
		return plain("x"+strings.ReplaceAll(string(fb.Take(int(fb.Next()%32))), "\n", ""), nil)
	}
	// An endless line: skipped, and it ends the block it was in.
	st.left = 0
	cf.damaged = cf.damaged || readable
	cf.items = append(cf.items, "a line of 70000 bytes")
	return []byte(strings.Repeat("7", 70000) + "\n")
}

// counterRead is what the readers made of a file.
type counterRead struct {
	lf         *File // nil: Open refused it (err says why)
	err, err2  error // the first and the second Counters
	got, again []CounterRecord
	summary    uint64 // Summary.Records after the first Counters
	alloc      uint64 // bytes allocated by all of it
}

// readCounterFile reads the file as every reader does: Open, Counters,
// Summary.Problems, Counters again, Records (which a counter file refuses).
func readCounterFile(p string) *counterRead {
	r := &counterRead{}
	r.alloc = allocDuring(func() {
		lf, err := Open(p)
		if err != nil {
			r.err = err
			return
		}
		defer lf.Close()
		r.lf = lf
		r.err = lf.Counters(func(c CounterRecord) error { r.got = append(r.got, c); return nil })
		r.summary = lf.Summary.Records
		_ = lf.Summary.Problems(&lf.Header)
		r.err2 = lf.Counters(func(c CounterRecord) error { r.again = append(r.again, c); return nil })
		_ = lf.Records(func(Record) error { return nil })
		_ = lf.Summary.Problems(&lf.Header)
	})
	return r
}

func checkCounterFile(t *testing.T, cf *counterFile, r *counterRead) {
	t.Helper()
	size := uint64(len(cf.bytes))
	lf, err, err2, got, again, summary, alloc := r.lf, r.err, r.err2, r.got, r.again, r.summary, r.alloc
	// Allocation: the reader's buffers (64 KiB lines and frames, 4 KiB a
	// read), and what each byte of the file may become.
	if limit := 1<<20 + 64*size; alloc > limit {
		t.Fatalf("reading a file of %d bytes allocated %d bytes (more than %d)\nitems: %q", size, alloc, limit, cf.items)
	}
	if lf == nil {
		// Refused: a header that does not hold (a record size its columns
		// do not have).
		if cf.header.RecordSize == 24 && len(cf.header.Columns) == 3 || cf.header.RecordSize == 32 && len(cf.header.Columns) == 4 {
			t.Fatalf("a counter file's header refused: %v\nheader: %+v", err, cf.header)
		}
		return
	}
	if !cf.readable {
		if err == nil || len(got) > 0 {
			t.Fatalf("a %s file read as counters: %d records, %v", cf.header.Handler, len(got), err)
		}
		return
	}
	n := uint64(len(got))
	if n > lf.MaxCounters {
		t.Fatalf("%d counter records, MaxCounters %d", n, lf.MaxCounters)
	}
	minBytes := uint64(CounterRecordSize)
	if cf.ascii {
		minBytes = 6 // "0,0,0\n"
	}
	if n*minBytes > size {
		t.Fatalf("%d counter records from a file of %d bytes", n, size)
	}
	if summary != n {
		t.Fatalf("Summary.Records %d, %d records read", summary, n)
	}
	if fmt.Sprint(got) != fmt.Sprint(cf.want) {
		t.Fatalf("read %d records:\n%v\nthe file holds %d:\n%v\nitems: %q", len(got), got, len(cf.want), cf.want, cf.items)
	}
	if cf.damaged && !errors.Is(err, ErrDamaged) {
		t.Fatalf("damage not said: %v\nitems: %q", err, cf.items)
	}
	if err != nil && !errors.Is(err, ErrDamaged) {
		t.Fatalf("a read error that is not damage: %v", err)
	}
	// A counter channel's periods are checked against its last trailer's
	// total: said when they do not add up to it, never when they do.
	if h := &cf.header; h.Counter() && cf.trailer != nil {
		var sum, carry uint64
		for _, r := range cf.want {
			var c uint64
			sum, c = bits.Add64(sum, r.Count, 0)
			carry |= c
		}
		said := err != nil && strings.Contains(err.Error(), "the periods add up to")
		if disagree := carry != 0 || sum != cf.trailer.Total; said != disagree {
			t.Fatalf("periods adding up to %d (past 2^64-1: %v), the trailer says %d; the reader: %v\nitems: %q", sum, carry != 0, cf.trailer.Total, err, cf.items)
		}
	}
	if fmt.Sprint(again) != fmt.Sprint(got) || fmt.Sprint(err2) != fmt.Sprint(err) {
		t.Fatalf("a second read differs: %d records, %v; the first: %d, %v", len(again), err2, len(got), err)
	}
}
