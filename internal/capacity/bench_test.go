package capacity

import "testing"

// One tuple of four records (the bench-analyze shape: a source's out, then
// in, an unmarked channel and out of one operator), windows of 1 s.
func BenchmarkTuple(b *testing.B) {
	p, err := NewPlan([]Channel{
		{Node: "a", PID: 1, Name: "a out", Tuples: true},
		{Node: "b", PID: 2, Name: "b in", Tuples: true},
		{Node: "b", PID: 2, Name: "b work", Tuples: true},
		{Node: "b", PID: 2, Name: "b out", Tuples: true},
	})
	if err != nil {
		b.Fatal(err)
	}
	win, err := NewWindows(0, 100e9, 1e9)
	if err != nil {
		b.Fatal(err)
	}
	acc := NewAcc(p, win)
	evs := make([]Event, 4)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		t := float64(i%(1<<20)) * 9e4
		evs[0], evs[1], evs[2], evs[3] = Event{0, t}, Event{1, t + 5e3}, Event{2, t + 5050}, Event{3, t + 5100}
		acc.Tuple(evs)
	}
}
