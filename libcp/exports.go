// Command libcp is the native library, built with -buildmode=c-shared into
// libcloudprofiler.so. The ABI is capi/cloudprofiler.h: LogTS and the other
// hot paths are C (fastpath.c), the rest are the Go exports below, compiled
// against the header through engine.h.
package main

/*
#include <stdlib.h>
#include <string.h>
#include "engine.h"
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"
)

func main() {}

// report prints what went wrong (the code alone cannot say which file or
// which variable) and returns the code: I/O errors unless CP_QUIET is set,
// configuration errors always.
func report(err error) int32 {
	code := codeOf(err)
	if err != nil {
		setLastError(err.Error())
	}
	if err != nil && (code == C.CP_ERR_CONFIG || getenv("CP_QUIET") == "" && code == C.CP_ERR_IO) {
		fmt.Fprintln(os.Stderr, "cloudprofiler:", err)
	}
	return code
}

//export cpOpenChannel
func cpOpenChannel(name *C.char, logFormat C.int32_t, handlerType C.int32_t) C.int64_t {
	n := C.strnlen(name, maxNameLen+1)
	h, err := openChannel(C.GoStringN(name, C.int(n)), logfile.Format(logFormat), handlers.Type(handlerType))
	if err != nil {
		return C.int64_t(report(err))
	}
	return C.int64_t(h)
}

//export ParameterizeChannel
func ParameterizeChannel(ch C.int64_t, argNum C.int32_t, argVal C.int64_t) C.int32_t {
	return C.int32_t(report(parameterize(int64(ch), int32(argNum), int64(argVal))))
}

//export CloseChannel
func CloseChannel(ch C.int64_t) C.int32_t {
	return C.int32_t(report(closeChannel(int64(ch), "close")))
}

//export CloseAllChannels
func CloseAllChannels() C.int32_t {
	return C.int32_t(report(closeAll("close_all")))
}

//export cpCloseAllAtExit
func cpCloseAllAtExit() {
	report(closeAll("atexit"))
}

// setLastError keeps msg as this thread's last failure (CP_LastError). The
// exports run on the calling C thread, so the C thread-local is the caller's.
func setLastError(msg string) {
	C.cp_set_last_error((*C.char)(unsafe.Pointer(unsafe.StringData(msg))), C.int32_t(min(len(msg), 1<<16)))
}

// CP_ServiceRate fills *out with a SERVICERATE channel's estimate. It does
// not set CP_LastError (the header lists the functions that do); its codes
// say it all.
//
//export CP_ServiceRate
func CP_ServiceRate(ch C.int64_t, out *C.cp_service_rate_t) C.int32_t {
	st, err := serviceRate(int64(ch))
	if err != nil {
		return C.int32_t(codeOf(err))
	}
	if out == nil {
		return C.CP_ERR_BAD_ARG_VALUE
	}
	conv := C.int32_t(0)
	if st.Converged {
		conv = 1
	}
	*out = C.cp_service_rate_t{rate: C.double(st.Rate), running: C.double(st.Running), period_s: C.double(st.Period.Seconds()),
		samples: C.int64_t(st.Samples), periods: C.int64_t(st.Periods), convergences: C.int64_t(st.Convergences), converged: conv,
		mean: C.double(st.Mean)}
	return 0
}

// CP_MarkStats fills *out with what a marked channel's instance did so far.
// Like CP_ServiceRate, it does not set CP_LastError.
//
//export CP_MarkStats
func CP_MarkStats(ch C.int64_t, out *C.cp_mark_stats_t) C.int32_t {
	visits, busy, err := markStats(int64(ch))
	if err != nil {
		return C.int32_t(codeOf(err))
	}
	if out == nil {
		return C.CP_ERR_BAD_ARG_VALUE
	}
	*out = C.cp_mark_stats_t{visits: C.int64_t(visits), busy_s: C.double(busy)}
	return 0
}
