package critpath

import (
	"sync/atomic"
	"testing"

	"cloudprofiler/internal/capacity"
)

// BenchmarkTuples is make bench-analyze's shape: "a out" on one node, then
// "b in", "b work", "b out" on another, every tuple queued at b; pass 1
// keeps every visit for pass 2 (no departure index).
func BenchmarkTuples(b *testing.B) { benchTuples(b, false) }

// BenchmarkTuplesFast is BenchmarkTuples with Config.Fast: b's departures
// indexed beforehand (as decoding does), pass 1 looking each in's previous
// departure up.
func BenchmarkTuplesFast(b *testing.B) { benchTuples(b, true) }

func benchTuples(b *testing.B, fast bool) {
	chans := []Channel{
		{Inst: 0, Role: capacity.RoleOut, Proc: 0, Name: "a out", Rate: 1},
		{Inst: 1, Role: capacity.RoleIn, Proc: 1, Name: "b in", Rate: 1},
		{Inst: -1, Proc: 1, Name: "b work", Rate: 1},
		{Inst: 1, Role: capacity.RoleOut, Proc: 1, Name: "b out", Rate: 1},
	}
	insts := []Instance{{Operator: "a", Rank: 0}, {Operator: "b", HasIn: true, Rank: 3}}
	if fast {
		var budget atomic.Int64
		budget.Store(1 << 40)
		dep := NewDepIndex(&budget, "")
		for i := 0; i < b.N; i++ {
			dep.Add(uint64(1e9 + float64(i)*30 + 20))
		}
		if !dep.Done() {
			b.Fatal("index given up")
		}
		insts[1].Deps = dep
	}
	a, err := New(Config{Chans: chans, Insts: insts, Hz: 1e9, Slice: 1e9, Mem: 8 << 20, Workers: 1, Dir: b.TempDir(), Fast: fast})
	if err != nil {
		b.Fatal(err)
	}
	c := a.NewCollector()
	evs := make([]Event, 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := float64(i) * 30
		for k, at := range []float64{t, 1e9 + t, 1e9 + t + 10, 1e9 + t + 20} {
			evs[k] = Event{Ch: uint32(k), Est: at, Raw: uint64(at)}
		}
		evs[1].Err = 5
		if err := c.Tuple(evs, 5); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := a.Finish(0); err != nil {
		b.Fatal(err)
	}
}
