package minrtt

import "math"

// Queries: translating a value or a duration into the reference node's
// counter. Everything per node and per path was precomputed by NewModel;
// a query walks the chosen path's links (usually one) and does a few dozen
// float operations: no allocation, no map lookup in the *Idx forms.
//
// A reading c stands for the instant at which the node's counter equalled
// c; the bounds are for those instants (a reading's own floor, below one
// cycle on its node, is the caller's, as it is for durations on one node).

// Duration is a duration between events on two nodes, in reference cycles.
type Duration struct {
	Value        // best strict bound of the model's method (what the analysis reports)
	Scenario int // 0 both on the reference, 1 same non-reference node, 2 one end on the reference, 3 two non-reference nodes; -1 an unreachable node
	// Via is, for scenario 3, the tentative reference node of the paper's
	// method (3.3.4): the end node whose counter the duration was taken in
	// before scaling it into the reference, whichever gave the smaller
	// paper bound. "" otherwise.
	Via string
	// Paper is the strict paper-form error for this scenario (two-MinRTT
	// method: scenario 1 |d|*dr, scenario 2 the translation error e,
	// scenario 3 |d|*dr + r*e + dr*e); +Inf if the paper's anchors do not
	// reach the nodes.
	Paper float64
	// Baseline is the paper's baseline (3.3.5): both ends translated
	// separately, errors added. Equal to Paper in scenarios 0-2.
	Baseline float64
}

// paperTo translates x +- e from node src into node dst along the chosen
// paper path; ok is false when there is none.
func (m *Model) paperTo(src, dst int, x, e float64) (float64, float64, bool) {
	if src == dst {
		return x, e, true
	}
	p := m.paperPath[src*len(m.names)+dst]
	if p == nil {
		return math.NaN(), math.Inf(1), false
	}
	for _, li := range p {
		x, e = m.links[li].paperPoint(x, e)
	}
	return x, e, true
}

// polyTo maps the interval [lo, hi] of node src into node dst along the
// chosen all-probes path.
func (m *Model) polyTo(src, dst int, lo, hi float64) (float64, float64, bool) {
	if src == dst {
		return lo, hi, true
	}
	p := m.polyPath[src*len(m.names)+dst]
	if p == nil {
		return math.Inf(-1), math.Inf(1), false
	}
	for _, li := range p {
		lo, hi = m.links[li].polyPoint(lo, hi)
	}
	return lo, hi, true
}

// span is a strict interval [lo, hi]; the empty (inverted) span never
// arises from consistent data.
type span struct{ lo, hi float64 }

var anything = span{math.Inf(-1), math.Inf(1)}

func around(est, err float64) span {
	if math.IsNaN(est) || math.IsInf(err, 1) {
		return anything
	}
	return span{est - err, est + err}
}

// and intersects two strict intervals: the truth is in both. Should they
// not overlap (impossible with consistent data, NewModel checks), the gap
// between them is returned, which touches both.
func (s span) and(t span) span {
	r := span{fmax(s.lo, t.lo), fmin(s.hi, t.hi)}
	if r.lo > r.hi {
		r.lo, r.hi = r.hi, r.lo
	}
	return r
}

// fmax is math.Max, bit for bit, without its call (on amd64 math.Max is
// an assembly function the compiler cannot inline): ordered operands
// inline, the special cases (NaN, equal, signed zeros) by math.Max.
func fmax(x, y float64) float64 {
	if x > y {
		return x
	}
	if y > x {
		return y
	}
	if x == y && x != 0 { // an interval's ends that meet (math's special cases are NaN and signed zeros)
		return x
	}
	return math.Max(x, y)
}

// fmin is math.Min likewise.
func fmin(x, y float64) float64 {
	if x < y {
		return x
	}
	if y < x {
		return y
	}
	if x == y && x != 0 { // an interval's ends that meet (math's special cases are NaN and signed zeros)
		return x
	}
	return math.Min(x, y)
}

func (s span) value() Value {
	if math.IsInf(s.lo, 0) || math.IsInf(s.hi, 0) {
		return Value{math.NaN(), math.Inf(1)}
	}
	e := (s.hi - s.lo) / 2
	return Value{(s.lo + s.hi) / 2, e + relEps*(math.Abs(s.lo)+math.Abs(s.hi))}
}

func pt(x float64) span { return span{x, x} }

// diff is the interval of a-b, widened by the rounding of the subtraction
// (centred values are large, their differences small).
func diff(a, b span) span {
	s := slack(math.Abs(a.lo) + math.Abs(a.hi) + math.Abs(b.lo) + math.Abs(b.hi))
	return span{a.lo - b.hi - s, a.hi - b.lo + s}
}

// scale multiplies the interval d by a positive ratio within [rlo, rhi].
func scale(d span, rlo, rhi float64) span {
	lo, hi := d.lo*rhi, d.hi*rlo
	if d.lo >= 0 {
		lo = d.lo * rlo
	}
	if d.hi >= 0 {
		hi = d.hi * rhi
	}
	return span{lo - relEps*math.Abs(lo), hi + relEps*math.Abs(hi)}
}

// pick combines the paper's interval and the all-probes interval per method.
func (m *Model) pick(paper, poly span) Value {
	switch m.method {
	case MethodPaper:
		return paper.value()
	case MethodAllProbes:
		return poly.value()
	}
	return paper.and(poly).value()
}

// PointIdx is node i's reading c in the reference counter, as an absolute
// reference reading (float64: above 2^53, about a month of uptime at
// 3 GHz, it is rounded to a few cycles, and Err includes that rounding;
// PointRelIdx keeps sub-cycle precision). It panics for an invalid index.
func (m *Model) PointIdx(i int, c uint64) Value {
	v := m.PointRelIdx(i, c)
	if math.IsInf(v.Err, 1) {
		return v
	}
	o := float64(m.origin[m.ref])
	est := v.Est + o
	// Both roundings (the origin's and the sum's) are within one ulp.
	return Value{est, v.Err + 2*ulp(est) + ulp(o)}
}

func ulp(x float64) float64 {
	x = math.Abs(x)
	return math.Nextafter(x, math.Inf(1)) - x
}

// PointRelIdx is node i's reading c in the reference counter, relative to
// RefOrigin.
func (m *Model) PointRelIdx(i int, c uint64) Value {
	var t Translated
	m.TranslateInto(&t, i, c)
	return t.Value(m)
}

// Point is the named node's reading c in the reference counter (PointIdx).
func (m *Model) Point(node string, c uint64) (Value, error) {
	i, err := m.lookup(node)
	if err != nil {
		return Value{}, err
	}
	return m.PointIdx(i, c), nil
}

// PointRel is the named node's reading c relative to RefOrigin.
func (m *Model) PointRel(node string, c uint64) (Value, error) {
	i, err := m.lookup(node)
	if err != nil {
		return Value{}, err
	}
	return m.PointRelIdx(i, c), nil
}

// Duration is the duration from reading start on startNode to reading end
// on endNode, in reference cycles (DurationIdx).
func (m *Model) Duration(startNode string, start uint64, endNode string, end uint64) (Duration, error) {
	si, err := m.lookup(startNode)
	if err != nil {
		return Duration{}, err
	}
	ei, err := m.lookup(endNode)
	if err != nil {
		return Duration{}, err
	}
	return m.DurationIdx(si, start, ei, end), nil
}

// DurationIdx is the duration from reading start on node si to reading end
// on node ei, in reference cycles, by the paper's scenarios (3.3):
//
//   - 0, both on the reference: exact.
//   - 1, both on one other node B: d^A = r*d^B, paper error |d^B|*dr (the
//     paper's 2*d/D*e); all-probes: d^B times the ratio interval.
//   - 2, one end on the reference: the other end's translation error.
//   - 3, on two other nodes B and C: the paper translates v into B's counter
//     (tentative reference B), takes d^B there and scales it by r_B^A:
//     |d^B|*dr + r*e_BC + dr*e_BC; and likewise via C; Paper is the smaller.
//     The all-probes form intersects the same two routes and the baseline
//     (each end separately).
//
// It panics for an invalid index. A reading that starts or ends several
// durations, or whose value is reported too, is cheaper translated once
// (Translate) and given to DurationTranslated, which is the same
// computation.
func (m *Model) DurationIdx(si int, start uint64, ei int, end uint64) (d Duration) {
	if rs, re := m.reach[si], m.reach[ei]; !rs || !re {
		return unreachable()
	}
	if si == ei { // scenarios 0 and 1 need no translation
		m.durationOne(&d, si, start, end)
		return d
	}
	var s, e Translated
	m.TranslateInto(&s, si, start)
	m.TranslateInto(&e, ei, end)
	m.durationTwo(&d, &s, &e)
	return d
}
