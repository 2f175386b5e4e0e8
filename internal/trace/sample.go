// Package trace writes a sample of tuples' journeys as a trace in the Trace
// Event Format (the JSON that Perfetto's UI and chrome://tracing open): a
// process per node, a thread per operator instance (or per channel outside
// any operator), a slice per compute step (a tuple's consecutive records on
// one thread: an instance's in to its out), and a flow through every slice
// of a tuple, whose arrows are its transfers. Timestamps are in the
// reference clock, microseconds from the run's first tuple record; each
// slice carries its strict bound, and the transfer into it, in its args.
//
// The sample (Sampler) is the slowest tuples, end to end, and a uniform
// sample of the others chosen by a hash of their ids: the same whatever
// the number of workers, fed in any order.
package trace

import (
	"container/heap"
	"slices"
)

// Rec is one record of a tuple in the reference clock: its channel, its
// estimate (cycles), and the hop from the tuple's previous record to it:
// the duration's estimate and strict bound (cycles; 0 for the first).
type Rec struct {
	Ch            int32
	Est, Dur, Err float64
}

// Tuple is one sampled tuple: its id, end-to-end duration (cycles), and
// records in the channel order.
type Tuple struct {
	ID   int64
	E2E  float64
	Recs []Rec
	hash uint64
}

// Slowest is how many of a sample of n are the slowest tuples: a tenth,
// at least one.
func Slowest(n int) int {
	if n <= 0 {
		return 0
	}
	return max(1, n/10)
}

// Sampler keeps the Slowest(n) slowest tuples and the n with the smallest
// hash of their ids.
type Sampler struct {
	n, nSlow int
	slow     slowHeap
	uni      hashHeap
}

// NewSampler keeps a sample of n tuples.
func NewSampler(n int) *Sampler { return &Sampler{n: n, nSlow: Slowest(n)} }

// hash mixes an id (a bijection: distinct ids never tie).
func hash(id uint64) uint64 {
	x := id * 0x9E3779B97F4A7C15
	x ^= x >> 29
	x *= 0xBF58476D1CE4E5B9
	return x ^ x>>32
}

func slower(a, b *Tuple) bool { return a.E2E > b.E2E || a.E2E == b.E2E && a.ID > b.ID }

// Wants says whether a tuple would enter the sample: call Add only then
// (the records are built for the few that would).
func (s *Sampler) Wants(id int64, e2e float64) bool {
	if s.n <= 0 {
		return false
	}
	if len(s.slow) < s.nSlow || len(s.uni) < s.n {
		return true
	}
	t := Tuple{ID: id, E2E: e2e}
	return slower(&t, &s.slow[0]) || hash(uint64(id)) < s.uni[0].hash
}

// Add offers a tuple; recs are copied when it is kept.
func (s *Sampler) Add(id int64, e2e float64, recs []Rec) {
	if s.n <= 0 {
		return
	}
	t := Tuple{ID: id, E2E: e2e, hash: hash(uint64(id))}
	inSlow := len(s.slow) < s.nSlow || slower(&t, &s.slow[0])
	inUni := len(s.uni) < s.n || t.hash < s.uni[0].hash
	if !inSlow && !inUni {
		return
	}
	t.Recs = slices.Clone(recs)
	if inSlow {
		heap.Push(&s.slow, t)
		if len(s.slow) > s.nSlow {
			heap.Pop(&s.slow)
		}
	}
	if inUni {
		heap.Push(&s.uni, t)
		if len(s.uni) > s.n {
			heap.Pop(&s.uni)
		}
	}
}

// Merge offers o's tuples to s.
func (s *Sampler) Merge(o *Sampler) {
	for _, t := range o.slow {
		s.Add(t.ID, t.E2E, t.Recs)
	}
	for _, t := range o.uni {
		s.Add(t.ID, t.E2E, t.Recs)
	}
}

// Sample is the sample: the slowest tuples, then the uniform ones up to n
// in all, each once; slow says how many of them are the slowest.
func (s *Sampler) Sample() (ts []Tuple, slow int) {
	seen := map[int64]bool{}
	sl := slices.Clone(s.slow)
	slices.SortFunc(sl, func(a, b Tuple) int {
		if slower(&a, &b) {
			return -1
		}
		return 1
	})
	for _, t := range sl {
		seen[t.ID] = true
		ts = append(ts, t)
	}
	un := slices.Clone(s.uni)
	slices.SortFunc(un, func(a, b Tuple) int {
		if a.hash < b.hash {
			return -1
		}
		return 1
	})
	for _, t := range un {
		if len(ts) >= s.n {
			break
		}
		if !seen[t.ID] {
			seen[t.ID] = true
			ts = append(ts, t)
		}
	}
	return ts, len(sl)
}

// slowHeap: the fastest of the slowest on top.
type slowHeap []Tuple

func (h slowHeap) Len() int           { return len(h) }
func (h slowHeap) Less(i, j int) bool { return slower(&h[j], &h[i]) }
func (h slowHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slowHeap) Push(x any)        { *h = append(*h, x.(Tuple)) }
func (h *slowHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// hashHeap: the largest hash on top.
type hashHeap []Tuple

func (h hashHeap) Len() int           { return len(h) }
func (h hashHeap) Less(i, j int) bool { return h[i].hash > h[j].hash }
func (h hashHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *hashHeap) Push(x any)        { *h = append(*h, x.(Tuple)) }
func (h *hashHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
