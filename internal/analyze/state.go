package analyze

import (
	"encoding/binary"
	"fmt"
	"math"

	"cloudprofiler/internal/capacity"
)

// State is what a join of some tuples keeps, to be merged with the others'
// as analyze merges its workers (Merger): the order votes, the per-pair
// statistics, the counts and capacity's sums. Every field is exported for
// gob: the scale-out path (internal/scaleout) writes it into a partition's
// state file.
type State struct {
	Records, Tuples, Durations,
	SkippedTuples, SkippedRecords uint64
	T0       float64
	Votes    []VoteState
	Pairs    []PairState
	Capacity *capacity.AccState // nil: no capacity analysis
}

// VoteState is the votes of one pair of channels (order.go).
type VoteState struct {
	A, B         uint32
	Sure, Likely [2]uint64
}

// PairState is one pair's PairStats.
type PairState struct {
	Kind            string
	From, To        int
	Dur, Err        StatsState
	Paper, Baseline StatsState
	Scenarios       [4]uint64
	RetErr, OursErr *StatsState
}

// StatsState is a Stats with every field exported.
type StatsState struct {
	N, Limit uint64
	// Min and Max as math.Float64bits: gob leaves out a field equal to
	// zero, and -0.0 == 0, so a minimum of -0 came back as +0.
	Min, Max   uint64
	Exact      floatColumn
	Zero       uint64
	Lo         int32
	Counts     []uint64
	Far        map[int32]uint64
	Past, Used bool // Used: Exact is non-nil (gob drops empty slices)
}

func (s *Stats) state() StatsState {
	s.flush()
	return StatsState{N: s.N, Limit: s.limit, Min: math.Float64bits(s.Min), Max: math.Float64bits(s.Max), Exact: s.exact, Zero: s.zero, Lo: s.lo,
		Counts: s.counts, Far: s.far, Past: s.past, Used: s.exact != nil}
}

func (st *StatsState) stats() *Stats {
	s := &Stats{N: st.N, limit: st.Limit, Min: math.Float64frombits(st.Min), Max: math.Float64frombits(st.Max), zero: st.Zero, lo: st.Lo,
		counts: st.Counts, far: st.Far, past: st.Past}
	if st.Used { // a non-nil list, even empty: exact values kept
		s.exact = st.Exact
		if s.exact == nil {
			s.exact = []float64{}
		}
	}
	return s
}

// floatColumn is a []float64 that gob carries as its raw bytes, 8 a value,
// little endian. Gob's own encoding of a float reverses its bytes into a
// varint, one value at a time: 15 % of a partition's join went to the
// state's exact values that way (100M records in 64 partitions: about
// 390,000 a pair in each).
type floatColumn []float64

func (f floatColumn) GobEncode() ([]byte, error) {
	b := make([]byte, 8*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return b, nil
}

func (f *floatColumn) GobDecode(b []byte) error {
	if len(b)%8 != 0 {
		return fmt.Errorf("a column of %d bytes, not 8 a value", len(b))
	}
	out := make([]float64, len(b)/8)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	*f = out
	return nil
}

// state is w's State, records the records it joined.
func (w *worker) state(records uint64) *State {
	st := &State{Records: records, Tuples: w.tuples, Durations: w.durations, SkippedTuples: w.skippedTuples,
		SkippedRecords: w.skippedRecords, T0: w.t0}
	for k, v := range w.votes {
		st.Votes = append(st.Votes, VoteState{A: k[0], B: k[1], Sure: v.sure, Likely: v.likely})
	}
	if w.cap != nil {
		st.Capacity = w.cap.State()
	}
	for _, p := range w.pairs {
		ps := PairState{Kind: p.Key.Kind, From: p.Key.From, To: p.Key.To, Dur: p.Dur.state(), Err: p.Err.state(),
			Paper: p.Paper.state(), Baseline: p.Baseline.state(), Scenarios: p.Scenarios}
		if p.RetErr != nil {
			r, o := p.RetErr.state(), p.OursErr.state()
			ps.RetErr, ps.OursErr = &r, &o
		}
		st.Pairs = append(st.Pairs, ps)
	}
	return st
}

// setState puts st's counts, votes and pairs into w (a new worker; its
// capacity sums are the caller's).
func (w *worker) setState(st *State) {
	w.tuples, w.durations, w.skippedTuples, w.skippedRecords, w.t0 = st.Tuples, st.Durations, st.SkippedTuples, st.SkippedRecords, st.T0
	for _, v := range st.Votes {
		w.votes[[2]uint32{v.A, v.B}] = &votes{sure: v.Sure, likely: v.Likely}
	}
	for _, p := range st.Pairs {
		key := PairKey{p.Kind, p.From, p.To}
		ps := &PairStats{Key: key, Dur: p.Dur.stats(), Err: p.Err.stats(), Paper: p.Paper.stats(), Baseline: p.Baseline.stats(), Scenarios: p.Scenarios}
		if p.RetErr != nil {
			ps.RetErr, ps.OursErr = p.RetErr.stats(), p.OursErr.stats()
		}
		w.pairs[key] = ps
	}
}
