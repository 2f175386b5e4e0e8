package main

/*
#include "engine.h"
*/
import "C"

import (
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/tsc"
)

// sampler is the one goroutine that closes the periods of every counter
// channel. Period boundaries are multiples of the period on
// CLOCK_MONOTONIC_RAW, so channels with the same period sample in lock step.
// SERVICERATE channels (counters too) are also sampled for their estimator,
// each every T of its own (srSample). It sleeps until the next boundary or
// sample; with no counter channel it sleeps on wake.
var sampler = &counterSampler{wake: make(chan struct{}, 1), chans: map[*channel]bool{}}

type counterSampler struct {
	mu     sync.Mutex
	chans  map[*channel]bool
	wake   chan struct{}
	passes atomic.Uint64 // times it woke (the tests check it sleeps)
}

func (s *counterSampler) add(c *channel) {
	s.mu.Lock()
	now := tsc.MonoRaw()
	c.boundary = (now/c.period + 1) * c.period
	c.last = 0
	if c.sr != nil {
		c.sr.restart(c, now)
	}
	s.chans[c] = true
	s.mu.Unlock()
	s.poke()
}

func (s *counterSampler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *counterSampler) setPeriod(c *channel, p int64) {
	s.mu.Lock()
	c.period = p
	c.boundary = (tsc.MonoRaw()/p + 1) * p
	s.mu.Unlock()
	s.poke()
}

// count reads a counter channel's running total.
func (c *channel) count() uint64 {
	switch {
	case c.cur == handlers.PeriodicCounter && c.netconf:
		return atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.slot.nc_count)))
	case c.cur == handlers.PeriodicCounter:
		return atomic.LoadUint64(c.word()) & countMask
	}
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.slot.fpc_count)))
}

// remove closes the last (partial) period and returns the total. end is the
// count at the moment of close for PERIODICCOUNTER.
func (s *counterSampler) remove(c *channel, end uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.chans, c)
	total := end
	if c.cur == handlers.FastPeriodicCounter || c.cur == handlers.ServiceRate || c.netconf {
		// Counted outside the word: give an increment under way a moment
		// to land before the final read.
		time.Sleep(time.Millisecond)
		total = max(c.count(), c.last) // emit's: the highest seen
	}
	if c.emit(readSync(), total, 0) != nil {
		// The disk refused the last record too: what it held is said as
		// unwritten (status, trailer, CloseChannel's error).
		c.unwritten = max(total, c.last) - c.last
	}
	return total
}

func (s *counterSampler) run() {
	timer := time.NewTimer(time.Hour)
	for {
		s.passes.Add(1)
		s.mu.Lock()
		next := int64(-1)
		for c := range s.chans {
			if next < 0 || c.boundary < next {
				next = c.boundary
			}
			if c.sr != nil && c.sr.next < next {
				next = c.sr.next
			}
		}
		s.mu.Unlock()
		d := time.Hour
		if next >= 0 {
			d = time.Duration(next - tsc.MonoRaw())
		}
		if d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-s.wake:
				if !timer.Stop() {
					<-timer.C
				}
				continue
			}
		}
		s.sample()
	}
}

func (s *counterSampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := tsc.MonoRaw()
	for c := range s.chans {
		if c.sr != nil && c.sr.next <= now {
			c.srSample(now)
		}
	}
	var sp logfile.Sync
	for c := range s.chans {
		if c.boundary > now {
			continue
		}
		if sp.TSC == 0 {
			sp = readSync()
		}
		skipped := uint64((now - c.boundary) / c.period)
		c.boundary += int64(skipped+1) * c.period
		c.emit(sp, c.count(), skipped)
	}
}

// emit writes one counter record: the events since the last one. A
// FASTPERIODICCOUNTER's count is a plain load and store (no locked
// instruction on the hot path): with several writers an increment can
// store a value below one another stored, and the count steps back.
// Periods count only what it climbs above the highest value seen, so they
// never wrap (a step back once read as 18446744073705152100 events) and
// add up to the trailer's total: fewer than the events, as FASTPERIODIC-
// COUNTER promises with several writers.
//
// A record the disk refuses loses nothing: the next carries its events and
// its period (one more skipped period), and meanwhile the status says how
// many events wait, with the errno.
func (c *channel) emit(sp logfile.Sync, total, skipped uint64) error {
	var n uint64
	if total > c.last {
		n = total - c.last
	}
	skipped += c.held
	mono := uint64(0)
	if c.format.HasMono() {
		mono = uint64(sp.MonoRawNs)
	}
	var out []byte
	if c.format.IsASCII() {
		if c.netconf { // tuple records share the file: mark the line
			out = append(out, "#counter "...)
		}
		out = strconv.AppendUint(out, sp.TSC, 10)
		out = append(out, ',')
		out = strconv.AppendUint(out, n, 10)
		out = append(out, ',')
		out = strconv.AppendUint(out, skipped, 10)
		if c.format.HasMono() {
			out = append(out, ',')
			out = strconv.AppendUint(out, mono, 10)
		}
		out = append(out, '\n')
	} else {
		var rec [logfile.CounterRecordSize]byte
		binary.LittleEndian.PutUint64(rec[0:], sp.TSC)
		binary.LittleEndian.PutUint64(rec[8:], mono)
		binary.LittleEndian.PutUint64(rec[16:], n)
		binary.LittleEndian.PutUint64(rec[24:], skipped)
		out = logfile.AppendFrame(nil, logfile.FrameHeader{Kind: logfile.KindCounter, N: 1, RawLen: uint32(len(rec))}, rec[:])
	}
	pending := (*uint64)(unsafe.Pointer(&c.slot.unwritten))
	if err := c.append(out); err != nil {
		c.setWriteErr(err)
		c.held = skipped + 1
		atomic.StoreUint64(pending, n)
		return err
	}
	c.last += n
	c.held = 0
	atomic.StoreUint64(pending, 0)
	return nil
}
