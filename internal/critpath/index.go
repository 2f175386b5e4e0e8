package critpath

import (
	"math/bits"

	"cloudprofiler/internal/logfile"
	"runtime"
	"sync/atomic"
)

// DepIndex is the sorted raw counters (TSCs) of one operator instance's
// departures (its out channel's records, in file order: one sequential
// instance logs them in time order), so that pass 1 can find the
// departure before a tuple's in without the other tuples' records. Blocks
// of one cache line each: as many counters as fit in 512 bits as offsets
// from the block's first (kept apart, with their count and width: small
// arrays) in one width, the widest's. A lookup is a search of the
// blocks' first counters, then of one line: one cache miss (a lookup is a
// random access; pass 1 overlaps a batch's, Collector.flushPend).
type DepIndex struct {
	first []uint64 // per block: its first counter
	meta  []uint16 // per block: its count << 8 | its offsets' width
	words []uint64 // 8 a block (block b's line is b)
	n     int
	// perCycle: blocks per cycle, on average (Before's guess)
	perCycle float64
	// building
	blk    [depMax]uint64
	nb     int
	bad    bool // not sorted, or past the budget
	mapped bool // words moved into a mapping (grow), or tried to
	budget *atomic.Int64
}

// depMax is the most counters a block holds.
const depMax = 255

// NewDepIndex starts an index that takes at most what budget holds (bytes,
// shared by the indexes of a run, taken as they grow).
func NewDepIndex(budget *atomic.Int64) *DepIndex { return &DepIndex{budget: budget} }

// Add appends the next counter in file order; false when the index is
// given up (the counters do not climb, or it does not fit).
func (x *DepIndex) Add(tsc uint64) bool {
	if x.bad {
		return false
	}
	if x.nb > 0 {
		if tsc < x.blk[x.nb-1] {
			x.bad = true
			return false
		}
		if w := bits.Len64(tsc - x.blk[0]); x.nb == depMax || (x.nb+1)*w > 512 {
			x.flush()
			if x.bad {
				return false
			}
		}
	} else if x.n > 0 && tsc < x.last() {
		x.bad = true
		return false
	}
	x.blk[x.nb] = tsc
	x.nb++
	return true
}

// AddRecords appends the records' counters in file order (Add's, in a
// loop that appends to the open block without a call); false when the
// index is given up.
func (x *DepIndex) AddRecords(rs []logfile.Record) bool {
	for i := range rs {
		tsc := rs[i].TSC
		if n := x.nb; n > 0 && n < depMax && tsc >= x.blk[n-1] && (n+1)*bits.Len64(tsc-x.blk[0]) <= 512 && !x.bad {
			x.blk[n] = tsc
			x.nb = n + 1
			continue
		}
		if !x.Add(tsc) {
			return false
		}
	}
	return true
}

// last is the last counter of the blocks written.
func (x *DepIndex) last() uint64 {
	b := len(x.first) - 1
	return x.first[b] + x.off(b, int(x.meta[b]>>8)-1)
}

func (x *DepIndex) flush() {
	if x.nb == 0 || x.bad {
		return
	}
	f := x.blk[0]
	w := uint64(bits.Len64(x.blk[x.nb-1] - f))
	if x.budget != nil && x.budget.Add(-(8+2+64)) < 0 {
		x.bad = true
		return
	}
	line := uint64(len(x.first))
	if len(x.words)+8 > cap(x.words) {
		x.grow()
	}
	x.words = x.words[:len(x.words)+8]
	x.first = append(x.first, f)
	x.meta = append(x.meta, uint16(x.nb)<<8|uint16(w))
	if w > 0 {
		ws := x.words[line*8 : line*8+8]
		for i := 0; i < x.nb; i++ {
			v := x.blk[i] - f
			p := uint64(i) * w
			wi, sh := p/64, p%64
			ws[wi] |= v << sh
			if sh+w > 64 {
				ws[wi+1] |= v >> (64 - sh)
			}
		}
	}
	x.n += x.nb
	x.nb = 0
}

// hugeFrom is the size from which an index's lines move into a mapping of
// huge pages (hugeWords). A huge page is 2 MiB of memory as soon as one
// line of it is touched: 5,000 small indexes (one per operator instance)
// each in a mapping of its own took 10 GiB where the budget was 3.
const hugeFrom = 4 << 20

// grow makes room for at least one more line: on the heap (copied, as
// append does) while the index is small, then in a mapping of huge pages
// as large as the budget left (one copy; lookups then miss the TLB less);
// past the mapping's end, the heap again.
func (x *DepIndex) grow() {
	if x.mapped || 8*cap(x.words) < hugeFrom {
		x.words = append(x.words, make([]uint64, 8)...)[:len(x.words)]
		return
	}
	x.mapped = true
	m := hugeWords(x.budget)
	if cap(m) < len(x.words)+8 {
		unmapWords(m)
		x.words = append(x.words, make([]uint64, 8)...)[:len(x.words)]
		return
	}
	m = append(m, x.words...)
	runtime.AddCleanup(x, unmapWords, m)
	x.words = m
}

// Done ends the building; false when the index was given up.
func (x *DepIndex) Done() bool {
	x.flush()
	if x.bad {
		x.first, x.meta, x.words = nil, nil, nil
		return false
	}
	if nb := len(x.first); nb > 1 && x.first[nb-1] > x.first[0] {
		x.perCycle = float64(nb-1) / float64(x.first[nb-1]-x.first[0])
	}
	return true
}

// Len is how many counters the index holds.
func (x *DepIndex) Len() int { return x.n }

// Bytes is what the index takes.
func (x *DepIndex) Bytes() int64 {
	return int64(cap(x.first))*8 + int64(cap(x.meta))*2 + int64(len(x.words))*8
}

// Before is the latest counter below tsc (ok false: none). cur is the
// caller's cursor (the block of its last answer), which makes lookups in
// climbing order cheap: from it, a guess at the rate of the departures,
// then a gallop over the blocks' first counters (a small array), then a
// binary search in one block (one or two cache lines).
func (x *DepIndex) Before(tsc uint64, cur *int) (uint64, bool) {
	b := x.block(tsc, cur)
	if b < 0 {
		return 0, false
	}
	return x.inBlock(b, tsc), true
}

// block is the last block whose first counter is below tsc (-1: none).
func (x *DepIndex) block(tsc uint64, cur *int) int {
	hdr := x.first
	nb := len(hdr)
	if nb == 0 || hdr[0] >= tsc {
		return -1
	}
	// In [lo, hi).
	lo, hi := 0, nb
	if g := *cur; g > 0 && g < nb && hdr[g] < tsc {
		lo = g
		if x.perCycle > 0 {
			if gg := g + int(float64(tsc-hdr[g])*x.perCycle); gg > g && gg < nb {
				if hdr[gg] < tsc {
					lo = gg
				} else {
					hi = gg
				}
			}
		}
		if hi == nb {
			for step := 1; ; step *= 2 {
				q := lo + step
				if q >= nb {
					break
				}
				if hdr[q] >= tsc {
					hi = q
					break
				}
				lo = q
			}
		}
	}
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if hdr[m] < tsc {
			lo = m
		} else {
			hi = m
		}
	}
	*cur = lo
	return lo
}

// touch reads block b's line: a batch of lookups touches its blocks
// first, so that their cache misses overlap.
func (x *DepIndex) touch(b int) uint64 { return x.words[b*8] }

// inBlock is the latest counter of block b below tsc (its first is).
func (x *DepIndex) inBlock(b int, tsc uint64) uint64 {
	m8 := x.meta[b]
	w := uint64(m8 & 0xFF)
	if w == 0 {
		return x.first[b]
	}
	rel := tsc - x.first[b]
	mask := uint64(1)<<w - 1
	ws := x.words[b*8:][:8]
	l, r := 0, int(m8>>8)
	for r-l > 1 {
		m := int(uint(l+r) >> 1)
		p := uint64(m) * w
		wi, sh := p/64&7, p%64
		v := ws[wi] >> sh
		if sh+w > 64 {
			v |= ws[(wi+1)&7] << (64 - sh)
		}
		if v&mask < rel {
			l = m
		} else {
			r = m
		}
	}
	return x.first[b] + x.off(b, l)
}

// off is block b's i-th offset.
func (x *DepIndex) off(b, i int) uint64 {
	w := uint64(x.meta[b] & 0xFF)
	if w == 0 {
		return 0
	}
	ws := x.words[b*8:][:8]
	p := uint64(i) * w
	wi, sh := p/64&7, p%64
	v := ws[wi] >> sh
	if sh+w > 64 {
		v |= ws[(wi+1)&7] << (64 - sh)
	}
	return v & (1<<w - 1)
}
