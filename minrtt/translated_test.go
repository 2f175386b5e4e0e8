package minrtt

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/racetest"
)

// Translated: Translate once, then Value and DurationTranslated give the
// bits PointRelIdx and DurationIdx give, in every method and scenario. The
// query code as it was before Translated existed is kept below (old*) as an
// oracle: the refactor and the speedups of paperPoint and polyPoint must
// not change one bit of it either.

type transCase struct {
	name string
	m    *Model
}

// transModels builds the models the tests query, each in every method:
// four simulated nodes (d missing a round), two and three nodes, no direct
// link (paths through another node), a node that reaches the reference in
// the all-probes form only (no paper path), hand-worked rounds with an
// unreachable node, and the single-node model.
func transModels(t testing.TB) []transCase {
	t.Helper()
	var out []transCase
	add := func(name string, rs []*Round, ref string) {
		for _, meth := range []Method{MethodBest, MethodPaper, MethodAllProbes} {
			m, err := NewModel(rs, Options{Ref: ref, Method: meth, SkipUnreachable: true})
			require.NoError(t, err, name)
			out = append(out, transCase{fmt.Sprintf("%s/%s", name, meth), m})
		}
	}
	starts := []float64{10 * minute, 12 * minute, 14 * minute, 16 * minute}

	s := newSim(21)
	s.missing[1] = map[int]bool{3: true}
	add("sim4", s.rounds(starts), "a")
	add("sim4-ref-c", s.rounds(starts), "c")

	s = newSim(22)
	s.nodes = s.nodes[:2]
	add("sim2", s.rounds(starts), "b")

	s = newSim(23)
	s.nodes = s.nodes[:3]
	add("sim3", s.rounds(starts[:2]), "a")

	s = newSim(24)
	s.noDirect[pairKey(0, 1)] = true
	s.perDir = 40
	add("sim4-nodirect", s.rounds(starts), "a")

	// Nobody sent to b: no link from b has anchors, so b has no paper path;
	// the all-probes form still bounds it (the probes b sent).
	rs := newSim(25).rounds(starts[:3])
	for _, r := range rs {
		var keep []Direction
		for _, d := range r.Dirs {
			if d.Responder != "b" {
				keep = append(keep, d)
			}
		}
		r.Dirs = keep
	}
	add("sim4-nopaper-b", rs, "a")

	// D registered but never answered: unreachable.
	rs = handRounds()
	rs[0].Nodes = append(rs[0].Nodes, Node{Name: "D"})
	add("hand-D", rs, "A")
	add("hand-ref-B", handRounds(), "B")
	// C's probes in one round only: C unreachable.
	rs = handRounds()
	rs[1].Dirs = rs[1].Dirs[:1]
	add("hand-C-lost", rs, "A")

	for _, meth := range []Method{MethodBest, MethodPaper, MethodAllProbes} {
		m, err := NewSingleNodeModel("solo", 3e9, 1<<40, meth)
		require.NoError(t, err)
		out = append(out, transCase{"single/" + meth.String(), m})
	}
	return out
}

// transReading is a reading of node i: mostly within or near the rounds,
// some far outside them, near the 2^63 wrap of the centred difference, and
// the counter's ends.
func transReading(rng *rand.Rand, m *Model, i int) uint64 {
	o := m.origin[i]
	top := 2*m.mid[i] + 1
	switch k := rng.Intn(20); {
	case k < 12:
		return o + uint64(rng.Float64()*top)
	case k < 15: // before or after the rounds, up to 10 times their span
		return o + uint64(int64((rng.Float64()*21-10)*top))
	case k < 17: // months to centuries away, either side
		return o + uint64(int64(math.Ldexp(rng.Float64()*2-1, 40+rng.Intn(23))))
	case k < 19: // the centred difference's wrap at 2^63
		return o + 1<<63 + uint64(rng.Int63n(1<<20)-1<<19)
	default:
		return []uint64{0, 1, math.MaxUint64, o, o - 1, 1 << 63}[rng.Intn(6)]
	}
}

func sameFloat(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// sameOrNaN is sameFloat, but any two NaNs are the same: for the links'
// non-finite inputs (a missing path's) only. Which NaN an operation on two
// NaNs returns is the first operand's on amd64, and the compiler orders a
// commutative operation's operands as it likes, so NaN bits can change
// with any unrelated edit. The queries' NaNs are math.NaN(), set
// explicitly: they are compared by bits.
func sameOrNaN(a, b float64) bool { return sameFloat(a, b) || math.IsNaN(a) && math.IsNaN(b) }

func sameValue(a, b Value) bool { return sameFloat(a.Est, b.Est) && sameFloat(a.Err, b.Err) }

func sameDuration(a, b Duration) bool {
	return sameValue(a.Value, b.Value) && a.Scenario == b.Scenario && a.Via == b.Via &&
		sameFloat(a.Paper, b.Paper) && sameFloat(a.Baseline, b.Baseline)
}

func sameTranslated(a, b Translated) bool {
	return a.c == b.c && a.node == b.node && sameFloat(a.paper.y, b.paper.y) && sameFloat(a.paper.e, b.paper.e) &&
		sameFloat(a.poly.lo, b.poly.lo) && sameFloat(a.poly.hi, b.poly.hi)
}

func TestTranslatedSize(t *testing.T) {
	require.Equal(t, uintptr(48), unsafe.Sizeof(Translated{}))
}

// TestTranslatedIdentical: for every model, random reading pairs on every
// pair of nodes (unreachable ones too), in both orders and equal:
// DurationTranslated == DurationIdx == the old DurationIdx, and Value ==
// PointRelIdx == the old PointRelIdx, bit for bit.
func TestTranslatedIdentical(t *testing.T) {
	racetest.Arithmetic(t)
	n := 10000
	if testing.Short() {
		n = 2000
	}
	for _, tc := range transModels(t) {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			rng := rand.New(rand.NewSource(int64(len(tc.name))*7919 + 1))
			nn := len(m.names)
			scen := map[int]int{}
			bad := 0
			// TranslateInto writes every field: into a Translated left by
			// another node's reading, it gives what Translate gives.
			reuse := Translated{c: 7, node: nn - 1, paper: estimate{math.NaN(), 3}, poly: span{-5, math.Inf(1)}}
			check := func(si int, a uint64, ei int, b uint64) {
				ts := m.Translate(si, a)
				te := &reuse
				m.TranslateInto(te, ei, b)
				if want := m.Translate(ei, b); !sameTranslated(*te, want) {
					if bad++; bad <= 5 {
						t.Errorf("TranslateInto(%d, %d) over another = %+v, Translate %+v", ei, b, *te, want)
					}
				}
				require.Equal(t, si, ts.Node())
				require.Equal(t, a, ts.Reading())
				got := m.DurationTranslated(&ts, te)
				idx := m.DurationIdx(si, a, ei, b)
				old := oldDurationIdx(m, si, a, ei, b)
				scen[old.Scenario]++
				if !sameDuration(got, old) || !sameDuration(idx, old) {
					if bad++; bad <= 5 {
						t.Errorf("duration %d:%d -> %d:%d: translated %+v, DurationIdx %+v, old %+v", si, a, ei, b, got, idx, old)
					}
				}
				for _, p := range []struct {
					t *Translated
					i int
					c uint64
				}{{&ts, si, a}, {te, ei, b}} {
					v, w, o := p.t.Value(m), m.PointRelIdx(p.i, p.c), oldPointRelIdx(m, p.i, p.c)
					if !sameValue(v, o) || !sameValue(w, o) {
						if bad++; bad <= 5 {
							t.Errorf("point %d:%d: Value %+v, PointRelIdx %+v, old %+v", p.i, p.c, v, w, o)
						}
					}
				}
			}
			for q := 0; q < n; q++ {
				si, ei := rng.Intn(nn), rng.Intn(nn)
				a := transReading(rng, m, si)
				var b uint64
				switch rng.Intn(4) {
				case 0: // a short duration after a (a tuple's latency), in ei's counter
					b = a - m.origin[si] + m.origin[ei] + uint64(rng.ExpFloat64()*3e6)
				case 1:
					b = a - m.origin[si] + m.origin[ei] // the same centred reading
				default:
					b = transReading(rng, m, ei)
				}
				check(si, a, ei, b)
				check(ei, b, si, a) // reversed
				check(si, a, si, a) // equal readings, one node
				check(ei, a, ei, b)
			}
			t.Logf("%d queries, scenarios %v", 4*n, scen)
			reach := 0
			for _, ok := range m.reach {
				if ok {
					reach++
				}
			}
			want := []int{-1, 0, 2, 3}[min(reach, 3)] // the highest scenario there is
			for sc := 0; sc <= want; sc++ {
				require.Positive(t, scen[sc], "scenario %d never ran", sc)
			}
			if reach < nn {
				require.Positive(t, scen[-1], "scenario -1 never ran")
			}
			require.Zero(t, bad)
		})
	}
}

// TestTranslatedUnreachable: the models with a lost node do give scenario
// -1, and Translate on it a NaN estimate with Err +Inf.
func TestTranslatedUnreachable(t *testing.T) {
	for _, tc := range transModels(t) {
		m := tc.m
		for i := range m.names {
			if m.reach[i] {
				continue
			}
			tr := m.Translate(i, m.origin[i]+1000)
			v := tr.Value(m)
			require.True(t, math.IsNaN(v.Est) && math.IsInf(v.Err, 1), tc.name)
			ref := m.Translate(m.ref, m.origin[m.ref])
			require.Equal(t, -1, m.DurationTranslated(&tr, &ref).Scenario, tc.name)
			require.Equal(t, -1, m.DurationTranslated(&ref, &tr).Scenario, tc.name)
			require.Equal(t, -1, m.DurationTranslated(&tr, &tr).Scenario, tc.name)
		}
	}
	var lost int
	for _, tc := range transModels(t) {
		lost += len(tc.m.unreach)
	}
	require.Positive(t, lost)
}

// TestTranslatedIndexPanics: an invalid node index panics, as before.
func TestTranslatedIndexPanics(t *testing.T) {
	m := transModels(t)[0].m
	for _, i := range []int{-1, len(m.names), 1 << 32} {
		require.Panics(t, func() { m.Translate(i, 1) })
		require.Panics(t, func() { m.DurationIdx(i, 1, i, 2) })
		require.Panics(t, func() { m.DurationIdx(0, 1, i, 2) })
		require.Panics(t, func() { m.PointRelIdx(i, 1) })
	}
}

// TestLinkPointsIdentical: paperPoint and polyPoint against the old code on
// every usable link, at points and intervals, inside and far outside the
// anchors, with incoming errors, and at the non-finite inputs a missing
// path gives.
func TestLinkPointsIdentical(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	bad := 0
	for _, tc := range transModels(t) {
		for _, l := range tc.m.links {
			xs := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1)}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, a := range l.anch {
				xs = append(xs, a.x, math.Nextafter(a.x, math.Inf(1)), math.Nextafter(a.x, math.Inf(-1)))
				lo, hi = math.Min(lo, a.x), math.Max(hi, a.x)
			}
			if len(l.anch) == 0 {
				lo, hi = -1e12, 1e12
			}
			w := hi - lo + 1
			for k := 0; k < 2000; k++ {
				xs = append(xs, lo+(rng.Float64()*3-1)*w)
				xs = append(xs, math.Ldexp(rng.Float64()*2-1, rng.Intn(64)))
			}
			for _, x := range xs {
				if l.paperOK {
					e := []float64{0, 0, rng.Float64() * 1e4, math.Inf(1)}[rng.Intn(4)]
					y1, e1 := l.paperPoint(x, e)
					y0, e0 := oldPaperPoint(l, x, e)
					if !sameOrNaN(y1, y0) || !sameOrNaN(e1, e0) {
						if bad++; bad <= 5 {
							t.Errorf("%s: paperPoint(%v, %v) = %v, %v; old %v, %v", tc.name, x, e, y1, e1, y0, e0)
						}
					}
				}
				if l.polyOK {
					x2 := x
					if rng.Intn(2) == 0 {
						x2 = x + rng.ExpFloat64()*1e4
					}
					for _, iv := range [][2]float64{{x, x}, {x, x2}} {
						a1, b1 := l.polyPoint(iv[0], iv[1])
						a0, b0 := oldPolyPoint(l, iv[0], iv[1])
						if !sameOrNaN(a1, a0) || !sameOrNaN(b1, b0) {
							if bad++; bad <= 5 {
								t.Errorf("%s: polyPoint(%v, %v) = %v, %v; old %v, %v", tc.name, iv[0], iv[1], a1, b1, a0, b0)
							}
						}
					}
				}
			}
		}
	}
	require.Zero(t, bad)
}

// TestFMaxMin: fmax and fmin are math.Max and math.Min bit for bit, NaNs
// included (math.Max's NaN is math.NaN(), not an operand).
func TestFMaxMin(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	vals := []float64{math.NaN(), -math.NaN(), math.Float64frombits(0xfff8000000000000), math.Inf(1), math.Inf(-1),
		0, math.Copysign(0, -1), 1, -1, math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1e300}
	for k := 0; k < 200; k++ {
		vals = append(vals, math.Ldexp(rng.Float64()*2-1, rng.Intn(200)-100))
	}
	for _, x := range vals {
		for _, y := range vals {
			require.True(t, sameFloat(math.Max(x, y), fmax(x, y)), "fmax(%v, %v)", x, y)
			require.True(t, sameFloat(math.Min(x, y), fmin(x, y)), "fmin(%v, %v)", x, y)
		}
	}
}

// The query code before Translated, and paperPoint and polyPoint before
// their speedups, verbatim but for the names: the oracle.

func oldPaperTo(m *Model, src, dst int, x, e float64) (float64, float64, bool) {
	if src == dst {
		return x, e, true
	}
	p := m.paperPath[src*len(m.names)+dst]
	if p == nil {
		return math.NaN(), math.Inf(1), false
	}
	for _, li := range p {
		x, e = oldPaperPoint(m.links[li], x, e)
	}
	return x, e, true
}
func oldPolyTo(m *Model, src, dst int, lo, hi float64) (float64, float64, bool) {
	if src == dst {
		return lo, hi, true
	}
	p := m.polyPath[src*len(m.names)+dst]
	if p == nil {
		return math.Inf(-1), math.Inf(1), false
	}
	for _, li := range p {
		lo, hi = oldPolyPoint(m.links[li], lo, hi)
	}
	return lo, hi, true
}
func oldPointRelIdx(m *Model, i int, c uint64) Value {
	x := m.x(i, c)
	y, e, _ := oldPaperTo(m, i, m.ref, x, 0)
	if m.method == MethodPaper {
		return around(y, e).value()
	}
	lo, hi, _ := oldPolyTo(m, i, m.ref, x, x)
	return m.pick(around(y, e), span{lo, hi})
}
func oldDurationIdx(m *Model, si int, start uint64, ei int, end uint64) Duration {
	ref := m.ref
	xs, xe := m.x(si, start), m.x(ei, end)
	var d Duration
	var paper, poly span
	if !m.reach[si] || !m.reach[ei] {
		inf := math.Inf(1)
		return Duration{Value: Value{math.NaN(), inf}, Scenario: -1, Paper: inf, Baseline: inf}
	}
	switch {
	case si == ref && ei == ref:
		v := float64(int64(end - start))
		d.Value = Value{v, 0}
		if math.Abs(v) >= 1<<53 { // past 35 days at 3 GHz the float rounds
			d.Err = ulp(v)
		}
		return d

	case si == ei:
		d.Scenario = 1
		dd := float64(int64(end - start))
		est := m.paperR[si] * dd
		err := math.Abs(dd)*m.paperDR[si] + relEps*math.Abs(est)
		paper = around(est, err)
		d.Paper = paper.value().Err
		d.Baseline = d.Paper
		if m.method != MethodPaper {
			poly = scale(span{dd, dd}, m.polyRlo[si], m.polyRhi[si])
		}

	case ei == ref || si == ref:
		d.Scenario = 2
		if si == ref { // start on the reference, translate the end
			y, e, _ := oldPaperTo(m, ei, ref, xe, 0)
			paper = around(y-xs, e+slack(math.Abs(y)+math.Abs(xs)))
			if m.method != MethodPaper {
				lo, hi, _ := oldPolyTo(m, ei, ref, xe, xe)
				poly = diff(span{lo, hi}, pt(xs))
			}
		} else {
			y, e, _ := oldPaperTo(m, si, ref, xs, 0)
			paper = around(xe-y, e+slack(math.Abs(y)+math.Abs(xe)))
			if m.method != MethodPaper {
				lo, hi, _ := oldPolyTo(m, si, ref, xs, xs)
				poly = diff(pt(xe), span{lo, hi})
			}
		}
		d.Paper = paper.value().Err
		d.Baseline = d.Paper

	default:
		d.Scenario = 3
		paper, poly = oldScenario3(m, si, xs, ei, xe, &d)
	}
	d.Value = m.pick(paper, poly)
	return d
}
func oldScenario3(m *Model, si int, xs float64, ei int, xe float64, d *Duration) (paper, poly span) {
	ref := m.ref
	// Baseline: both ends into the reference, errors added.
	yu, eu, _ := oldPaperTo(m, si, ref, xs, 0)
	yv, ev, _ := oldPaperTo(m, ei, ref, xe, 0)
	base := around(yv-yu, eu+ev+slack(math.Abs(yu)+math.Abs(yv)))
	d.Baseline = base.value().Err

	// Via the start node B: v into B's counter, d^B there, scaled by r_B^A.
	viaB := anything
	if v, e, ok := oldPaperTo(m, ei, si, xe, 0); ok {
		dB := v - xs
		r, dr := m.paperR[si], m.paperDR[si]
		viaB = around(r*dB, math.Abs(dB)*dr+r*e+dr*e+slack(math.Abs(v)+math.Abs(xs)))
	}
	// Via the end node C: u into C's counter.
	viaC := anything
	if u, e, ok := oldPaperTo(m, si, ei, xs, 0); ok {
		dC := xe - u
		r, dr := m.paperR[ei], m.paperDR[ei]
		viaC = around(r*dC, math.Abs(dC)*dr+r*e+dr*e+slack(math.Abs(u)+math.Abs(xe)))
	}
	paper = viaB
	d.Via = m.names[si]
	if viaC.hi-viaC.lo < viaB.hi-viaB.lo {
		paper, d.Via = viaC, m.names[ei]
	}
	if math.IsInf(paper.hi, 1) { // no route between B and C: the baseline is all there is
		paper, d.Via = base, ""
	}
	d.Paper = paper.value().Err
	if m.method == MethodPaper {
		return paper, anything
	}
	if m.method == MethodBest {
		// Every strict interval narrows the best: the other route and the
		// baseline too.
		paper = viaB.and(viaC).and(base)
	}

	// All-probes: each end separately, and through either end node.
	lu, hu, _ := oldPolyTo(m, si, ref, xs, xs)
	lv, hv, _ := oldPolyTo(m, ei, ref, xe, xe)
	poly = diff(span{lv, hv}, span{lu, hu})
	if lo, hi, ok := oldPolyTo(m, ei, si, xe, xe); ok {
		poly = poly.and(scale(diff(span{lo, hi}, pt(xs)), m.polyRlo[si], m.polyRhi[si]))
	}
	if lo, hi, ok := oldPolyTo(m, si, ei, xs, xs); ok {
		poly = poly.and(scale(diff(pt(xe), span{lo, hi}), m.polyRlo[ei], m.polyRhi[ei]))
	}
	return paper, poly
}

func oldPaperPoint(l *link, x, e float64) (float64, float64) {
	a := l.anch
	j, m := 0, len(a)-1
	if x > a[0].x && x < a[m].x {
		// Binary search for the bracketing pair a[j].x <= x <= a[j+1].x.
		lo, hi := 0, m
		for hi-lo > 1 {
			mid := (lo + hi) / 2
			if a[mid].x <= x {
				lo = mid
			} else {
				hi = mid
			}
		}
		j, m = lo, hi
	}
	t := (x - a[j].x) / (a[m].x - a[j].x)
	y := a[j].y + t*(a[m].y-a[j].y)
	err := math.Abs(1-t)*a[j].d + math.Abs(t)*a[m].d + (l.pr+l.pdr)*e
	return y, err + slack(math.Abs(y)+math.Abs(x))
}
func oldPolyPoint(l *link, xlo, xhi float64) (float64, float64) {
	klo, khi := (xlo-l.xc)/l.s, (xhi-l.xc)/l.s
	blo, bhi := l.a0+l.r0*(xlo-l.xc), l.a0+l.r0*(xhi-l.xc)
	mlo, mhi := math.Inf(1), math.Inf(-1)
	vu := l.vu[:len(l.va)]
	for i, a := range l.va {
		// Plain comparisons: math.Min/Max pay for NaN and -0 handling.
		if v := a + vu[i]*klo; v < mlo {
			mlo = v
		}
		if v := a + vu[i]*khi; v > mhi {
			mhi = v
		}
	}
	ylo, yhi := blo+mlo, bhi+mhi
	if l.loose > 0 { // a vertex off by da, du moves a'+u*k by da+du*|k|
		ylo -= l.loose * (1 + math.Abs(klo))
		yhi += l.loose * (1 + math.Abs(khi))
	}
	return ylo - slack(math.Abs(ylo)+math.Abs(xlo)), yhi + slack(math.Abs(yhi)+math.Abs(xhi))
}

// The model with a node that has no paper path does have one.
func TestTranslatedNoPaperModel(t *testing.T) {
	for _, tc := range transModels(t) {
		if tc.name == "sim4-nopaper-b/best" {
			b := tc.m.NodeIndex("b")
			require.False(t, tc.m.paperOK[b])
			require.True(t, tc.m.reach[b])
			return
		}
	}
	t.Fatal("no sim4-nopaper-b model")
}
