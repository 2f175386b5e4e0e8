package probe

// step is a set of directions (origin, responder), as indices into the
// round's node list, that run at the same time: no node appears twice, so
// no node is origin and responder at once and no link carries two probes.
type step [][2]int

// schedule orders all n(n-1) directions between n nodes into steps with the
// round-robin tournament "circle" method: node 0 stays put and the others
// rotate, giving n-1 (n even) or n (n odd, one node sits out each time)
// perfect matchings. Each matching runs twice: first every pair's a->b,
// then every b->a.
func schedule(n int) []step {
	if n < 2 {
		return nil
	}
	m := n
	if m%2 == 1 {
		m++ // slot n is the bye
	}
	ring := make([]int, m)
	for i := range ring {
		ring[i] = i
	}
	var steps []step
	for r := 0; r < m-1; r++ {
		var fwd, rev step
		for i := 0; i < m/2; i++ {
			a, b := ring[i], ring[m-1-i]
			if a >= n || b >= n {
				continue
			}
			fwd = append(fwd, [2]int{a, b})
			rev = append(rev, [2]int{b, a})
		}
		steps = append(steps, fwd, rev)
		// Rotate all but the first slot one place.
		last := ring[m-1]
		copy(ring[2:], ring[1:m-1])
		ring[1] = last
	}
	return steps
}
