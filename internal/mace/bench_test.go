package mace

import (
	"testing"

	"cloudprofiler/internal/capacity"
)

// BenchmarkTuple is make bench-analyze's shape: "a out", then "b in",
// "b work", "b out" (b marks its in and out), one window a second.
func BenchmarkTuple(b *testing.B) {
	chans := []Channel{{Inst: 0, Role: capacity.RoleOut}, {Inst: 1, Role: capacity.RoleIn}, {Inst: -1}, {Inst: 1, Role: capacity.RoleOut}}
	insts := []Instance{{Operator: "a", Label: "a/1/", Machine: "a"}, {Operator: "b", Label: "b/2/", Machine: "b", HasIn: true}}
	acc, err := NewAcc(&Config{Hz: 1e9, T0: 0, T1: 10e9, Width: 1e9, Chans: chans, Insts: insts, Rates: []float64{1}})
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]capacity.Event, 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := float64(i%1000000) * 1e4
		evs[0] = capacity.Event{Ch: 0, Est: t}
		evs[1] = capacity.Event{Ch: 1, Est: t + 5e3}
		evs[2] = capacity.Event{Ch: 2, Est: t + 6e3}
		evs[3] = capacity.Event{Ch: 3, Est: t + 7e3}
		acc.Tuple(int64(i), evs, true)
	}
}
