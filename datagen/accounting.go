package datagen

import "sort"

// maxRecordedGaps: gaps kept for late ids to repay and for the report
// (FRAMING.md, Accounting).
const maxRecordedGaps = 4096

// accounting is one stream's bookkeeping, exactly as FRAMING.md's
// Accounting section says (the Java object factory does the same).
type accounting struct {
	first, end                                         uint64 // the range [first, end) from HELLO
	next                                               uint64
	gaps                                               [][2]uint64 // recorded gaps, inclusive, in id order
	overflow                                           bool        // a gap was not recorded
	received, lost, outOfOrder, duplicates, outOfRange uint64
}

func newAccounting(first, tuples uint64) *accounting {
	return &accounting{first: first, end: first + tuples, next: first}
}

func (a *accounting) add(id uint64) {
	switch {
	case id < a.first || id >= a.end:
		a.outOfRange++
	case id == a.next:
		a.received++
		a.next++
	case id > a.next:
		a.gap(a.next, id-1)
		a.received++
		a.next = id + 1
	default:
		a.late(id)
	}
}

func (a *accounting) gap(from, to uint64) {
	a.lost += to - from + 1
	if len(a.gaps) < maxRecordedGaps {
		a.gaps = append(a.gaps, [2]uint64{from, to})
	} else {
		a.overflow = true
	}
}

// late: an id below next repays the recorded gap it lies in, or was seen.
func (a *accounting) late(id uint64) {
	i := sort.Search(len(a.gaps), func(i int) bool { return a.gaps[i][1] >= id })
	if i == len(a.gaps) || a.gaps[i][0] > id {
		a.duplicates++
		return
	}
	g := a.gaps[i]
	switch {
	case g[0] == g[1]:
		a.gaps = append(a.gaps[:i], a.gaps[i+1:]...)
	case id == g[0]:
		a.gaps[i][0]++
	case id == g[1]:
		a.gaps[i][1]--
	default: // split: the second half is a new recorded gap if there is room
		if len(a.gaps) < maxRecordedGaps {
			a.gaps = append(a.gaps, [2]uint64{})
			copy(a.gaps[i+2:], a.gaps[i+1:])
			a.gaps[i] = [2]uint64{g[0], id - 1}
			a.gaps[i+1] = [2]uint64{id + 1, g[1]}
		} else {
			// No room: keep the lower half recorded; the upper half's ids
			// are still lost, but no longer matched (FRAMING.md).
			a.gaps[i][1] = id - 1
			a.overflow = true
		}
	}
	a.lost--
	a.received++
	a.outOfOrder++
}

// finish closes the stream at sent tuples: the tail never received is a gap.
func (a *accounting) finish(sent uint64) {
	if end := a.first + sent; a.next < end {
		a.gap(a.next, end-1)
		a.next = end
	}
}

func (a *accounting) report(r *Report) {
	r.Received, r.Lost, r.OutOfOrder, r.Duplicates, r.OutOfRange = a.received, a.lost, a.outOfOrder, a.duplicates, a.outOfRange
	n := min(len(a.gaps), maxGaps)
	r.Gaps = append([][2]uint64(nil), a.gaps[:n]...)
	r.GapsTruncated = a.overflow || len(a.gaps) > maxGaps
}
