// Package trace writes a sample of tuples' journeys as a trace, in the
// Trace Event Format (the JSON that Perfetto's UI and chrome://tracing
// open: Write) or in Perfetto's protobuf (WriteProto): a process per node, a thread per operator instance (or per channel outside
// any operator), a slice per compute step (a tuple's consecutive records on
// one thread: an instance's in to its out), and a flow through every slice
// of a tuple, whose arrows are its transfers. Timestamps are in the
// reference clock, microseconds from the run's first tuple record; each
// slice carries its strict bound, and the transfer into it, in its args.
// Counters beside the slices (Layout.Counters) say how busy each instance
// was, window by window.
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

// Tuple is one sampled tuple: its id, end-to-end duration (cycles: the
// estimate from its first record to its last, as durations.parquet has
// it), and records in the channel order.
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
	slow     tupleHeap // the fastest of the slowest on top
	uni      tupleHeap // the largest hash on top
}

// NewSampler keeps a sample of n tuples.
func NewSampler(n int) *Sampler {
	return &Sampler{n: n, nSlow: Slowest(n),
		slow: tupleHeap{top: func(a, b *Tuple) bool { return slower(b, a) }},
		uni:  tupleHeap{top: func(a, b *Tuple) bool { return a.hash > b.hash }}}
}

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
	if len(s.slow.ts) < s.nSlow || len(s.uni.ts) < s.n {
		return true
	}
	t := Tuple{ID: id, E2E: e2e}
	return slower(&t, &s.slow.ts[0]) || hash(uint64(id)) < s.uni.ts[0].hash
}

// Add offers a tuple; recs are copied when it is kept.
func (s *Sampler) Add(id int64, e2e float64, recs []Rec) {
	if s.n <= 0 {
		return
	}
	t := Tuple{ID: id, E2E: e2e, hash: hash(uint64(id))}
	inSlow := len(s.slow.ts) < s.nSlow || slower(&t, &s.slow.ts[0])
	inUni := len(s.uni.ts) < s.n || t.hash < s.uni.ts[0].hash
	if inSlow {
		s.slow.keep(t, recs, s.nSlow)
	}
	if inUni {
		s.uni.keep(t, recs, s.n)
	}
}

// Merge offers o's tuples to s, each once (a tuple can be among both the
// slowest and the uniform ones).
func (s *Sampler) Merge(o *Sampler) {
	seen := map[int64]bool{}
	for _, h := range [][]Tuple{o.slow.ts, o.uni.ts} {
		for _, t := range h {
			if !seen[t.ID] {
				seen[t.ID] = true
				s.Add(t.ID, t.E2E, t.Recs)
			}
		}
	}
}

// Sample is the sample: the slowest tuples, then the uniform ones up to n
// in all, each once; slow says how many of them are the slowest.
func (s *Sampler) Sample() (ts []Tuple, slow int) {
	seen := map[int64]bool{}
	sl := slices.Clone(s.slow.ts)
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
	un := slices.Clone(s.uni.ts)
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

// tupleHeap is a heap of tuples, the first to go on top (top(a, b): a
// goes before b).
type tupleHeap struct {
	ts  []Tuple
	top func(a, b *Tuple) bool
}

func (h *tupleHeap) Len() int           { return len(h.ts) }
func (h *tupleHeap) Less(i, j int) bool { return h.top(&h.ts[i], &h.ts[j]) }
func (h *tupleHeap) Swap(i, j int)      { h.ts[i], h.ts[j] = h.ts[j], h.ts[i] }
func (h *tupleHeap) Push(x any)         { h.ts = append(h.ts, x.(Tuple)) }
func (h *tupleHeap) Pop() any {
	t := h.ts[len(h.ts)-1]
	h.ts = h.ts[:len(h.ts)-1]
	return t
}

// keep puts t, with a copy of recs, in the heap of at most limit tuples:
// each heap keeps its own copy, and a full heap's root is replaced in
// place, its records' memory reused (a run whose latency climbs sends
// most tuples into the slowest).
func (h *tupleHeap) keep(t Tuple, recs []Rec, limit int) {
	if len(h.ts) < limit {
		t.Recs = slices.Clone(recs)
		heap.Push(h, t)
		return
	}
	t.Recs = append(h.ts[0].Recs[:0], recs...)
	h.ts[0] = t
	heap.Fix(h, 0)
}
