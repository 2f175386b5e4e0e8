package main

/*
#include "engine.h"
*/
import "C"

// Go-callable wrappers of the C entry points, for the Go tests (test files
// cannot use cgo). Each call crosses into C as a real caller would.

func logTS(h, id int64) int32 { return int32(C.LogTS(C.int64_t(h), C.int64_t(id))) }

func errorString(code int32) string { return C.GoString(C.CP_ErrorString(C.int32_t(code))) }

func fakeApplyC(raw uint64) uint64 { return uint64(C.cp_fake_apply(C.uint64_t(raw))) }

func tscNowC() uint64 { return uint64(C.cp_tsc_now()) }
