package main

/*
#include <stdlib.h>
#include "engine.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/marking"
)

// A channel whose name marks an operator instance's in, out or sent
// (package marking) notes in each record whether the instance's thread
// waited since the instance's previous mark (marks.c says how and why). The
// instances of the process share their state across their channels: a
// restarted task's channels find their instance again.

// markedInstance is one OPERATOR#INSTANCE of the process.
type markedInstance struct {
	c *C.struct_cp_mark // C memory, never freed (a few bytes an instance)
}

var (
	marksMu   sync.Mutex
	instances = map[marking.Mark]*markedInstance{}
)

// waitsWanted reads CP_WAITS: "" or "rseq" (notes where the kernel and
// glibc give rseq, else none), "getrusage" (notes at the price of a
// getrusage call a mark after a pause) or "off".
func waitsWanted(v string) (int, error) {
	switch v {
	case "", "rseq":
		return C.CP_WAITS_RSEQ, nil
	case "getrusage":
		return C.CP_WAITS_GETRUSAGE, nil
	case "off":
		return C.CP_WAITS_OFF, nil
	}
	return 0, fmt.Errorf("CP_WAITS=%q: want rseq, getrusage or off", v)
}

// The modes, for Go callers.
const (
	waitsOff       = int(C.CP_WAITS_OFF)
	waitsGetrusage = int(C.CP_WAITS_GETRUSAGE)
	waitsRSEQ      = int(C.CP_WAITS_RSEQ)
)

// waitsWanted0 is the mode the environment asks for (the default where it
// says nothing valid).
func waitsWanted0() int {
	w, err := waitsWanted(getenv("CP_WAITS"))
	if err != nil {
		return waitsRSEQ
	}
	return w
}

// initMarks sets the mode in effect (initLibrary, once, before any
// channel exists).
func initMarks() {
	got := int(C.cp_marks_init(C.int(cfg.waits), C.double(freq.Hz/1e9)))
	if cfg.waits == waitsRSEQ && got != waitsRSEQ {
		waitsUnavailable = "this kernel or C library gives the library no restartable sequences (rseq: Linux 4.18 and glibc 2.35 or later), " +
			"so marked channels note no waits of their threads: capacity falls back to the order of the marks, and the engines' capacity gauges stay NaN " +
			"(CP_WAITS=getrusage notes them at 130-500 ns a mark)"
	}
}

// waitsUnavailable says why the default notes of waits are off ("": they
// are not, or CP_WAITS turned them off); said once, at the first marked
// channel's open (warnNoWaits).
var (
	waitsUnavailable string
	noWaitsWarned    sync.Once
)

func warnNoWaits() {
	noWaitsWarned.Do(func() { fmt.Fprintln(os.Stderr, "cloudprofiler: warning:", waitsUnavailable) })
}

// waitsName is the mode in effect, as file headers say it
// (logfile.Header.Waits).
func waitsName() string {
	switch C.cp_waits_mode {
	case C.CP_WAITS_RSEQ:
		return "rseq"
	case C.CP_WAITS_GETRUSAGE:
		return "getrusage"
	}
	return ""
}

// markOf is the instance a channel named name marks with its records (in,
// out or sent on a buffered handler) and the role (CP_MARK_*), nil when it
// marks none or notes no waits.
func markOf(name string, h handlers.Type) (*markedInstance, C.int32_t) {
	if h != handlers.BufferIdentity && h != handlers.BufferIdentityComp {
		return nil, 0
	}
	m, ok := marking.ParseName(name)
	if !ok || !m.Role.Tuple() {
		return nil, 0
	}
	if C.cp_waits_mode == C.CP_WAITS_OFF {
		if waitsUnavailable != "" {
			warnNoWaits()
		}
		return nil, 0
	}
	role := map[marking.Role]C.int32_t{marking.RoleIn: C.CP_MARK_IN, marking.RoleOut: C.CP_MARK_OUT, marking.RoleSent: C.CP_MARK_SENT}[m.Role]
	m.Role = marking.RoleNone // the instance's key
	marksMu.Lock()
	defer marksMu.Unlock()
	in := instances[m]
	if in == nil {
		in = &markedInstance{c: (*C.struct_cp_mark)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_cp_mark{}))))}
		if in.c == nil {
			return nil, 0
		}
		instances[m] = in
	}
	return in, role
}

// markStats is what a marked channel's instance did so far: its ins, and
// the seconds its thread worked on them (struct cp_mark).
func markStats(h int64) (visits uint64, busy float64, err error) {
	c, err := lookup(h)
	if err != nil {
		return 0, 0, err
	}
	if c.mark == nil {
		why := "not a marked in, out or sent of a buffered handler, or CP_WAITS=off"
		if waitsUnavailable != "" {
			why = waitsUnavailable
		}
		return 0, 0, fail(C.CP_ERR_BAD_HANDLER, "channel %q notes no waits: %s", c.name, why)
	}
	m := c.mark.c
	visits = atomic.LoadUint64((*uint64)(unsafe.Pointer(&m.visits)))
	cycles := atomic.LoadUint64((*uint64)(unsafe.Pointer(&m.busy)))
	return visits, float64(cycles) / freq.Hz, nil
}
