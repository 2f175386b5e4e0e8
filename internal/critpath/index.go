package critpath

import (
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"cloudprofiler/internal/logfile"
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
//
// Past its budget (a long run: 250M departures take about 600 MB), the
// index moves its lines to a file in dir (spill) and keeps only the blocks'
// first counters and metas in memory; its blocks from then on take
// bigLines lines each, so that those take ten bytes for about 200
// counters. A lookup in a spilled index reads the lines about its block
// (a DepWindow, a caller's own): a partition's tuples come in id order,
// so its lookups climb, and one read serves a run of them.
type DepIndex struct {
	first []uint64 // per block: its first counter
	meta  []uint16 // per block: its count << 8 | its offsets' width
	words []uint64 // in memory: the blocks' lines, 8 words a line (block b's line is b, until spilled)
	n     int
	// perCycle: blocks per cycle, on average (Before's guess)
	perCycle float64
	// building
	blk      [depMax]uint64
	nb       int
	lineBits int    // the bits a new block's offsets may take: 512 a line it takes
	lastTSC  uint64 // the last counter of the blocks written
	bad      bool   // not sorted, or past the budget
	mapped   bool   // words moved into a mapping (grow), or tried to
	mapping  []uint64
	unmap    runtime.Cleanup
	budget   *atomic.Int64
	// spilled (spill): the lines are in file, the blocks before bigFrom
	// one line each, from it bigLines each; pend is lines not yet written.
	dir       string
	inFile    bool  // lines to the file from the first block (InFile)
	own       int64 // bytes of the budget a spilled index took for its lines, for its first counters and metas
	file      *os.File
	fileWords int64
	pend      []uint64
	bigFrom   int
}

// depMax is the most counters a block holds.
const depMax = 255

// bigLines is how many lines a block of a spilled index takes: 4,096 bits
// hold depMax offsets of up to 16 bits (a few microseconds apart).
const bigLines = 8

// pendWords is how much of a spilled index's lines are written at once.
const pendWords = 8 << 10

// NewDepIndex starts an index that takes at most what budget holds (bytes,
// shared by the indexes of a run, taken as they grow); past it, its lines
// go to a file in dir ("": it is given up).
func NewDepIndex(budget *atomic.Int64, dir string) *DepIndex {
	return &DepIndex{budget: budget, dir: dir, lineBits: 512, bigFrom: -1}
}

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
		if w := bits.Len64(tsc - x.blk[0]); x.nb == depMax || (x.nb+1)*w > x.lineBits {
			x.flush()
			if x.bad {
				return false
			}
		}
	} else if x.n > 0 && tsc < x.lastTSC {
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
		if n := x.nb; n > 0 && n < depMax && tsc >= x.blk[n-1] && (n+1)*bits.Len64(tsc-x.blk[0]) <= x.lineBits && !x.bad {
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

func (x *DepIndex) flush() {
	if x.nb == 0 || x.bad {
		return
	}
	f := x.blk[0]
	w := uint64(bits.Len64(x.blk[x.nb-1] - f))
	if x.inFile && x.file == nil && x.dir != "" && !x.spill() {
		x.inFile = false // in memory while the budget holds it
	}
	if !x.take() {
		x.bad = true
		x.release()
		return
	}
	var ws []uint64
	if x.file != nil {
		n := len(x.pend)
		x.pend = append(x.pend, make([]uint64, bigLines*8)...)
		ws = x.pend[n:]
	} else {
		line := uint64(len(x.words))
		if len(x.words)+8 > cap(x.words) {
			x.grow()
		}
		x.words = x.words[:len(x.words)+8]
		ws = x.words[line : line+8]
	}
	x.first = append(x.first, f)
	x.meta = append(x.meta, uint16(x.nb)<<8|uint16(w))
	if w > 0 {
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
	x.lastTSC = x.blk[x.nb-1]
	x.n += x.nb
	x.nb = 0
	if len(x.pend) >= pendWords {
		x.writePend()
	}
}

// take counts a new block against the budget: its first counter and meta,
// and its line while the lines are in memory. When the budget is spent,
// the lines move to the file (spill) and it tries again.
func (x *DepIndex) take() bool {
	if x.budget == nil {
		return true
	}
	if x.file != nil {
		// Its first counters and metas take what its lines gave up first
		// (own: another index cannot take it in between), then the budget.
		if x.own >= 8+2 {
			x.own -= 8 + 2
			return true
		}
		if x.budget.Add(-(8 + 2)) >= 0 {
			return true
		}
		x.budget.Add(8 + 2)
		return false
	}
	if x.budget.Add(-(8 + 2 + 64)) >= 0 {
		return true
	}
	x.budget.Add(8 + 2 + 64)
	if x.dir == "" || !x.spill() {
		return false
	}
	return x.take()
}

// spill moves the lines to a file in dir (removed as soon as it is made:
// gone when closed, whatever happens); what they took of the budget is
// the index's own from then on (take). False when the file cannot be
// made or written.
func (x *DepIndex) spill() bool {
	f, err := os.CreateTemp(x.dir, "cp-depindex-*")
	if err != nil {
		return false
	}
	os.Remove(f.Name())
	if len(x.words) > 0 {
		if _, err := f.WriteAt(wordBytes(x.words), 0); err != nil {
			f.Close()
			return false
		}
	}
	x.file, x.fileWords, x.bigFrom, x.lineBits = f, int64(len(x.words)), len(x.first), 512*bigLines
	x.own = int64(len(x.words)) * 8
	x.freeWords()
	return true
}

// InFile makes an index that will not fit its budget in memory (the
// caller's estimate) keep its lines in a file from its first block.
func (x *DepIndex) InFile() { x.inFile = true }

// writePend writes the lines not yet in the file; a failed write gives the
// index up.
func (x *DepIndex) writePend() {
	if len(x.pend) == 0 || x.bad {
		return
	}
	if _, err := x.file.WriteAt(wordBytes(x.pend), x.fileWords*8); err != nil {
		x.bad = true
		x.release()
		return
	}
	x.fileWords += int64(len(x.pend))
	x.pend = x.pend[:0]
}

// freeWords lets go of the lines in memory (a mapping at once).
func (x *DepIndex) freeWords() {
	if x.mapping != nil {
		x.unmap.Stop()
		unmapWords(x.mapping)
		x.mapping = nil
	}
	x.words = nil
}

// release lets go of what an index given up holds.
func (x *DepIndex) release() {
	x.freeWords()
	x.first, x.meta, x.pend = nil, nil, nil
	if x.file != nil {
		x.file.Close()
		x.file = nil
	}
}

// wordBytes is ws's memory as bytes (the file holds the lines as memory
// does: one process writes and reads it).
func wordBytes(ws []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ws))), len(ws)*8)
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
	x.mapping = m
	x.unmap = runtime.AddCleanup(x, unmapWords, m)
	x.words = m
}

// Done ends the building; false when the index was given up.
func (x *DepIndex) Done() bool {
	x.flush()
	if x.file != nil {
		x.writePend()
		x.pend = nil
	}
	if x.bad {
		x.release()
		return false
	}
	if nb := len(x.first); nb > 1 && x.first[nb-1] > x.first[0] {
		x.perCycle = float64(nb-1) / float64(x.first[nb-1]-x.first[0])
	}
	return true
}

// Len is how many counters the index holds.
func (x *DepIndex) Len() int { return x.n }

// Bytes is what the index takes in memory.
func (x *DepIndex) Bytes() int64 {
	return int64(cap(x.first))*8 + int64(cap(x.meta))*2 + int64(len(x.words))*8
}

// Spilled says whether the index's lines are in its file: lookups then go
// through a DepWindow (Lookup).
func (x *DepIndex) Spilled() bool { return x.file != nil }

// Before is the latest counter below tsc (ok false: none) in an index in
// memory (a spilled one: block, then Lookup). cur is the
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
	return x.first[b] + offAt(ws[:], w, l)
}

// offAt is the i-th offset of width w in a block's words.
func offAt(ws []uint64, w uint64, i int) uint64 {
	p := uint64(i) * w
	wi, sh := p/64, p%64
	v := ws[wi] >> sh
	if sh+w > 64 {
		v |= ws[wi+1] << (64 - sh)
	}
	return v & (1<<w - 1)
}

// DepWindow is a reader's window on a spilled index's lines: a lookup's
// block and the lines after it, read at once (the next lookups climb).
type DepWindow struct {
	from, to int64 // the file's words [from, to)
	words    []uint64
}

// windowWords is what a DepWindow reads: 2 KiB, four blocks of bigLines.
const windowWords = 4 * bigLines * 8

// wordsOf is where block b's words start in a spilled index's file, and
// how many it has.
func (x *DepIndex) wordsOf(b int) (int64, int) {
	if b < x.bigFrom {
		return int64(b) * 8, 8
	}
	return int64(x.bigFrom)*8 + int64(b-x.bigFrom)*bigLines*8, bigLines * 8
}

// Lookup is the latest counter below tsc in block b (block's answer for
// tsc) of a spilled index, its lines read through win.
func (x *DepIndex) Lookup(b int, tsc uint64, win *DepWindow) (uint64, error) {
	at, n := x.wordsOf(b)
	if at < win.from || at+int64(n) > win.to {
		if cap(win.words) < windowWords {
			win.words = make([]uint64, windowWords)
		}
		to := min(at+windowWords, x.fileWords)
		ws := win.words[:to-at]
		if _, err := x.file.ReadAt(wordBytes(ws), at*8); err != nil {
			return 0, fmt.Errorf("critical path: the departure index's file: %w", err)
		}
		win.from, win.to, win.words = at, to, ws
	}
	m8 := x.meta[b]
	w := uint64(m8 & 0xFF)
	if w == 0 {
		return x.first[b], nil
	}
	ws := win.words[at-win.from:][:n]
	rel := tsc - x.first[b]
	l, r := 0, int(m8>>8)
	for r-l > 1 {
		m := int(uint(l+r) >> 1)
		if offAt(ws, w, m) < rel {
			l = m
		} else {
			r = m
		}
	}
	return x.first[b] + offAt(ws, w, l), nil
}
