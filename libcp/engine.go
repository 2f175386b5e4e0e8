package main

/*
#cgo CFLAGS: -O2 -Wall -Werror
#include <stdlib.h>
#include "engine.h"

// libcp/cloudprofiler.h is a symlink to capi/cloudprofiler.h: the go command
// hashes headers in the package directory only, so through the link an edit
// of the contract rebuilds the library, and the compiler checks it against
// the Go exports in _cgo_export.h.
*/
import "C"

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/tsc"

	"golang.org/x/sys/unix"
)

// LibraryVersion is written into every file header.
const LibraryVersion = "cloudprofiler 0.1.0"

const (
	wordGenShift = 48
	closedBit    = uint64(1) << 47
	countMask    = closedBit - 1
	maxNameLen   = 4096
	// A closed slot is not reused for this long, so a thread preempted between
	// validating a handle and using the slot cannot touch a new channel.
	quarantine = 2 * time.Second
	// How long a drain waits for a reserved position to be written before it
	// counts a hole (a writer preempted for that long, or gone).
	holeWait = 5 * time.Second
)

// config is read from the environment once, at the first OpenChannel.
type config struct {
	logDir       string
	blockRecords uint64    // power of two
	ringBlocks   uint64    // power of two
	fake         *tsc.Fake // CP_FAKE_TSC, nil when unset
	node         string    // CP_NODE, else the host name
	run          string    // CP_RUN, "" when unset
	waits        int       // CP_WAITS: CP_WAITS_OFF, _GETRUSAGE or _RSEQ (the most wanted; marks.go)
}

// getenv reads the process environment as it is now, through libc: a C host
// may setenv before its first OpenChannel, after Go took its own snapshot of
// the environment at load time.
func getenv(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	v := C.getenv(cs)
	if v == nil {
		return ""
	}
	return C.GoString(v)
}

func envPow2(name string, def, min, max uint64) (uint64, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v < min || v > max || v&(v-1) != 0 {
		return 0, fmt.Errorf("%s=%q: want a power of two in [%d, %d]", name, s, min, max)
	}
	return v, nil
}

func loadConfig() (config, error) {
	c := config{logDir: getenv("CP_LOG_DIR")}
	if c.logDir == "" {
		c.logDir = "cloudprofiler-logs"
	}
	var err error
	if c.blockRecords, err = envPow2("CP_BLOCK_RECORDS", 1<<16, 1<<8, 1<<22); err != nil {
		return c, err
	}
	if c.ringBlocks, err = envPow2("CP_RING_BLOCKS", 8, 2, 1024); err != nil {
		return c, err
	}
	if v := getenv("CP_FAKE_TSC"); v != "" {
		f, err := tsc.ParseFake(v)
		if err != nil {
			return c, err
		}
		c.fake = &f
	}
	if v := getenv("CP_NODE"); v != "" { // empty means unset, as for every CP_* variable
		if !validNode(v) {
			return c, fmt.Errorf("CP_NODE=%q: want 1..%d characters of [A-Za-z0-9._-]", v, maxNodeLen)
		}
		c.node = v
	} else {
		h, _ := os.Hostname()
		c.node = defaultNode(h)
	}
	if v := getenv("CP_RUN"); v != "" {
		if !validNode(v) {
			return c, fmt.Errorf("CP_RUN=%q: want 1..%d characters of [A-Za-z0-9._-]", v, maxNodeLen)
		}
		c.run = v
	}
	if c.waits, err = waitsWanted(getenv("CP_WAITS")); err != nil {
		return c, err
	}
	return c, nil
}

const maxNodeLen = 64

// validNode says whether s is a usable CP_NODE: 1..64 of [A-Za-z0-9._-].
func validNode(s string) bool {
	if len(s) == 0 || len(s) > maxNodeLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-') {
			return false
		}
	}
	return true
}

// defaultNode makes a node name of the host name: other characters become
// '_', at most 64 of them.
func defaultNode(h string) string {
	b := []byte(h)
	if len(b) > maxNodeLen {
		b = b[:maxNodeLen]
	}
	for i, ch := range b {
		if !validNode(string(ch)) {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "unknown-host"
	}
	return string(b)
}

// channel is the Go side of one open channel; the C side is cp_slots[idx].
type channel struct {
	idx     int
	gen     uint64
	handle  int64
	number  uint64
	slot    *C.cp_slot_t
	htype   handlers.Type // as opened: the header's handler (NET_CONF stays NET_CONF)
	cur     handlers.Type // in effect now: htype, or what the configuration server said
	netconf bool
	conf    *logfile.Conf
	name    string
	format  logfile.Format
	path    string
	fd      int // O_APPEND: frames, lines, events, the trailer
	sfd     int // the same file without O_APPEND: the status slots, in place
	recSize uint64

	mu     sync.Mutex // args, close
	fastMu sync.Mutex // the slot's fast path selector
	args   []int64
	closed bool

	// ring handlers
	ring         []byte
	ringSeq      []uint64
	blockRecs    uint64
	ringBlocks   uint64
	next         uint64    // next block to drain: owned by whoever drains
	lastSeen     uint64    // ring position at pump's last look (regMu)
	lastMove     time.Time // when pump last saw the position move (regMu)
	written      uint64    // positions below this are on disk (drainer-owned)
	flushPartial atomic.Bool
	spilling     atomic.Bool // blocks wait in spill for a failing disk
	spill        []spilled   // drainer-owned
	stop         chan struct{}
	kick         chan struct{}
	drained      chan struct{}
	sleeps       atomic.Uint64 // times the drainer slept with drain_parked set (tests)
	holes        uint64
	unwritten    uint64
	scratch      []byte
	errMu        sync.Mutex
	lastErr      error // the last write error (errMu): drainer, sampler and close set it
	cols         []byte

	// counter handlers (guarded by sampler.mu)
	period   int64
	boundary int64
	last     uint64 // the count the records written hold
	held     uint64 // periods whose record could not be written (the next carries them)

	sr *srState // SERVICERATE: the estimator and its sampling (sampler.go)

	medBuf unsafe.Pointer

	// FOX_START, FOX_END and the return log (fox.go)
	fox *foxOpen
	// a marked channel that notes its thread's waits (marks.go; nil: none)
	mark     *markedInstance
	markRole C.int32_t
	retLog   *channel // FOX_START: its return log
	recv     *foxRecv // the return log: the ReTACK receiver
}

var (
	initMu   sync.Mutex
	initDone bool
	cfg      config
	host     string
	freq     tsc.Frequency
	domain   string // tsc.Domain(): the headers' tsc_domain

	regMu    sync.Mutex
	channels = map[int]*channel{}
	gens     [C.CP_MAX_CHANNELS]uint64
	freed    []freedSlot
	nextIdx  int
	opened   uint64

	membarrierOK bool
)

type freedSlot struct {
	idx int
	at  time.Time
}

func slotPtr(idx int) *C.cp_slot_t { return &C.cp_slots[idx] }

func (c *channel) word() *uint64 { return (*uint64)(unsafe.Pointer(&c.slot.word)) }

// initLibrary runs once, at the first OpenChannel that finds a valid
// configuration: a bad CP_* value fails that open (CP_ERR_CONFIG) and the
// next OpenChannel reads the environment again.
func initLibrary() error {
	initMu.Lock()
	defer initMu.Unlock()
	if initDone {
		return nil
	}
	c, err := loadConfig()
	if err != nil {
		return fail(C.CP_ERR_CONFIG, "%v", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fail(C.CP_ERR_IO, "eventfd: %v", err)
	}
	cfg = c
	host, _ = os.Hostname()
	if host == "" {
		host = "unknown-host"
	}
	// The fake counter before anything reads the TSC: no handle exists yet,
	// and the first one is published (with a release) after this.
	if cfg.fake != nil {
		tsc.SetFake(cfg.fake)
		C.cp_set_fake(C.uint64_t(cfg.fake.RateQ32), C.int64_t(cfg.fake.Offset))
	}
	freq = tsc.Freq()
	domain = tsc.Domain()
	C.cp_block_ready_fd = C.int(efd)
	membarrierOK = C.cp_membarrier_init() == 1
	initMarks()
	// The flusher formats one block at a time: 64 bytes covers the
	// longest ASCII line (three 20-digit numbers) and any binary record.
	C.cp_sigflush_init(C.uint64_t(cfg.blockRecords * 64))
	go dispatch(os.NewFile(uintptr(efd), "cp-block-ready"))
	go pump()
	go sampler.run()
	C.cp_register_atexit()
	if C.cp_install_sigterm() < 0 {
		fmt.Fprintln(os.Stderr, "cloudprofiler: could not install the SIGTERM flush handler")
	}
	initDone = true
	return nil
}

// dispatch wakes the drainers at once when a logging thread finds half its
// ring waiting (fastpath.c), without waiting for pump's next look. It blocks in the netpoller on the eventfd.
func dispatch(f *os.File) {
	var b [8]byte
	for {
		if _, err := f.Read(b[:]); err != nil {
			fmt.Fprintln(os.Stderr, "cloudprofiler: block-ready eventfd:", err)
			return
		}
		kickDrainers(true)
	}
}

// pump decides when drainers work. Logging threads never hand blocks over
// (no syscall on the hot path); instead pump looks every 10 ms while some
// channel has data that is not on disk, backing off to every 250 ms when
// none has (an idle process wakes 4 times a second). A full block is
// written in the gaps of a bursty channel (when it went quiet since the last
// look), or at once when the ring is full but for one block (wakeBlocks):
// on a 2-vCPU machine, work on the other vCPU slows a logging thread
// (FACTS.md), so draining during a burst that fits the ring costs more
// than it gains. What a channel
// logged is on disk at most flushQuiet after it goes quiet.
func pump() {
	const minSleep, maxSleep = 10 * time.Millisecond, 250 * time.Millisecond
	d := minSleep
	for {
		time.Sleep(d)
		if pending := kickDrainers(false); pending {
			d = minSleep
		} else if d < maxSleep {
			d = min(2*d, maxSleep)
		}
	}
}

// flushQuiet is how long a channel must have logged nothing before the
// records of its partly filled block are written.
const flushQuiet = time.Second

// kickDrainers wakes the drainers that should write now (all that have a
// full block if force is set) and says whether any channel has data that
// is not on disk yet.
func kickDrainers(force bool) bool {
	pendingAny := false
	now := time.Now()
	regMu.Lock()
	for _, c := range channels {
		if c.kick == nil {
			continue
		}
		pos := atomic.LoadUint64(c.word()) & countMask
		done := atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.slot.written_pos)))
		full := pos/c.blockRecs - done/c.blockRecs
		quiet := pos == c.lastSeen
		if !quiet {
			c.lastMove = now
		}
		c.lastSeen = pos
		if c.spilling.Load() { // retry the disk every look
			pendingAny = true
			select {
			case c.kick <- struct{}{}:
			default:
			}
			continue
		}
		if pos <= done {
			continue
		}
		pendingAny = true
		wake := full > 0 && (force || quiet || full >= c.wakeBlocks())
		if quiet && now.Sub(c.lastMove) >= flushQuiet {
			c.flushPartial.Store(true)
			wake = true
		}
		if wake {
			select {
			case c.kick <- struct{}{}:
			default:
			}
		}
	}
	regMu.Unlock()
	return pendingAny
}

// errCode maps errors onto the header's codes.
type codeErr struct {
	code int32
	err  error
}

func (e *codeErr) Error() string { return e.err.Error() }

func fail(code int32, format string, a ...any) error {
	return &codeErr{code, fmt.Errorf(format, a...)}
}

func codeOf(err error) int32 {
	var ce *codeErr
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ce):
		return ce.code
	case errors.Is(err, handlers.ErrUnknown):
		return C.CP_ERR_BAD_HANDLER
	case errors.Is(err, handlers.ErrNotYet):
		return C.CP_ERR_NOT_SUPPORTED
	case errors.Is(err, handlers.ErrPlatform):
		return C.CP_ERR_UNSUPPORTED_PLATFORM
	case errors.Is(err, handlers.ErrFormat):
		return C.CP_ERR_FORMAT_HANDLER
	case errors.Is(err, handlers.ErrArgNum):
		return C.CP_ERR_BAD_ARG_NUM
	case errors.Is(err, handlers.ErrArgValue):
		return C.CP_ERR_BAD_ARG_VALUE
	}
	return C.CP_ERR_INTERNAL
}

// sanitize keeps a name safe as part of a file name: [A-Za-z0-9._-] stay,
// everything else becomes '_', and the result is at most 80 bytes.
func sanitize(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(b) < 80; i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '-', ch == '_':
			b = append(b, ch)
		case ch == '.' && len(b) > 0 && b[len(b)-1] != '.':
			b = append(b, ch)
		default:
			b = append(b, '_')
		}
	}
	return string(b)
}

func readSync() logfile.Sync {
	var s C.cp_sync_t
	C.cp_read_sync(&s)
	return logfile.Sync{TSC: uint64(s.tsc), TSCWidth: uint64(s.tsc_width),
		MonoRawNs: int64(s.mono_raw_ns), RealtimeNs: int64(s.realtime_ns)}
}

// allocSlot picks a never-used slot, else the oldest one out of quarantine.
func allocSlot() (int, error) {
	if nextIdx < C.CP_MAX_CHANNELS {
		nextIdx++
		return nextIdx - 1, nil
	}
	if len(freed) > 0 && time.Since(freed[0].at) > quarantine {
		idx := freed[0].idx
		freed = freed[1:]
		return idx, nil
	}
	return 0, fail(C.CP_ERR_TOO_MANY_CHANNELS, "%d channels open or closed in the last %v", C.CP_MAX_CHANNELS, quarantine)
}

func openChannel(name string, f logfile.Format, h handlers.Type) (int64, error) {
	if len(name) == 0 || len(name) > maxNameLen {
		return 0, fail(C.CP_ERR_BAD_NAME, "channel name must be 1..%d bytes, got %d", maxNameLen, len(name))
	}
	if !f.Valid() {
		return 0, fail(C.CP_ERR_BAD_FORMAT, "unknown log format %d", int32(f))
	}
	if err := h.CheckOpen(f.Codec() != logfile.CodecRaw); err != nil {
		return 0, err
	}
	if err := initLibrary(); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(cfg.logDir, 0o755); err != nil {
		return 0, fail(C.CP_ERR_IO, "log directory: %v", err)
	}
	warnOpenDir(cfg.logDir)
	cur, args, drop := h, h.Defaults(), false
	var conf *logfile.Conf
	var confVersion uint64
	if h == handlers.NetConf {
		// Asked before any lock is taken: bounded by CP_CONF_TIMEOUT_MS.
		d := resolveAtOpen(name)
		cur, args, drop, conf, confVersion = d.handler, d.args, d.drop, d.info, d.version
		if d.format >= 0 {
			f = d.format
		}
	}

	var fox *foxOpen
	if h == handlers.FoxStart || h == handlers.FoxEnd {
		// Bound or resolved before any file exists: a missing peer is a
		// clear error at open (CP_ERR_CONFIG), not a file that logs nothing.
		var err error
		if fox, err = prepareFox(h, name); err != nil {
			return 0, err
		}
	}

	regMu.Lock()
	opened++
	c := &channel{number: opened, htype: h, cur: cur, format: f, args: args, recSize: uint64(f.RecordSize()),
		netconf: h == handlers.NetConf, conf: conf, name: name, fox: fox}
	c.mark, c.markRole = markOf(name, h)
	ext := ".cplog"
	if f.IsASCII() {
		ext = ".cplog.txt"
	}
	stem := filepath.Join(cfg.logDir, fmt.Sprintf("%s-%d-%d-%s", sanitize(host), os.Getpid(), c.number, sanitize(name)))
	c.path = stem + ext
	if h == handlers.FoxStart {
		fox.retPath = stem + ".ret" + ext
	}
	err := c.create(drop, confVersion)
	regMu.Unlock()
	if err != nil {
		fox.release()
		return 0, err
	}
	if h == handlers.FoxStart {
		// Under c.mu: a CloseAllChannels racing with this open finds the
		// return log in place, or none and a channel it already closed.
		c.mu.Lock()
		err := c.openReturnLog()
		c.mu.Unlock()
		if err != nil {
			c.close("open failed")
			os.Remove(c.path)
			return 0, err
		}
	}
	return c.handle, nil
}

// create allocates the slot, creates the file with its header and publishes
// the channel (regMu held). On error nothing is left behind.
func (c *channel) create(drop bool, confVersion uint64) error {
	idx, err := allocSlot()
	if err != nil {
		return err
	}
	c.idx, c.slot = idx, slotPtr(idx)
	gens[idx] = gens[idx]%C.CP_MAX_GEN + 1
	c.gen = gens[idx]
	c.handle = int64(c.gen<<C.CP_IDX_BITS | uint64(idx+1))

	fd, err := unix.Open(c.path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_CLOEXEC, 0o644)
	if err != nil {
		freed = append(freed, freedSlot{idx, time.Time{}})
		return fail(C.CP_ERR_IO, "open %s: %v", c.path, err)
	}
	sfd := -1
	undo := func() {
		// Remove the name only while it is still the file made here
		// (someone who can write the directory may have renamed another
		// over it).
		if same, _ := sameFileAt(fd, c.path); same {
			os.Remove(c.path)
		}
		unix.Close(fd)
		if sfd >= 0 {
			unix.Close(sfd)
		}
		freed = append(freed, freedSlot{idx, time.Time{}})
	}
	// pwrite on an O_APPEND fd appends (Linux): the status slots are
	// rewritten in place through a second fd, opened from the first (the
	// file itself, whatever its name has become since), never by the path
	// again: a symlink renamed over the new file in between once had the
	// status written into its target.
	if fd, err = aboveStdio(fd); err == nil {
		if sfd, err = reopenWrite(fd); err == nil {
			sfd, err = aboveStdio(sfd)
		}
	}
	if err != nil {
		undo()
		return fail(C.CP_ERR_IO, "open %s: %v", c.path, err)
	}
	c.fd, c.sfd = fd, sfd

	c.slot.drop_when_full = 0
	if drop {
		c.slot.drop_when_full = 1
	}
	if err := c.setupSlot(); err != nil {
		undo()
		return err
	}
	if err := c.writeHeader(c.name); err != nil {
		c.freeMemory()
		undo()
		return fail(C.CP_ERR_IO, "write %s: %v", c.path, err)
	}
	// Publish: the word makes the handle valid, then the fd makes the
	// channel visible to the SIGTERM flusher (which reads fd, then word).
	atomic.StoreUint64(c.word(), c.gen<<wordGenShift)
	atomic.StoreInt32((*int32)(unsafe.Pointer(&c.slot.fd)), int32(fd))
	channels[idx] = c
	if c.ring != nil {
		c.stop = make(chan struct{})
		c.kick = make(chan struct{}, 1)
		c.drained = make(chan struct{})
		go c.drainLoop()
	}
	if c.cur.Counter() {
		sampler.add(c)
	}
	if c.netconf {
		watchConf(c, confVersion)
	}
	return nil
}

// aboveStdio moves fd above 0..2 (fd 0 means "no file" to the signal
// flusher); on failure fd is closed and -1 returned.
func aboveStdio(fd int) (int, error) {
	if fd >= 3 {
		return fd, nil
	}
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	unix.Close(fd)
	if err != nil {
		return -1, fmt.Errorf("dup: %v", err)
	}
	return nfd, nil
}

func (c *channel) setWriteErr(err error) {
	c.errMu.Lock()
	c.lastErr = err
	c.errMu.Unlock()
}

func (c *channel) writeErr() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.lastErr
}

// kindValue is what the C slot's kind says for the handler in effect.
func (c *channel) kindValue() C.int32_t {
	if c.netconf && c.cur == handlers.PeriodicCounter {
		return C.CP_KIND_NC_COUNTER
	}
	return C.int32_t(c.cur)
}

// setupSlot fills the C slot (not yet published) for this channel.
func (c *channel) setupSlot() error {
	s := c.slot
	s.kind = c.kindValue()
	s.nc_count = 0
	s.fast = C.int32_t(cheapPath(handlers.Type(s.kind)))
	s.owner = 0
	s.owner_limit = 0
	s.busy = 0
	s.rec_size = C.uint32_t(c.recSize)
	s.with_mono = 0
	if c.format.HasMono() {
		s.with_mono = 1
	}
	s.ascii = 0
	if c.format.IsASCII() {
		s.ascii = 1
	}
	s.log_format = C.int32_t(c.format)
	// The file: its write lock, where it ends, the status slots (placed by writeHeader).
	s.wlock = 0
	s.wowner = 0
	s.end_stale = 0
	s.file_end = 0
	s.status_fd = C.int(c.sfd)
	s.status_off = 0
	s.status_seq = 0
	s.status_floor = 0
	s.refused = 0
	s.last_errno = 0
	s.id_failing = 0
	s.unwritten = 0
	s.failed = 0
	s.abandoned = 0
	s.inflight = 0
	s.dropped = 0
	s.written_pos = 0
	s.drain_parked = 0
	s.drain_wakes = 0
	s.aux = 0
	s.fpc_count = 0
	s.sr_flags = 0
	s.lock = 0
	s.fl_n = 0
	s.ring = nil
	s.ring_seq = nil
	s.med_buf = nil
	s.med_n = 0
	s.med_cap = 0
	s.mark, s.mark_role = nil, 0
	if c.mark != nil {
		s.mark, s.mark_role = c.mark.c, c.markRole // before the slot is published
	}
	s.fox = nil
	if c.fox != nil && c.fox.cfox != nil {
		s.fox = c.fox.cfox // FOX_END's socket, before the slot is published
	}
	if len(c.args) > 0 {
		s.arg0 = C.int64_t(c.args[0])
	}
	if i := c.cur.Index(1); i >= 0 {
		s.arg1 = C.int64_t(c.args[i])
	}
	s.xoy = nil
	if c.cur == handlers.XoY {
		if err := c.setXoY(); err != nil {
			return err
		}
	}
	if c.cur.Counter() {
		c.period = c.args[0]
	}
	if c.cur == handlers.ServiceRate {
		c.sr = newSRState(c.args)
	}
	if c.cur == handlers.Median {
		if err := c.setMedianWindow(c.args[0]); err != nil {
			return err
		}
	}
	if !c.cur.Ring() && !c.netconf { // a NET_CONF channel keeps a ring for what it may become
		return nil
	}
	c.blockRecs, c.ringBlocks = cfg.blockRecords, cfg.ringBlocks
	ringBytes := c.blockRecs * c.ringBlocks * c.recSize
	ring := C.calloc(C.size_t(ringBytes), 1)
	seq := C.calloc(C.size_t(c.ringBlocks), 8)
	if ring == nil || seq == nil {
		C.free(ring)
		C.free(seq)
		return fail(C.CP_ERR_NO_MEMORY, "ring of %d bytes", ringBytes)
	}
	c.ring = unsafe.Slice((*byte)(ring), ringBytes)
	c.ringSeq = unsafe.Slice((*uint64)(seq), c.ringBlocks)
	for i := range c.ringSeq {
		c.ringSeq[i] = uint64(i)
	}
	s.ring = (*C.char)(ring)
	s.ring_seq = (*C.uint64_t)(seq)
	s.ring_blocks = C.uint32_t(c.ringBlocks)
	s.wake_blocks = C.uint32_t(c.wakeBlocks())
	c.updateFastPath(true)
	s.ring_posmask = C.uint64_t(c.blockRecs*c.ringBlocks - 1)
	s.block_shift = C.uint32_t(log2(c.blockRecs))
	return nil
}

// cheapPath is LogTS's selector for the two cheapest handlers, which it
// then decides on from the line it reads anyway, not from the kind on the
// next (fastpath.c); CP_FAST_NONE for every other handler.
func cheapPath(kind handlers.Type) int32 {
	switch kind {
	case handlers.Null:
		return C.CP_FAST_NULL
	case handlers.FastPeriodicCounter, handlers.ServiceRate:
		return C.CP_FAST_COUNT
	}
	return C.CP_FAST_NONE
}

// updateFastPath selects LogTS's path from the channel's state (fastpath.c).
// The owner-biased path is chosen once, at open, and never again after it
// was revoked: a thread preempted inside the owned path could otherwise
// commit into a later owner's positions. fastMu serialises the callers
// (ParameterizeChannel, the drainer on a failing disk, open).
func (c *channel) updateFastPath(open bool) {
	c.fastMu.Lock()
	defer c.fastMu.Unlock()
	drop := atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.slot.drop_when_full))) == 1
	failed := atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.slot.failed))) == 1
	// The slot's kind, not c.cur: this runs on the drainer too, without c.mu.
	kind := handlers.Type(atomic.LoadInt32((*int32)(unsafe.Pointer(&c.slot.kind))))
	fast := cheapPath(kind)
	// FOX_START logs its starts as BUFFER_IDENTITY does; its return log is
	// filled by the receiver (cp_ring_put), never by LogTS.
	ring := kind == handlers.BufferIdentity || kind == handlers.BufferIdentityComp || kind == handlers.FoxStart && c.fox.role == "start"
	if ring && c.recSize == 16 && !drop && !failed {
		fast = C.CP_FAST_SHARED
		if c.mark != nil {
			fast = C.CP_FAST_MARK // never owned: each record reads its thread's waits first
		} else if open && membarrierOK && getenv("CP_NO_OWNER_BIAS") == "" {
			c.slot.owner = 0
			c.slot.owner_limit = 0
			fast = C.CP_FAST_OWNED // the slot is not published yet
		}
	}
	if !open {
		C.cp_revoke_owner(c.slot) // a no-op unless owned
	}
	atomic.StoreInt32((*int32)(unsafe.Pointer(&c.slot.fast)), fast)
}

func log2(v uint64) uint32 {
	var n uint32
	for v > 1 {
		v >>= 1
		n++
	}
	return n
}

// setXoY publishes x and y. The previous parameter set is kept for the life
// of the process (40 bytes a change): a LogTS racing with the change may
// still be reading it.
func (c *channel) setXoY() error {
	if C.cp_set_xoy(c.slot, C.int64_t(c.args[0]), C.int64_t(c.args[1])) == nil {
		return fail(C.CP_ERR_NO_MEMORY, "XOY parameters")
	}
	return nil
}

func (c *channel) setMedianWindow(w int64) error {
	buf := C.calloc(C.size_t(w), 24)
	if buf == nil {
		return fail(C.CP_ERR_NO_MEMORY, "median window of %d", w)
	}
	C.cp_median_set_window(c.slot, (*C.uint64_t)(buf), C.uint32_t(w))
	C.free(c.medBuf) // no thread can hold it: the swap took the slot's lock
	c.medBuf = buf
	return nil
}

func (c *channel) freeMemory() {
	if c.ring != nil && c.holes == 0 {
		C.free(unsafe.Pointer(c.slot.ring))
		C.free(unsafe.Pointer(c.slot.ring_seq))
	}
	if c.medBuf != nil {
		C.cp_median_set_window(c.slot, nil, 0)
		C.free(c.medBuf)
		c.medBuf = nil
	}
}

func (c *channel) argMap() map[string]int64 {
	m := map[string]int64{}
	for i, a := range c.cur.Args() {
		m[a.Name] = c.args[i]
	}
	return m
}

func (c *channel) columns() []string {
	cols := []string{"tuple_id", "tsc"}
	if c.cur.Counter() && !c.netconf {
		cols = []string{"period_end_tsc", "count", "skipped_periods"}
	}
	if c.format.HasMono() {
		cols = append(cols, "mono_ns")
	}
	return cols
}

func (c *channel) writeHeader(name string) error {
	h := logfile.Header{
		Version: logfile.Version, ByteOrder: "little", Format: c.format.String(), FormatID: int32(c.format),
		Handler: c.htype.String(), HandlerID: int32(c.htype), Args: c.argMap(), Columns: c.columns(), Conf: c.conf,
		RecordSize: int(c.recSize), Channel: int(c.number), Name: name, NameHex: hex.EncodeToString([]byte(name)),
		Host: host, Node: cfg.node, TSCDomain: domain, Run: cfg.run, PID: os.Getpid(), TSCHz: freq.Hz, TSCHzSource: freq.Source, OpenSync: readSync(),
		Library: LibraryVersion,
	}
	if c.fox != nil {
		h.Fox = c.fox.header()
	}
	if c.mark != nil {
		h.Waits = waitsName()
	}
	if c.ring != nil {
		h.BlockRecords, h.RingBlocks = int(c.blockRecs), int(c.ringBlocks)
	}
	if c.cur.Counter() {
		h.CounterPeriod = c.period
		if !c.netconf {
			// The records the columns describe, as CP_LogRead writes
			// them: a reader that sizes its buffer from the header's
			// record_size must not come up short (it said 16 for 24).
			h.RecordSize = 8 * len(h.Columns)
		}
	}
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	var b []byte
	if c.format.IsASCII() {
		b = append(b, logfile.ASCIIMagic+"\n#header "...)
		b = append(b, js...)
		b = append(b, "\n#columns "...)
		for i, col := range h.Columns {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, col...)
		}
		b = append(b, '\n')
	} else {
		b = append(b, logfile.Magic...)
		b = append(b, byte(logfile.Version), 0, byte(logfile.ByteOrderMark&0xff), byte(logfile.ByteOrderMark>>8))
		b = append(b, byte(len(js)), byte(len(js)>>8), byte(len(js)>>16), byte(len(js)>>24))
		b = append(b, js...)
	}
	// The two status slots right after the header (version 2): slot 0 with
	// seq 1, slot 1 with seq 0; updates rewrite slot seq % 2 in place.
	c.slot.status_off = C.uint64_t(len(b))
	b = appendStatus(b, c.format.IsASCII(), logfile.Status{Seq: 1})
	b = appendStatus(b, c.format.IsASCII(), logfile.Status{Seq: 0})
	c.slot.status_seq = 1
	return c.append(b)
}

// appendStatus appends s encoded as one status slot by the C encoder (the
// one cp_status_write uses).
func appendStatus(dst []byte, ascii bool, s logfile.Status) []byte {
	var buf [C.CP_STATUS_LINE_SIZE]byte
	st := C.cp_status_t{seq: C.uint64_t(s.Seq), accepted: C.uint64_t(s.Accepted), written: C.uint64_t(s.Written),
		unwritten: C.uint64_t(s.Unwritten), refused: C.uint64_t(s.Refused), dropped: C.uint64_t(s.Dropped),
		err: C.uint32_t(s.Errno), state: C.uint32_t(s.State)}
	a := C.int(0)
	if ascii {
		a = 1
	}
	n := C.cp_status_encode((*C.char)(unsafe.Pointer(&buf[0])), a, &st)
	return append(dst, buf[:n]...)
}

// append writes b at the end of the file (status.c: under the file's write
// lock, with one write(2) that O_APPEND keeps whole next to the SIGTERM
// flusher's), retrying on EINTR and short writes. If it fails part way (a
// full disk), the file is cut back to where b began, so it never holds half
// a frame or line that a later retry would follow.
func (c *channel) append(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if e := C.cp_append(c.slot, C.int(c.fd), unsafe.Pointer(&b[0]), C.size_t(len(b))); e != 0 {
		return syscall.Errno(e)
	}
	return nil
}

// writeStatus rewrites the next status slot in place (cp_status_write):
// accepted and written are the caller's, the rest the C slot's.
func (c *channel) writeStatus(state uint32, accepted, written uint64) {
	C.cp_status_write(c.slot, C.uint32_t(state), C.uint64_t(accepted), C.uint64_t(written))
}

// writeMeta writes an event or the trailer as a frame or a '#' line.
func (c *channel) writeMeta(kind uint8, v any) error {
	js, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if c.format.IsASCII() {
		tag := "#event "
		if kind == logfile.KindTrailer {
			tag = "#trailer "
		}
		return c.append(append(append([]byte(tag), js...), '\n'))
	}
	return c.append(logfile.AppendFrame(nil, logfile.FrameHeader{Kind: kind, RawLen: uint32(len(js))}, js))
}

// lookup validates a handle from Go (the C fast path has its own check).
func lookup(h int64) (*channel, error) {
	if h <= 0 {
		return nil, fail(C.CP_ERR_BAD_HANDLE, "bad handle %d", h)
	}
	idx := int(h&(1<<C.CP_IDX_BITS-1)) - 1
	regMu.Lock()
	c := channels[idx]
	regMu.Unlock()
	if c == nil || c.handle != h {
		if idx >= 0 && idx < C.CP_MAX_CHANNELS {
			w := atomic.LoadUint64((*uint64)(unsafe.Pointer(&slotPtr(idx).word)))
			if uint64(h)>>C.CP_IDX_BITS == w>>wordGenShift && w&closedBit != 0 {
				return nil, fail(C.CP_ERR_CLOSED, "channel %d is closed", h)
			}
		}
		return nil, fail(C.CP_ERR_BAD_HANDLE, "bad handle %d", h)
	}
	return c, nil
}

func parameterize(h int64, argNum int32, val int64) error {
	c, err := lookup(h)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fail(C.CP_ERR_CLOSED, "channel %d is closed", h)
	}
	if err := c.cur.CheckArg(argNum, val, c.args); err != nil {
		return err
	}
	if argNum == handlers.ArgDropWhenFull {
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&c.slot.drop_when_full)), uint32(val))
		c.updateFastPath(false)
		return c.writeMeta(logfile.KindEvent, logfile.Event{Event: "drop_when_full", Total: uint64(val), Pos: atomic.LoadUint64(c.word()) & countMask})
	}
	switch {
	case c.cur == handlers.Median:
		if err := c.setMedianWindow(val); err != nil {
			return err
		}
	case c.cur == handlers.ServiceRate && argNum != 0:
		if err := sampler.setSRParam(c, argNum, val); err != nil {
			return err
		}
	case c.cur.Counter():
		sampler.setPeriod(c, val)
	}
	c.args[c.cur.Index(argNum)] = val
	if c.cur == handlers.XoY {
		if err := c.setXoY(); err != nil {
			return err
		}
	} else if c.cur == handlers.Median {
		// cp_median_set_window stored arg0 with the buffer.
	} else if argNum == 0 {
		atomic.StoreInt64((*int64)(unsafe.Pointer(&c.slot.arg0)), val)
	} else if argNum == 1 {
		atomic.StoreInt64((*int64)(unsafe.Pointer(&c.slot.arg1)), val)
	}
	return c.writeMeta(logfile.KindEvent, logfile.Event{Event: "parameterize", Args: c.argMap(), Pos: atomic.LoadUint64(c.word()) & countMask})
}

// reopenWrite opens the file fd refers to again for writing, without
// O_APPEND: through /proc/self/fd (the same inode, never a name in the log
// directory), and checks that it is the same file.
func reopenWrite(fd int) (int, error) {
	sfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return -1, fmt.Errorf("reopen through /proc/self/fd (is /proc mounted?): %w", err)
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		unix.Close(sfd)
		return -1, err
	}
	if err := unix.Fstat(sfd, &b); err != nil {
		unix.Close(sfd)
		return -1, err
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		unix.Close(sfd)
		return -1, fmt.Errorf("reopened another file (device %d inode %d, not %d %d)", b.Dev, b.Ino, a.Dev, a.Ino)
	}
	return sfd, nil
}

// sameFileAt says whether path (not followed) names the file fd refers to.
func sameFileAt(fd int, path string) (bool, error) {
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return false, err
	}
	if err := unix.Lstat(path, &b); err != nil {
		return false, err
	}
	return a.Dev == b.Dev && a.Ino == b.Ino, nil
}

// openDirWarned: the log directories warnOpenDir has spoken of.
var openDirWarned sync.Map

// warnOpenDir says once per directory, on stderr, that a log directory
// others can write is one where they can rename, replace or remove its
// files (the library writes only through the files it created; the
// analysis reads whatever is there).
func warnOpenDir(dir string) {
	if msg := openDirProblem(dir); msg != "" {
		if _, said := openDirWarned.LoadOrStore(dir, true); !said {
			fmt.Fprintln(os.Stderr, "cloudprofiler: warning:", msg)
		}
	}
}

// openDirProblem says what is wrong with dir as a log directory ("": nothing).
func openDirProblem(dir string) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return ""
	}
	mode := st.Mode & 0o7777
	if mode&0o022 == 0 {
		return ""
	}
	who := "others"
	if mode&0o002 == 0 {
		who = "its group"
	}
	return fmt.Sprintf("log directory %s (mode %04o) is writable by %s: they can rename, replace or remove the log files in it; use a directory only you can write (CP_LOG_DIR)", dir, mode, who)
}
