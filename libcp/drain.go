package main

/*
#include "engine.h"
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"golang.org/x/sys/unix"
)

// drainLoop runs per ring channel: it sleeps until pump or dispatch kicks
// it, then encodes, compresses and writes every full block, and the part of
// the current block a quiet channel has filled when pump asks for that.
//
// Before it sleeps it sets the slot's drain_parked, and a logging thread
// that finds the ring full but for the block it entered (wakeDue) wakes it
// (an eventfd write, through dispatch) only if it takes the flag back: one
// syscall per sleep of the drainer, however many blocks a burst fills while
// the drainer works. After setting the flag it looks once more (a logging
// thread that entered a block before the flag was set wrote nothing), and
// then goes on without sleeping if it takes the flag back itself; if a
// logging thread took it first, that thread's wake-up is on its way.
func (c *channel) drainLoop() {
	defer close(c.drained)
	parked := (*uint32)(unsafe.Pointer(&c.slot.drain_parked))
	for {
		atomic.StoreUint32(parked, 1)
		if !c.wakeDue() || !atomic.CompareAndSwapUint32(parked, 1, 0) {
			c.sleeps.Add(1)
			select {
			case <-c.kick:
			case <-c.stop:
				return
			}
			atomic.StoreUint32(parked, 0)
		}
		if c.spilling.Load() {
			// If the disk still fails, the ring keeps draining into the spill:
			// bounded, since the channel refuses new events meanwhile.
			c.retrySpill()
		}
		pos := atomic.LoadUint64(c.word()) & countMask
		for (c.next+1)*c.blockRecs <= pos {
			c.drainBlock(c.next, (c.next+1)*c.blockRecs)
		}
		if c.flushPartial.Swap(false) && pos > c.written {
			c.writeRange(c.written, pos)
		}
	}
}

// wakeBlocks is how many full blocks waiting to be written wake the
// drainer at once, from a logging thread (entered_block in fastpath.c,
// through the slot's wake_blocks) or from pump: the ring but one. Until
// then the drain waits for a gap (pump), so a burst that fits the ring is
// written after it, not beside it.
func (c *channel) wakeBlocks() uint64 { return c.ringBlocks - 1 }

// wakeDue says whether wakeBlocks full blocks or more are not yet written.
func (c *channel) wakeDue() bool {
	pos := atomic.LoadUint64(c.word()) & countMask
	return pos/c.blockRecs-c.written/c.blockRecs >= c.wakeBlocks()
}

// drainFinal writes every position below end (the count at close).
func (c *channel) drainFinal(end uint64) {
	for c.next*c.blockRecs < end {
		c.drainBlock(c.next, min(end, (c.next+1)*c.blockRecs))
	}
}

// waitWritten waits until the record's TSC is set: a writer reserved the
// position a moment ago. It sleeps, never spins, and gives up after holeWait.
func waitWritten(p *uint64) bool {
	if atomic.LoadUint64(p) != 0 {
		return true
	}
	deadline := time.Now().Add(holeWait)
	d := 5 * time.Microsecond
	for time.Now().Before(deadline) {
		time.Sleep(d)
		if atomic.LoadUint64(p) != 0 {
			return true
		}
		if d < 10*time.Millisecond {
			d *= 2
		}
	}
	return false
}

// blockMem returns the ring memory of positions [from, to), which lie in one block.
func (c *channel) blockMem(from, to uint64) []byte {
	r := (from / c.blockRecs) & (c.ringBlocks - 1)
	off := r*c.blockRecs + from%c.blockRecs
	return c.ring[off*c.recSize : (off+to-from)*c.recSize]
}

// writeRange writes positions [from, to) of one block as one frame (or
// ASCII block) and records that they are on disk.
func (c *channel) writeRange(from, to uint64) {
	mem := c.blockMem(from, to)
	n := to - from
	for i := uint64(0); i < n; i++ {
		if !waitWritten((*uint64)(unsafe.Pointer(&mem[i*c.recSize+8]))) {
			c.holes++
		}
	}
	var out []byte
	if c.format.IsASCII() {
		out = c.encodeASCII(c.scratch[:0], mem, from, n)
	} else {
		out = c.encodeFrame(c.scratch[:0], mem, from, n)
	}
	c.scratch = out[:0]
	c.write(out, from, n)
	c.written = to
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.slot.written_pos)), to)
	c.ringStatus(logfile.StateOpen, atomic.LoadUint64(c.word())&countMask)
}

// ringStatus updates the status of a ring channel (drainer-owned state):
// accepted as given, written the positions below which everything is in
// the file (blocks spilled for a failing disk are not), unwritten what the
// spill holds.
func (c *channel) ringStatus(state uint32, accepted uint64) {
	written := c.written
	if len(c.spill) > 0 {
		written = c.spill[0].from
	}
	c.writeStatus(state, accepted, written)
}

// drainBlock writes what is not yet written of block b up to position end,
// then hands the ring block back to the writers.
func (c *channel) drainBlock(b, end uint64) {
	first := b * c.blockRecs
	if from := max(first, c.written); from < end {
		c.writeRange(from, end)
	}
	clear(c.blockMem(first, end))
	atomic.StoreUint64(&c.ringSeq[b&(c.ringBlocks-1)], b+c.ringBlocks)
	c.next++
}

func (c *channel) encodeFrame(dst, mem []byte, first, n uint64) []byte {
	fh := logfile.FrameHeader{Kind: logfile.KindRecords, N: uint32(n), FirstPos: first}
	dst = fh.Append(dst)
	codec := c.format.Codec()
	fh.Codec = uint8(codec)
	if codec == logfile.CodecRaw {
		dst = append(dst, mem...)
		fh.RawLen = uint32(len(mem))
	} else {
		c.cols = logfile.EncodeColumns(c.cols[:0], mem, int(n), int(c.recSize))
		fh.RawLen = uint32(len(c.cols))
		dst = logfile.Compress(dst, c.cols, codec)
	}
	fh.StoredLen = uint32(len(dst) - logfile.FrameHeaderSize)
	fh.Append(dst[:0])
	logfile.Seal(dst)
	return dst
}

func (c *channel) encodeASCII(dst, mem []byte, first, n uint64) []byte {
	dst = append(dst, "#block "...)
	dst = strconv.AppendUint(dst, first, 10)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, n, 10)
	dst = append(dst, '\n')
	for i := uint64(0); i < n; i++ {
		rec := mem[i*c.recSize:]
		t := binary.LittleEndian.Uint64(rec[8:])
		if t == 0 {
			dst = append(dst, "#hole\n"...)
			continue
		}
		dst = strconv.AppendInt(dst, int64(binary.LittleEndian.Uint64(rec)), 10)
		dst = append(dst, ',')
		dst = strconv.AppendUint(dst, t, 10)
		if c.recSize == 24 {
			dst = append(dst, ',')
			dst = strconv.AppendUint(dst, binary.LittleEndian.Uint64(rec[16:]), 10)
		}
		dst = append(dst, '\n')
	}
	return dst
}

// write puts one encoded block on disk. If that fails (a full disk), the
// block is kept in memory (spilled) and the channel refuses new events
// (LogTS returns CP_ERR_IO) until every spilled block is written: nothing
// accepted is lost, the ring goes on turning so no logging thread waits on
// the disk, and memory stays bounded (new events are refused, so at most one
// ring's worth spills).
func (c *channel) write(b []byte, from, n uint64) {
	if len(c.spill) == 0 {
		err := c.append(b)
		if err == nil {
			return
		}
		c.setWriteErr(err)
		fmt.Fprintf(os.Stderr, "cloudprofiler: %s: %v; refusing new events until it can write again\n", c.path, err)
		c.setFailed(true)
	}
	c.spill = append(c.spill, spilled{append([]byte(nil), b...), from, n})
	atomic.AddUint64((*uint64)(unsafe.Pointer(&c.slot.unwritten)), n)
	c.spilling.Store(true)
}

type spilled struct {
	frame   []byte
	from, n uint64 // positions [from, from+n)
}

// retrySpill writes spilled blocks in order and says whether all are out.
func (c *channel) retrySpill() bool {
	for len(c.spill) > 0 {
		if err := c.append(c.spill[0].frame); err != nil {
			c.setWriteErr(err)
			return false
		}
		atomic.AddUint64((*uint64)(unsafe.Pointer(&c.slot.unwritten)), -c.spill[0].n)
		c.spill = c.spill[1:]
		c.ringStatus(logfile.StateOpen, atomic.LoadUint64(c.word())&countMask)
	}
	c.spill = nil
	if c.spilling.Swap(false) {
		fmt.Fprintf(os.Stderr, "cloudprofiler: %s: writing again\n", c.path)
		c.setFailed(false)
	}
	return true
}

// setFailed switches a channel between refusing events and taking them.
// The owner-biased path does not look at failed, so the fast path is
// re-selected (which revokes an owner).
func (c *channel) setFailed(failed bool) {
	v := uint32(0)
	if failed {
		v = 1
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.slot.failed)), v)
	c.updateFastPath(false)
}

func (c *channel) isClosing() bool {
	return atomic.LoadUint64(c.word())&closedBit != 0
}

// closeChannel flushes and closes; reason goes into the trailer.
func closeChannel(h int64, reason string) error {
	c, err := lookup(h)
	if err != nil {
		return err
	}
	return c.close(reason)
}

func (c *channel) close(reason string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fail(C.CP_ERR_CLOSED, "channel %d is closed", c.handle)
	}
	c.closed = true
	c.stopReceiver() // a return log: nothing is put after the final drain
	var foxStats *logfile.FoxStats
	if c.retLog != nil { // FOX_START: its return log first, with the ReTACK counts
		c.retLog.close(reason)
		foxStats = c.retLog.recv.stats()
	}
	if c.recv != nil {
		foxStats = c.recv.stats()
	}
	if c.fox != nil && c.fox.role == "start" {
		c.fox.release() // its socket, if the return log never took it
	}
	// One atomic OR linearises the close: every LogTS before it has a
	// position below end (and will be drained), every one after it fails.
	C.cp_revoke_owner(c.slot) // an owner thread writes the word with plain stores
	if c.netconf {
		unwatchConf(c)
		c.retire() // before the OR: FIRSTLAST's pair takes ring positions
	}
	end := atomic.OrUint64(c.word(), closedBit) & countMask
	tr := logfile.Trailer{Reason: reason, Positions: end, Fox: foxStats}
	if c.fox != nil && c.fox.role == "end" {
		tr.Fox = c.endFoxEnd()
	}
	switch {
	case c.cur.Ring() || c.netconf:
		close(c.stop)
		<-c.drained
		c.drainFinal(end)
		for i := 0; !c.retrySpill() && i < 20; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		for _, s := range c.spill {
			c.unwritten += s.n
		}
		tr.Holes, tr.Unwritten = c.holes, c.unwritten
		tr.Dropped = atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.slot.dropped)))
		tr.Total = end
	case c.cur.Counter():
		tr.Total = sampler.remove(c, end)
		tr.Unwritten = c.unwritten
	case c.cur == handlers.FirstLast:
		tr.Total = c.writeFirstLast()
	case c.cur == handlers.Identity:
		for atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.slot.inflight))) != 0 {
			time.Sleep(50 * time.Microsecond)
		}
		tr.Total = end
	}
	if err := c.writeErr(); err != nil {
		tr.WriteError = err.Error()
	}
	tr.CloseSync = readSync()
	var firstErr error
	if err := c.writeMeta(logfile.KindTrailer, tr); err != nil {
		firstErr = fail(C.CP_ERR_IO, "%s: trailer: %v", c.path, err)
	}
	// The status after the trailer attempt: written in place, it needs no
	// free space, so a disk that refused the trailer still keeps the counts.
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.slot.unwritten)), c.unwritten)
	state := uint32(logfile.StateClosed)
	if c.unwritten > 0 {
		state = logfile.StateClosedLoss
	}
	if c.ring != nil {
		c.ringStatus(state, tr.Total)
	} else {
		c.writeStatus(state, tr.Total, 0)
	}
	if err := unix.Fsync(c.fd); err != nil && firstErr == nil {
		firstErr = fail(C.CP_ERR_IO, "%s: fsync: %v", c.path, err)
	}
	// Hide the fd from the SIGTERM flusher and wait until none is using it.
	atomic.StoreInt32((*int32)(unsafe.Pointer(&c.slot.fd)), -1)
	C.cp_sigflush_begin_fd_close()
	atomic.StoreInt32((*int32)(unsafe.Pointer(&c.slot.status_fd)), -1)
	unix.Close(c.fd)
	unix.Close(c.sfd)
	// Writers still waiting for ring space (only after a failed disk) return.
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.slot.abandoned)), 1)
	c.freeMemory()
	regMu.Lock()
	delete(channels, c.idx)
	freed = append(freed, freedSlot{c.idx, time.Now()})
	regMu.Unlock()
	if c.unwritten > 0 { // said even when the trailer failed too: the loss is what matters
		firstErr = fail(C.CP_ERR_IO, "%s: %d records could not be written: %v", c.path, c.unwritten, c.writeErr())
	}
	if firstErr != nil {
		fmt.Fprintln(os.Stderr, "cloudprofiler:", firstErr)
	}
	return firstErr
}

func (c *channel) writeFirstLast() uint64 {
	var v [7]C.uint64_t
	C.cp_firstlast_snapshot(c.slot, &v[0])
	n := uint64(v[0])
	if n == 0 {
		return 0
	}
	k := uint64(1)
	if n > 1 {
		k = 2
	}
	mem := make([]byte, 0, 48)
	for i := uint64(0); i < k; i++ {
		mem = binary.LittleEndian.AppendUint64(mem, uint64(v[1+3*i]))
		mem = binary.LittleEndian.AppendUint64(mem, uint64(v[2+3*i]))
		if c.recSize == 24 {
			mem = binary.LittleEndian.AppendUint64(mem, uint64(v[3+3*i]))
		}
	}
	var out []byte
	if c.format.IsASCII() {
		out = c.encodeASCII(nil, mem, 0, k)
	} else {
		out = c.encodeFrame(nil, mem, 0, k)
	}
	if err := c.append(out); err != nil {
		c.setWriteErr(err)
		c.unwritten += k
	}
	return n
}

func closeAll(reason string) error {
	regMu.Lock()
	var all []*channel
	for _, c := range channels {
		all = append(all, c)
	}
	regMu.Unlock()
	var first error
	for _, c := range all {
		if err := c.close(reason); err != nil && first == nil && codeOf(err) != C.CP_ERR_CLOSED {
			first = err
		}
	}
	return first
}
