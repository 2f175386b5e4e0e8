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
// returns the polygon (empty when infeasible). Vertices are finally
// recomputed from their two lines (see polygon).
func intersect(hs []halfPlane, b float64) polygon {
	p, q := newBox(b), polygon{}
	for i, h := range hs {
		q = p.clip(h, i, q)
		p, q = q, p
		if len(p.a) == 0 {
			return p
		}
	}
	box := boxPlanes(b)
	line := func(i int) halfPlane {
		if i < 0 {
			return box[-i-1]
		}
		return hs[i]
	}
	n := len(p.a)
	for i := 0; i < n; i++ {
		l1, l2 := line(p.edge[(i+n-1)%n]), line(p.edge[i])
		det := l1.ca*l2.cu - l1.cu*l2.ca
		if math.Abs(det) < 1e-9 {
			continue // nearly parallel: keep the clipped point
		}
		a := (l1.w*l2.cu - l1.cu*l2.w) / det
		u := (l1.ca*l2.w - l1.w*l2.ca) / det
		// Keep the exact intersection only when it agrees with the clipped
		// point up to rounding; otherwise (a degenerate sliver) trust clip.
		if math.Abs(a-p.a[i]) <= 1e-6*(1+math.Abs(a)) && math.Abs(u-p.u[i]) <= 1e-6*(1+math.Abs(u)) {
			p.a[i], p.u[i] = a, u
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
