package critpath

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"os"
	"slices"
	"sync"
	"unsafe"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/cost"
	"cloudprofiler/internal/pad"
)

// Channel is one channel of the analysis as pass 1 reads it; its place in
// Config.Chans is the index events carry.
type Channel struct {
	Inst int           // the operator instance it marks (-1: none)
	Role capacity.Role // in, out or sent (with Inst >= 0)
	Proc int           // its process (node and pid), numbered
	Name string        // what names an unmarked record in a link ("FROM -> TO")
	// Rate is reference cycles per cycle of the channel's node (the
	// translation of a duration on that node): with Config.Fast, an in's
	// previous departure is its estimate less (raw in - raw departure) * Rate.
	Rate float64
	// Waits: its records say whether the instance's thread waited since
	// the instance's previous mark (logfile.Header.Waits; Event.Waited).
	Waits bool
}

// Instance is one operator instance (a worker).
type Instance struct {
	Operator string
	HasIn    bool // it marks its ins (else it is a source: its records are hand-offs only)
	HasOut   bool // it marks its outs: its own work per tuple is in to out (the cost model's)
	HasSent  bool // it marks its sents
	Lineage  bool // it logs lineage: a tuple whose last record is its in was absorbed into another
	Rank     int  // its in's place in the hop order: the highest is furthest downstream
	// Deps is the raw counters of its departures (with Config.Fast).
	Deps *DepIndex
}

// Config is what the analysis needs of the run.
type Config struct {
	Chans []Channel
	Insts []Instance
	Hz    float64 // reference cycles a second
	T0    float64 // the run's first tuple record, reference cycles (Finish)
	Slice float64 // a slice, reference cycles
	// Mem is what the visits may take in memory, all collectors together;
	// past it they go to sorted runs in Dir.
	Mem     int64
	Workers int
	Dir     string
	// Fast: every instance that marks its in has a departure index (Deps)
	// and marks no sent. Pass 1 then finds each in's previous departure in
	// the index, splits the hand-off there, and keeps only the visits that
	// pass 2 needs: those where the instance waited (the hand-off came
	// after its previous departure; its first visit; a tuple's first
	// record) or whose departure is after its out. Between two such visits
	// the instance worked without a break: its own path.
	Fast bool
	// Costs are the grids the cost model is summed on (package cost: each
	// visit's own work, its send or time blocked, and its take while the
	// instance was backlogged); none: no cost model.
	Costs []cost.Grid
}

// Event is one record of a tuple, in hop order: its channel, its estimate
// in the reference counter, and the strict bound of the hop from the
// previous record to it (0 for the first).
type Event struct {
	Ch     uint32
	Waited bool // its instance's thread waited since its previous mark (on a channel that Waits)
	Est    float64
	Err    float64
	Raw    uint64 // the record's counter, in its node's clock (Config.Fast)
}

// Visit is a tuple's visit to an operator instance that marks its in, as
// pass 2 needs it. 64 bytes.
type Visit struct {
	In, H    int64 // the in; the hand-off (the tuple's record before the in)
	Out, Dep int64 // the out (In without one) and the departure: sent, else out, else in
	Err      float32
	Bucket   int32  // the tuple's end-to-end bucket; noBucket: not a journey
	Inst     uint16 // the instance
	Up       uint16 // the hand-off's instance + 1 when it is one that marks its ins; 0: another record; noHandOff: none
	Next     uint16 // the instance the tuple visits next + 1 (0: none)
	Link     uint16 // the transfer part of the hand-off to the in
	Waits    uint8  // what the instance's thread did (visitWaits...): the records' notes of its waits
	D        int64  // with Config.Fast: the instance's previous departure (noD: none; its first visit)
}

// Visit.Waits: the instance's records note its thread's waits (the
// library's evidence, logfile.Header.Waits); its thread waited between its
// previous mark and this in (the gap held waiting, not the take of a queued
// tuple); between this visit's out and its sent (blocked by a full
// downstream, not a send).
const (
	visitNotes = 1 << iota
	visitWaitedIn
	visitWaitedSent
)

// worked says whether the visit's instance notes its thread's waits and
// its thread did not wait between its previous mark and this in: the gap
// was work (cost.Cell.Worked), from workedFrom.
func (v *Visit) worked() bool {
	return v.Waits&(visitNotes|visitWaitedIn) == visitNotes
}

// workedFrom is where the worked gap before the in starts, given the
// instance's previous departure d: at d, or at the tuple's hand-off where
// that came later (AddWorked takes nothing where that is after the in).
// An operator chained behind another in one thread (Flink's chaining: a
// filter after a keyed function) gets its tuple from a call: the gap from
// its departure is its upstream's work on the next tuple, not its own (a
// chained filter's busy share was its upstream's, 0.97), and the hand-off,
// its upstream's departure, comes when the call returned, after the in.
// libcp's live figures count alike (marks.c: no take where another
// instance marked on the thread in the gap).
func (v *Visit) workedFrom(d int64) int64 {
	if v.Up != noHandOff && v.H > d {
		return v.H
	}
	return d
}

// taken says whether a visit whose instance last departed at d took its
// tuple while backlogged: its take, d to its in, was work. The tuple must
// have been handed off by d: what decides whether a visit is in the cost's
// sample is known at d, never how long the gap then lasted (a rule that
// took every gap without a wait would take the gaps a preemption
// stretched until the next tuple came, and at a low load those are most
// of them: mix's cost came out 7% high over UDP). A hand-off is not an
// arrival, though: Flink keeps a tuple in the sender's output buffer for
// up to 100 ms after its out, Storm batches, so the receiver may wait for
// a tuple handed off long before d. Where the instance's records note its
// thread's waits, a gap its thread gave the CPU up in is no take.
//
// A visit with no hand-off (its in is its tuple's first record: a
// source's, every visit of the Flink agent's marks without ids) has no
// take: nothing says its tuple was there at d. The notes alone would say
// the thread did not give the CPU up, but the library clears the note of
// a gap a JVM collection explains, and a thread parked for input while a
// collection ran looks the same: at a light load on a busy machine nearly
// every such gap of a source's first operator was then a take, 5 ms
// each (the Flink agent's 1-parse at 105 tuples/s, taking 1,400).
func (v *Visit) taken(d int64) bool {
	if d > v.In || v.Up == noHandOff || v.H > d {
		return false
	}
	return v.Waits&visitWaitedIn == 0
}

// noD: a visit without its previous departure.
const noD = math.MinInt64

const visitSize = int(unsafe.Sizeof(Visit{}))

// noHandOff: the tuple's first record is this in.
const noHandOff = 0xFFFF

// Analysis is one run's critical-path and breakdown analysis.
type Analysis struct {
	cfg      Config
	reg      registry
	compute  []uint16 // per operator
	queue    []uint16
	input    uint16
	unattrib uint16
	other    uint16
	opOf     []int // instance -> operator
	ops      []string
	lastIn   int // the highest rank of an instance that marks its ins: a tuple that departs below it was cut

	mu     sync.Mutex
	cols   []*Collector
	runCap int
}

// New prepares the analysis.
func New(cfg Config) (*Analysis, error) {
	if len(cfg.Insts) >= noHandOff-1 {
		return nil, fmt.Errorf("critical path: %d operator instances, at most %d", len(cfg.Insts), noHandOff-2)
	}
	if !(cfg.Slice > 0) {
		return nil, errors.New("critical path: the slice must be positive")
	}
	for _, g := range cfg.Costs {
		if err := g.Check(); err != nil {
			return nil, fmt.Errorf("critical path: %w", err)
		}
	}
	a := &Analysis{cfg: cfg}
	ops := map[string]int{}
	for _, in := range cfg.Insts {
		o, ok := ops[in.Operator]
		if !ok {
			o = len(a.ops)
			ops[in.Operator] = o
			a.ops = append(a.ops, in.Operator)
		}
		a.opOf = append(a.opOf, o)
	}
	a.lastIn = math.MinInt
	for _, in := range cfg.Insts {
		if in.HasIn {
			a.lastIn = max(a.lastIn, in.Rank)
		}
	}
	for _, op := range a.ops {
		a.compute = append(a.compute, a.reg.id(Part{KindCompute, op}))
		a.queue = append(a.queue, a.reg.id(Part{KindQueue, op}))
	}
	a.input = a.reg.id(Part{KindInput, ""})
	a.unattrib = a.reg.id(Part{KindUnattributed, ""})
	a.other = a.reg.id(Part{KindOther, ""})
	w := max(cfg.Workers, 1)
	a.runCap = max(int(cfg.Mem/int64(w)/int64(visitSize)), 1024)
	return a, nil
}

// bucket is the sums of the journeys whose end-to-end latency falls in one
// bucket: pass 1 adds every part it can; pass 2 the split hops.
type bucket struct {
	n      uint64
	e2e    int64
	e2eErr errSum
	sum    []int64  // per part
	err    []errSum // per part: the sum of its bounds
}

func (b *bucket) add(part uint16, v int64, err float64) {
	b.grow(part)
	b.sum[part] += v
	b.err[part].add(err)
}

// merge adds o's sums into b's.
func (b *bucket) merge(o *bucket) {
	b.n += o.n
	b.e2e += o.e2e
	b.e2eErr.merge(o.e2eErr)
	b.mergeParts(o)
}

// mergeParts adds o's sums per part into b's (not its journeys).
func (b *bucket) mergeParts(o *bucket) {
	for i := range o.sum {
		b.grow(uint16(i))
		b.sum[i] += o.sum[i]
		b.err[i].merge(o.err[i])
	}
}

// grow makes room for part's sums.
func (b *bucket) grow(part uint16) {
	if int(part) >= len(b.sum) {
		if int(part) >= cap(b.sum) {
			// Padded (package pad): written for every journey of the bucket.
			n := max(int(part)+1, 2*len(b.sum), 8)
			sum, err := pad.Slice[int64](n), pad.Slice[errSum](n)
			copy(sum, b.sum)
			copy(err, b.err)
			b.sum, b.err = sum[:len(b.sum)], err[:len(b.err)]
		}
		b.sum, b.err = b.sum[:int(part)+1], b.err[:int(part)+1] // past len: zeros, never written
	}
}

// errSum is a sum of bounds (cycles) that does not depend on the order of
// its terms: the workers' sums, whichever partitions each took, add up to
// the same bits (summed as float64s they did not: a run's breakdown
// changed in its last digits from one run to the next). Each term is
// rounded up to a multiple of 2^-errFrac cycles (a bound stays a bound,
// larger by less than that) and added into a 128-bit integer; terms past
// 2^(128-errFrac) cycles, +Inf or NaN (no bound) make the sum +Inf; a
// bound is never negative, and zero or less adds nothing.
type errSum struct {
	hi, lo uint64
	inf    bool
}

const errFrac = 32

func (s *errSum) add(v float64) {
	if !(v > 0) {
		if v != v {
			s.inf = true
		}
		return
	}
	x := math.Ceil(v * (1 << errFrac)) // exact: a power of two's multiple
	if x >= 0x1p128 {                  // +Inf too
		s.inf = true
		return
	}
	var hi, lo uint64
	if x < 0x1p64 {
		lo = uint64(x)
	} else {
		hi = uint64(x / 0x1p64)
		lo = uint64(x - float64(hi)*0x1p64) // exact: x is a multiple of 2^11 here
	}
	s.merge(errSum{hi: hi, lo: lo})
}

func (s *errSum) merge(o errSum) {
	var c uint64
	s.lo, c = bits.Add64(s.lo, o.lo, 0)
	s.hi, _ = bits.Add64(s.hi, o.hi, c)
	s.inf = s.inf || o.inf
}

// float is the sum in cycles, rounded once (called for a report's rows
// only: math/big's cost does not matter).
func (s errSum) float() float64 {
	if s.inf {
		return math.Inf(1)
	}
	if s.hi == 0 {
		return float64(s.lo) / (1 << errFrac)
	}
	n := new(big.Int).Lsh(new(big.Int).SetUint64(s.hi), 64)
	n.Or(n, new(big.Int).SetUint64(s.lo))
	f, _ := new(big.Float).SetMantExp(new(big.Float).SetInt(n), -errFrac).Float64()
	return f
}

func (s errSum) zero() bool { return s == errSum{} }

// Journeys are grouped by end-to-end latency in buckets at most 0.1% wide
// (a float's exponent and the top 10 bits of its mantissa); the tail and
// the median are whole buckets. Bucket 0 holds latencies of 0; negative
// ones (estimates across nodes can be) mirror the positive ones, so that
// buckets keep the latencies' order.
const bucketBits = 10

// noBucket marks a visit of a tuple that is no journey (absorbed by lineage).
const noBucket = math.MinInt32

// posBuckets covers every positive int64; buckets run from -posBuckets to
// posBuckets.
const posBuckets = 64 << bucketBits

// cutOffset moves the bucket of a cut journey (a tuple that left an
// operator and never reached the next: lost, or in flight when the logs
// ended) past the complete journeys': its group is its own.
const cutOffset = 2*posBuckets + 1

func bucketOf(v int64) int32 {
	switch {
	case v == 0:
		return 0
	case v < 0:
		if v == math.MinInt64 {
			v++
		}
		return -bucketOf(-v)
	}
	b := math.Float64bits(float64(v))
	return 1 + int32((b>>(52-bucketBits))&(1<<(11+bucketBits)-1)) - 1023<<bucketBits
}

// buckets are a collector's (or pass 2's) sums per bucket.
type buckets []*bucket

func (bs *buckets) at(k int32) *bucket {
	if *bs == nil {
		*bs = make(buckets, 2*posBuckets+1+cutOffset)
	}
	b := (*bs)[k+posBuckets]
	if b == nil {
		b = &bucket{}
		(*bs)[k+posBuckets] = b
	}
	return b
}

// key is the bucket at index i of a buckets slice.
func bucketKey(i int) int32 { return int32(i - posBuckets) }

// Collector is one analyze worker's pass 1.
type Collector struct {
	a       *Analysis
	buckets buckets
	links   []int32 // from*channels+to: the link's part + 1 (0: not yet)
	linkMap map[[2]uint32]uint16
	pts     []int64
	// The shapes of the tuples seen (shapeOf), by their channels; the
	// last one's key, to skip the map when the next tuple has it too.
	shapes map[string]*shape
	key    []byte
	last   *shape
	buf    []Visit
	enc    []byte // a run, encoded (encode.go)
	keys   []sortKey
	tmp    []sortKey
	runs   []run
	f      *os.File
	off    int64

	tuples, journeys, absorbed, negative uint64
	cut                                  uint64 // journeys cut short (lost)
	lastDep                              int64
	hasDep                               bool
	visits                               uint64  // every visit, kept or not
	instDep                              []int64 // with Config.Fast: per instance, its last departure (noD: none)
	handBuf                              []int32
	cur                                  []int // with Config.Fast: per instance, its index's cursor
	pend                                 []pendVisit
	wins                                 []DepWindow // with Config.Fast: per instance, its spilled index's window
	cost                                 *cost.Acc   // with Config.Fast: the cost model's sums (nil: none)
	sink                                 uint64
}

// run is a sorted run of visits: in memory (mem) or in the collector's file.
type run struct {
	mem  []Visit
	off  int64
	n    int
	size int64 // bytes in the file
	f    *os.File
}

// NewCollector makes a worker's collector.
func (a *Analysis) NewCollector() *Collector {
	// Its scratch, written for every tuple, padded (package pad).
	c := &Collector{a: a, pts: pad.Slice[int64](16)[:0], key: pad.Slice[byte](64)[:0], handBuf: pad.Slice[int32](16)[:0]}
	if a.cfg.Fast {
		c.cost = a.newCostAcc()
	}
	a.mu.Lock()
	a.cols = append(a.cols, c)
	a.mu.Unlock()
	return c
}

func (c *Collector) label(ch uint32) string {
	ci := &c.a.cfg.Chans[ch]
	if ci.Inst >= 0 {
		return c.a.cfg.Insts[ci.Inst].Operator
	}
	return ci.Name
}

// link is the transfer part from channel x's record to channel y's.
func (c *Collector) link(x, y uint32) uint16 {
	n := len(c.a.cfg.Chans)
	if n > 1024 { // a table would be large: the map
		k := [2]uint32{x, y}
		if id, ok := c.linkMap[k]; ok {
			return id
		}
		if c.linkMap == nil {
			c.linkMap = map[[2]uint32]uint16{}
		}
		id := c.a.reg.id(Part{KindTransfer, c.label(x) + " -> " + c.label(y)})
		c.linkMap[k] = id
		return id
	}
	if c.links == nil {
		c.links = make([]int32, n*n)
	}
	if id := c.links[int(x)*n+int(y)]; id > 0 {
		return uint16(id - 1)
	}
	id := c.a.reg.id(Part{KindTransfer, c.label(x) + " -> " + c.label(y)})
	c.links[int(x)*n+int(y)] = int32(id) + 1
	return id
}

// Tuple takes one tuple's records in hop order and the strict bound of its
// end-to-end latency.
func (c *Collector) Tuple(evs []Event, e2eErr float64) error {
	a := c.a
	n := len(evs)
	for i := range evs {
		if evs[i].Est != evs[i].Est {
			return nil // a record of an unreachable node: no times
		}
	}
	sh := c.shapeOf(evs)
	if !sh.marked {
		return nil
	}
	c.tuples++
	p := c.pts[:0]
	for i := range evs {
		p = append(p, int64(math.Floor(evs[i].Est+0.5)))
	}
	c.pts = p
	journey := sh.journey
	var bk int32 = noBucket
	if journey {
		c.journeys++
		bk = bucketOf(p[n-1] - p[0])
		if sh.cut {
			c.cut++
			bk += cutOffset
		}
	} else {
		c.absorbed++
	}
	for i := 1; i < n; i++ {
		if p[i] < p[i-1] {
			c.negative++
		}
	}
	for k := range sh.visits {
		sv := &sh.visits[k]
		i := int(sv.in)
		// With Config.Fast, the visit is made where it waits for its lookup.
		var one Visit
		v := &one
		if a.cfg.Fast {
			if cap(c.pend) == 0 {
				c.pend = make([]pendVisit, 0, pendBatch)
			}
			c.pend = c.pend[:len(c.pend)+1]
			v = &c.pend[len(c.pend)-1].v
		}
		vb := bk
		if sv.copy {
			// Its hand-off is not the record before it: the hop into it
			// went to the breakdown as it is, nothing to split.
			vb = noBucket
		}
		*v = Visit{In: p[i], Out: p[sv.out], Dep: p[sv.end], Bucket: vb, Inst: sv.inst, Up: sv.up, Link: sv.link, Next: sv.next, D: noD}
		if ci := &a.cfg.Chans[evs[i].Ch]; ci.Waits {
			v.Waits = visitNotes
			if evs[i].Waited {
				v.Waits |= visitWaitedIn
			}
			if ce := &a.cfg.Chans[evs[sv.end].Ch]; ce.Role == capacity.RoleSent && evs[sv.end].Waited {
				v.Waits |= visitWaitedSent
			}
		}
		if i > 0 {
			v.H = p[sv.hand]
			v.Err = float32(evs[i].Err)
		}
		if v.Dep > c.lastDep || !c.hasDep {
			c.lastDep, c.hasDep = v.Dep, true
		}
		c.visits++
		if a.cfg.Fast {
			pv := &c.pend[len(c.pend)-1]
			pv.raw, pv.est, pv.rate, pv.journey = evs[i].Raw, evs[i].Est, a.cfg.Chans[evs[i].Ch].Rate, journey && !sv.copy
			if len(c.pend) == pendBatch {
				if err := c.flushPend(); err != nil {
					return err
				}
			}
		} else if err := c.add(v); err != nil {
			return err
		}
	}
	if journey {
		b := c.buckets.at(bk)
		b.n++
		b.e2e += p[n-1] - p[0]
		b.e2eErr.add(e2eErr)
		for k, h := range sh.hops {
			if h.handOff {
				continue
			}
			var err float64
			if h.err {
				err = evs[k+1].Err
			}
			b.add(h.part, p[k+1]-p[k], err)
		}
	}
	return nil
}

// shape is what Tuple derives from a tuple's channels alone, the same for
// every tuple that takes the same way (most take one of a few): its
// visits, and the part each hop goes to.
type shape struct {
	chans   []uint32 // its channels
	marked  bool     // a record of an operator instance: else the tuple is not the analysis's
	journey bool     // its end-to-end latency counts (not absorbed by lineage)
	cut     bool     // it ends at an operator's departure with operators after it: lost, or in flight at the end
	hops    []shapeHop
	visits  []shapeVisit
}

// shapeHop is the hop from record k to k+1.
type shapeHop struct {
	part    uint16
	err     bool // its bound is the later record's (a transfer between processes)
	handOff bool // the hand-off to a visit's in: pass 1's lookup (flushPend) or pass 2 splits it
}

// shapeVisit is a visit: its records (the in, the out: its out, else its
// sent, else the in; its last) and Visit's fields that the channels say.
type shapeVisit struct {
	in, out, end         int32
	inst, up, link, next uint16
	// hand is the record of its hand-off: the record before the in, but
	// where the tuple's records repeat (copies of it: a 1->N operator
	// upstream), the upstream departure its copy took (copy).
	hand int32
	copy bool
}

// maxShapes bounds the shapes a collector keeps; past it, a tuple's is
// derived each time.
const maxShapes = 4096

// shapeOf is the shape of a tuple with evs' channels.
func (c *Collector) shapeOf(evs []Event) *shape {
	if l := c.last; l != nil && len(l.chans) == len(evs) {
		same := true
		for i := range evs {
			same = same && evs[i].Ch == l.chans[i]
		}
		if same {
			return l
		}
	}
	key := c.key[:0]
	for i := range evs {
		ch := evs[i].Ch
		key = append(key, byte(ch), byte(ch>>8), byte(ch>>16), byte(ch>>24))
	}
	c.key = key
	sh, ok := c.shapes[string(key)]
	if !ok {
		sh = c.deriveShape(evs)
		if len(c.shapes) >= maxShapes {
			return sh
		}
		if c.shapes == nil {
			c.shapes = map[string]*shape{}
		}
		c.shapes[string(key)] = sh
	}
	c.last = sh
	return sh
}

// deriveShape works a shape out from the channels.
func (c *Collector) deriveShape(evs []Event) *shape {
	a := c.a
	chans := a.cfg.Chans
	n := len(evs)
	sh := &shape{hops: make([]shapeHop, max(n-1, 0)), chans: make([]uint32, n)}
	for i := range evs {
		sh.chans[i] = evs[i].Ch
	}
	for i := range evs {
		if chans[evs[i].Ch].Inst >= 0 {
			sh.marked = true
		}
	}
	last := &chans[evs[n-1].Ch]
	sh.journey = !(last.Inst >= 0 && last.Role == capacity.RoleIn && a.cfg.Insts[last.Inst].Lineage && n > 1)
	sh.cut = last.Inst >= 0 && (last.Role == capacity.RoleOut || last.Role == capacity.RoleSent) && a.cfg.Insts[last.Inst].Rank < a.lastIn
	isIn := func(k int) bool { ck := &chans[evs[k].Ch]; return ck.Inst >= 0 && ck.Role == capacity.RoleIn }
	hands := c.hands(evs)
	for k := 0; k+1 < n; k++ {
		if isIn(k+1) && int(hands[k+1]) == k {
			sh.hops[k].handOff = true
		}
	}
	i := 0
	for i < n {
		ci := &chans[evs[i].Ch]
		if !isIn(i) {
			if i+1 < n && !isIn(i+1) {
				sh.hops[i] = c.plainHop(evs, i)
			}
			i++
			continue
		}
		// A visit: its in, then records up to its last out or sent with no
		// other instance's mark between.
		inst := ci.Inst
		op := a.opOf[inst]
		sv := shapeVisit{in: int32(i), out: int32(i), inst: uint16(inst), up: noHandOff, hand: int32(i - 1)}
		if i > 0 {
			h := int(hands[i])
			sv.hand, sv.copy = int32(h), h != i-1
			prev := &chans[evs[h].Ch]
			sv.up = 0
			if prev.Inst >= 0 && prev.Inst != inst && a.cfg.Insts[prev.Inst].HasIn {
				sv.up = uint16(prev.Inst + 1)
			}
			sv.link = c.link(evs[h].Ch, evs[i].Ch)
		}
		end, out, sent := i, -1, -1
		for k := i + 1; k < n; k++ {
			ck := &chans[evs[k].Ch]
			if ck.Inst >= 0 && ck.Inst != inst {
				break
			}
			if ck.Inst == inst {
				if ck.Role == capacity.RoleIn {
					break // its next visit (the same tuple twice)
				}
				end = k
				if ck.Role == capacity.RoleOut && out < 0 {
					out = k
				}
				if ck.Role == capacity.RoleSent {
					sent = k
				}
			}
		}
		switch {
		case out >= 0:
			sv.out = int32(out)
		case sent >= 0:
			sv.out = int32(sent)
		}
		sv.end = int32(end)
		if end+1 < n && isIn(end+1) {
			sv.next = uint16(chans[evs[end+1].Ch].Inst + 1)
		}
		// The visit's hops: its own work, except out..sent: blocked by the
		// next operator (its queue), when the tuple goes to one.
		for k := i + 1; k <= end; k++ {
			h := shapeHop{part: a.compute[op]}
			if out >= 0 && k > out && chans[evs[k].Ch].Role == capacity.RoleSent {
				h.part = a.other
				if sv.next != 0 {
					h.part = a.queue[a.opOf[sv.next-1]]
				}
			}
			sh.hops[k-1] = h
		}
		sh.visits = append(sh.visits, sv)
		// The hop after the visit, unless it is the next visit's in.
		if end+1 < n && sv.next == 0 {
			sh.hops[end] = c.plainHop(evs, end)
		}
		i = end + 1
	}
	// A copy's in whose hand-off is another record: the hop into it is no
	// hand-off to split, it counts as it is.
	for _, sv := range sh.visits {
		if sv.copy {
			sh.hops[sv.in-1] = c.plainHop(evs, int(sv.in)-1)
		}
	}
	return sh
}

// hands is, for each record of a tuple, the record its tuple was handed
// off at: the record before it, except where the tuple's records repeat
// (copies: a 1->N operator upstream handed the same id on several times).
// Then each process's records come in time order (package analyze orders
// them so), and the k-th in of a run of one process's records takes the
// k-th departure of the run before it (its sents where its instance marks
// sent, else its outs; else the run's last record): first in, first out.
func (c *Collector) hands(evs []Event) []int32 {
	chans := c.a.cfg.Chans
	n := len(evs)
	h := c.handBuf[:0]
	for i := 0; i < n; i++ {
		h = append(h, int32(i-1))
	}
	c.handBuf = h
	repeats := false
	for i := 1; i < n && !repeats; i++ {
		repeats = evs[i].Ch == evs[i-1].Ch
	}
	for i := 1; i < n && !repeats; i++ {
		for k := 0; k < i && !repeats; k++ {
			repeats = evs[k].Ch == evs[i].Ch
		}
	}
	if !repeats {
		return h
	}
	var deps []int32 // the departures of the run before
	for i := 0; i < n; {
		j := i + 1
		for j < n && chans[evs[j].Ch].Proc == chans[evs[i].Ch].Proc {
			j++
		}
		// The run [i, j): its ins take the departures before it in turn.
		k := 0
		for r := i; r < j; r++ {
			cr := &chans[evs[r].Ch]
			if cr.Inst < 0 || cr.Role != capacity.RoleIn || r == 0 {
				continue
			}
			switch {
			case k < len(deps):
				h[r] = deps[k]
			case len(deps) > 0:
				h[r] = deps[len(deps)-1]
			}
			k++
		}
		// Its departures, for the run after it.
		deps = deps[:0]
		for r := i; r < j; r++ {
			cr := &chans[evs[r].Ch]
			if cr.Inst < 0 {
				continue
			}
			sent := c.a.cfg.Insts[cr.Inst].HasSent
			if (sent && cr.Role == capacity.RoleSent) || (!sent && cr.Role == capacity.RoleOut) {
				deps = append(deps, int32(r))
			}
		}
		if len(deps) == 0 {
			deps = append(deps, int32(j-1))
		}
		i = j
	}
	return h
}

// pendVisit is a visit whose previous departure pass 1 has yet to look
// up (Config.Fast): lookups go in batches, so that their cache misses
// (an index is large, a lookup a random access) overlap.
type pendVisit struct {
	v       Visit
	raw     uint64
	est     float64
	rate    float64
	block   int
	journey bool
}

const pendBatch = 256

// flushPend looks up the pending visits' previous departures, splits their
// hand-offs into queueing and transfer (as pass 2 does without
// Config.Fast), and keeps the visits pass 2 needs.
func (c *Collector) flushPend() error {
	a := c.a
	if c.instDep == nil {
		c.instDep = pad.Slice[int64](len(a.cfg.Insts))
		c.cur = pad.Slice[int](len(a.cfg.Insts))
		for k := range c.instDep {
			c.instDep[k] = noD
		}
	}
	for k := range c.pend {
		p := &c.pend[k]
		j := int(p.v.Inst)
		p.block = a.cfg.Insts[j].Deps.block(p.raw, &c.cur[j])
	}
	// Their blocks' words, in a loop of loads only: the misses overlap
	// (a spilled index's are read as they are looked up).
	var sink uint64
	for k := range c.pend {
		p := &c.pend[k]
		if x := a.cfg.Insts[p.v.Inst].Deps; p.block >= 0 && !x.Spilled() {
			sink += x.touch(p.block)
		}
	}
	c.sink += sink
	for k := range c.pend {
		p := &c.pend[k]
		v := &p.v
		j := int(v.Inst)
		if v.Dep > c.instDep[j] {
			c.instDep[j] = v.Dep
		}
		taken := false
		if p.block >= 0 {
			var raw uint64
			if x := a.cfg.Insts[j].Deps; x.Spilled() {
				if c.wins == nil {
					c.wins = make([]DepWindow, len(a.cfg.Insts))
				}
				var err error
				if raw, err = x.Lookup(p.block, p.raw, &c.wins[j]); err != nil {
					return err
				}
			} else {
				raw = x.inBlock(p.block, p.raw)
			}
			d := p.est - float64(p.raw-raw)*p.rate
			v.D = min(int64(math.Floor(d+0.5)), v.In)
			taken = v.taken(v.D)
		}
		// Its own work: to its last out (no sent here). A tuple it did
		// not hand on (a filter's) has none to measure: its work shows in
		// the take of the next, when that one waited.
		if a.cfg.Insts[j].HasOut {
			c.cost.Add(j, v.In, v.Dep, v.Dep != v.In, v.D, v.Dep, taken)
			if v.D != noD && v.worked() {
				c.cost.AddWorked(j, v.workedFrom(v.D), v.In)
			}
		}
		if v.Up != noHandOff && p.journey {
			// Queued (the instance busy at the hand-off): the whole hop
			// is queueing, up to the in; its take of the tuple (d..in, a
			// preemption in it too) is the wait's end, not a transfer.
			var q int64
			if v.D != noD && v.D > v.H {
				q = v.In - v.H
			}
			tr := v.In - v.H - q
			qe, te := 0.0, float64(v.Err)
			if q > 0 {
				qe, te = te, 0
			}
			b := c.buckets.at(v.Bucket)
			b.add(a.queue[a.opOf[j]], q, qe)
			b.add(v.Link, tr, te)
		}
		if v.Up == noHandOff || v.D == noD || v.H > v.D || v.Dep > v.Out {
			if err := c.add(v); err != nil {
				return err
			}
		}
	}
	c.pend = c.pend[:0]
	return nil
}

// plainHop is the hop from record i to i+1 when i+1 starts no visit: a
// transfer between processes, else other.
func (c *Collector) plainHop(evs []Event, i int) shapeHop {
	a := c.a
	chans := a.cfg.Chans
	x, y := &chans[evs[i].Ch], &chans[evs[i+1].Ch]
	if x.Inst >= 0 && x.Inst == y.Inst && x.Role == capacity.RoleOut && y.Role == capacity.RoleSent {
		// A source blocked handing the tuple on: the queue of the operator
		// it goes to next.
		if i+2 < len(evs) {
			if z := &chans[evs[i+2].Ch]; z.Inst >= 0 && z.Role == capacity.RoleIn {
				return shapeHop{part: a.queue[a.opOf[z.Inst]]}
			}
		}
	}
	if x.Proc != y.Proc {
		return shapeHop{part: c.link(evs[i].Ch, evs[i+1].Ch), err: true}
	}
	return shapeHop{part: a.other}
}

// add keeps a visit, sorting and spilling a full buffer as a run.
func (c *Collector) add(v *Visit) error {
	if c.buf == nil {
		n := c.a.runCap
		if c.a.cfg.Fast {
			n = min(n, 1024) // few are kept: grown as they come
		}
		c.buf = make([]Visit, 0, n)
	}
	if len(c.buf) == c.a.runCap {
		if err := c.spill(); err != nil {
			return err
		}
	}
	c.buf = append(c.buf, *v)
	return nil
}

// sortVisits sorts visits by their ins, then instances, then visitCmp.
func sortVisits(vs []Visit) {
	slices.SortFunc(vs, func(x, y Visit) int { return visitCmp(&x, &y) })
}

// visitBefore says whether x comes before y in pass 2's order.
func visitBefore(x, y *Visit) bool {
	return x.In < y.In || x.In == y.In && visitCmp(x, y) < 0
}

// visitCmp orders visits by their ins, then instances, then every other
// field: a total order, so that pass 2 walks visits of one instance at one
// in (copies of a tuple, a fan-out) in the same order however the workers
// shared the partitions (in the order they came, the walk's cost model
// and so Mace's prediction differed from run to run in the last bits).
func visitCmp(x, y *Visit) int {
	if c := cmp.Compare(x.In, y.In); c != 0 {
		return c
	}
	if c := cmp.Compare(x.Inst, y.Inst); c != 0 {
		return c
	}
	for _, c := range [...]int{cmp.Compare(x.Out, y.Out), cmp.Compare(x.Dep, y.Dep), cmp.Compare(x.H, y.H), cmp.Compare(x.D, y.D),
		cmp.Compare(math.Float32bits(x.Err), math.Float32bits(y.Err)), cmp.Compare(x.Bucket, y.Bucket), cmp.Compare(x.Up, y.Up),
		cmp.Compare(x.Next, y.Next), cmp.Compare(x.Link, y.Link), cmp.Compare(x.Waits, y.Waits)} {
		if c != 0 {
			return c
		}
	}
	return 0
}

// spill writes the buffer as a sorted run to the collector's file.
func (c *Collector) spill() error {
	if len(c.buf) == 0 {
		return nil
	}
	c.keys, c.tmp = sortedKeys(c.buf, c.keys, c.tmp)
	if c.f == nil {
		f, err := os.CreateTemp(c.a.cfg.Dir, "cp-critpath-*")
		if err != nil {
			return fmt.Errorf("critical path: spill: %w", err)
		}
		os.Remove(f.Name()) // gone when closed, whatever happens
		c.f = f
	}
	enc := c.enc[:0]
	var prev Visit
	for _, k := range c.keys {
		v := &c.buf[k.i]
		enc = appendVisit(enc, v, &prev)
		prev = *v
	}
	c.enc = enc
	if _, err := c.f.WriteAt(enc, c.off); err != nil {
		return fmt.Errorf("critical path: spill %s: %w", c.f.Name(), err)
	}
	c.runs = append(c.runs, run{off: c.off, n: len(c.buf), size: int64(len(enc)), f: c.f})
	c.off += int64(len(enc))
	c.buf = c.buf[:0]
	return nil
}

// close removes the collector's spill.
func (c *Collector) close() {
	if c.f != nil {
		c.f.Close()
		c.f = nil
	}
}

// newCostAcc is an empty cost model for the configured grids (nil: none).
func (a *Analysis) newCostAcc() *cost.Acc {
	if len(a.cfg.Costs) == 0 {
		return nil
	}
	acc, err := cost.NewAcc(len(a.cfg.Insts), a.cfg.Costs...)
	if err != nil {
		return nil // New refused the grids
	}
	return acc
}
