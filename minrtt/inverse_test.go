package minrtt

import (
	"math"
	"math/rand"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/racetest"
)

// rangeCheck compares r's answers for reading c with the translation's.
func rangeCheck(t *testing.T, m *Model, i int, r *ReadingRange, c uint64, what string) {
	t.Helper()
	v := m.PointRelIdx(i, c).Est
	if got, want := r.Contains(c), v >= r.from && v < r.to; got != want {
		t.Fatalf("%s: node %s reading %d (rank %d, estimate %v) in [%v, %v): Contains says %v, the translation %v",
			what, m.names[i], c, c-r.base, v, r.from, r.to, got, want)
	}
	if got, want := r.Before(c), v < r.from; got != want {
		t.Fatalf("%s: node %s reading %d (estimate %v) before %v: Before says %v, the translation %v",
			what, m.names[i], c, v, r.from, got, want)
	}
}

// The range test on raw readings says what translating them says, for
// every model of transModels (paths through other nodes, a node without a
// paper path, unreachable nodes, the single-node model; each method), on
// ranges whose ends are readings' own estimates (the ends' inclusion
// tested exactly), a hair either side of them, and open: every reading
// within a few thousand ranks of each end and of each band's edges, and
// readings from everywhere (far outside the rounds, the 2^63 wrap, the
// counter's ends). A node the translation reaches is shown monotone and
// its bands are narrow: the integer test decides almost every reading.
func TestReadingRangeIsTheTranslation(t *testing.T) {
	racetest.Arithmetic(t)
	rng := rand.New(rand.NewSource(48))
	for _, tc := range transModels(t) {
		m := tc.m
		for i := range m.names {
			reach := !math.IsNaN(m.PointRelIdx(i, m.origin[i]).Est)
			if reach {
				require.True(t, m.monotone(i), "%s: node %s", tc.name, m.names[i])
			}
			for k := 0; k < 6; k++ {
				a, b := transReading(rng, m, i), transReading(rng, m, i)
				if k < 4 { // within the rounds
					top := 2*m.mid[i] + 1
					a, b = m.origin[i]+uint64(rng.Float64()*top), m.origin[i]+uint64(rng.Float64()*top)
				}
				from, to := m.PointRelIdx(i, a).Est, m.PointRelIdx(i, b).Est
				if from > to {
					from, to = to, from
				}
				switch k {
				case 1:
					from = math.Nextafter(from, math.Inf(1))
					to = math.Nextafter(to, math.Inf(-1))
				case 2:
					from = math.Inf(-1)
				case 3:
					to = math.Inf(1)
				}
				if !(from < to) {
					continue
				}
				r := m.RangeIdx(i, from, to)
				if reach {
					require.Less(t, r.Bands(), uint64(1)<<36, "%s: node %s [%v, %v): the integer test decides", tc.name, m.names[i], from, to)
				} else {
					require.Equal(t, uint64(math.MaxUint64), r.Bands(), "%s: node %s does not translate: every reading translated", tc.name, m.names[i])
				}
				near := func(rank uint64) {
					for d := uint64(0); d < 2000; d++ {
						rangeCheck(t, m, i, r, rank+d+r.base, tc.name)
						rangeCheck(t, m, i, r, rank-d+r.base, tc.name)
					}
				}
				for _, e := range []uint64{a - r.base, b - r.base, r.fromLo, r.fromLo + r.fromW, r.inLo, r.inLo + r.inW, r.outLo, r.outLo + r.outW,
					m.firstAtLeast(i, r.base, from), m.firstAtLeast(i, r.base, to)} {
					near(e)
				}
				for j := 0; j < 3000; j++ {
					rangeCheck(t, m, i, r, transReading(rng, m, i), tc.name)
				}
			}
		}
	}
}

// The ends' inclusion on the reference node, whose estimate is its
// reading exactly: [from, to) of two readings' estimates keeps from's
// reading and not to's, and the wrap of c - origin past 2^63 is where the
// readings' order turns (the two pieces of uint64 readings).
func TestReadingRangeEnds(t *testing.T) {
	m, err := NewModel(handRounds(), Options{Ref: "A"})
	require.NoError(t, err)
	a := m.index["A"]
	o := m.origin[a]
	r := m.RangeIdx(a, 500, 1500)
	for _, c := range []struct {
		c  uint64
		in bool
	}{{o + 499, false}, {o + 500, true}, {o + 1499, true}, {o + 1500, false}, {o - 1, false},
		{o + 1<<63 - 1, false}, {o + 1<<63, false}} {
		require.Equal(t, c.in, r.Contains(c.c), "reading origin%+d", int64(c.c-o))
		require.Equal(t, int64(c.c-o) < 500, r.Before(c.c), "reading origin%+d", int64(c.c-o))
	}
	// Past the wrap the readings' estimates are the most negative: an
	// open start keeps them, an open end the ones just before the wrap.
	r = m.RangeIdx(a, math.Inf(-1), 0)
	require.True(t, r.Contains(o+1<<63))
	require.True(t, r.Contains(o-1))
	require.False(t, r.Contains(o+1<<63-1))
	r = m.RangeIdx(a, 0, math.Inf(1))
	require.True(t, r.Contains(o+1<<63-1))
	require.False(t, r.Contains(o+1<<63))
}

// A round whose only probe from A to B took far longer than the rounds
// were apart puts its anchor far off: the paper's interpolation falls
// between it and the next one, so the translation is not monotone there
// (shown), monotone says so, and the range translates every reading of
// B: still exactly the translation's answer.
func TestReadingRangeNotMonotone(t *testing.T) {
	dir := func(o, r string, p ...Probe) Direction {
		return Direction{Origin: o, Responder: r, Sent: len(p), Probes: p}
	}
	nodes := []Node{{Name: "A", TSCHz: 3e9}, {Name: "B", TSCHz: 3e9}}
	round := func(n int, ab, ba Probe) *Round {
		return &Round{Format: RoundFormat, Version: RoundVersion, Round: n, Nodes: nodes,
			Dirs: []Direction{dir("A", "B", ab), dir("B", "A", ba)}}
	}
	// True clocks: A = B. Round 2's probe from A took a million cycles:
	// its anchor (B 2001, A 501000) lies half a million cycles above the
	// truth (still a consistent probe: B read 2001 while A read 2000 to
	// 1000002).
	rs := []*Round{
		round(1, Probe{1000, 1001, 1002}, Probe{1003, 1004, 1005}),
		round(2, Probe{2000, 2001, 1000002}, Probe{2010, 2011, 2012}),
		round(3, Probe{10000, 10001, 10002}, Probe{10003, 10004, 10005}),
	}
	for _, meth := range []Method{MethodPaper, MethodBest, MethodAllProbes} {
		m, err := NewModel(rs, Options{Ref: "A", Method: meth})
		require.NoError(t, err)
		b := m.index["B"]
		var es []float64
		for c := uint64(0); c < 12000; c += 100 {
			es = append(es, m.PointRelIdx(b, c).Est)
		}
		falls := !sort.Float64sAreSorted(es)
		require.Equal(t, meth == MethodPaper, falls, "%s: the estimate falls somewhere", meth)
		if falls {
			require.False(t, m.monotone(b), "%s", meth)
		}
		from, to := m.PointRelIdx(b, 5000).Est, m.PointRelIdx(b, 9000).Est
		if from > to {
			from, to = to, from
		}
		r := m.RangeIdx(b, from, to)
		if !m.monotone(b) {
			require.Equal(t, uint64(math.MaxUint64), r.Bands(), "%s: every reading translated", meth)
		}
		for c := uint64(0); c < 12000; c++ {
			rangeCheck(t, m, b, r, c, meth.String())
		}
	}
}

// float64's rounding makes the estimate step back by an ulp here and
// there, far from the rounds (B's readings 1.3e16 cycles on, where an ulp
// is 4 cycles): a bound placed on such a step has readings on both sides
// of it in both orders. The band around each bound translates them.
func TestReadingRangeRounding(t *testing.T) {
	rs := handRounds()
	rs[0].Nodes = append(rs[0].Nodes, Node{Name: "D"})
	m, err := NewModel(rs, Options{Ref: "A", Method: MethodAllProbes, SkipUnreachable: true})
	require.NoError(t, err)
	b := m.index["B"]
	c := m.origin[b] + 13118049235864000
	for ; m.PointRelIdx(b, c+1).Est >= m.PointRelIdx(b, c).Est; c++ {
		require.Less(t, c, m.origin[b]+13118049235866000, "no step back found")
	}
	for _, from := range []float64{m.PointRelIdx(b, c).Est, m.PointRelIdx(b, c+1).Est} {
		r := m.RangeIdx(b, from, math.Inf(1))
		require.True(t, m.monotone(b))
		require.Less(t, r.Bands(), uint64(1)<<30)
		for d := uint64(0); d < 5000; d++ {
			rangeCheck(t, m, b, r, c+d, "step back")
			rangeCheck(t, m, b, r, c-d, "step back")
		}
		r = m.RangeIdx(b, math.Inf(-1), from)
		for d := uint64(0); d < 5000; d++ {
			rangeCheck(t, m, b, r, c+d, "step back")
			rangeCheck(t, m, b, r, c-d, "step back")
		}
	}
}
