package main

/*
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include "engine.h"

static void cp_test_sigterm_default(void) { signal(SIGTERM, SIG_DFL); }

// A saturated operator for the SERVICERATE tests, as a C program would be:
// each item costs `cycles` TSC cycles of spinning (its LogTS inside them),
// for about `total` cycles. With mark != 0 it calls CP_MarkBlocked(mark)
// right before and right after each LogTS: every sampling period with an
// item in it has a mark, wherever the period ends. Returns the items
// counted, or the first error.
static int64_t cp_test_operator(int64_t ch, uint64_t cycles, uint64_t total, int32_t mark) {
  uint64_t start = cp_tsc_now(), t = start;
  int64_t n = 0;
  while (t - start < total) {
    uint64_t t0 = t;
    while ((t = cp_tsc_now()) - t0 < cycles) {}
    int32_t rc = mark ? CP_MarkBlocked(ch, mark) : 0;
    if (rc == 0) rc = LogTS(ch, n);
    if (rc == 0 && mark) rc = CP_MarkBlocked(ch, mark);
    if (rc) return rc;
    n++;
  }
  return n;
}

// Marked visits as a C operator makes them, all in one call (no Go
// between them: a return to Go may wait for a P): for each i, a sleep of
// before_ns[i] (when > 0), its in, cycles[i] of spinning work (a sleep of
// sleep_ns[i] in the middle when > 0), its out, and a record on the
// unmarked channel other. The first error, else 0.
static int32_t cp_test_visits(int64_t in, int64_t out, int64_t other, int64_t first, int n, const uint64_t *cycles,
                              const int64_t *before_ns, const int64_t *sleep_ns) {
  for (int i = 0; i < n; i++) {
    if (before_ns[i] > 0) {
      struct timespec ts = {0, before_ns[i]};
      nanosleep(&ts, NULL);
    }
    int32_t rc = LogTS(in, first + i);
    if (rc) return rc;
    uint64_t t0 = cp_tsc_now();
    while (cp_tsc_now() - t0 < cycles[i] / 2) {}
    if (sleep_ns[i] > 0) {
      struct timespec ts = {0, sleep_ns[i]};
      nanosleep(&ts, NULL);
    }
    while (cp_tsc_now() - t0 < cycles[i]) {}
    if ((rc = LogTS(out, first + i)) != 0) return rc;
    if (other && (rc = LogTS(other, first + i)) != 0) return rc;
  }
  return 0;
}

// Two operators chained in one thread, as Flink chains them: for each i,
// a's in, a_cycles of a's work, a's out, then b (called from a's hand-off):
// b's in, b_cycles of b's work, b's out, and a's sent as the call returns.
// The first error, else 0.
static int32_t cp_test_chain(int64_t ain, int64_t aout, int64_t asent, int64_t bin, int64_t bout, int n,
                             uint64_t a_cycles, uint64_t b_cycles) {
  for (int i = 0; i < n; i++) {
    int32_t rc = LogTS(ain, i);
    uint64_t t0 = cp_tsc_now();
    while (cp_tsc_now() - t0 < a_cycles) {}
    if (rc == 0) rc = LogTS(aout, i);
    if (rc == 0) rc = LogTS(bin, i);
    t0 = cp_tsc_now();
    while (cp_tsc_now() - t0 < b_cycles) {}
    if (rc == 0) rc = LogTS(bout, i);
    if (rc == 0) rc = LogTS(asent, i);
    if (rc) return rc;
  }
  return 0;
}

// A burst from C, as a logging thread makes one: n LogTS calls with ids
// first, first+1, ...; the first error, else 0.
static int32_t cp_test_burst(int64_t ch, int64_t first, int64_t n) {
  for (int64_t i = first; i < first + n; i++) {
    int32_t rc = LogTS(ch, i);
    if (rc) return rc;
  }
  return 0;
}
*/
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"
)

// Go-callable wrappers of the C entry points, for the Go tests (test files
// cannot use cgo). Each call crosses into C as a real caller would.

func logTS(h, id int64) int32 { return int32(C.LogTS(C.int64_t(h), C.int64_t(id))) }

// visitsC runs marked visits in C (cp_test_visits), ids first, first+1, ...
func visitsC(in, out, other, first int64, cycles []uint64, before, sleep []time.Duration) int32 {
	n := len(cycles)
	b, sl := make([]int64, n), make([]int64, n)
	for i := range n {
		b[i], sl[i] = int64(before[i]), int64(sleep[i])
	}
	return int32(C.cp_test_visits(C.int64_t(in), C.int64_t(out), C.int64_t(other), C.int64_t(first), C.int(n),
		(*C.uint64_t)(unsafe.Pointer(&cycles[0])), (*C.int64_t)(unsafe.Pointer(&b[0])), (*C.int64_t)(unsafe.Pointer(&sl[0]))))
}

func chainC(ain, aout, asent, bin, bout int64, n int, aCycles, bCycles uint64) int32 {
	return int32(C.cp_test_chain(C.int64_t(ain), C.int64_t(aout), C.int64_t(asent), C.int64_t(bin), C.int64_t(bout), C.int(n),
		C.uint64_t(aCycles), C.uint64_t(bCycles)))
}

// setWaitsMode sets the way marks see their thread's waits, as
// initLibrary does from CP_WAITS, and returns the mode in effect (the
// channels opened from then on note waits with it).
func setWaitsMode(want int) int { return int(C.cp_marks_init(C.int(want), C.double(freq.Hz/1e9))) }

func logBurstC(h, first, n int64) int32 {
	return int32(C.cp_test_burst(C.int64_t(h), C.int64_t(first), C.int64_t(n)))
}

// fastPath is the channel's LogTS selector (CP_FAST_* in engine.h).
func (c *channel) fastPath() int32 {
	return atomic.LoadInt32((*int32)(unsafe.Pointer(&c.slot.fast)))
}

const fastNull = C.CP_FAST_NULL

// drainWakes is how many eventfd writes logging threads made for the
// channel to wake its drainer (its slot's count, kept after close).
func (c *channel) drainWakes() uint64 {
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.slot.drain_wakes)))
}

func errorString(code int32) string { return C.GoString(C.CP_ErrorString(C.int32_t(code))) }

func fakeApplyC(raw uint64) uint64 { return uint64(C.cp_fake_apply(C.uint64_t(raw))) }

func tscNowC() uint64 { return uint64(C.cp_tsc_now()) }

// logTSMany calls LogTSMany over ids (nil ids: a NULL pointer with n).
func logTSMany(h int64, ids []int64, n int64) (int64, int32) {
	var err C.int32_t = 99
	var p *C.int64_t
	if len(ids) > 0 {
		p = (*C.int64_t)(unsafe.Pointer(&ids[0]))
	}
	got := C.LogTSMany(C.int64_t(h), p, C.int64_t(n), &err)
	return int64(got), int32(err)
}

// srOperator runs cp_test_operator on this thread.
func srOperator(h int64, cycles, total uint64, mark int32) int64 {
	return int64(C.cp_test_operator(C.int64_t(h), C.uint64_t(cycles), C.uint64_t(total), C.int32_t(mark)))
}

func logLineageC(h, out, in int64) int32 {
	return int32(C.CP_LogLineage(C.int64_t(h), C.int64_t(out), C.int64_t(in)))
}

func markBlockedC(h int64, which int32) int32 {
	return int32(C.CP_MarkBlocked(C.int64_t(h), C.int32_t(which)))
}

// srAnswer is cp_service_rate_t in Go.
type srAnswer struct {
	Rate, Running, PeriodS         float64
	Samples, Periods, Convergences int64
	Converged, Reserved            int32
	Mean                           float64
}

// serviceRateC calls CP_ServiceRate (out NULL when null is set); out is
// filled with 0x55 bytes first.
func serviceRateC(h int64, null bool) (srAnswer, int32) {
	var out C.cp_service_rate_t
	b := unsafe.Slice((*byte)(unsafe.Pointer(&out)), unsafe.Sizeof(out))
	for i := range b {
		b[i] = 0x55
	}
	p := &out
	if null {
		p = nil
	}
	rc := int32(C.CP_ServiceRate(C.int64_t(h), p))
	return srAnswer{float64(out.rate), float64(out.running), float64(out.period_s), int64(out.samples),
		int64(out.periods), int64(out.convergences), int32(out.converged), int32(out.reserved), float64(out.mean)}, rc
}

func lastError(capacity int32) (string, int32) {
	buf := (*C.char)(C.malloc(C.size_t(max(capacity, 1))))
	defer C.free(unsafe.Pointer(buf))
	n := C.CP_LastError(buf, C.int32_t(capacity))
	if capacity <= 0 {
		return "", int32(n)
	}
	return C.GoString(buf), int32(n)
}

func openNullName() int64 { return int64(C.OpenChannel(nil, 3, 9)) }

func logOpen(path string) int64 {
	if path == "\x00" {
		return int64(C.CP_LogOpen(nil))
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return int64(C.CP_LogOpen(cs))
}

// jsonCall calls CP_LogInfo (info) or CP_LogSummary with a buffer of
// capacity bytes (filled with 'x' first); returns the bytes and the result.
func jsonCall(info bool, h int64, capacity int64) ([]byte, int64) {
	buf := C.malloc(C.size_t(capacity + 1))
	defer C.free(buf)
	b := unsafe.Slice((*byte)(buf), capacity+1)
	for i := range b {
		b[i] = 'x'
	}
	var n C.int64_t
	p := (*C.char)(buf)
	if capacity == 0 {
		p = nil
	}
	if info {
		n = C.CP_LogInfo(C.int64_t(h), p, C.int64_t(capacity))
	} else {
		n = C.CP_LogSummary(C.int64_t(h), p, C.int64_t(capacity))
	}
	return append([]byte(nil), b...), int64(n)
}

// logRead calls CP_LogRead (or CP_LogReadCounters) into C memory of
// capacity records of size bytes; returns the bytes written and the result.
func logRead(h int64, capacity int64, size int, counters bool) ([]byte, int64) {
	out := C.malloc(C.size_t(max(capacity*int64(size), 1)))
	defer C.free(out)
	var n C.int64_t
	if counters {
		n = C.CP_LogReadCounters(C.int64_t(h), out, C.int64_t(capacity))
	} else {
		n = C.CP_LogRead(C.int64_t(h), out, C.int64_t(capacity))
	}
	if n <= 0 {
		return nil, int64(n)
	}
	return C.GoBytes(out, C.int(int64(n)*int64(size))), int64(n)
}

func logReadNil(h int64, capacity int64) int64 {
	return int64(C.CP_LogRead(C.int64_t(h), nil, C.int64_t(capacity)))
}

func logClose(h int64) int32 { return int32(C.CP_LogClose(C.int64_t(h))) }

func parameterizeC(h int64, arg int32, v int64) int32 {
	return int32(C.ParameterizeChannel(C.int64_t(h), C.int32_t(arg), C.int64_t(v)))
}

func closeChannelC(h int64) int32 { return int32(C.CloseChannel(C.int64_t(h))) }

// bytesPtr is b's first byte for C (nil when empty).
func bytesPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// crc32cC continues crc over b with cp_crc32c (mode 0), its table path (1)
// or its SSE4.2 path (2, only where crcHWC says the CPU has it).
func crc32cC(crc uint32, b []byte, mode int) uint32 {
	p, n := bytesPtr(b), C.size_t(len(b))
	switch mode {
	case 1:
		return uint32(C.cp_crc32c_sw(C.uint32_t(crc), p, n))
	case 2:
		return uint32(C.cp_crc32c_hw(C.uint32_t(crc), p, n))
	}
	return uint32(C.cp_crc32c(C.uint32_t(crc), p, n))
}

func crcHWC() bool { return C.cp_crc32c_has_hw() != 0 }

// sealC seals a frame (32-byte header with stored_len, then the payload) in place.
func sealC(frame []byte) { C.cp_frame_seal(bytesPtr(frame)) }

// setSlotCounts sets what cp_status_write takes from the C slot.
func setSlotCounts(c *channel, unwritten, refused, dropped uint64, errno uint32) {
	s := c.slot
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.unwritten)), unwritten)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.refused)), refused)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.dropped)), dropped)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&s.last_errno)), errno)
}

// statusOffset is where the channel's status slot 0 begins in its file.
func statusOffset(c *channel) int64 { return int64(c.slot.status_off) }

// sigtermDefault gives SIGTERM its default disposition (the Go runtime's
// handler out of the way), so that the library's handler, installed next,
// closes, flushes and lets the process die of the signal.
func sigtermDefault() { C.cp_test_sigterm_default() }
