package main

/*
#include "engine.h"
*/
import "C"

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"cloudprofiler/internal/logfile"
)

// Reading logs through the library's decoder (CP_LogOpen ... CP_LogClose):
// not a hot path, so plain cgo exports. Records are written straight into
// the caller's memory from the decoded frame (one copy).

// Reader handles carry this bit, so a reader handle is never a channel's
// (whose generation, the bits above 20, is below 2^16) nor the reverse.
const readerTag = int64(1) << 62

type logReader struct {
	mu      sync.Mutex // one call at a time (also CP_LogClose against a read)
	lf      *logfile.File
	path    string
	base    logfile.Summary // as indexed by Open: each read starts from it
	read    string          // "none", "records" or "counters": what Summary describes
	written int64
	readErr string
	closed  bool
}

var (
	readersMu  sync.Mutex
	readers    = map[int64]*logReader{}
	readerNext int64
)

// readerFail keeps the message for CP_LastError and returns the code.
func readerFail(code int32, format string, a ...any) int32 {
	setLastError(fmt.Sprintf(format, a...))
	return code
}

func getReader(h C.int64_t, fn string) (*logReader, int32) {
	readersMu.Lock()
	r := readers[int64(h)]
	readersMu.Unlock()
	if r == nil {
		return nil, readerFail(C.CP_ERR_BAD_HANDLE, "%s: %d is not an open reader handle", fn, int64(h))
	}
	r.mu.Lock()
	if r.closed { // closed while this call waited for the lock
		r.mu.Unlock()
		return nil, readerFail(C.CP_ERR_BAD_HANDLE, "%s: reader %d was closed", fn, int64(h))
	}
	return r, 0
}

// contain keeps a panic in the decoder (a bug it meets in a hostile file)
// from taking the host process down: the call returns CP_ERR_INTERNAL with
// the panic in CP_LastError instead. Deferred by every reader export.
func contain(fn string, ret *C.int64_t) {
	if p := recover(); p != nil {
		*ret = C.int64_t(readerFail(C.CP_ERR_INTERNAL, "%s: internal error (please report it with the file): %v", fn, p))
	}
}

//export cpLogOpen
func cpLogOpen(path *C.char) (ret C.int64_t) {
	defer contain("CP_LogOpen", &ret)
	p := C.GoString(path)
	if p == "" {
		return C.int64_t(readerFail(C.CP_ERR_BAD_NAME, "CP_LogOpen: the path is empty"))
	}
	lf, err := logfile.Open(p)
	if err != nil {
		return C.int64_t(readerFail(C.CP_ERR_IO, "CP_LogOpen: %v", err))
	}
	r := &logReader{lf: lf, path: p, base: lf.Summary, read: "none"}
	readersMu.Lock()
	readerNext++
	h := readerTag | readerNext
	readers[h] = r
	readersMu.Unlock()
	return C.int64_t(h)
}

//export CP_LogClose
func CP_LogClose(h C.int64_t) C.int32_t {
	readersMu.Lock()
	r := readers[int64(h)]
	delete(readers, int64(h))
	readersMu.Unlock()
	if r == nil {
		return C.int32_t(readerFail(C.CP_ERR_BAD_HANDLE, "CP_LogClose: %d is not an open reader handle", int64(h)))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.lf.Close()
	return 0
}

// putJSON writes v's JSON into buf (NUL-terminated if it fits) and returns
// its full length.
func putJSON(fn string, v any, buf *C.char, capacity C.int64_t) C.int64_t {
	if capacity < 0 || buf == nil && capacity > 0 {
		return C.int64_t(readerFail(C.CP_ERR_BAD_ARG_VALUE, "%s: buffer %p with capacity %d", fn, buf, int64(capacity)))
	}
	js, err := json.Marshal(v)
	if err != nil {
		return C.int64_t(readerFail(C.CP_ERR_INTERNAL, "%s: %v", fn, err))
	}
	if capacity > 0 {
		dst := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(capacity))
		n := copy(dst, js)
		if n < len(dst) {
			dst[n] = 0
		}
	}
	return C.int64_t(len(js))
}

// layout is how CP_LogRead (counters=false) or CP_LogReadCounters writes
// records: bytes per record and the columns, all 8-byte little-endian.
func (r *logReader) layout(counters bool) (int, []string) {
	mono := r.lf.Header.Format2().HasMono()
	cols := []string{"tuple_id", "tsc"}
	if counters || r.lf.Header.Counter() {
		cols = []string{"period_end_tsc", "count", "skipped_periods"}
	}
	if mono {
		cols = append(cols, "mono_ns")
	}
	return 8 * len(cols), cols
}

// hasCounters says whether CP_LogReadCounters can find records in the file.
func (r *logReader) hasCounters() bool {
	return r.lf.Header.Counter() || r.lf.Header.Handler == "NET_CONF"
}

type readerInfo struct {
	Path              string         `json:"path"`
	Header            logfile.Header `json:"header"`
	Counter           bool           `json:"counter"`
	RecordSize        int            `json:"record_size"`
	Columns           []string       `json:"columns"`
	MaxRecords        uint64         `json:"max_records"`
	CounterRecordSize int            `json:"counter_record_size,omitempty"`
	CounterColumns    []string       `json:"counter_columns,omitempty"`
	MaxCounterRecords *uint64        `json:"max_counter_records,omitempty"`
}

//export CP_LogInfo
func CP_LogInfo(h C.int64_t, buf *C.char, capacity C.int64_t) (ret C.int64_t) {
	defer contain("CP_LogInfo", &ret)
	r, code := getReader(h, "CP_LogInfo")
	if r == nil {
		return C.int64_t(code)
	}
	defer r.mu.Unlock()
	// Open verified every frame it indexed: these bounds are the sums of
	// verified counts (ASCII: lines), never a damaged header's claim.
	info := readerInfo{Path: r.path, Header: r.lf.Header, Counter: r.lf.Header.Counter()}
	info.RecordSize, info.Columns = r.layout(false)
	info.MaxRecords = r.lf.MaxRecords
	if info.Counter {
		info.MaxRecords = r.lf.MaxCounters
	}
	if r.hasCounters() {
		info.CounterRecordSize, info.CounterColumns = r.layout(true)
		mc := r.lf.MaxCounters
		info.MaxCounterRecords = &mc
	}
	return putJSON("CP_LogInfo", &info, buf, capacity)
}

//export CP_LogRead
func CP_LogRead(h C.int64_t, out unsafe.Pointer, capacity C.int64_t) C.int64_t {
	return readInto(h, out, capacity, false, "CP_LogRead")
}

//export CP_LogReadCounters
func CP_LogReadCounters(h C.int64_t, out unsafe.Pointer, capacity C.int64_t) C.int64_t {
	return readInto(h, out, capacity, true, "CP_LogReadCounters")
}

func readInto(h C.int64_t, out unsafe.Pointer, capacity C.int64_t, counters bool, fn string) (ret C.int64_t) {
	defer contain(fn, &ret)
	r, code := getReader(h, fn)
	if r == nil {
		return C.int64_t(code)
	}
	defer r.mu.Unlock()
	if capacity < 0 || capacity > 1<<56 || out == nil && capacity > 0 {
		return C.int64_t(readerFail(C.CP_ERR_BAD_ARG_VALUE, "%s: out %p with capacity %d", fn, out, int64(capacity)))
	}
	lf := r.lf
	lf.Summary = r.base // each read starts from the index's findings
	lf.Summary.Events = append([]logfile.Event(nil), r.base.Events...)
	r.readErr, r.written = "", 0
	counterFile := lf.Header.Counter()
	asCounters := counters || counterFile
	size, _ := r.layout(asCounters)
	var dst []byte
	if capacity > 0 {
		dst = unsafe.Slice((*byte)(out), int(capacity)*size)
	}
	limit := int64(capacity)
	var n int64 // records decoded; those below limit are written
	var err error
	le := binary.LittleEndian
	switch {
	case asCounters && !r.hasCounters():
		r.read = "counters" // a tuple channel's file: no counter records
	case asCounters:
		r.read = "counters"
		mono := size == 32
		err = lf.Counters(func(c logfile.CounterRecord) error {
			if n < limit {
				o := dst[n*int64(size):]
				le.PutUint64(o, c.TSC)
				le.PutUint64(o[8:], c.Count)
				le.PutUint64(o[16:], c.Skipped)
				if mono {
					le.PutUint64(o[24:], c.MonoNs)
				}
			}
			n++
			return nil
		})
	default:
		r.read = "records"
		mono := size == 24
		err = lf.Records(func(rec logfile.Record) error {
			if n < limit {
				o := dst[n*int64(size):]
				le.PutUint64(o, uint64(rec.TupleID))
				le.PutUint64(o[8:], rec.TSC)
				if mono {
					le.PutUint64(o[16:], rec.MonoNs)
				}
			}
			n++
			return nil
		})
	}
	r.written = min(n, limit)
	if err != nil && !errors.Is(err, logfile.ErrDamaged) {
		r.readErr = err.Error()
		return C.int64_t(readerFail(C.CP_ERR_IO, "%s: %v", fn, err))
	}
	return C.int64_t(r.written)
}

type readerSummary struct {
	Read             string           `json:"read"` // what the last read decoded: "none", "records", "counters"
	Records          uint64           `json:"records"`
	Written          int64            `json:"written"`
	Holes            uint64           `json:"holes"`
	Duplicates       uint64           `json:"duplicates"`
	MissingPositions uint64           `json:"missing_positions"`
	Frames           int              `json:"frames"`
	SignalFrames     int              `json:"signal_frames"`
	TruncatedBytes   int64            `json:"truncated_bytes"`
	CorruptBytes     int64            `json:"corrupt_bytes"`
	CorruptFrames    int              `json:"corrupt_frames"`
	CorruptLines     int              `json:"corrupt_lines"`
	Truncated        bool             `json:"truncated"`
	Damaged          bool             `json:"damaged"`
	Version          int              `json:"version"`
	Status           *logfile.Status  `json:"status"`
	RingBound        uint64           `json:"ring_bound"`
	Problems         []string         `json:"problems"`
	Trailer          *logfile.Trailer `json:"trailer"`
	Events           []logfile.Event  `json:"events"`
	Error            string           `json:"error,omitempty"`
}

//export CP_LogSummary
func CP_LogSummary(h C.int64_t, buf *C.char, capacity C.int64_t) (ret C.int64_t) {
	defer contain("CP_LogSummary", &ret)
	r, code := getReader(h, "CP_LogSummary")
	if r == nil {
		return C.int64_t(code)
	}
	defer r.mu.Unlock()
	s := &r.lf.Summary
	out := readerSummary{Read: r.read, Records: s.Records, Written: r.written, Holes: s.Holes, Duplicates: s.Duplicates,
		MissingPositions: s.MissingPos, Frames: s.Frames, SignalFrames: s.SignalFrames, TruncatedBytes: s.TruncatedBytes,
		CorruptBytes: s.CorruptBytes, CorruptFrames: s.CorruptFrames, CorruptLines: s.CorruptLines, Truncated: s.TruncatedBytes > 0,
		Damaged: s.CorruptBytes > 0 || s.CorruptFrames > 0 || s.CorruptLines > 0, Trailer: s.Trailer, Events: s.Events, Error: r.readErr,
		Version: s.Version, Status: s.Status, RingBound: s.RingBound, Problems: []string{}}
	if r.read != "none" {
		out.Problems = append(out.Problems, s.Problems(&r.lf.Header)...) // [] rather than null when none
	}
	if out.Events == nil {
		out.Events = []logfile.Event{}
	}
	return putJSON("CP_LogSummary", &out, buf, capacity)
}
