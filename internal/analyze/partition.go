package analyze

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"cloudprofiler/internal/logfile"
)

// Stage 3 of the pipeline (pipeline.go): partition by tuple id. Every tuple
// record goes to one of P partitions by a hash of its tuple id (of its
// group of 2^group consecutive ids: idGroup), so that a tuple's records,
// from whichever channel and node, meet in one partition, which the join
// then takes alone. A decode worker collects records per
// partition in blocks of one channel; a full block goes to memory when the
// whole run fits the budget (16 bytes a record: id and TSC; the channel is
// the block's), else to the worker's spill file, column-encoded (about 4
// bytes a record where ids and counters climb: the kernel's copy of 16 raw
// bytes into its page cache and back costs more than the encoding, about 4
// CPU-s against 1 for 100M records here), and the partition keeps the
// block's place.

// spillRecordSize is a record's size in a block: id and TSC, little endian.
const spillRecordSize = 16

// block is one channel's records of one partition, in arrival order; the
// partitions' index holds one per block, 24 bytes.
type block struct {
	ch   uint32
	n    uint32
	size uint32 // bytes in the spill file (column-encoded)
	file int32  // spill file (its decode worker), or -1: in memory
	off  int64  // byte offset in the spill file, or index into partitions.mem
}

// blockIndexSize is what the index holds per block.
const blockIndexSize = 24

// partitions holds where every partition's blocks are.
type partitions struct {
	n           int  // partitions, a power of two
	shift       uint // 64 - log2(n)
	group       uint // ids in groups of 2^group go to a partition together (idGroup)
	blockEvents int  // records per block
	dir         string
	spill       bool // blocks go to spill files, column-encoded (else they stay in memory)

	own       string // this run's directory inside dir (created at the first spill)
	removeDir bool   // dir is the default (Out/.spill): removed at the end when empty

	mu      sync.Mutex
	blocks  [][]block // per partition, in the order blocks were finished
	mem     [][]byte  // blocks held in memory
	files   []*os.File
	spilled uint64 // records written to spill files
	events  []uint64
}

// partitionPlan sizes the partitions for total records, workers joining at
// once, and a memory budget (pipeline.go explains the split). Records are
// partitioned in one pass, so the index of blocks grows with the records:
// a budget too small for that many is an error that says what would do.
func partitionPlan(total uint64, files, workers int, budget int64, dir string) (*partitions, error) {
	p, err := partitionPlanAtLeast(total, files, workers, budget, dir, 0)
	if err == nil {
		p.group = idGroup(total, p.n)
	}
	return p, err
}

// idGroup is how many low bits of a tuple id analyze's partitions leave out
// of the hash: 2^group consecutive ids go to one partition. A source that
// numbers its tuples in order makes ids near each other near in time, and
// the join takes a partition's tuples in id order; with each id hashed on
// its own, a partition held every P-th tuple, and each of its lookups by
// time (the critical path's departure index, the clock model's span, the
// windows of capacity and of the report's timeline) and each decoder's
// append to its block went to another cache line. Grouped, they go to the
// same lines in turn: on the bench's 40M records, a tenth less CPU, the
// departure lookups 40 % less (docs/performance.md); past its budget the
// departure index is read from its file a window at a time, one read per
// group (critpath.DepIndex). The groups are hashed as ids were, so
// partitions stay even: dense ids leave each within 1 % of the mean
// (TestIDGroupsKeepPartitionsEven), as before. group is the largest, up
// to 8 (256 ids: 1,000M records took a tenth less time than with 64),
// that leaves a partition's records at least 1,024 times a group's ids:
// ids that a hash spreads less well than a sequence (at random, a group
// holds one) still give a partition 1,024/k groups or more (k records a
// tuple).
func idGroup(total uint64, n int) uint {
	g := uint(0)
	for g < 8 && total>>(g+1) >= uint64(n)*1024 {
		g++
	}
	return g
}

// partitionPlanAtLeast is partitionPlan with at least minN partitions (a
// power of two; the export's: export.go), by the hash of each id (group
// 0: export.json's exportHash).
func partitionPlanAtLeast(total uint64, files, workers int, budget int64, dir string, minN int) (*partitions, error) {
	n, blockEvents, spill, index := planSizes(total, files, workers, budget, minN)
	if spill && index > indexBudget(budget) {
		need := budget
		for {
			need += need / 8
			if _, _, _, ix := planSizes(total, files, workers, need, minN); ix <= indexBudget(need) {
				break
			}
		}
		return nil, fmt.Errorf("analyze: %d records are too many for --mem-mb %d in one pass (the index of their spilled blocks would take %d MiB); give --mem-mb %d or more",
			total, budget>>20, index>>20, (need+1<<20-1)>>20)
	}
	p := &partitions{n: n, shift: uint(64 - bits.TrailingZeros(uint(n))), dir: dir, spill: spill, blockEvents: blockEvents}
	p.blocks = make([][]block, n)
	p.events = make([]uint64, n)
	return p, nil
}

// indexBudget is what the index of spilled blocks may take: an eighth of
// the budget, or 4 MiB (tests run the pipeline on kilobytes).
func indexBudget(budget int64) uint64 { return uint64(max(budget/8, 4<<20)) }

// planSizes: the partitions (the join holds one per worker in a quarter of
// the budget), the records per block (while they decode, before the join,
// workers hold a block per partition each in half the budget), whether the
// records spill (they fit in a quarter, else), and the bytes the index of
// blocks takes; at least minN partitions (a power of two, or 0).
func planSizes(total uint64, files, workers int, budget int64, minN int) (n, blockEvents int, spill bool, index uint64) {
	w := uint64(workers)
	want := total * joinBytesPerEvent / max(uint64(budget/4)/w, 1)
	n = max(8, 4*workers, minN)
	for uint64(n) < want && n < MaxPartitions {
		n *= 2
	}
	blockEvents = int(min(max(uint64(budget/2)/w/uint64(n)/spillRecordSize, 64), 4096))
	// Each file leaves up to a part-filled block per partition.
	index = (total/uint64(blockEvents) + uint64(n)*uint64(files)) * blockIndexSize
	return n, blockEvents, total*spillRecordSize > uint64(budget/4), index
}

// MaxPartitions bounds the partition count (and the block index with it).
const MaxPartitions = 1 << 14

// joinBytesPerEvent is what the join holds per record of its partition: the
// record (id, TSC, channel) and the radix sort's two arrays of records.
const joinBytesPerEvent = 20 + 2*24

// partitionOf is the partition of a tuple id (HashPartition of its group).
func (p *partitions) partitionOf(id int64) int { return HashPartition(id>>p.group, p.shift) }

// HashPartition is the partition of a tuple id among 2^(64-shift):
// Fibonacci hashing, so that sequential ids spread evenly (an export's
// partitions too: exportHash). A shift of 64 gives partition 0.
func HashPartition(id int64, shift uint) int {
	return int((uint64(id) * 0x9E3779B97F4A7C15) >> shift)
}

// partWriter is one decode worker's open blocks, a block per partition.
type partWriter struct {
	ps   *partitions
	file int32
	f    *os.File
	off  int64
	ch   uint32
	bufs [][]byte // per partition: records of channel ch not yet in a block
	enc  []byte   // a block as written to the spill file
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

// addRecords puts a batch of one channel's records into their partitions'
// open blocks, as add does one at a time; with noted, a record that
// followed a wait of its thread carries it in bit 63 (decode.go). A run of
// ids of one group (idGroup) goes to one partition: its block is looked up
// once for the run, not once a record.
func (w *partWriter) addRecords(rs []logfile.Record, noted bool) error {
	ps := w.ps
	k, group := -1, int64(0)
	var b []byte
	for i := range rs {
		id, tsc := rs[i].TupleID, rs[i].TSC
		if noted && rs[i].Waited {
			tsc |= logfile.WaitedBit
		}
		if g := id >> ps.group; k < 0 || g != group {
			if k >= 0 {
				w.bufs[k] = b
			}
			k, group = ps.partitionOf(id), g
			if b = w.bufs[k]; b == nil {
				b = make([]byte, 0, ps.blockEvents*spillRecordSize)
			}
		}
		n := len(b)
		b = b[:n+spillRecordSize] // a block's capacity is a whole number of records
		binary.LittleEndian.PutUint64(b[n:], uint64(id))
		binary.LittleEndian.PutUint64(b[n+8:], tsc)
		if len(b) == cap(b) {
			w.bufs[k] = b
			if err := w.flush(k); err != nil {
				return err
			}
			if b = w.bufs[k]; b == nil {
				b = make([]byte, 0, ps.blockEvents*spillRecordSize)
			}
		}
	}
	if k >= 0 {
		w.bufs[k] = b
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
		// Column-encoded (logfile.EncodeColumns: zigzag varint deltas of
		// the ids, then of the TSCs): a channel's ids and counters climb,
		// so a record takes about 4 bytes instead of 16.
		w.enc = logfile.EncodeColumns(w.enc[:0], b, int(blk.n), spillRecordSize)
		out := w.enc
		blk.size = uint32(len(out))
		if _, err := w.f.Write(out); err != nil {
			return fmt.Errorf("spill: %w (the spill directory needs about 4 bytes a tuple record, at most 20: --spill DIR, or a larger --mem-mb)", err)
		}
		blk.file, blk.off = w.file, w.off
		w.off += int64(len(out))
		w.bufs[k] = b[:0]
	}
	w.ps.mu.Lock()
	if !w.ps.spill {
		blk.off = int64(len(w.ps.mem))
		if len(b) == cap(b) { // a full block is kept as it is
			w.ps.mem = append(w.ps.mem, b)
			w.bufs[k] = nil
		} else { // a part-filled one (a file ended) is kept at its size
			w.ps.mem = append(w.ps.mem, slices.Clone(b))
			w.bufs[k] = b[:0]
		}
	}
	w.ps.blocks[k] = append(w.ps.blocks[k], blk)
	w.ps.events[k] += uint64(blk.n)
	if w.ps.spill {
		w.ps.spilled += uint64(blk.n)
	}
	w.ps.mu.Unlock()
	return nil
}

func (w *partWriter) open() error {
	w.ps.mu.Lock()
	defer w.ps.mu.Unlock()
	if w.ps.own == "" {
		// This run's own directory inside the spill directory: runs that
		// share a --spill DIR never touch each other's files.
		if err := os.MkdirAll(w.ps.dir, 0o755); err != nil {
			return fmt.Errorf("spill directory: %w", err)
		}
		own, err := os.MkdirTemp(w.ps.dir, spillPrefix)
		if err != nil {
			return fmt.Errorf("spill directory: %w", err)
		}
		w.ps.own = own
	}
	f, err := os.OpenFile(filepath.Join(w.ps.own, fmt.Sprintf("spill-%d", w.file)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	w.f = f
	for len(w.ps.files) <= int(w.file) {
		w.ps.files = append(w.ps.files, nil)
	}
	w.ps.files[w.file] = f
	return nil
}

// spillPrefix names a run's own directory inside the spill directory.
const spillPrefix = "cp-spill-"

// partData is one partition's records, read back for the join.
type partData struct {
	id  []int64
	tsc []uint64 // on a channel that notes waits, bit 63 set where the record followed one (decode.go)
	ch  []uint32
	enc []byte // a spilled block as it was read
}

// read loads partition k's records into d (reusing its arrays), a
// channel's records together in the order the channel logged them.
func (p *partitions) read(k int, d *partData) error {
	d.id, d.tsc, d.ch = d.id[:0], d.tsc[:0], d.ch[:0]
	// A channel's blocks together, in the order it logged them: a channel
	// that logs ascending ids then makes one ascending run (join.go).
	blocks := p.blocks[k]
	slices.SortStableFunc(blocks, func(x, y block) int { return int(x.ch) - int(y.ch) })
	// Grown once to the partition's size, not by doubling as records come.
	n := int(p.events[k])
	d.id, d.tsc, d.ch = slices.Grow(d.id, n), slices.Grow(d.tsc, n), slices.Grow(d.ch, n)
	for _, b := range blocks {
		var raw []byte
		if b.file < 0 {
			raw = p.mem[b.off]
		} else {
			if cap(d.enc) < int(b.size) {
				d.enc = make([]byte, b.size)
			}
			enc := d.enc[:b.size]
			if _, err := p.files[b.file].ReadAt(enc, b.off); err != nil {
				return fmt.Errorf("spill %s: %w", p.files[b.file].Name(), err)
			}
			var err error
			if d.id, d.tsc, err = logfile.DecodeColumnPair(d.id, d.tsc, enc, int(b.n)); err != nil {
				return fmt.Errorf("spill %s at byte %d: %w", p.files[b.file].Name(), b.off, err)
			}
		}
		for o := 0; o < len(raw); o += spillRecordSize {
			d.id = append(d.id, int64(binary.LittleEndian.Uint64(raw[o:])))
			d.tsc = append(d.tsc, binary.LittleEndian.Uint64(raw[o+8:]))
		}
		for range b.n {
			d.ch = append(d.ch, b.ch)
		}
	}
	return nil
}

// close removes this run's spill files and its own directory, and the
// spill directory itself when it is the default one and empty.
func (p *partitions) close() {
	for _, f := range p.files {
		if f != nil {
			f.Close()
		}
	}
	if p.own != "" {
		os.RemoveAll(p.own)
	}
	if p.removeDir {
		os.Remove(p.dir) // only when empty
	}
}
