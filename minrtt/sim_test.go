package minrtt

import (
	"math"
	"math/rand"
)

// A simulated cluster with exact ground truth: true time tau (in "ticks",
// think 3 GHz cycles), and node counters reading off + floor(rate*tau).

type simNode struct {
	name string
	off  uint64
	rate float64
}

func (n simNode) read(tau float64) uint64 { return n.off + uint64(math.Floor(n.rate*tau)) }

// tau is the true instant at which the node's continuous counter equals c.
func (n simNode) tau(c uint64) float64 { return float64(int64(c-n.off)) / n.rate }

type sim struct {
	nodes []simNode
	rng   *rand.Rand
	// one-way delays per ordered pair: base + exponential jitter (mean
	// jitter) + a spike (up to spikeMax) with probability spikeP.
	base      map[[2]int]float64
	jitter    float64
	spikeP    float64
	spikeMax  float64
	minOneWay map[[2]int]float64 // smallest delay actually drawn, per ordered pair
	perDir    int
	firstTau  float64
	lastTau   float64
	noDirect  map[[2]int]bool // unordered pairs (lo, hi) that never probe each other
	badPair   map[[2]int]float64
	missing   map[int]map[int]bool // round -> node index -> missing
}

func newSim(seed int64) *sim {
	s := &sim{
		nodes: []simNode{
			{"a", 5_000_000_000, 1.0},
			{"b", 2_000_000_000, 0.9997},
			{"c", 9_000_000_000_000, 1.0004},
			{"d", 300_000_000_000, 1.00013},
		},
		rng:       rand.New(rand.NewSource(seed)),
		base:      map[[2]int]float64{},
		jitter:    8000,
		spikeP:    0.02,
		spikeMax:  3e6,
		minOneWay: map[[2]int]float64{},
		perDir:    200,
		noDirect:  map[[2]int]bool{},
		badPair:   map[[2]int]float64{},
		missing:   map[int]map[int]bool{},
	}
	for i := range s.nodes {
		for j := range s.nodes {
			if i != j {
				// Asymmetric: 20k-35k ticks (7-12 us at 3 GHz) one way.
				s.base[[2]int{i, j}] = 20000 + 15000*s.rng.Float64()
			}
		}
	}
	return s
}

func (s *sim) delay(i, j int) float64 {
	d := s.base[[2]int{i, j}] + s.badPair[pairKey(i, j)] + s.rng.ExpFloat64()*s.jitter
	if s.rng.Float64() < s.spikeP {
		d += s.rng.Float64() * s.spikeMax
	}
	k := [2]int{i, j}
	if v, ok := s.minOneWay[k]; !ok || d < v {
		s.minOneWay[k] = d
	}
	return d
}

func pairKey(i, j int) [2]int {
	if i > j {
		i, j = j, i
	}
	return [2]int{i, j}
}

// rounds simulates rounds starting at the given true times.
func (s *sim) rounds(starts []float64) []*Round {
	var out []*Round
	s.firstTau, s.lastTau = math.Inf(1), math.Inf(-1)
	for ri, t0 := range starts {
		r := &Round{Format: RoundFormat, Version: RoundVersion, Round: ri + 1, Label: "during",
			Server: "sim", StartedNs: int64(t0 / 3), PerDir: s.perDir}
		for i, n := range s.nodes {
			if s.missing[ri][i] {
				r.Missing = append(r.Missing, Missing{Node: n.name, Why: "simulated absence"})
				continue
			}
			r.Nodes = append(r.Nodes, Node{Name: n.name, Host: "sim", TSCHz: 3e9 * n.rate, TSCHzSource: "sim"})
		}
		tau := t0
		for o := range s.nodes {
			for p := range s.nodes {
				if o == p || s.missing[ri][o] || s.missing[ri][p] || s.noDirect[pairKey(o, p)] {
					continue
				}
				d := Direction{Origin: s.nodes[o].name, Responder: s.nodes[p].name, Sent: s.perDir}
				for k := 0; k < s.perDir; k++ {
					send := tau
					at := send + s.delay(o, p)
					back := at + s.delay(p, o)
					d.Probes = append(d.Probes, Probe{
						Send: s.nodes[o].read(send), Resp: s.nodes[p].read(at), Recv: s.nodes[o].read(back)})
					s.firstTau, s.lastTau = math.Min(s.firstTau, send), math.Max(s.lastTau, back)
					tau = back + 5000 + 20000*s.rng.Float64()
				}
				r.Dirs = append(r.Dirs, d)
			}
		}
		r.EndedNs = int64(tau / 3)
		out = append(out, r)
	}
	return out
}

// floor is the smallest half-width any strict method could reach for
// translating between nodes i and j: (min one-way i->j + min j->i)/2, in
// ticks (the reference runs at rate ~1 tick).
func (s *sim) floor(i, j int) float64 {
	return (s.minOneWay[[2]int{i, j}] + s.minOneWay[[2]int{j, i}]) / 2
}

// truthPoint is node i's reading c in node ref's counter, relative to origin.
func (s *sim) truthPoint(ref, i int, c uint64, origin uint64) float64 {
	t := s.tau(i, c)
	return s.nodes[ref].rate*t - float64(origin-s.nodes[ref].off)
}

func (s *sim) tau(i int, c uint64) float64 { return s.nodes[i].tau(c) }

// truthDuration is the true duration between readings start (node si) and
// end (node ei) in ref's counter.
func (s *sim) truthDuration(ref, si int, start uint64, ei int, end uint64) float64 {
	if si == ei {
		return s.nodes[ref].rate * float64(int64(end-start)) / s.nodes[si].rate
	}
	return s.nodes[ref].rate * (s.tau(ei, end) - s.tau(si, start))
}
