package minrtt

import "math"

// This file is the geometry of the all-probes method: the set of clock
// relations (offset, ratio) that every probe between two nodes allows is an
// intersection of half-planes, a convex polygon. It knows nothing of nodes or
// probes; link.go turns probes into half-planes.

// halfPlane is the set ca*a + cu*u <= w in the (a, u) plane.
type halfPlane struct{ ca, cu, w float64 }

// polygon is a convex polygon, vertices counterclockwise or clockwise (the
// clipping does not care). edge[i] is the half-plane whose boundary line
// carries the edge from vertex i to vertex i+1: it lets the final vertices
// be recomputed exactly as the intersection of their two lines, so rounding
// in the long chain of clips does not accumulate.
type polygon struct {
	a, u []float64
	edge []int // index into the half-plane list; negative: the initial box
	// loose bounds how far a vertex that could not be recomputed exactly
	// (nearly parallel lines, or a sliver where the clipped point and the
	// lines disagree) may be from the true one, in |a|+|u|; 0 if none.
	loose float64
}

// boxPlanes are the four sides of the initial box |a| <= b, |u| <= b, with
// indices -1..-4 in polygon.edge.
func boxPlanes(b float64) [4]halfPlane {
	return [4]halfPlane{{1, 0, b}, {0, 1, b}, {-1, 0, b}, {0, -1, b}}
}

func newBox(b float64) polygon {
	// Corners in order; the edge leaving each corner lies on the given side.
	return polygon{
		a:    []float64{b, b, -b, -b},
		u:    []float64{-b, b, b, -b},
		edge: []int{-1, -2, -3, -4},
	}
}

// clip intersects p with h (index hi) and returns the result, reusing out's
// storage. Sutherland-Hodgman against one half-plane: keep inside vertices,
// add the crossing points of edges that cross the boundary.
func (p polygon) clip(h halfPlane, hi int, out polygon) polygon {
	out.a, out.u, out.edge = out.a[:0], out.u[:0], out.edge[:0]
	n := len(p.a)
	if n == 0 {
		return out
	}
	d := func(i int) float64 { return h.ca*p.a[i] + h.cu*p.u[i] - h.w }
	dp := d(n - 1)
	for i := 0; i < n; i++ {
		prev := (i + n - 1) % n
		dq := d(i)
		switch {
		case dp <= 0 && dq <= 0: // both inside: keep the edge's end
			out.a, out.u, out.edge = append(out.a, p.a[i]), append(out.u, p.u[i]), append(out.edge, p.edge[i])
		case dp <= 0 && dq > 0: // leaving: the crossing starts an edge on h
			t := dp / (dp - dq)
			out.a = append(out.a, p.a[prev]+t*(p.a[i]-p.a[prev]))
			out.u = append(out.u, p.u[prev]+t*(p.u[i]-p.u[prev]))
			out.edge = append(out.edge, hi)
		case dp > 0 && dq <= 0: // entering: the crossing continues the old edge
			t := dp / (dp - dq)
			out.a = append(out.a, p.a[prev]+t*(p.a[i]-p.a[prev]))
			out.u = append(out.u, p.u[prev]+t*(p.u[i]-p.u[prev]))
			out.edge = append(out.edge, p.edge[prev])
			out.a, out.u, out.edge = append(out.a, p.a[i]), append(out.u, p.u[i]), append(out.edge, p.edge[i])
		}
		dp = dq
	}
	if len(out.a) < 3 {
		out.a, out.u, out.edge = out.a[:0], out.u[:0], out.edge[:0]
	}
	return out
}

// intersect clips a box of half-size b with every half-plane, in order, and
// returns the polygon (empty when infeasible).
//
// Rounding. A clipped point carries the rounding of the clips before it,
// relative to the size of the polygon at the time: a few ulps of b at
// first, far more than the final polygon's scale warrants, and amplified
// along an edge by 1/sin of the angle between the lines that meet there
// (adjacent constraints are often nearly parallel). So the clipping runs
// twice: the second time from a box just around the first result, so that
// every number is at the polygon's own scale; and then each vertex is
// recomputed as the exact intersection of its two lines. p.loose bounds
// what rounding is left.
func intersect(hs []halfPlane, b float64) polygon {
	p := clipAll(hs, newBox(b))
	if len(p.a) == 0 || p.touchesBox() {
		return p // infeasible, or unbounded: the box decides, no refinement
	}
	// Second pass, from the first result's bounding box with a margin of
	// its own size (plus one cycle): the true polygon is within rounding of
	// the first, so it lies well inside.
	alo, ahi, ulo, uhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i := range p.a {
		alo, ahi = math.Min(alo, p.a[i]), math.Max(ahi, p.a[i])
		ulo, uhi = math.Min(ulo, p.u[i]), math.Max(uhi, p.u[i])
	}
	ma, mu := ahi-alo+1, uhi-ulo+1
	b2 := math.Max(math.Max(math.Abs(alo-ma), math.Abs(ahi+ma)), math.Max(math.Abs(ulo-mu), math.Abs(uhi+mu)))
	p = clipAll(hs, newBox(b2))
	if len(p.a) == 0 || p.touchesBox() {
		// Cannot happen unless rounding is far worse than assumed; report
		// the first pass's verdict conservatively as unbounded.
		p = clipAll(hs, newBox(b))
		p.edge[0] = -1
		return p
	}
	box := boxPlanes(b2)
	line := func(i int) halfPlane {
		if i < 0 {
			return box[-i-1]
		}
		return hs[i]
	}
	n := len(p.a)
	const eps = 0x1p-52
	for i := 0; i < n; i++ {
		l1, l2 := line(p.edge[(i+n-1)%n]), line(p.edge[i])
		det := l1.ca*l2.cu - l1.cu*l2.ca
		if math.Abs(det) < 1e-12 {
			// Lines parallel to 1e-12: keep the clipped point, whose
			// rounding is a few ulps of b2 per clip, amplified by 1/det
			// at most up to b2 itself.
			p.loose = math.Max(p.loose, math.Min(8*eps*b2*float64(len(hs))/math.Max(math.Abs(det), 1e-300), 2*b2))
			continue
		}
		a := (l1.w*l2.cu - l1.cu*l2.w) / det
		u := (l1.ca*l2.w - l1.w*l2.ca) / det
		// Cramer's rule: each product and difference rounds by an ulp of
		// the numbers involved; dividing by det amplifies it.
		p.loose = math.Max(p.loose, 8*eps*(math.Abs(l1.w)+math.Abs(l2.w)+math.Abs(a)+math.Abs(u))/math.Abs(det))
		p.a[i], p.u[i] = a, u
	}
	return p
}

// clipAll clips p with every half-plane in order.
func clipAll(hs []halfPlane, p polygon) polygon {
	q := polygon{}
	for i, h := range hs {
		q = p.clip(h, i, q)
		p, q = q, p
		if len(p.a) == 0 {
			return p
		}
	}
	return p
}

// touchesBox tells whether some edge of p lies on the initial box: then the
// half-planes did not bound the polygon and the box, not the data, decided
// its extent.
func (p polygon) touchesBox() bool {
	for _, e := range p.edge {
		if e < 0 {
			return true
		}
	}
	return false
}

// rangeAt returns the min and max of a + u*k over the polygon's vertices
// (a linear function is extreme at vertices).
func (p polygon) rangeAt(k float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := range p.a {
		v := p.a[i] + p.u[i]*k
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}
