package analyze

import (
	"fmt"
	"slices"
	"strings"

	"cloudprofiler/internal/capacity"
)

// A tuple's hops depend on the order of its channels. Reference estimates
// alone cannot give it when a hop is shorter than the translation bound: an
// asymmetric network biases every estimate of a node the same way, and
// tuples then seem to arrive before they leave. So the order is one per
// channel, for all tuples, decided pair by pair from what the data is sure
// of: two channels of one process are ordered by their own TSC, and two
// events whose bound intervals do not overlap are ordered for certain.
// Only pairs no tuple orders for certain fall back to the majority of
// estimates. Config.Order overrides it where the user knows better
// (rankChannels says how the three combine).

// maxVoteEvents caps the events of one tuple that vote (pairs grow as n²).
const maxVoteEvents = 32

type votes struct{ sure, likely [2]uint64 } // [0]: lower index first

// orderVotes tallies, per channel pair (lower index first in the key), how
// often each comes first.
type orderVotes map[[2]uint32]*votes

func (a *analysis) vote(ov orderVotes, evs []event) {
	var c voteCache
	a.voteCached(ov, &c, evs)
}

// voteCache remembers where the latest pairs' tallies are: tuples cross the
// same few channel pairs again and again, and a map lookup per pair of
// records would cost more than the rest of the vote.
type voteCache [64]struct {
	k [2]uint32
	v *votes
}

func (a *analysis) voteCached(ov orderVotes, cache *voteCache, evs []event) {
	if len(evs) > maxVoteEvents {
		evs = evs[:maxVoteEvents]
	}
	for i := range evs {
		for j := i + 1; j < len(evs); j++ {
			x, y := &evs[i], &evs[j] // x.est <= y.est
			if x.ch == y.ch {
				continue
			}
			first := x // the event that came first
			sure := false
			switch {
			case a.procOf[x.ch] == a.procOf[y.ch]: // one process: its own counter
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
			slot := &cache[(k[0]*31+k[1])&63]
			v := slot.v
			if v == nil || slot.k != k {
				v = ov[k]
				if v == nil {
					v = &votes{}
					ov[k] = v
				}
				slot.k, slot.v = k, v
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
// Hard relations come first: the user's order between the channels it
// lists, then, for other pairs, the side most sure votes are for. The rank
// is a topological order of them (Kahn's algorithm) in which, among the
// channels free to come next, the one that precedes most others wins
// (hard or likely relations, a Copeland score); a cycle of sure relations,
// which only inconsistent data can make, is broken the same way.
func (a *analysis) rankChannels(ov orderVotes) ([]int, error) {
	n := len(a.chans)
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
	// The hard relations as edges: succ[x] the channels x must precede,
	// indeg[y] how many not yet placed must precede y. (An n x n matrix
	// and a scan of it for every pick made this cubic: 4,000 channels took
	// over 200 s, and 10,000 would have held 100 MB.)
	hard := map[[2]int]bool{}
	succ := make([][]int, n)
	indeg := make([]int, n)
	wins := make([]int, n)
	decide := func(x, y int, isHard bool) {
		wins[x]++
		if isHard && !hard[[2]int{x, y}] {
			hard[[2]int{x, y}] = true
			succ[x] = append(succ[x], y)
			indeg[y]++
		}
	}
	for k, v := range ov {
		x, y := int(k[0]), int(k[1])
		px, okx := given[x]
		py, oky := given[y]
		switch {
		case okx && oky && px != py:
			if px < py {
				decide(x, y, true)
			} else {
				decide(y, x, true)
			}
		case v.sure[0] > v.sure[1]:
			decide(x, y, true)
		case v.sure[1] > v.sure[0]:
			decide(y, x, true)
		case v.likely[0] > v.likely[1]:
			decide(x, y, false)
		case v.likely[1] > v.likely[0]:
			decide(y, x, false)
		}
	}
	// Listed channels no tuple shares are still ordered as listed.
	for x, px := range given {
		for y, py := range given {
			if px < py && !hard[[2]int{x, y}] && !hard[[2]int{y, x}] {
				decide(x, y, true)
			}
		}
	}
	placed := make([]bool, n)
	rank := make([]int, n)
	labels := make([]string, n) // compared n^2 times: made once
	for i, c := range a.chans {
		labels[i] = c.Label()
	}
	better := func(x, y int) bool { // x should come before y among free channels
		if _, okx := given[x]; okx {
			if _, oky := given[y]; oky && given[x] != given[y] {
				return given[x] < given[y]
			}
		}
		if wins[x] != wins[y] {
			return wins[x] > wins[y]
		}
		return labels[x] < labels[y]
	}
	for r := 0; r < n; r++ {
		pick, pickFree := -1, false
		for x := 0; x < n; x++ {
			if placed[x] {
				continue
			}
			free := indeg[x] == 0
			// A free channel beats one that is not (a cycle's member).
			if pick < 0 || (free && !pickFree) || (free == pickFree && better(x, pick)) {
				pick, pickFree = x, free
			}
		}
		placed[pick] = true
		rank[pick] = r
		for _, y := range succ[pick] {
			indeg[y]--
		}
	}
	a.sentAfterOut(rank)
	return rank, nil
}

// sentAfterOut puts each marked instance's sent channel right after its
// out (the naming rule: the hand-off returned). The votes cannot: on a
// shared machine the thread that handed a tuple on is often preempted
// before it logs sent, while the next operator takes the tuple, works
// and hands it on (seen with tandem and a busy second vCPU: "A sent" came
// after "B sent" in most tuples, and the sink's hand-off became A's).
func (a *analysis) sentAfterOut(rank []int) {
	plan := a.cap.plan
	if plan == nil {
		plan = a.cp.plan
	}
	if plan == nil {
		return
	}
	order := make([]int, len(rank))
	for ch, r := range rank {
		order[r] = ch
	}
	for i := range plan.Instances {
		in := &plan.Instances[i]
		out, sent := in.Chans[capacity.RoleOut], in.Chans[capacity.RoleSent]
		if out < 0 || sent < 0 {
			continue
		}
		order = slices.DeleteFunc(order, func(ch int) bool { return ch == sent })
		at := slices.Index(order, out)
		order = slices.Insert(order, at+1, sent)
	}
	for r, ch := range order {
		rank[ch] = r
	}
}
