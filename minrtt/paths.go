package minrtt

import "math"

// Path choice. Translating through other nodes picks the path with the
// smallest bound: when a direct link is missing (a client missed rounds, a
// pair never probed) or worse than a detour (a pair with a bad RTT), a value
// goes link by link, each link adding its own translation error plus r times
// the error the value already carries (plus the second-order dr times it).
// The model picks, per source node and per method, the path whose bound is
// smallest for the source's mid-experiment reading, by Dijkstra's algorithm
// on that bound (bounds only grow along a path, up to the rate factor r ~ 1,
// so label-setting finds the best path). Durations on one node scale by the
// ratio into the reference: that path is chosen separately, by the ratio's
// bound. The choice is made once, in NewModel; queries at other readings
// follow the same paths (every path's bound is strict, only its size
// depends on the choice).

// state is what travels along a path: (est, err) for the paper form,
// (lo, hi) for the all-probes form; (r, dr) or (rlo, rhi) for ratios.
type state [2]float64

// dijkstra finds, from src, the best path to every node. parent[v] is the
// link that reaches v on it (-1 for src and unreached nodes).
func (m *Model) dijkstra(src int, start state, usable func(*link) bool,
	step func(*link, state) state, cost func(state) float64) (parent []int, cst []float64) {
	n := len(m.names)
	parent, cst = make([]int, n), make([]float64, n)
	st := make([]state, n)
	done := make([]bool, n)
	for i := range parent {
		parent[i], cst[i] = -1, math.Inf(1)
	}
	st[src], cst[src] = start, cost(start)
	for {
		u := -1
		for v := 0; v < n; v++ {
			if !done[v] && !math.IsInf(cst[v], 1) && (u < 0 || cst[v] < cst[u]) {
				u = v
			}
		}
		if u < 0 {
			return parent, cst
		}
		done[u] = true
		for li, l := range m.links {
			if l.from != u || done[l.into] || !usable(l) {
				continue
			}
			s := step(l, st[u])
			if c := cost(s); c < cst[l.into] {
				st[l.into], cst[l.into], parent[l.into] = s, c, li
			}
		}
	}
}

// pathTo follows parents back from dst: the link indices from src to dst.
func (m *Model) pathTo(parent []int, src, dst int) []int32 {
	if src == dst || parent[dst] < 0 {
		return nil
	}
	var rev []int32
	for v := dst; v != src; v = m.links[parent[v]].from {
		rev = append(rev, int32(parent[v]))
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

// pointPaths chooses paths from src for translating values (paper form, or
// all-probes when poly), and the bound (half-width) each gives at src's
// mid-experiment reading.
func (m *Model) pointPaths(src int, poly bool) ([][]int32, []float64) {
	x := m.mid[src]
	var parent []int
	var cst []float64
	if poly {
		parent, cst = m.dijkstra(src, state{x, x},
			func(l *link) bool { return l.polyOK },
			func(l *link, s state) state { lo, hi := l.polyPoint(s[0], s[1]); return state{lo, hi} },
			func(s state) float64 { return (s[1] - s[0]) / 2 })
	} else {
		parent, cst = m.dijkstra(src, state{x, 0},
			func(l *link) bool { return l.paperOK },
			func(l *link, s state) state { y, e := l.paperPoint(s[0], s[1]); return state{y, e} },
			func(s state) float64 { return s[1] })
	}
	paths := make([][]int32, len(m.names))
	for dst := range paths {
		paths[dst] = m.pathTo(parent, src, dst)
	}
	return paths, cst
}

// ratioPaper is node i's ratio to the reference in the paper form, r +- dr,
// along the path with the smallest dr. Composing two ratios: (r1 +- dr1)
// (r2 +- dr2) is within r1*r2 +- (r1*dr2 + r2*dr1 + dr1*dr2).
func (m *Model) ratioPaper(i int) (float64, float64) {
	if i == m.ref {
		return 1, 0
	}
	if !m.paperOK[i] {
		return math.NaN(), math.Inf(1)
	}
	step := func(l *link, s state) state {
		r := s[0] * l.pr
		return state{r, s[0]*l.pdr + l.pr*s[1] + s[1]*l.pdr + relEps*r}
	}
	parent, _ := m.dijkstra(i, state{1, 0}, func(l *link) bool { return l.paperOK }, step,
		func(s state) float64 { return s[1] })
	s := state{1, 0}
	for _, li := range m.pathTo(parent, i, m.ref) {
		s = step(m.links[li], s)
	}
	return s[0], s[1]
}

// ratioPoly is node i's ratio interval to the reference in the all-probes
// form, along the path with the narrowest interval (ratios are positive, so
// intervals multiply end by end).
func (m *Model) ratioPoly(i int) (float64, float64) {
	if i == m.ref {
		return 1, 1
	}
	if !m.polyOK[i] {
		return math.NaN(), math.NaN()
	}
	step := func(l *link, s state) state {
		lo, hi := s[0]*l.rlo, s[1]*l.rhi
		return state{lo * (1 - relEps), hi * (1 + relEps)}
	}
	parent, _ := m.dijkstra(i, state{1, 1}, func(l *link) bool { return l.polyOK }, step,
		func(s state) float64 { return s[1] - s[0] })
	s := state{1, 1}
	for _, li := range m.pathTo(parent, i, m.ref) {
		s = step(m.links[li], s)
	}
	return s[0], s[1]
}
