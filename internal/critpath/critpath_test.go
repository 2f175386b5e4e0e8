package critpath

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/capacity"
)

// sim runs tuples through src -> A -> B -> sink with FIFO queues (unbounded)
// and deterministic costs, every gap cycles apart, transfers of tr cycles,
// and feeds them to a fresh analysis. It returns the result and the true
// total queueing at B.
func sim(t *testing.T, n int, gap, costA, costB, tr int64, mem int64) (*Result, int64) {
	chans := []Channel{
		{Inst: -1, Proc: 0, Name: "src"},
		{Inst: 0, Role: capacity.RoleIn, Proc: 1, Name: "A in"},
		{Inst: 0, Role: capacity.RoleOut, Proc: 1, Name: "A out"},
		{Inst: 1, Role: capacity.RoleIn, Proc: 1, Name: "B in"},
		{Inst: 1, Role: capacity.RoleOut, Proc: 1, Name: "B out"},
		{Inst: -1, Proc: 2, Name: "sink"},
	}
	insts := []Instance{{Operator: "A", HasIn: true, Rank: 1}, {Operator: "B", HasIn: true, Rank: 3}}
	a, err := New(Config{Chans: chans, Insts: insts, Hz: 1e9, Slice: 10000, Mem: mem, Workers: 2, Dir: t.TempDir()})
	require.NoError(t, err)
	cols := []*Collector{a.NewCollector(), a.NewCollector()}
	var freeA, freeB, qB int64
	for i := 0; i < n; i++ {
		s := 1000 + int64(i)*gap
		ain := max(s+tr, freeA)
		aout := ain + costA
		freeA = aout
		bin := max(aout+tr, freeB)
		// Queueing counts from the hand-off to the in when B was busy at
		// the hand-off: while the tuple is in flight to a busy instance,
		// it would wait anyway, and B's take of it ends the wait.
		if freeB > aout {
			qB += bin - aout
		}
		bout := bin + costB
		freeB = bout
		sink := bout + tr
		evs := []Event{{0, false, float64(s), 0, 0}, {1, false, float64(ain), 0, 0}, {2, false, float64(aout), 0, 0}, {3, false, float64(bin), 0, 0}, {4, false, float64(bout), 0, 0}, {5, false, float64(sink), 5, 0}}
		require.NoError(t, cols[i%2].Tuple(evs, 5))
	}
	res, err := a.Finish(1000)
	require.NoError(t, err)
	return res, qB
}

func share(rows []PathRow, kind, name string) float64 {
	for _, r := range rows {
		if r.Level == "run" && r.Kind == kind && r.Name == name {
			return r.Share
		}
	}
	return 0
}

func part(rows []BreakdownRow, group, p, where string) *BreakdownRow {
	for i := range rows {
		r := &rows[i]
		if r.Group == group && r.Part == p && r.Where == where {
			return r
		}
	}
	return nil
}

func checkInvariants(t *testing.T, res *Result) {
	sums := map[int64][2]float64{}
	for _, r := range res.Path {
		s := sums[r.Slice]
		s[0] += r.Share
		s[1] += r.Participation
		sums[r.Slice] = s
	}
	for sl, s := range sums {
		require.InDelta(t, 1, s[0], 1e-9, "slice %d share", sl)
		require.InDelta(t, 1, s[1], 1e-9, "slice %d participation", sl)
	}
	require.True(t, res.AddUp)
	for _, g := range []string{"p99", "median", "all"} {
		var sum int64
		var e2e int64
		for _, r := range res.Breakdown {
			if r.Group != g {
				continue
			}
			if r.Part == "end-to-end" {
				e2e = r.TotalCycles
			} else {
				sum += r.TotalCycles
			}
		}
		require.Equal(t, e2e, sum, g)
	}
}

func TestHeavyLoadPathOnTheBottleneck(t *testing.T) {
	for _, mem := range []int64{1 << 30, 4096 * int64(visitSize)} { // in memory, and spilled runs
		res, qB := sim(t, 20000, 20, 10, 30, 3, mem)
		checkInvariants(t, res)
		require.Zero(t, res.Inconsistent, "%+v", res.Path[:min(len(res.Path), 5)])
		require.Greater(t, share(res.Path, "operator", "B"), 0.9)
		q := part(res.Breakdown, "all", "queue", "B")
		require.NotNil(t, q)
		require.Equal(t, qB, q.TotalCycles)
		if mem < 1<<20 {
			require.Positive(t, res.SpilledBytes)
		}
	}
}

func TestLightLoadPathWaitsForInput(t *testing.T) {
	res, qB := sim(t, 2000, 1000, 10, 30, 3, 1<<30)
	checkInvariants(t, res)
	require.Zero(t, qB)
	require.Zero(t, res.Inconsistent)
	require.Greater(t, share(res.Path, "input", ""), 0.8)
	// Every tuple: A 10, B 30, three transfers of 3 (src->A, A->B, B->sink).
	c := part(res.Breakdown, "all", "compute", "B")
	require.InDelta(t, 30e-3, c.MeanUS, 1e-9)
	e := part(res.Breakdown, "all", "end-to-end", "")
	require.InDelta(t, 49e-3, e.MeanUS, 1e-9)
	require.InDelta(t, 5e-3, part(res.Breakdown, "all", "transfer", "B -> sink").BoundUS, 1e-9)
	_ = math.Abs
}

// A bounded queue of q tuples between A and B: A's push waits (out..sent)
// until B took the tuple q places ahead.
func TestBackpressureQueueChargedToTheBusyOperator(t *testing.T) {
	chans, insts := withSent()
	a, err := New(Config{Chans: chans, Insts: insts, Hz: 1e9, Slice: 20000, Mem: 1 << 30, Workers: 1, Dir: t.TempDir()})
	require.NoError(t, err)
	c := a.NewCollector()
	const n, gap, costA, costB, q = 5000, 20, 10, 30, 4
	bin := make([]int64, n)
	var freeA, freeB, blockedTruth int64
	for i := 0; i < n; i++ {
		s := 1000 + int64(i)*gap
		ain := max(s+1, freeA)
		aout := ain + costA
		sent := aout
		if i >= q && bin[i-q]+1 > sent {
			sent = bin[i-q] + 1 // B took the tuple q ahead: room
		}
		blockedTruth += sent - aout
		freeA = sent
		bin[i] = max(sent+1, freeB)
		bout := bin[i] + costB
		freeB = bout
		evs := []Event{{0, false, float64(s), 0, 0}, {1, false, float64(ain), 0, 0}, {2, false, float64(aout), 0, 0}, {3, false, float64(sent), 0, 0}, {4, false, float64(bin[i]), 0, 0}, {5, false, float64(bout), 0, 0}}
		require.NoError(t, c.Tuple(evs, 0))
	}
	res, err := a.Finish(1000)
	require.NoError(t, err)
	checkInvariants(t, res)
	require.Zero(t, res.Inconsistent)
	require.Greater(t, share(res.Path, "operator", "B"), 0.9)
	qa, qb := part(res.Breakdown, "all", "queue", "A"), part(res.Breakdown, "all", "queue", "B")
	require.NotNil(t, qb)
	// Waiting at A's input while A waited for B is B's. A is busy 10 of
	// every 30 cycles (B's pace), blocked 20: B gets about twice A's share.
	require.InDelta(t, 2, float64(qb.TotalCycles)/float64(qa.TotalCycles), 0.2, "queue A %d, B %d", qa.TotalCycles, qb.TotalCycles)
	require.Positive(t, blockedTruth)
}

// The sender's sent logged after the receiver's in (the wake-up ran the
// receiver first): the path still covers every slice, and nothing is
// reported inconsistent.
func TestHandOffLoggedAfterTheIn(t *testing.T) {
	chans, insts := withSent()
	a, err := New(Config{Chans: chans, Insts: insts, Hz: 1e9, Slice: 3000, Mem: 1 << 30, Workers: 2, Dir: t.TempDir()})
	require.NoError(t, err)
	c := a.NewCollector()
	for i := 0; i < 2000; i++ {
		s := 1000 + int64(i)*100
		ain, aout := s+2, s+12
		bin := aout + 3
		sent := bin + 7 // after B's in
		bout := bin + 20
		evs := []Event{{0, false, float64(s), 0, 0}, {1, false, float64(ain), 0, 0}, {2, false, float64(aout), 0, 0}, {3, false, float64(sent), 0, 0}, {4, false, float64(bin), 0, 0}, {5, false, float64(bout), 0, 0}}
		require.NoError(t, c.Tuple(evs, 0))
	}
	res, err := a.Finish(1000)
	require.NoError(t, err)
	checkInvariants(t, res)
	require.Zero(t, res.Inconsistent, "%+v", res.Path[:min(len(res.Path), 6)])
	require.Greater(t, share(res.Path, "input", ""), 0.5)
}

// withSent is src -> A (in, out, sent) -> B (in, out), one process.
func withSent() ([]Channel, []Instance) {
	return []Channel{
			{Inst: -1, Proc: 0, Name: "src"},
			{Inst: 0, Role: capacity.RoleIn, Proc: 1, Name: "A in"},
			{Inst: 0, Role: capacity.RoleOut, Proc: 1, Name: "A out"},
			{Inst: 0, Role: capacity.RoleSent, Proc: 1, Name: "A sent"},
			{Inst: 1, Role: capacity.RoleIn, Proc: 1, Name: "B in"},
			{Inst: 1, Role: capacity.RoleOut, Proc: 1, Name: "B out"},
		},
		[]Instance{{Operator: "A", HasIn: true, Rank: 1}, {Operator: "B", HasIn: true, Rank: 3}}
}

// Estimates across nodes can make a journey's end-to-end latency negative:
// its parts still add up, in its own (negative) bucket.
func TestNegativeJourneysAddUp(t *testing.T) {
	res, _ := sim(t, 3000, 100, 10, 30, -60, 1<<30) // transfers of -60: records out of order
	checkInvariants(t, res)
	e := part(res.Breakdown, "all", "end-to-end", "")
	require.Negative(t, e.TotalCycles)
}

// A saturated operator B between an unmarked source and a sink that marks
// its ins: at every slice's end the sink is waiting for B's next tuple.
// A wait never starts a path (Sager's Def. 3.12): every slice's path is
// B's work, nothing of it "input"; and B, which holds the only path that
// does not end in a wait, has a critical participation of 1 (SnailTrail's:
// its share of every critical path of the slice). Before, the sink's wait
// started each slice's path as "input" and halved B's participation.
func TestLastInstanceWaitsAtSliceEnd(t *testing.T) {
	{
		chans := []Channel{
			{Inst: -1, Proc: 0, Name: "src"},
			{Inst: 0, Role: capacity.RoleIn, Proc: 1, Name: "B in"},
			{Inst: 0, Role: capacity.RoleOut, Proc: 1, Name: "B out"},
			{Inst: 1, Role: capacity.RoleIn, Proc: 2, Name: "sink in"},
		}
		insts := []Instance{{Operator: "B", HasIn: true, HasOut: true, Rank: 2}, {Operator: "sink", HasIn: true, Rank: 3}}
		a, err := New(Config{Chans: chans, Insts: insts, Hz: 1e9, Slice: 10000, Mem: 1 << 30, Workers: 1, Dir: t.TempDir()})
		require.NoError(t, err)
		c := a.NewCollector()
		var freeB int64
		for i := 0; i < 5000; i++ {
			s := 1000 + int64(i)*10 // every 10 cycles; B takes 30: always backlogged
			bin := max(s+2, freeB)
			bout := bin + 30
			freeB = bout
			evs := []Event{{0, false, float64(s), 0, 0}, {1, false, float64(bin), 0, 0}, {2, false, float64(bout), 0, 0}, {3, false, float64(bout + 5), 0, 0}}
			require.NoError(t, c.Tuple(evs, 0))
		}
		res, err := a.Finish(1000)
		require.NoError(t, err)
		checkInvariants(t, res)
		require.Zero(t, res.Inconsistent)
		last := int64(res.Slices - 1)
		for _, r := range res.Path {
			if r.Slice == 0 || r.Slice == last || r.Level == "run" {
				continue // the first slice holds B's first wait for input, the last its end
			}
			switch {
			case r.Kind == "operator" && r.Name == "B":
				require.InDelta(t, 1, r.Share, 1e-9, "slice %d", r.Slice)
				require.InDelta(t, 1, r.Participation, 1e-9, "slice %d", r.Slice)
			default:
				require.Zero(t, r.Share, "slice %d: %s %s on the path", r.Slice, r.Kind, r.Name)
			}
		}
	}
}
