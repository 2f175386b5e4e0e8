package mace

import (
	"sync"
	"testing"

	"cloudprofiler/internal/capacity"
)

// BenchmarkTuple is make bench-analyze's shape: "a out", then "b in",
// "b work", "b out" (b marks its in and out), one window a second.
func BenchmarkTuple(b *testing.B) {
	acc := benchAcc(b)
	b.ResetTimer()
	benchTuples(acc, b.N)
}

// benchAcc is an Acc for bench-analyze's shape.
func benchAcc(b *testing.B) *Acc {
	chans := []Channel{{Inst: 0, Role: capacity.RoleOut}, {Inst: 1, Role: capacity.RoleIn}, {Inst: -1}, {Inst: 1, Role: capacity.RoleOut}}
	insts := []Instance{{Operator: "a", Label: "a/1/", Machine: "a"}, {Operator: "b", Label: "b/2/", Machine: "b", HasIn: true}}
	acc, err := NewAcc(&Config{Hz: 1e9, T0: 0, T1: 10e9, Width: 1e9, Chans: chans, Insts: insts, Rates: []float64{1}})
	if err != nil {
		b.Fatal(err)
	}
	return acc
}

// benchTuples feeds acc n tuples of bench-analyze's shape.
func benchTuples(acc *Acc, n int) {
	evs := make([]capacity.Event, 4)
	for i := 0; i < n; i++ {
		t := float64(i%1000000) * 1e4
		evs[0] = capacity.Event{Ch: 0, Est: t}
		evs[1] = capacity.Event{Ch: 1, Est: t + 5e3}
		evs[2] = capacity.Event{Ch: 2, Est: t + 6e3}
		evs[3] = capacity.Event{Ch: 3, Est: t + 7e3}
		acc.Tuple(int64(i), evs, true)
	}
}

// BenchmarkTupleTwoWorkers is BenchmarkTuple on two goroutines at once,
// each with its own Acc made one after the other, as analyze's workers
// make theirs: what one worker writes on every tuple must not share a
// cache line with what the other reads or writes (a sub-window slice of 8
// bytes, in Go's 16-byte tiny blocks, did: 34 ns a tuple here then, 22-30
// since, against 21 on one goroutine).
func BenchmarkTupleTwoWorkers(b *testing.B) {
	accs := [2]*Acc{benchAcc(b), benchAcc(b)}
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, acc := range accs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			benchTuples(acc, b.N)
		}()
	}
	wg.Wait()
}
