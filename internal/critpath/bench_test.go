package critpath

import (
	"sync/atomic"
	"testing"

	"cloudprofiler/internal/capacity"
)

// BenchmarkTuples is make bench-analyze's shape: "a out" on one node, then
// "b in", "b work", "b out" on another, every tuple queued at b.
func BenchmarkTuples(b *testing.B) {
	chans := []Channel{
		{Inst: 0, Role: capacity.RoleOut, Proc: 0, Name: "a out"},
		{Inst: 1, Role: capacity.RoleIn, Proc: 1, Name: "b in"},
		{Inst: -1, Proc: 1, Name: "b work"},
		{Inst: 1, Role: capacity.RoleOut, Proc: 1, Name: "b out"},
	}
	insts := []Instance{{Operator: "a", Rank: 0}, {Operator: "b", HasIn: true, Rank: 3}}
	a, err := New(Config{Chans: chans, Insts: insts, Hz: 1e9, Slice: 1e9, Mem: 8 << 20, Workers: 1, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	c := a.NewCollector()
	evs := make([]Event, 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := float64(i) * 30
		evs[0] = Event{Ch: 0, Est: t, Err: 0}
		evs[1] = Event{Ch: 1, Est: 1e9 + t, Err: 5}
		evs[2] = Event{Ch: 2, Est: 1e9 + t + 10, Err: 0}
		evs[3] = Event{Ch: 3, Est: 1e9 + t + 20, Err: 0}
		if err := c.Tuple(evs, 5); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := a.Finish(0); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTuplesFast is BenchmarkTuples with Config.Fast: b's departures
// indexed beforehand (as decoding does), pass 1 looking each in's previous
// departure up.
func BenchmarkTuplesFast(b *testing.B) {
	chans := []Channel{
		{Inst: 0, Role: capacity.RoleOut, Proc: 0, Name: "a out", Rate: 1},
		{Inst: 1, Role: capacity.RoleIn, Proc: 1, Name: "b in", Rate: 1},
		{Inst: -1, Proc: 1, Name: "b work", Rate: 1},
		{Inst: 1, Role: capacity.RoleOut, Proc: 1, Name: "b out", Rate: 1},
	}
	var budget atomic.Int64
	budget.Store(1 << 40)
	dep := NewDepIndex(&budget)
	for i := 0; i < b.N; i++ {
		dep.Add(uint64(1e9 + float64(i)*30 + 20))
	}
	if !dep.Done() {
		b.Fatal("index given up")
	}
	insts := []Instance{{Operator: "a", Rank: 0}, {Operator: "b", HasIn: true, Rank: 3, Deps: dep}}
	a, err := New(Config{Chans: chans, Insts: insts, Hz: 1e9, Slice: 1e9, Mem: 8 << 20, Workers: 1, Dir: b.TempDir(), Fast: true})
	if err != nil {
		b.Fatal(err)
	}
	c := a.NewCollector()
	evs := make([]Event, 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := float64(i) * 30
		evs[0] = Event{Ch: 0, Est: t, Err: 0, Raw: uint64(t)}
		evs[1] = Event{Ch: 1, Est: 1e9 + t, Err: 5, Raw: uint64(1e9 + t)}
		evs[2] = Event{Ch: 2, Est: 1e9 + t + 10, Err: 0, Raw: uint64(1e9 + t + 10)}
		evs[3] = Event{Ch: 3, Est: 1e9 + t + 20, Err: 0, Raw: uint64(1e9 + t + 20)}
		if err := c.Tuple(evs, 5); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := a.Finish(0); err != nil {
		b.Fatal(err)
	}
}
