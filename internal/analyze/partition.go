package analyze

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Stage 3 of the pipeline (pipeline.go): partition by tuple id. Every tuple
// record goes to one of P partitions by a hash of its tuple id, so that a
// tuple's records, from whichever channel and node, meet in one partition,
// which the join then takes alone. A decode worker collects records per
// partition in blocks of one channel; a full block goes to memory when the
// whole run fits the budget, else to the worker's spill file (16 bytes a
// record: id and TSC; the channel is the block's), and the partition keeps
// the block's place.

// spillRecordSize is a record's size in a block: id and TSC, little endian.
const spillRecordSize = 16

// block is one channel's records of one partition, in arrival order.
type block struct {
	ch   uint32
	n    uint32
	file int32  // spill file (its decode worker), or -1: in mem
	off  int64  // byte offset in the spill file
	mem  []byte // n records, when held in memory
}

// partitions holds where every partition's blocks are.
type partitions struct {
	n           int  // partitions, a power of two
	shift       uint // 64 - log2(n)
	blockEvents int  // records per block
	dir         string
	spill       bool // blocks go to spill files (else they stay in memory)

	mu      sync.Mutex
	blocks  [][]block // per partition, in the order blocks were finished
	files   []*os.File
	spilled uint64 // records written to spill files
	events  []uint64
}

// partitionPlan sizes the partitions for total records, workers joining at
// once, and a memory budget (pipeline.go explains the split).
func partitionPlan(total uint64, workers int, budget int64, dir string) *partitions {
	// The join holds one partition per worker: joinBytesPerEvent each.
	perWorker := uint64(budget/4) / uint64(workers)
	want := total * joinBytesPerEvent / max(perWorker, 1)
	n := max(8, 4*workers)
	for uint64(n) < want && n < maxPartitions {
		n *= 2
	}
	p := &partitions{n: n, shift: uint(64 - bits.TrailingZeros(uint(n))), dir: dir,
		spill: total*spillRecordSize > uint64(budget/4)}
	// Decode workers hold a block per partition each: an eighth of the budget.
	p.blockEvents = int(min(max(uint64(budget/8)/uint64(workers)/uint64(n)/spillRecordSize, 64), 4096))
	p.blocks = make([][]block, n)
	p.events = make([]uint64, n)
	return p
}

// maxPartitions bounds the partition count (and the block index with it).
const maxPartitions = 1 << 14

// joinBytesPerEvent is what the join holds per record of its partition: the
// record (id, TSC, channel) and the radix sort's two key arrays.
const joinBytesPerEvent = 20 + 2*16

// partitionOf is the partition of a tuple id: Fibonacci hashing, so that
// sequential ids spread evenly.
func (p *partitions) partitionOf(id int64) int {
	return int((uint64(id) * 0x9E3779B97F4A7C15) >> p.shift)
}

// partWriter is one decode worker's open blocks, a block per partition.
type partWriter struct {
	ps   *partitions
	file int32
	f    *os.File
	off  int64
	ch   uint32
	bufs [][]byte // per partition: records of channel ch not yet in a block
}

func (p *partitions) writer(worker int) *partWriter {
	return &partWriter{ps: p, file: int32(worker), bufs: make([][]byte, p.n)}
}

// setChannel starts the records of another channel: open blocks are
// finished first (a block holds one channel's records).
func (w *partWriter) setChannel(ch uint32) error {
	if err := w.flushAll(); err != nil {
		return err
	}
	w.ch = ch
	return nil
}

// add puts one record into its partition's open block.
func (w *partWriter) add(id int64, tsc uint64) error {
	k := w.ps.partitionOf(id)
	b := w.bufs[k]
	if b == nil {
		b = make([]byte, 0, w.ps.blockEvents*spillRecordSize)
	}
	n := len(b)
	b = b[:n+spillRecordSize] // a block's capacity is a whole number of records
	binary.LittleEndian.PutUint64(b[n:], uint64(id))
	binary.LittleEndian.PutUint64(b[n+8:], tsc)
	w.bufs[k] = b
	if len(b) == cap(b) {
		return w.flush(k)
	}
	return nil
}

func (w *partWriter) flushAll() error {
	for k := range w.bufs {
		if err := w.flush(k); err != nil {
			return err
		}
	}
	return nil
}

// flush finishes partition k's open block.
func (w *partWriter) flush(k int) error {
	b := w.bufs[k]
	if len(b) == 0 {
		return nil
	}
	blk := block{ch: w.ch, n: uint32(len(b) / spillRecordSize), file: -1}
	if w.ps.spill {
		if w.f == nil {
			if err := w.open(); err != nil {
				return err
			}
		}
		if _, err := w.f.Write(b); err != nil {
			return fmt.Errorf("spill: %w (the spill directory needs about 16 bytes per tuple record: --spill DIR, or a larger --mem-mb)", err)
		}
		blk.file, blk.off = w.file, w.off
		w.off += int64(len(b))
		w.bufs[k] = b[:0]
	} else {
		blk.mem = b
		w.bufs[k] = nil
	}
	w.ps.mu.Lock()
	w.ps.blocks[k] = append(w.ps.blocks[k], blk)
	w.ps.events[k] += uint64(blk.n)
	if w.ps.spill {
		w.ps.spilled += uint64(blk.n)
	}
	w.ps.mu.Unlock()
	return nil
}

func (w *partWriter) open() error {
	if err := os.MkdirAll(w.ps.dir, 0o755); err != nil {
		return fmt.Errorf("spill directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(w.ps.dir, fmt.Sprintf("spill-%d", w.file)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	w.f = f
	w.ps.mu.Lock()
	for len(w.ps.files) <= int(w.file) {
		w.ps.files = append(w.ps.files, nil)
	}
	w.ps.files[w.file] = f
	w.ps.mu.Unlock()
	return nil
}

// partData is one partition's records, read back for the join.
type partData struct {
	id  []int64
	tsc []uint64
	ch  []uint32
	buf []byte
}

// read loads partition k's records into d (reusing its arrays), a
// channel's records together in the order the channel logged them.
func (p *partitions) read(k int, d *partData) error {
	d.id, d.tsc, d.ch = d.id[:0], d.tsc[:0], d.ch[:0]
	// A channel's blocks together, in the order it logged them: a channel
	// that logs ascending ids then makes one ascending run (join.go).
	blocks := p.blocks[k]
	slices.SortStableFunc(blocks, func(x, y block) int { return int(x.ch) - int(y.ch) })
	for _, b := range blocks {
		raw := b.mem
		if b.file >= 0 {
			need := int(b.n) * spillRecordSize
			if cap(d.buf) < need {
				d.buf = make([]byte, need)
			}
			raw = d.buf[:need]
			if _, err := p.files[b.file].ReadAt(raw, b.off); err != nil {
				return fmt.Errorf("spill %s: %w", p.files[b.file].Name(), err)
			}
		}
		for o := 0; o < len(raw); o += spillRecordSize {
			d.id = append(d.id, int64(binary.LittleEndian.Uint64(raw[o:])))
			d.tsc = append(d.tsc, binary.LittleEndian.Uint64(raw[o+8:]))
			d.ch = append(d.ch, b.ch)
		}
	}
	return nil
}

// close removes the spill files and the directory when it is empty.
func (p *partitions) close() {
	for _, f := range p.files {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
	os.Remove(p.dir)
}
