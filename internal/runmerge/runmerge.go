// Package runmerge sorts a slice that is a few ascending runs already (a
// channel's records in the order it logged climbing ids; a partition's
// visits, climbing with its ids) by merging neighbouring runs pass after
// pass: ceil(log2(runs)) sequential passes, where a radix sort of the same
// keys takes one pass a digit. analyze's join and the critical path's
// spill use it where it takes fewer passes than their radix sorts.
package runmerge

// Key is what the runs are ascending in.
type Key interface{ RunKey() uint64 }

// Sort sorts a, whose ascending runs start at starts (starts[0] == 0, in
// order; starts is overwritten), by merging them with b (as long as a) as
// the other buffer, and returns the sorted slice (a or b; the other is
// the buffer). Stable: ties go to the earlier run, so equal keys keep
// their order in a.
func Sort[T Key](a, b []T, starts []int) (sorted, buf []T) {
	for len(starts) > 1 {
		next := starts[:0]
		for r := 0; r < len(starts); r += 2 {
			s := starts[r]
			next = append(next, s)
			if r+1 == len(starts) {
				copy(b[s:], a[s:])
				break
			}
			m, e := starts[r+1], len(a)
			if r+2 < len(starts) {
				e = starts[r+2]
			}
			i, j, o := s, m, s
			for i < m && j < e {
				if a[j].RunKey() < a[i].RunKey() {
					b[o] = a[j]
					j++
				} else {
					b[o] = a[i]
					i++
				}
				o++
			}
			o += copy(b[o:], a[i:m])
			copy(b[o:], a[j:e])
		}
		starts = next
		a, b = b, a
	}
	return a, b
}
