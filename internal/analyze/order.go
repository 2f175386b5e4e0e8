package analyze

import (
	"fmt"
	"slices"
	"strings"
)

// A tuple's hops depend on the order of its channels. Reference estimates
// alone cannot give it when a hop is shorter than the translation bound: an
// asymmetric network biases every estimate of a node the same way, and
// tuples then seem to arrive before they leave. So the order is one per
// channel, for all tuples, decided pair by pair from what the data is sure
// of: two channels of one process are ordered by their own TSC, and two
// events whose bound intervals do not overlap are ordered for certain.
// Only pairs no tuple orders for certain fall back to the majority of
// estimates. The channels are then ranked by how many others they precede
// (a Copeland ranking, exact for a chain or any acyclic topology that the
// votes get right). Config.Order overrides it where the user knows better.

// maxVoteEvents caps the events of one tuple that vote (pairs grow as n²).
const maxVoteEvents = 32

type votes struct{ sure, likely [2]uint64 } // [0]: lower index first

// orderVotes tallies, per channel pair (lower index first in the key), how
// often each comes first.
type orderVotes map[[2]uint32]*votes

func (a *analysis) vote(ov orderVotes, evs []event) {
	if len(evs) > maxVoteEvents {
		evs = evs[:maxVoteEvents]
	}
	for i := range evs {
		for j := i + 1; j < len(evs); j++ {
			x, y := evs[i], evs[j] // x.est <= y.est
			if x.ch == y.ch {
				continue
			}
			cx, cy := a.chans[x.ch], a.chans[y.ch]
			first := x // the event that came first
			sure := false
			switch {
			case cx.Node == cy.Node && cx.PID == cy.PID:
				sure = true
				if y.tsc < x.tsc {
					first = y
				}
			case y.est-y.err > x.est+x.err:
				sure = true
			}
			k := [2]uint32{x.ch, y.ch}
			if k[0] > k[1] {
				k[0], k[1] = k[1], k[0]
			}
			v := ov[k]
			if v == nil {
				v = &votes{}
				ov[k] = v
			}
			side := 0
			if first.ch != k[0] {
				side = 1
			}
			if sure {
				v.sure[side]++
			} else {
				v.likely[side]++
			}
		}
	}
}

// rankChannels turns the votes (and cfg.Order) into a rank per channel.
func (a *analysis) rankChannels(ov orderVotes) ([]int, error) {
	n := len(a.chans)
	wins := make([]int, n)
	for k, v := range ov {
		lowFirst := v.sure[0] > v.sure[1] || (v.sure[0] == v.sure[1] && v.likely[0] > v.likely[1])
		highFirst := v.sure[1] > v.sure[0] || (v.sure[0] == v.sure[1] && v.likely[1] > v.likely[0])
		if lowFirst {
			wins[k[0]]++
		} else if highFirst {
			wins[k[1]]++
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	given := map[int]int{} // channel -> position in cfg.Order
	for pos, label := range a.cfg.Order {
		found := false
		for i, c := range a.chans {
			if c.Label() == label || c.Name == label {
				given[i], found = pos, true
			}
		}
		if !found {
			var all []string
			for _, c := range a.chans {
				if c.Role == RoleTuples {
					all = append(all, c.Label())
				}
			}
			return nil, fmt.Errorf("--order: no channel %q (channels: %s)", label, strings.Join(all, ", "))
		}
	}
	slices.SortStableFunc(idx, func(x, y int) int {
		px, okx := given[x]
		py, oky := given[y]
		switch {
		case okx && oky:
			return px - py
		case okx:
			return -1
		case oky:
			return 1
		}
		if wins[x] != wins[y] {
			return wins[y] - wins[x]
		}
		return strings.Compare(a.chans[x].Label(), a.chans[y].Label())
	})
	rank := make([]int, n)
	for r, i := range idx {
		rank[i] = r
	}
	return rank, nil
}
