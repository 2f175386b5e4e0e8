// Package racetest lets a test of pure arithmetic step aside under -race.
//
// The race detector watches memory shared between goroutines; a test that
// runs one goroutine through millions of float operations gives it nothing
// to find, yet runs 5-10x slower under it (checkptr and every call
// instrumented): TestReadingRangeIsTheTranslation took 77 s under -race
// and 7 s without. make test-go runs every test under -race, then the
// tests that called Arithmetic once more without it (the Makefile's
// ARITH_TESTS), so each still runs in full in make test.
package racetest

import "testing"

// Arithmetic skips t under -race, saying where it runs instead.
func Arithmetic(t testing.TB) {
	t.Helper()
	if Enabled {
		t.Skip("pure arithmetic on one goroutine: nothing for -race to watch; make test-go runs it without -race (ARITH_TESTS)")
	}
}
