package main

/*
#include "engine.h"
*/
import "C"

import "unsafe"

// Go-callable wrappers of the C entry points, for the Go tests (test files
// cannot use cgo). Each call crosses into C as a real caller would.

func logTS(h, id int64) int32 { return int32(C.LogTS(C.int64_t(h), C.int64_t(id))) }

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
