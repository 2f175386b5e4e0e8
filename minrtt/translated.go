package minrtt

import "math"

// Translate once, use many times. An analysis that reports every record's
// reading in the reference counter and durations between records would
// otherwise translate each reading twice or more: PointRelIdx for the
// record, and DurationIdx again for every duration it starts or ends.
// Translated holds what both need from one reading; PointRelIdx and
// DurationIdx are made of the same parts, so the stored form gives the
// same bits.

// Translated is one node reading translated into the reference counter
// once: everything PointRelIdx and DurationIdx need from that reading. It
// is 48 bytes (an analysis keeps one per record) and belongs to the Model
// that made it; with another Model it gives meaningless numbers. Make it
// with Model.Translate or Model.TranslateInto.
type Translated struct {
	c     uint64   // the reading, in node's counter
	node  int      // node index
	paper estimate // in the reference, centred (NaN +- Inf without a paper path)
	poly  span     // in the reference, centred ((-Inf, +Inf) without a path); zero with MethodPaper, which never reads it
}

// estimate is a paper-form translation: y +- e.
type estimate struct{ y, e float64 }

// Node is the reading's node index.
func (t *Translated) Node() int { return t.node }

// Reading is the node's reading that t translates.
func (t *Translated) Reading() uint64 { return t.c }

// Translate translates node i's reading c into the reference counter. On
// the reference node it walks no path. It panics for an invalid index;
// for a node that does not translate (Options.SkipUnreachable) the result
// gives a NaN estimate with Err +Inf.
//
// To store translations (one per record), TranslateInto is faster: it
// writes the fields in place. A Translated is too large for the compiler
// to keep in registers (over 32 bytes), so s[k] = m.Translate(i, c) goes
// through a temporary copied with 16-byte moves, each of which waits for
// the 8-byte writes before it (store forwarding fails): 3 ns more per
// call off the reference, 8 ns (4 times as long) on it.
func (m *Model) Translate(i int, c uint64) Translated {
	var t Translated
	m.TranslateInto(&t, i, c)
	return t
}

// TranslateInto sets *t to Translate(i, c).
func (m *Model) TranslateInto(t *Translated, i int, c uint64) {
	x := m.x(i, c)
	t.c, t.node = c, i
	if i == m.ref { // what paperTo and polyTo return for src == dst
		t.paper, t.poly = estimate{x, 0}, span{x, x}
		return
	}
	t.paper.y, t.paper.e, _ = m.paperTo(i, m.ref, x, 0)
	t.poly = span{}
	if m.method != MethodPaper {
		t.poly.lo, t.poly.hi, _ = m.polyTo(i, m.ref, x, x)
	}
}

// Value is the reading in the reference counter relative to RefOrigin:
// m.PointRelIdx(t.Node(), t.Reading()), bit for bit (PointRelIdx is this).
func (t *Translated) Value(m *Model) Value {
	if t.node == m.ref {
		// What every method's path below gives for the reference's x:
		// around(x, 0), the poly span {x, x} and their intersection are
		// all {x, x}, whose value is x (x+x doubles exactly: |x| <= 2^63)
		// with 0 + relEps*(|x|+|x|); without the four comparisons that
		// fall through to math.Max and math.Min on equal operands.
		x := t.paper.y
		return Value{x, relEps * (math.Abs(x) + math.Abs(x))}
	}
	paper := around(t.paper.y, t.paper.e)
	if m.method == MethodPaper {
		return paper.value()
	}
	return m.pick(paper, t.poly)
}

// DurationTranslated is the duration from reading s to reading e in
// reference cycles: m.DurationIdx(s.Node(), s.Reading(), e.Node(),
// e.Reading()), bit for bit (both are made of the same parts). Scenarios
// 0-2 use only the stored translations; scenario 3 translates each end
// into the other's node as well (the paper's routes).
func (m *Model) DurationTranslated(s, e *Translated) (d Duration) {
	m.DurationInto(&d, s, e)
	return d
}

// DurationInto sets *d to DurationTranslated(s, e). For a column of
// durations it is faster: as with TranslateInto, a Duration (over 32
// bytes) returned by value is copied through a temporary.
func (m *Model) DurationInto(d *Duration, s, e *Translated) {
	if !m.reach[s.node] || !m.reach[e.node] {
		*d = unreachable()
		return
	}
	*d = Duration{}
	if s.node == e.node {
		m.durationOne(d, s.node, s.c, e.c)
	} else {
		m.durationTwo(d, s, e)
	}
}

// unreachable is the duration to or from a node that does not translate.
func unreachable() Duration {
	inf := math.Inf(1)
	return Duration{Value: Value{math.NaN(), inf}, Scenario: -1, Paper: inf, Baseline: inf}
}

// durationOne is scenarios 0 and 1: readings start and end on node i.
func (m *Model) durationOne(d *Duration, i int, start, end uint64) {
	dd := float64(int64(end - start))
	if i == m.ref {
		d.Value = Value{dd, 0}
		if math.Abs(dd) >= 1<<53 { // past 35 days at 3 GHz the float rounds
			d.Err = ulp(dd)
		}
		return
	}
	d.Scenario = 1
	est := m.paperR[i] * dd
	err := math.Abs(dd)*m.paperDR[i] + relEps*math.Abs(est)
	paper := around(est, err)
	d.Paper = paper.value().Err
	d.Baseline = d.Paper
	var poly span
	if m.method != MethodPaper {
		poly = scale(span{dd, dd}, m.polyRlo[i], m.polyRhi[i])
	}
	d.Value = m.pick(paper, poly)
}

// durationTwo is scenarios 2 and 3: two different nodes, both translated.
func (m *Model) durationTwo(d *Duration, s, e *Translated) {
	var paper, poly span
	switch ref := m.ref; {
	case s.node == ref: // start on the reference, the end translated
		d.Scenario = 2
		xs, y := m.x(s.node, s.c), e.paper.y
		paper = around(y-xs, e.paper.e+slack(math.Abs(y)+math.Abs(xs)))
		if m.method != MethodPaper {
			poly = diff(e.poly, pt(xs))
		}
		d.Paper = paper.value().Err
		d.Baseline = d.Paper

	case e.node == ref:
		d.Scenario = 2
		xe, y := m.x(e.node, e.c), s.paper.y
		paper = around(xe-y, s.paper.e+slack(math.Abs(y)+math.Abs(xe)))
		if m.method != MethodPaper {
			poly = diff(pt(xe), s.poly)
		}
		d.Paper = paper.value().Err
		d.Baseline = d.Paper

	default:
		d.Scenario = 3
		paper, poly = m.scenario3(s, e, d)
	}
	d.Value = m.pick(paper, poly)
}

// scenario3 computes the paper's route through each end node, the baseline
// (the stored translations) and, unless the method is the paper's, the
// all-probes intervals.
func (m *Model) scenario3(s, e *Translated, d *Duration) (paper, poly span) {
	si, ei := s.node, e.node
	xs, xe := m.x(si, s.c), m.x(ei, e.c)
	// Baseline: both ends into the reference, errors added.
	yu, eu, yv, ev := s.paper.y, s.paper.e, e.paper.y, e.paper.e
	base := around(yv-yu, eu+ev+slack(math.Abs(yu)+math.Abs(yv)))
	d.Baseline = base.value().Err

	// Via the start node B: v into B's counter, d^B there, scaled by r_B^A.
	viaB := anything
	if v, err, ok := m.paperTo(ei, si, xe, 0); ok {
		dB := v - xs
		r, dr := m.paperR[si], m.paperDR[si]
		viaB = around(r*dB, math.Abs(dB)*dr+r*err+dr*err+slack(math.Abs(v)+math.Abs(xs)))
	}
	// Via the end node C: u into C's counter.
	viaC := anything
	if u, err, ok := m.paperTo(si, ei, xs, 0); ok {
		dC := xe - u
		r, dr := m.paperR[ei], m.paperDR[ei]
		viaC = around(r*dC, math.Abs(dC)*dr+r*err+dr*err+slack(math.Abs(u)+math.Abs(xe)))
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
	poly = diff(e.poly, s.poly)
	if lo, hi, ok := m.polyTo(ei, si, xe, xe); ok {
		poly = poly.and(scale(diff(span{lo, hi}, pt(xs)), m.polyRlo[si], m.polyRhi[si]))
	}
	if lo, hi, ok := m.polyTo(si, ei, xs, xs); ok {
		poly = poly.and(scale(diff(pt(xe), span{lo, hi}), m.polyRlo[ei], m.polyRhi[ei]))
	}
	return paper, poly
}
