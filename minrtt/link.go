package minrtt

import (
	"fmt"
	"math"
	"sort"
)

// This file turns the probes between two nodes into a link: what is known
// about translating one node's counter (From) into another's (Into), in the
// two forms the model offers: the paper's two-MinRTT anchors and the
// all-probes polygon. Values are in centred coordinates (model.go): a node's
// reading minus that node's origin, as float64.

// Slack for strictness. Readings are integers: the floor of a continuous
// counter, read a cycle or so off the instant that causality orders. Every
// reading therefore stands for an instant within quantQ cycles of it.
// Results computed in float64 are widened by relEps times the magnitude of
// the centred numbers involved (about 45 ulps: 0.1 cycle at 1e13, i.e. an
// hour at 3 GHz), plus absEps.
const (
	quantQ = 2.0
	relEps = 1e-14
	absEps = 1e-6
)

func slack(mag float64) float64 { return relEps*mag + absEps }

// sample is one answered probe in centred coordinates with its round.
type sample struct {
	round          int
	send, resp, rv float64 // send, recv in the origin's coordinates; resp in the responder's
	kernel         bool    // the kernels timed the probe (Direction.UserProbes)
}

func (s sample) rtt() float64 { return s.rv - s.send }

// anchor is the paper's MinRTT point (Fig. 6): From read x while Into's
// counter was within y +- d.
type anchor struct{ x, y, d float64 }

// link translates From's centred counter into Into's: y = alpha + r*x.
type link struct {
	into, from int

	// Report.
	rounds, probes int
	kernelProbes   int     // of probes, those the kernels timed
	minRTT         float64 // of probes Into sent to From (Into cycles); NaN if none
	minRTTRev      float64 // of probes From sent to Into (From cycles); NaN if none

	// Paper method: one anchor per round from the min-RTT probe that Into
	// sent to From, sorted by x; ratio r +- dr from the first and last.
	anch     []anchor
	pr, pdr  float64
	paperOK  bool
	paperWhy string

	// All-probes method: y = a0 + r0*(x-xc) + a' + u*(x-xc)/s for (a', u)
	// in the polygon (va, vu); the ratio is r0 + u/s, within [rlo, rhi].
	// The shift (a0, r0, xc, s) only conditions the numbers: (a', u) are a
	// few thousand cycles at most and k=(x-xc)/s is about [-1/2, 1/2].
	a0, r0, xc, s float64
	va, vu        []float64
	loose         float64 // polygon.loose: vertex uncertainty, |a'|+|u|
	rlo, rhi      float64
	polyOK        bool
	polyWhy       string
}

// buildLink makes the link Into<-From from the probes Into sent to From
// (fwd: Into is origin) and those From sent to Into (rev: From is origin);
// hzRatio is Into's registered TSC frequency over From's (1 if unknown).
// It returns an error only for inconsistent data (an empty polygon); a link
// that is merely unusable carries why in paperWhy/polyWhy.
func buildLink(into, from int, names []string, hzRatio float64, fwd, rev []sample) (*link, error) {
	l := &link{into: into, from: from, minRTT: math.NaN(), minRTTRev: math.NaN()}
	rounds := map[int]bool{}
	for _, s := range fwd {
		rounds[s.round] = true
		if !(s.rtt() >= l.minRTT) {
			l.minRTT = s.rtt()
		}
		l.kernelProbes += b2i(s.kernel)
	}
	for _, s := range rev {
		rounds[s.round] = true
		if !(s.rtt() >= l.minRTTRev) {
			l.minRTTRev = s.rtt()
		}
		l.kernelProbes += b2i(s.kernel)
	}
	l.rounds, l.probes = len(rounds), len(fwd)+len(rev)
	pair := names[into] + "<-" + names[from]

	l.buildPaper(fwd, pair)
	// The polygon needs a first guess of the relation to centre its
	// coordinates: this link's anchors or the reverse link's inverted,
	// whichever knows the ratio better, else the registered frequencies'
	// ratio through the best probe. The guess only conditions the numbers;
	// the polygon is the same.
	var a0, r0, xc float64
	back := &link{}
	back.buildPaper(rev, "")
	switch {
	case l.paperOK && !(back.paperOK && back.pdr/back.pr < l.pdr/l.pr):
		xc = (l.anch[0].x + l.anch[len(l.anch)-1].x) / 2
		a0, r0 = l.anch[0].y+l.pr*(xc-l.anch[0].x), l.pr
	case back.paperOK:
		// back: X_from = y'_0 + r'(X_into - x'_0); invert.
		b0 := back.anch[0]
		r0 = 1 / back.pr
		xc = (b0.y + back.anch[len(back.anch)-1].y) / 2
		a0 = b0.x + (xc-b0.y)*r0
	default:
		r0 = hzRatio
		best := math.Inf(1)
		for _, s := range fwd {
			if s.rtt() < best {
				best, xc, a0 = s.rtt(), s.resp, (s.send+s.rv)/2
			}
		}
		for _, s := range rev {
			if s.rtt() < best {
				best, xc, a0 = s.rtt(), (s.send+s.rv)/2, s.resp
			}
		}
	}
	// Check the polygon even for a link too short to use: an empty one
	// means inconsistent data.
	err := l.buildPoly(fwd, rev, a0, r0, xc, pair)
	if err == nil && l.rounds < 2 {
		l.polyOK = false
		l.polyWhy = fmt.Sprintf("%s: probes in %d round(s) (need probes in 2 or more rounds spanning time)", pair, l.rounds)
	}
	return l, err
}

// buildPaper picks each round's min-RTT probe (paper 3.1) as an anchor.
func (l *link) buildPaper(fwd []sample, pair string) {
	best := map[int]sample{}
	for _, s := range fwd {
		if b, ok := best[s.round]; !ok || s.rtt() < b.rtt() {
			best[s.round] = s
		}
	}
	l.anch = l.anch[:0]
	for _, s := range best {
		l.anch = append(l.anch, anchor{x: s.resp, y: (s.send + s.rv) / 2, d: s.rtt() / 2})
	}
	sort.Slice(l.anch, func(i, j int) bool { return l.anch[i].x < l.anch[j].x })
	n := len(l.anch)
	if n < 2 || !(l.anch[n-1].x > l.anch[0].x) {
		l.paperOK = false
		l.paperWhy = fmt.Sprintf("%s: anchors (probes sent by %s) in %d round(s); the paper's ratio needs 2 rounds spanning time", pair, pairInto(pair), n)
		return
	}
	j, m := l.anch[0], l.anch[n-1]
	r := (m.y - j.y) / (m.x - j.x) // Eq. 2
	// Each anchor's half-width: RTT/2 (paper Eq. 3) plus quantization: the
	// three readings are each within quantQ of their instants, and From's
	// reading moves Into's value by r per cycle. 2r bounds the true ratio
	// with a wide margin (r is known to ~1e-6 by now).
	for i := range l.anch {
		l.anch[i].d += quantQ * (1 + 2*r)
	}
	j, m = l.anch[0], l.anch[n-1]
	l.pr = r
	l.pdr = (j.d+m.d)/(m.x-j.x) + relEps*math.Abs(r)
	l.paperOK = r > 0
	if !l.paperOK {
		l.paperWhy = fmt.Sprintf("%s: the anchors give a non-positive ratio %g", pair, r)
	}
}

func pairInto(pair string) string {
	for i := 0; i+1 < len(pair); i++ {
		if pair[i:i+2] == "<-" {
			return pair[:i]
		}
	}
	return pair
}

// paperPoint translates x +- e (From) into Into: Eq. 4 from the two anchors
// that bracket x, with the strict error |1-t|*d_j + |t|*d_m (t = (x-x_j)/
// (x_m-x_j)), which is the paper's e inside the bracket (t in [0,1]) and
// grows linearly outside it. Outside all anchors it extrapolates from the
// first and last anchors, not the nearest two: the error grows as
// |x-x_m|/(x_m-x_j), so the farthest-apart pair grows slowest. The
// incoming error e moves the true value by at most (r+dr)*e.
func (l *link) paperPoint(x, e float64) (float64, float64) {
	a := l.anch
	j, m := 0, len(a)-1
	if x > a[0].x && x < a[m].x {
		// Binary search for the bracketing pair a[j].x <= x < a[j+1].x
		// (j the last anchor at or before x: the pair is the same as by
		// any other search), keeping a[j].x <= x < a[j+n].x; one compare
		// per step (1-2 ns less than lo/hi/mid at 16-64 anchors).
		n := m
		for n > 1 {
			half := n / 2
			if a[j+half].x <= x {
				j += half
			}
			n -= half
		}
		m = j + 1
	}
	t := (x - a[j].x) / (a[m].x - a[j].x)
	y := a[j].y + t*(a[m].y-a[j].y)
	err := math.Abs(1-t)*a[j].d + math.Abs(t)*a[m].d + (l.pr+l.pdr)*e
	return y, err + slack(math.Abs(y)+math.Abs(x))
}

// buildPoly intersects every probe's constraint. A probe Into sent to From
// (send s, resp p, recv v) says Into's counter at the instant From read p
// was within [s, v]; one From sent to Into says From's counter at the
// instant Into read p was within [s, v]. With every reading within quantQ of
// its instant and y = alpha + r*x (r > 0), that is:
//
//	fwd: alpha + r*(p+Q) >= s-Q   and  alpha + r*(p-Q) <= v+Q
//	rev: alpha + r*(s-Q) <= p+Q   and  alpha + r*(v+Q) >= p-Q
func (l *link) buildPoly(fwd, rev []sample, a0, r0, xc float64, pair string) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range fwd {
		lo, hi = math.Min(lo, s.resp), math.Max(hi, s.resp)
	}
	for _, s := range rev {
		lo, hi = math.Min(lo, s.send), math.Max(hi, s.rv)
	}
	sc := math.Max((hi-lo)/2, 1)
	l.a0, l.r0, l.xc, l.s = a0, r0, xc, sc

	// Tightest probes first: the polygon shrinks to its final size within
	// a few clips, which keeps it small and the numbers well conditioned.
	type pr struct {
		s   sample
		fwd bool
	}
	all := make([]pr, 0, len(fwd)+len(rev))
	for _, s := range fwd {
		all = append(all, pr{s, true})
	}
	for _, s := range rev {
		all = append(all, pr{s, false})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].s.rtt() < all[j].s.rtt() })

	// le: alpha + r*x <= y; ge: alpha + r*x >= y; in (a', u) coordinates,
	// widened by the float rounding of w.
	hs := make([]halfPlane, 0, 2*len(all))
	le := func(x, y float64) {
		b := a0 + r0*(x-xc)
		hs = append(hs, halfPlane{1, (x - xc) / sc, y - b + 4e-16*(math.Abs(y)+math.Abs(b)+math.Abs(x))})
	}
	ge := func(x, y float64) {
		b := a0 + r0*(x-xc)
		hs = append(hs, halfPlane{-1, -(x - xc) / sc, b - y + 4e-16*(math.Abs(y)+math.Abs(b)+math.Abs(x))})
	}
	for _, p := range all {
		s := p.s
		if p.fwd {
			ge(s.resp+quantQ, s.send-quantQ)
			le(s.resp-quantQ, s.rv+quantQ)
		} else {
			le(s.send-quantQ, s.resp+quantQ)
			ge(s.rv+quantQ, s.resp-quantQ)
		}
	}
	// The initial box must hold every (a', u) the probes allow; a' and u
	// are within a round trip of 0 when the guess is right, and the box
	// still holds ratios up to 5 times the guess when it is not.
	poly := intersect(hs, polyBox+8*r0*sc)
	if len(poly.a) == 0 {
		return fmt.Errorf("minrtt: the %d probes between %s and %s admit no linear relation between their counters (inconsistent data: a bug, or a counter that is not constant-rate)",
			l.probes, pairInto(pair), pair[len(pairInto(pair))+2:])
	}
	if poly.touchesBox() {
		l.polyWhy = fmt.Sprintf("%s: the probes do not bound the ratio (need probes in 2 or more rounds spanning time)", pair)
		return nil
	}
	l.va, l.vu, l.loose = poly.a, poly.u, poly.loose
	ulo, uhi := math.Inf(1), math.Inf(-1)
	for _, u := range l.vu {
		ulo, uhi = math.Min(ulo, u), math.Max(uhi, u)
	}
	l.rlo = r0 + (ulo-l.loose)/sc - relEps*r0
	l.rhi = r0 + (uhi+l.loose)/sc + relEps*r0
	if !(l.rlo > 0) {
		l.polyWhy = fmt.Sprintf("%s: the probes allow a non-positive ratio", pair)
		return nil
	}
	l.polyOK = true
	return nil
}

// polyBox is the smallest half-size of the initial box in (a', u) cycles. A
// polygon that still touches the box was not bounded by the probes.
const polyBox = 1e12

// polyPoint maps the interval [xlo, xhi] (From) to the interval of Into
// values the polygon allows: alpha + r*x is linear in (alpha, r), so its
// extremes over the polygon are at vertices, and r > 0 puts the low end at
// xlo and the high end at xhi.
func (l *link) polyPoint(xlo, xhi float64) (float64, float64) {
	if math.Float64bits(xlo) == math.Float64bits(xhi) {
		return l.polyAt(xlo)
	}
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

// polyAt is polyPoint(x, x), the first link of every translation: the
// same operations on the same numbers, each done once instead of twice
// (one division, one pass over the vertices).
func (l *link) polyAt(x float64) (float64, float64) {
	k, b := (x-l.xc)/l.s, l.a0+l.r0*(x-l.xc)
	mlo, mhi := math.Inf(1), math.Inf(-1)
	vu := l.vu[:len(l.va)]
	for i, a := range l.va {
		v := a + vu[i]*k
		if v < mlo {
			mlo = v
		}
		if v > mhi {
			mhi = v
		}
	}
	ylo, yhi := b+mlo, b+mhi
	if l.loose > 0 {
		w := l.loose * (1 + math.Abs(k))
		ylo -= w
		yhi += w
	}
	return ylo - slack(math.Abs(ylo)+math.Abs(x)), yhi + slack(math.Abs(yhi)+math.Abs(x))
}

// paperErrAt and polyErrAt are the link's translation errors at x, for
// reports.
func (l *link) paperErrAt(x float64) float64 {
	_, e := l.paperPoint(x, 0)
	return e
}

func (l *link) polyErrAt(x float64) float64 {
	lo, hi := l.polyPoint(x, x)
	return (hi - lo) / 2
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
