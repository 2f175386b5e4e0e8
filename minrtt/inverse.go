package minrtt

import "math"

// A range of the reference clock in one node's counter. A cut (export
// --format logs) keeps the records whose estimate lies in [from, to);
// translating every record to test it costs more than decoding it, while
// the range's bounds translated back into the node's counter once make the
// test an integer comparison of the raw reading.
//
// Why that is exact. PointRelIdx(i, c).Est is a function of the centred
// reading x = float64(int64(c - origin_i)), so it is ordered by c's rank
// c - origin_i + 2^63 (mod 2^64), not by c: over uint64 readings it is
// monotone on two pieces, split where c - origin_i wraps past 2^63 (a
// reading 97 years from the rounds at 3 GHz). By rank it is one piece:
//
//   - On the reference node Est is x itself, exactly.
//   - Elsewhere, in real arithmetic on the same constants, every form is
//     continuous and piecewise linear in x: the paper's interpolation
//     between anchors, its error growing along and beyond them, the
//     polygon's lowest and highest line, the intersection of the two. It
//     is non-decreasing where every piece rises: monotone checks that for
//     the node's paths, from the links' constants, and in practice it
//     always holds (slopes near the counters' rate ratio, errors growing
//     by 1e-4 of it); a node it cannot vouch for (a round whose only
//     probe took longer than the rounds were apart can make the paper's
//     interpolation fall between two anchors) is tested by translating
//     each reading, as before.
//   - float64 rounds each operation, which can make two neighbouring
//     readings' estimates step back by a few ulps. Bisection puts each
//     bound where the computed estimate crosses it; readings within a
//     margin of 2^-30 of the magnitudes involved (millions of ulps, at
//     least a few hundred times any rounding) are translated and tested
//     as before, and outside that band the rounding cannot cross the bound.
//
// The test is then exactly PointRelIdx's, ends included: nothing is
// estimated that the translation would not give.

// ReadingRange is, for one node, the readings whose estimate (PointRelIdx)
// lies in [from, to): Contains says whether a reading does, mostly from
// two integer comparisons. Make it with Model.RangeIdx; it is immutable and
// safe for concurrent use.
type ReadingRange struct {
	m        *Model
	node     int
	from, to float64
	base     uint64 // c - base is reading c's rank (see above)
	// By rank: below fromLo a reading's estimate is below from, above
	// fromLo+fromW at or above it; in between (from's band) it is
	// translated. to has a band likewise. What lies between the two bands
	// is in the range: [inLo, inLo+inW); what lies below from's band or
	// above to's is out of it: outside [outLo, outLo+outW]. (Starts and
	// widths, so that one unsigned comparison tests each.)
	fromLo, fromW uint64
	inLo, inW     uint64
	outLo, outW   uint64
}

// RangeIdx is the range [from, to) of reference estimates (relative to
// RefOrigin, as PointRelIdx gives them; -Inf and +Inf: open) in node i's
// readings. It translates a few hundred readings to place the bounds.
func (m *Model) RangeIdx(i int, from, to float64) *ReadingRange {
	r := &ReadingRange{m: m, node: i, from: from, to: to, base: m.origin[i] - 1<<63}
	// Until the bounds are placed: every reading translated.
	r.fromLo, r.fromW, r.outLo, r.outW = 0, math.MaxUint64, 0, math.MaxUint64
	if math.IsNaN(m.PointRelIdx(i, m.origin[i]).Est) || !m.monotone(i) {
		// A node that does not translate (NaN everywhere), or whose
		// translation is not shown monotone: so it stays.
		return r
	}
	fromLo, fromW, ok := m.band(i, r.base, from)
	toLo, toW, ok2 := m.band(i, r.base, to)
	fromHi, toHi := fromLo+fromW, toLo+toW
	if !ok || !ok2 || toHi < fromLo { // the last: a range narrower than its bands
		return r
	}
	r.fromLo, r.fromW = fromLo, fromW
	r.outLo, r.outW = fromLo, toHi-fromLo
	if fromHi < math.MaxUint64 && toLo > fromHi+1 {
		r.inLo, r.inW = fromHi+1, toLo-(fromHi+1)
	}
	return r
}

// Contains says whether reading c's estimate is in [from, to): what
// m.PointRelIdx(i, c).Est >= from && m.PointRelIdx(i, c).Est < to says.
func (r *ReadingRange) Contains(c uint64) bool {
	if in, sure := r.Quick(c); sure {
		return in
	}
	return r.containsTranslated(c)
}

// Quick is Contains from the raw reading alone, for a loop over many
// (Quick inlines, Contains does not): sure is false for a reading in a
// band around an end, which Contains translates.
func (r *ReadingRange) Quick(c uint64) (in, sure bool) {
	k := c - r.base
	if k-r.inLo < r.inW {
		return true, true
	}
	return false, k-r.outLo > r.outW
}

// Before says whether reading c's estimate is below from: what
// m.PointRelIdx(i, c).Est < from says.
func (r *ReadingRange) Before(c uint64) bool {
	k := c - r.base
	if k-r.fromLo <= r.fromW {
		return r.m.PointRelIdx(r.node, c).Est < r.from
	}
	return k < r.fromLo
}

// Bands is how many of the node's readings Contains translates (those in
// [outLo, outLo+outW] but not [inLo, inLo+inW); 2^64-1 when it translates
// every reading): for tests.
func (r *ReadingRange) Bands() uint64 {
	if r.outW == math.MaxUint64 && r.inW == 0 {
		return r.outW
	}
	return r.outW - r.inW + 1
}

// containsTranslated is Contains for a reading in a band. Not inlined:
// inlined into Contains it would make Contains too large to inline.
//
//go:noinline
func (r *ReadingRange) containsTranslated(c uint64) bool {
	v := r.m.PointRelIdx(r.node, c).Est
	return v >= r.from && v < r.to
}

// firstAtLeast is, by bisection, the smallest rank whose estimate is at
// least t; the largest rank when none is. Whatever the estimates, the rank
// before the one returned has an estimate that is not at least t, and the
// one returned has one that is (or is the largest); for a larger t the
// same midpoints lead to the same rank or a later one.
func (m *Model) firstAtLeast(i int, base uint64, t float64) uint64 {
	at := func(k uint64) float64 { return m.PointRelIdx(i, k+base).Est }
	if !(at(math.MaxUint64) >= t) {
		return math.MaxUint64
	}
	lo, hi := uint64(0), uint64(math.MaxUint64)
	for lo < hi {
		mid := lo + (hi-lo)/2
		if at(mid) >= t {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// band places bound t in node i's ranks: below lo, estimates are below t;
// above lo+w, at or above it. ok is false when the magnitudes at t are not
// finite (no band can be drawn: translate every reading).
func (m *Model) band(i int, base uint64, t float64) (lo, w uint64, ok bool) {
	if math.IsInf(t, 0) { // every estimate is above -Inf and below +Inf: one rank at an end, translated
		k := m.firstAtLeast(i, base, t)
		return k, 0, true
	}
	k := m.firstAtLeast(i, base, t)
	v := m.PointRelIdx(i, k+base)
	mag := math.Abs(t) + math.Abs(m.x(i, k+base)) + math.Abs(v.Est) + v.Err + m.scale(i)
	if math.IsNaN(mag) || math.IsInf(mag, 0) {
		return 0, 0, false
	}
	margin := mag*0x1p-30 + 0x1p-10
	lo, hi := m.firstAtLeast(i, base, t-margin), m.firstAtLeast(i, base, t+margin)
	return lo, hi - lo, true
}

// scale is the largest magnitude among the constants node i's translation
// computes with (its links' anchors, polygon centres and vertices): the
// rounding of an estimate is relative to them as much as to the value.
func (m *Model) scale(i int) float64 {
	s := 0.0
	for _, l := range m.pathLinks(i) {
		for _, a := range l.anch {
			s = math.Max(s, math.Max(math.Abs(a.x), math.Max(math.Abs(a.y), a.d)))
		}
		s = math.Max(s, math.Abs(l.a0)+math.Abs(l.xc)+l.s+l.loose)
		for k := range l.va {
			s = math.Max(s, math.Abs(l.va[k])+math.Abs(l.vu[k]))
		}
	}
	return s
}

// pathLinks are the links of node i's paths into the reference (both
// forms).
func (m *Model) pathLinks(i int) []*link {
	var ls []*link
	n := len(m.names)
	for _, p := range [][]int32{m.paperPath[i*n+m.ref], m.polyPath[i*n+m.ref]} {
		for _, li := range p {
			ls = append(ls, m.links[li])
		}
	}
	return ls
}

// monotone says whether node i's estimate is non-decreasing in its
// centred reading in real arithmetic (see above), by the slopes of every
// piece along the node's paths; false when that cannot be shown.
func (m *Model) monotone(i int) bool {
	if i == m.ref {
		return true // Est is x
	}
	n := len(m.names)
	// The paper's form: y rises with slope in [ylo, yhi] times x's, its
	// error e changes by at most de times x's. Its estimate is y (the
	// middle of y-e, y+e); intersected with the polygon's interval (best),
	// y-e and y+e must rise too.
	paper := m.method != MethodAllProbes && m.paperPath[i*n+m.ref] != nil
	if paper {
		ylo, yhi, de := 1.0, 1.0, 0.0
		for _, li := range m.paperPath[i*n+m.ref] {
			l := m.links[li]
			smin, smax, gmax := l.paperSlopes()
			if !(smin > 0) || math.IsInf(smax, 0) || math.IsNaN(gmax) || math.IsInf(gmax, 0) {
				return false
			}
			// e' = the anchors' errors' change + (r+dr)*e + slack(|y'|+|y|).
			de = yhi*gmax + (l.pr+l.pdr)*de + relEps*(yhi*smax+yhi)
			ylo, yhi = ylo*smin, yhi*smax
		}
		if m.method == MethodBest && !(ylo > 2*de) {
			return false
		}
	}
	// The polygon's form: each link's low and high lines rise at least at
	// its ratio's low end, less its slack's change (relEps per unit of
	// each magnitude): positive when rlo is, by far more than relEps.
	if m.method != MethodPaper {
		for _, li := range m.polyPath[i*n+m.ref] {
			if l := m.links[li]; !(l.rlo > 2*relEps*(1+l.r0)) {
				return false
			}
		}
	}
	return true
}

// paperSlopes are the paper form's pieces on link l: the least and
// largest slope of its interpolation (between neighbouring anchors, and
// beyond the first and last, where it extrapolates from those two), and
// the largest change of its error per unit of x.
func (l *link) paperSlopes() (smin, smax, gmax float64) {
	a := l.anch
	n := len(a)
	if n < 2 {
		return math.NaN(), math.NaN(), math.NaN()
	}
	span := a[n-1].x - a[0].x
	smin = (a[n-1].y - a[0].y) / span
	smax, gmax = smin, (a[0].d+a[n-1].d)/span
	for j := 0; j+1 < n; j++ {
		dx := a[j+1].x - a[j].x
		s := (a[j+1].y - a[j].y) / dx
		if !(dx > 0) {
			return math.NaN(), math.NaN(), math.NaN()
		}
		smin, smax = math.Min(smin, s), math.Max(smax, s)
		gmax = math.Max(gmax, math.Abs(a[j+1].d-a[j].d)/dx)
	}
	return smin, smax, gmax
}
