package minrtt

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Hand-worked numbers for every formula. The quantization slack is part of
// each anchor's error: an anchor's d is RTT/2 + Q*(1+2r) with Q = quantQ = 2
// (link.go), and results carry a float slack below 1e-5 cycles here.

const handTol = 1e-5

// Eq. 4 and its strict error on a link built by hand: anchors (x, y, d) =
// (0, 0, 10) and (1000, 2000, 20); r = 2000/1000 = 2 (Eq. 2), dr =
// (10+20)/1000 = 0.03.
func TestHandPaperPoint(t *testing.T) {
	l := &link{anch: []anchor{{0, 0, 10}, {1000, 2000, 20}}, pr: 2, pdr: 0.03}

	// Inside the bracket, x=500: t = 0.5, y = 0 + 0.5*2000 = 1000,
	// err = 0.5*10 + 0.5*20 = 15 (the paper's e: at most max(10, 20)).
	y, e := l.paperPoint(500, 0)
	require.InDelta(t, 1000, y, 1e-9)
	require.InDelta(t, 15, e, handTol)

	// At an anchor the error is that anchor's d.
	_, e = l.paperPoint(1000, 0)
	require.InDelta(t, 20, e, handTol)

	// Extrapolating, x=1500: t = 1.5, y = 3000,
	// err = |1-1.5|*10 + 1.5*20 = 5 + 30 = 35: grows beyond e outside.
	y, e = l.paperPoint(1500, 0)
	require.InDelta(t, 3000, y, 1e-9)
	require.InDelta(t, 35, e, handTol)
	// And before the first anchor, x=-500: t=-0.5, y=-1000,
	// err = 1.5*10 + 0.5*20 = 25.
	y, e = l.paperPoint(-500, 0)
	require.InDelta(t, -1000, y, 1e-9)
	require.InDelta(t, 25, e, handTol)

	// An incoming error of 4 adds (r+dr)*4 = 2.03*4 = 8.12: 15+8.12 = 23.12.
	_, e = l.paperPoint(500, 4)
	require.InDelta(t, 23.12, e, handTol)

	// Three anchors: x=1500 now lies between the 2nd and 3rd ones,
	// (1000, 2000, 20) and (2000, 4004, 30): t=0.5, y = 3002, err = 25.
	l.anch = append(l.anch, anchor{2000, 4004, 30})
	y, e = l.paperPoint(1500, 0)
	require.InDelta(t, 3002, y, 1e-9)
	require.InDelta(t, 25, e, handTol)
}

// Eq. 2 from probes: buildPaper keeps each round's min-RTT probe.
func TestHandPaperAnchors(t *testing.T) {
	// Round 0: probes (send, resp, recv) = (-80, 0, 80) and (-50, 0, 50):
	// the second (RTT 100) wins: anchor (0, 0, 50+q).
	// Round 1: (19950, 10000, 20050), RTT 100: anchor (10000, 20000, 50+q).
	// r = 20000/10000 = 2; q = Q*(1+2r) = 2*5 = 10; d = 60 each;
	// dr = (60+60)/10000 = 0.012.
	l := &link{}
	l.buildPaper([]sample{
		{round: 0, send: -80, resp: 0, rv: 80},
		{round: 0, send: -50, resp: 0, rv: 50},
		{round: 1, send: 19950, resp: 10000, rv: 20050},
	}, "A<-B")
	require.True(t, l.paperOK)
	require.InDelta(t, 2, l.pr, 1e-12)
	require.InDelta(t, 0.012, l.pdr, 1e-12)
	require.Equal(t, []anchor{{0, 0, 60}, {10000, 20000, 60}}, l.anch)

	// One round only: no ratio.
	l = &link{}
	l.buildPaper([]sample{{round: 0, send: -50, resp: 0, rv: 50}}, "A<-B")
	require.False(t, l.paperOK)
	require.Contains(t, l.paperWhy, "2 rounds")
}

// The polygon alone: the box 0<=a<=10, 0<=u<=4 clipped out of a big box;
// a + u*k ranges over [0, 10+4k] for k >= 0.
func TestHandPolygon(t *testing.T) {
	hs := []halfPlane{{1, 0, 10}, {-1, 0, 0}, {0, 1, 4}, {0, -1, 0}}
	p := intersect(hs, 1e6)
	require.Len(t, p.a, 4)
	require.False(t, p.touchesBox())
	lo, hi := p.rangeAt(0.5)
	require.Equal(t, 0.0, lo)
	require.Equal(t, 12.0, hi)
	// Cut the corner a+u <= 12: at k=1 the max is 12, not 14.
	p = intersect(append(hs, halfPlane{1, 1, 12}), 1e6)
	require.Len(t, p.a, 5)
	_, hi = p.rangeAt(1)
	require.InDelta(t, 12, hi, 1e-12)
	// Infeasible: a >= 11 as well.
	require.Empty(t, intersect(append(hs, halfPlane{-1, 0, -11}), 1e6).a)
	// Unbounded in u: only a is constrained; the box decides.
	require.True(t, intersect(hs[:2], 1e6).touchesBox())
}

// The all-probes link by hand. Two probes A sent to B (A's counter y =
// 2*B's x exactly): (send, resp, recv) = (-50, 0, 50) and (19950, 10000,
// 20050). With Q=2 they say: y >= s-Q at x = p+Q and y <= v+Q at x = p-Q:
// lower points (2, -52), (10002, 19948); upper points (-2, 52), (9998, 20052).
// With nothing else, the lowest line at x=5000 goes through the lower
// points: -52 + 2*(5000-2) = 9944; the highest through the upper ones:
// 52 + 2*(5000+2) = 10056. Est 10000, err 56 (the paper's: RTT/2 + Q(1+2r)
// = 60). Ratio: steepest line through both windows, from the left lower
// point to the right upper one: (20052+52)/(9998-2) = 20104/9996; the
// flattest: (19948-52)/(10002+2) = 19896/10004.
func TestHandAllProbesLink(t *testing.T) {
	fwd := []sample{{round: 0, send: -50, resp: 0, rv: 50}, {round: 1, send: 19950, resp: 10000, rv: 20050}}
	l, err := buildLink(0, 1, []string{"A", "B"}, 2, fwd, nil)
	require.NoError(t, err)
	require.True(t, l.polyOK, l.polyWhy)
	lo, hi := l.polyPoint(5000, 5000)
	require.InDelta(t, 9944, lo, handTol)
	require.InDelta(t, 10056, hi, handTol)
	require.InDelta(t, 20104.0/9996, l.rhi, 1e-12)
	require.InDelta(t, 19896.0/10004, l.rlo, 1e-12)
	_, pe := l.paperPoint(5000, 0)
	require.InDelta(t, 60, pe, handTol)

	// A probe B sent to A at the middle, (send, resp, recv) = (4990, 9990,
	// 5000) (truth: A read 9990 when B was at 4995), says y <= 9990+2 at
	// x = 4988 and y >= 9990-2 at x = 5002. The highest line at x=5000 is
	// now the one through the new upper point (4988, 9992) and the right
	// upper point (9998, 20052): slope 10060/5010, so 9992 + 12*10060/5010
	// = 10016.0958...; the lowest goes through the left lower point
	// (2, -52) and the new lower point (5002, 9988): slope 10040/5000 =
	// 2.008, so 9988 - 2*2.008 = 9983.984. From 112 cycles wide to 32.
	l2, err := buildLink(0, 1, []string{"A", "B"}, 2, fwd, []sample{{round: 0, send: 4990, resp: 9990, rv: 5000}})
	require.NoError(t, err)
	lo2, hi2 := l2.polyPoint(5000, 5000)
	require.InDelta(t, 9983.984, lo2, handTol)
	require.InDelta(t, 9992+12*10060.0/5010, hi2, handTol)

	// Inconsistent: a reverse probe that says A read 0 while B was at 5000.
	_, err = buildLink(0, 1, []string{"A", "B"}, 2, fwd, []sample{{round: 0, send: 4990, resp: 0, rv: 5000}})
	require.ErrorContains(t, err, "no linear relation")
}

// handRounds is a three-node cluster A (reference), B, C with one probe per
// direction per round, two rounds. True clocks: A = t, B = 5000 + t/2,
// C = 100000 + t; so B->A ratio 2, C->A 1, C->B 1/2.
func handRounds() []*Round {
	dir := func(o, r string, p ...Probe) Direction {
		return Direction{Origin: o, Responder: r, Sent: len(p), Probes: p}
	}
	nodes := []Node{{Name: "A", TSCHz: 3e9}, {Name: "B", TSCHz: 1.5e9}, {Name: "C", TSCHz: 3e9}}
	r1 := &Round{Format: RoundFormat, Version: RoundVersion, Round: 1, Nodes: nodes, Dirs: []Direction{
		// A reads 1000..1100; B read 5520 (t=1040).
		dir("A", "B", Probe{1000, 5520, 1100}),
		// A reads 1200..1300; C read 101250 (t=1250).
		dir("A", "C", Probe{1200, 101250, 1300}),
		// B reads 5600..5650; C read 101250 (t=1250, B=5625).
		dir("B", "C", Probe{5600, 101250, 5650}),
		// C reads 101200..101300; B read 5610 (t=1220, C=101220).
		dir("C", "B", Probe{101200, 5610, 101300}),
	}}
	r2 := &Round{Format: RoundFormat, Version: RoundVersion, Round: 2, Nodes: nodes, Dirs: []Direction{
		dir("A", "B", Probe{20990, 15520, 21190}),   // t=21040
		dir("A", "C", Probe{21200, 121250, 21300}),  // t=21250
		dir("B", "C", Probe{15600, 121250, 15650}),  // t=21250, B=15625
		dir("C", "B", Probe{121200, 15610, 121300}), // t=21220
	}}
	return []*Round{r1, r2}
}

// The paper's scenarios on handRounds, worked by hand.
//
// Link A<-B: anchors (x=5520, y=1050, RTT 100), (15520, 21090, RTT 200):
// r = 20040/10000 = 2.004 (Eq. 2); q = 2*(1+2*2.004) = 10.016;
// d = 60.016, 110.016; dr = 170.032/10000 = 0.0170032.
// Link A<-C: (101250, 1250, 100), (121250, 21250, 100): r = 1; q = 6;
// d = 56, 56; dr = 112/20000 = 0.0056.
// Link B<-C: (101250, 5625, 50), (121250, 15625, 50): r = 0.5; q = 4;
// d = 29, 29; dr = 0.0029.
// Link C<-B: (5610, 101250, 100), (15610, 121250, 100): r = 2; q = 10;
// d = 60, 60; dr = 0.012.
func TestHandScenarios(t *testing.T) {
	m, err := NewModel(handRounds(), Options{Ref: "A", Method: MethodPaper})
	require.NoError(t, err)
	require.Equal(t, "A", m.Ref())
	require.Equal(t, 3e9, m.RefHz())
	require.Equal(t, []string{"A", "B", "C"}, m.Nodes())

	// Point (Eq. 4): B=10520: t = 5000/10000 = 0.5; 1050 + 0.5*20040 =
	// 11070; err = 0.5*60.016 + 0.5*110.016 = 85.016.
	v, err := m.Point("B", 10520)
	require.NoError(t, err)
	require.InDelta(t, 11070, v.Est, 1e-9)
	require.InDelta(t, 85.016, v.Err, handTol)
	rel, _ := m.PointRel("B", 10520)
	require.InDelta(t, 11070-1000, rel.Est, 1e-9) // RefOrigin = A's first reading
	require.Equal(t, uint64(1000), m.RefOrigin())
	// Extrapolated: B=25520: t=2: 1050 + 2*20040 = 41130;
	// err = |1-2|*60.016 + 2*110.016 = 280.048.
	v, _ = m.Point("B", 25520)
	require.InDelta(t, 41130, v.Est, 1e-9)
	require.InDelta(t, 280.048, v.Err, handTol)

	// Scenario 0: both on A: exact.
	d, err := m.Duration("A", 3000, "A", 3500)
	require.NoError(t, err)
	require.Equal(t, Duration{Value: Value{500, 0}}, d)

	// Scenario 1: B 6000 -> 8000: d^A = 2.004*2000 = 4008;
	// err = 2000*0.0170032 = 34.0064. Paper's form 2*d/D*e with e =
	// max(d) = 110.016: 44.0064 >= ours (ours sums the two anchors' d
	// instead of doubling the larger); both below e (Table 2: 0 < e1 < e).
	d, _ = m.Duration("B", 6000, "B", 8000)
	require.Equal(t, 1, d.Scenario)
	require.InDelta(t, 4008, d.Est, 1e-9)
	require.InDelta(t, 34.0064, d.Err, handTol)
	require.Equal(t, d.Err, d.Paper)
	require.Equal(t, d.Paper, d.Baseline)
	require.Less(t, d.Err, 2*2000.0/10000*110.016)
	require.Less(t, d.Err, 110.016)

	// Scenario 2: A 3000 -> B 10520: 11070 - 3000 = 8070, err 85.016
	// (Table 2: e2 = e at most).
	d, _ = m.Duration("A", 3000, "B", 10520)
	require.Equal(t, 2, d.Scenario)
	require.InDelta(t, 8070, d.Est, 1e-9)
	require.InDelta(t, 85.016, d.Err, handTol)
	require.Equal(t, d.Paper, d.Baseline)
	// Reversed: B 10520 -> A 12000: 12000 - 11070 = 930.
	d, _ = m.Duration("B", 10520, "A", 12000)
	require.InDelta(t, 930, d.Est, 1e-9)
	require.InDelta(t, 85.016, d.Err, handTol)

	// Scenario 3: B 10520 -> C 111250 (truth: t=11040 -> t=11250: 210).
	// Via B: C=111250 into B over B<-C: t=0.5: 5625 + 0.5*10000 = 10625,
	// e=29; d^B = 10625-10520 = 105; d^A = 2.004*105 = 210.42;
	// err = 105*0.0170032 + 2.004*29 + 0.0170032*29
	//     = 1.785336 + 58.116 + 0.4930928 = 60.3944288.
	// Via C: B=10520 into C over C<-B: t=0.491: 101250 + 0.491*20000 =
	// 111070, e=60; d^C = 180; d^A = 180;
	// err = 180*0.0056 + 1*60 + 0.0056*60 = 61.344. Via B is smaller.
	// Baseline: B=10520 -> 11070 +- 85.016; C=111250 -> t=0.5: 11250 +- 56;
	// 180 +- 141.016 (Table 2: about 2e, and above scenario 3).
	d, _ = m.Duration("B", 10520, "C", 111250)
	require.Equal(t, 3, d.Scenario)
	require.Equal(t, "B", d.Via)
	require.InDelta(t, 210.42, d.Est, 1e-9)
	require.InDelta(t, 60.3944288, d.Err, handTol)
	require.Equal(t, d.Err, d.Paper)
	require.InDelta(t, 141.016, d.Baseline, handTol)
	require.Less(t, d.Paper, d.Baseline)
	require.InDelta(t, 210, d.Est, d.Err)

	// Reversed: C 111250 -> B 10520 = -210. Via B: d^B = 10520-10625 = -105
	// -> -210.42, same error; via C: -180, 61.344.
	d, _ = m.Duration("C", 111250, "B", 10520)
	require.Equal(t, "B", d.Via)
	require.InDelta(t, -210.42, d.Est, 1e-9)
	require.InDelta(t, 60.3944288, d.Err, handTol)

	// Table 2, with e the largest anchor error involved (110.016 on A<-B):
	// scenario 1 below e, scenario 2 at most e, scenario 3 below 2e, the
	// baseline at most 2e and above scenario 3.
	e := 110.016
	d1, _ := m.Duration("B", 6000, "B", 8000)
	d2, _ := m.Duration("A", 3000, "B", 10520)
	d3, _ := m.Duration("B", 10520, "C", 111250)
	require.Less(t, d1.Err, e)
	require.LessOrEqual(t, d2.Err, e)
	require.Less(t, d3.Err, 2*e)
	require.LessOrEqual(t, d3.Baseline, 2*e)
	require.Less(t, d3.Paper, d3.Baseline)

	// The report: A<-B's anchors, ratio and round trips.
	var ab *Link
	links := m.Links()
	for i := range links {
		if links[i].Into == "A" && links[i].From == "B" {
			ab = &links[i]
		}
	}
	require.NotNil(t, ab)
	require.Equal(t, 2, ab.Rounds)
	require.Equal(t, 2, ab.Probes)
	require.Equal(t, 100.0, ab.MinRTT)
	require.True(t, math.IsNaN(ab.MinRTTRev)) // B never probed A
	require.InDeltaSlice(t, []float64{60.016, 110.016}, ab.AnchorErr, 1e-9)
	require.InDelta(t, 2.004, ab.Ratio, 1e-12)
	require.InDelta(t, 0.0170032, ab.RatioErr, 1e-12)
	require.True(t, ab.RatioLo <= 2 && 2 <= ab.RatioHi)
	require.True(t, ab.Used)
	require.Empty(t, ab.Unusable)
	path, err := m.Path("B", MethodPaper)
	require.NoError(t, err)
	require.Equal(t, []string{"B", "A"}, path)

	// The other methods agree with the truth and are no wider.
	for _, meth := range []Method{MethodAllProbes, MethodBest} {
		mm, err := NewModel(handRounds(), Options{Ref: "A", Method: meth})
		require.NoError(t, err)
		d, _ := mm.Duration("B", 10520, "C", 111250)
		require.InDelta(t, 210, d.Est, d.Err, meth.String())
		require.LessOrEqual(t, d.Err, 60.3944288+handTol, meth.String())
		require.InDelta(t, 60.3944288, d.Paper, handTol, "Paper field is the paper's in every method")
		p, _ := mm.Point("B", 10520)
		require.InDelta(t, 11040, p.Est, p.Err, meth.String())
		require.LessOrEqual(t, p.Err, 85.016+handTol, meth.String())
	}
}

func TestHandErrors(t *testing.T) {
	_, err := NewModel(nil, Options{})
	require.ErrorContains(t, err, "no rounds")
	_, err = NewModel(handRounds(), Options{Ref: "Z"})
	require.ErrorContains(t, err, `"Z" is not in the rounds`)
	_, err = NewModel(handRounds(), Options{Method: Method(7)})
	require.ErrorContains(t, err, "unknown method")

	// One round only: no pair spans time.
	_, err = NewModel(handRounds()[:1], Options{Ref: "A"})
	require.ErrorContains(t, err, "B, C: no path to the reference node A")
	require.ErrorContains(t, err, "2 or more rounds")

	// A node that never answered.
	rs := handRounds()
	rs[0].Nodes = append(rs[0].Nodes, Node{Name: "D"})
	_, err = NewModel(rs, Options{Ref: "A"})
	require.ErrorContains(t, err, "D registered but answered no probe")

	// Inconsistent probes: B read 15520 both while A read 20990..21190
	// and while A read 1000..1100.
	rs = handRounds()
	rs[1].Dirs[0].Probes = append(rs[1].Dirs[0].Probes, Probe{1000, 15520, 1100})
	_, err = NewModel(rs, Options{Ref: "A"})
	require.ErrorContains(t, err, "between A and B admit no linear relation")

	// SkipUnreachable: D is left out, the others translate.
	rs = handRounds()
	rs[0].Nodes = append(rs[0].Nodes, Node{Name: "D"})
	m, err := NewModel(rs, Options{Ref: "A", Method: MethodPaper, SkipUnreachable: true})
	require.NoError(t, err)
	require.Contains(t, m.Unreachable()["D"], "answered no probe")
	_, err = m.Point("D", 1)
	require.ErrorContains(t, err, "node D does not translate into A")
	_, err = m.Duration("B", 1, "D", 2)
	require.Error(t, err)
	v := m.PointIdx(m.NodeIndex("D"), 1)
	require.True(t, math.IsNaN(v.Est) && math.IsInf(v.Err, 1))
	d := m.DurationIdx(m.NodeIndex("D"), 1, m.NodeIndex("D"), 2)
	require.Equal(t, -1, d.Scenario)
	require.True(t, math.IsInf(d.Err, 1))
	p, err := m.Point("B", 10520)
	require.NoError(t, err)
	require.InDelta(t, 85.016, p.Err, handTol)
	// D as the reference cannot work.
	_, err = NewModel(rs, Options{Ref: "D", SkipUnreachable: true})
	require.ErrorContains(t, err, "node D registered but answered no probe")
	// C's only probes in one round: with SkipUnreachable, C is left out.
	rs = handRounds()
	rs[1].Dirs = rs[1].Dirs[:1] // round 2: only A->B
	m, err = NewModel(rs, Options{Ref: "A", SkipUnreachable: true})
	require.NoError(t, err)
	require.Contains(t, m.Unreachable()["C"], "no path to the reference node A")
	require.NotContains(t, m.Unreachable(), "B")

	m, err = NewModel(handRounds(), Options{Ref: "A"})
	require.NoError(t, err)
	require.Empty(t, m.Unreachable())
	_, err = m.Point("Z", 1)
	require.Error(t, err)
	_, err = m.Duration("A", 1, "Z", 2)
	require.Error(t, err)
	require.Equal(t, -1, m.NodeIndex("Z"))
	require.False(t, math.IsNaN(m.PointIdx(1, 10520).Est))
}
