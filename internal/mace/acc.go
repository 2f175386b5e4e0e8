package mace

import (
	"fmt"
	"math"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/pad"
)

// Channel is one channel of the analysis as Mace needs it.
type Channel struct {
	Inst int           // its operator instance (-1: not a mark)
	Role capacity.Role // in, out or sent
}

// Instance is one operator instance.
type Instance struct {
	Operator string
	Label    string // node/pid/INSTANCE
	Machine  string // its node (CP_NODE or host): instances on one may share CPUs
	HasIn    bool   // it marks its ins (else a source: no load of its own)
}

// Config is what the analysis needs of the run.
type Config struct {
	Hz    float64 // reference cycles per second
	T0    float64 // the first window's start (the run's first tuple record), reference cycles
	T1    float64 // the run's last tuple record
	Width float64 // a window, reference cycles
	Chans []Channel
	Insts []Instance
	// Rates are the arrival-rate multipliers whose windows are counted
	// (what-if rate=xR); 1 is always counted, first.
	Rates []float64
}

// windows is how many windows of cfg's width cover [T0, T1] at rate r.
func (cfg *Config) windows(r float64) int {
	n := math.Ceil((cfg.T1 - cfg.T0) / r / cfg.Width)
	if !(n >= 1) {
		return 1
	}
	return int(n)
}

// maxCells bounds instances x sub-windows x rates a worker counts.
const maxCells = 1 << 26

// sub is how many sub-windows a window's load is counted in. The theorem
// assumes arrivals spread evenly within a window (its A-2); a burst that
// starts inside a window would otherwise hide up to a window's capacity
// in the window's idle part, and the excess after it would be short by
// as much for as long as it lasts. Counted in 32nds, Mace at a window's
// end is the excess the run had then, give or take a 32nd's spread.
const sub = 32

// Check says what is wrong with cfg (NewAcc refuses it so).
func (cfg *Config) Check() error {
	if !(cfg.Hz > 0) || !(cfg.Width > 0) || math.IsInf(cfg.Width, 0) {
		return fmt.Errorf("mace: window of %v cycles at %v Hz", cfg.Width, cfg.Hz)
	}
	if !(cfg.T1 >= cfg.T0) {
		return fmt.Errorf("mace: the run ends (%v) before it starts (%v)", cfg.T1, cfg.T0)
	}
	if len(cfg.Rates) == 0 || cfg.Rates[0] != 1 {
		return fmt.Errorf("mace: the rates counted must start with 1, got %v", cfg.Rates)
	}
	cells := 0
	for _, r := range cfg.Rates {
		if !(r > 0) || math.IsInf(r, 0) {
			return fmt.Errorf("mace: rate x%v", r)
		}
		cells += cfg.windows(r) * sub * max(len(cfg.Insts), 1)
	}
	if cells > maxCells {
		return fmt.Errorf("mace: %s s of tuple records in windows of %s s are %d windows for %d instances: too many; give a wider --mace-window",
			fmtS((cfg.T1-cfg.T0)/cfg.Hz), fmtS(cfg.Width/cfg.Hz), cfg.windows(1), len(cfg.Insts))
	}
	return nil
}

func fmtS(s float64) string { return fmt.Sprintf("%.6g", s) }

// maxUps is how many distinct upstream channels an instance's inputs are
// told apart from (more: "many").
const maxUps = 8

// sampleShift: one visit in 2^sampleShift (by tuple id) goes to an
// instance's order sample; sampleCap bounds the sample.
const (
	sampleShift = 6
	sampleCap   = 1 << 12
)

// visit is a sampled visit: its in and its tuple's stimulus.
type visit struct{ in, stim float64 }

// Acc is one worker's count of the run's tuples.
type Acc struct {
	cfg *Config
	n   []int // windows per rate
	// counts[r][(inst*n[r]+w)*sub+s]: input events of inst whose stimulus
	// is in sub-window s of window w at rate Rates[r].
	counts [][]uint32
	// Per window (rate 1): the journeys whose stimulus is in it, and their
	// largest and smallest end-to-end latency (reference cycles).
	tuples []uint64
	latMax []float64
	latMin []float64
	// Per instance: the channels its inputs came from (-1: a tuple's first
	// record), up to maxUps, and whether there were more.
	ups  [][]int32
	many []bool
	// Per instance: a sample of visits, for the order check.
	sample [][]visit
	// Per instance: tuples whose first record is its out or sent although
	// it marks its ins (an id it made, without lineage).
	orphans []uint64
	// Tuples seen, and the span of their stimuli (reference cycles).
	seen                uint64
	stimFirst, stimLast float64
	// Per rate: sub-windows per reference cycle, and the tuple's sub-window
	// (Tuple works them out once a tuple; more rates than Tuple's stack
	// array holds use this, cache-line sized, never shared).
	inv   []float64
	fines []int
	// Each worker has its own Acc, made one after the other: padding keeps
	// this one's fields (seen is written on every tuple) off the cache
	// lines of the next object, another worker's Acc perhaps.
	_ [64]byte
}

// NewAcc is a worker's accumulator.
func NewAcc(cfg *Config) (*Acc, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	ni := len(cfg.Insts)
	a := &Acc{cfg: cfg}
	for _, r := range cfg.Rates {
		n := cfg.windows(r)
		a.n = append(a.n, n)
		a.counts = append(a.counts, make([]uint32, n*sub*ni))
	}
	for _, r := range cfg.Rates {
		a.inv = append(a.inv, sub/(r*cfg.Width))
	}
	// Written for every tuple: padded (package pad).
	a.fines = pad.Slice[int](len(cfg.Rates))
	n := a.n[0]
	a.tuples = pad.Slice[uint64](n)
	a.latMax = pad.Slice[float64](n)
	a.latMin = pad.Slice[float64](n)
	for w := range a.latMax {
		a.latMax[w], a.latMin[w] = math.Inf(-1), math.Inf(1)
	}
	a.stimFirst, a.stimLast = math.Inf(1), math.Inf(-1)
	a.ups, a.many, a.sample = make([][]int32, ni), make([]bool, ni), make([][]visit, ni)
	a.orphans = pad.Slice[uint64](ni)
	return a, nil
}

// window is the window of a stimulus at rate r (clamped to the run).
func (a *Acc) window(stim float64, r int) int { return a.fine(stim, r) / sub }

// Bytes is what a worker's accumulator of cfg takes.
func Bytes(cfg *Config) int64 {
	ni := int64(max(len(cfg.Insts), 1))
	var b int64
	for _, r := range cfg.Rates {
		b += int64(cfg.windows(r)) * sub * ni * 4
	}
	n := int64(cfg.windows(1))
	return b + n*24 + ni*(sampleCap*16+maxUps*4)
}

// fine is the sub-window of a stimulus at rate r, counted from the first
// window's first (clamped to the run).
func (a *Acc) fine(stim float64, r int) int {
	x := (stim - a.cfg.T0) * a.inv[r]
	if !(x > 0) {
		return 0
	}
	if n := a.n[r] * sub; x >= float64(n) {
		return n - 1
	}
	return int(x)
}

// Tuple takes one tuple's records in hop order (the analysis's channel
// ranking), its id, and whether it is a journey (its latency counts: not
// absorbed into another tuple by lineage).
func (a *Acc) Tuple(id int64, evs []capacity.Event, journey bool) {
	if len(evs) == 0 {
		return
	}
	stim := evs[0].Est
	if stim != stim {
		return // a record of a node the model does not reach
	}
	a.seen++
	if stim < a.stimFirst {
		a.stimFirst = stim
	}
	if stim > a.stimLast {
		a.stimLast = stim
	}
	cfg := a.cfg
	if c := cfg.Chans[evs[0].Ch]; c.Inst >= 0 && c.Role != capacity.RoleIn && cfg.Insts[c.Inst].HasIn {
		a.orphans[c.Inst]++
	}
	// The tuple's sub-window per rate, on the stack: written for every
	// tuple, it must not share a cache line with another worker's data.
	var buf [8]int
	fines := a.fines
	if len(fines) <= len(buf) {
		fines = buf[:len(fines)]
	}
	for r := range fines {
		fines[r] = a.fine(stim, r)
	}
	w0 := fines[0] / sub
	sampled := uint64(id)*0x9E3779B97F4A7C15>>(64-sampleShift) == 0
	marked := false
	for i := range evs {
		c := cfg.Chans[evs[i].Ch]
		if c.Inst < 0 || c.Role != capacity.RoleIn {
			continue
		}
		marked = true
		j := c.Inst
		for r := range cfg.Rates {
			a.counts[r][j*a.n[r]*sub+fines[r]]++
		}
		// Where the input came from.
		up := int32(-1)
		if i > 0 {
			up = int32(evs[i-1].Ch)
		}
		if ups := a.ups[j]; !a.many[j] && (len(ups) == 0 || ups[len(ups)-1] != up) && !containsUp(ups, up) {
			if len(a.ups[j]) == maxUps {
				a.many[j] = true
			} else {
				a.ups[j] = append(a.ups[j], up)
			}
		}
		if sampled && len(a.sample[j]) < sampleCap {
			a.sample[j] = append(a.sample[j], visit{evs[i].Est, stim})
		}
	}
	if !marked || !journey {
		return
	}
	lat := evs[len(evs)-1].Est - stim
	a.tuples[w0]++
	if lat > a.latMax[w0] {
		a.latMax[w0] = lat
	}
	if lat < a.latMin[w0] {
		a.latMin[w0] = lat
	}
}

func containsUp(ups []int32, up int32) bool {
	for _, u := range ups {
		if u == up {
			return true
		}
	}
	return false
}

// Merge adds o's counts to a's (workers of one run).
func (a *Acc) Merge(o *Acc) {
	for r := range a.counts {
		for k, v := range o.counts[r] {
			a.counts[r][k] += v
		}
	}
	for w := range a.tuples {
		a.tuples[w] += o.tuples[w]
		a.latMax[w] = math.Max(a.latMax[w], o.latMax[w])
		a.latMin[w] = math.Min(a.latMin[w], o.latMin[w])
	}
	for j := range a.ups {
		for _, up := range o.ups[j] {
			if !a.many[j] && !containsUp(a.ups[j], up) {
				if len(a.ups[j]) == maxUps {
					a.many[j] = true
				} else {
					a.ups[j] = append(a.ups[j], up)
				}
			}
		}
		a.many[j] = a.many[j] || o.many[j]
		if room := sampleCap - len(a.sample[j]); room > 0 {
			a.sample[j] = append(a.sample[j], o.sample[j][:min(room, len(o.sample[j]))]...)
		}
	}
	for j, k := range o.orphans {
		a.orphans[j] += k
	}
	a.seen += o.seen
	a.stimFirst, a.stimLast = math.Min(a.stimFirst, o.stimFirst), math.Max(a.stimLast, o.stimLast)
}
