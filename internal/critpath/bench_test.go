package critpath

import (
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
