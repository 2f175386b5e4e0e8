package main

/*
#include "engine.h"
*/
import "C"

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"cloudprofiler/confserver"
	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"
)

// NET_CONF channels ask the configuration server ($CP_CONF_SERVER) which
// handler they get when they open, and switch handler, without being
// reopened, when a rule changes: one goroutine long-polls the server's watch
// endpoint and re-resolves every open NET_CONF channel when the version
// moves, or when the server comes back after being unreachable.

var (
	confOnce     sync.Once
	confAddr     string
	confTimeout  = time.Second
	confFallback = handlers.Null
	confClient   atomic.Pointer[confserver.Client] // resolve calls, bounded by confTimeout
	watchClient  *confserver.Client                // long polls

	confMu      sync.Mutex
	confChans   = map[*channel]bool{}
	watcherOn   bool
	confWarning string // a bad CP_CONF_* value, said in every fallback reason

	resolveSlots = make(chan struct{}, confParallel)
)

const confParallel = 32

func confInit() {
	confOnce.Do(func() {
		confAddr = getenv("CP_CONF_SERVER")
		if s := getenv("CP_CONF_TIMEOUT_MS"); s != "" {
			ms, err := strconv.Atoi(s)
			if err != nil || ms < 1 || ms > 60000 {
				confWarning = fmt.Sprintf("CP_CONF_TIMEOUT_MS=%q ignored (want 1..60000); ", s)
			} else {
				confTimeout = time.Duration(ms) * time.Millisecond
			}
		}
		if s := getenv("CP_CONF_FALLBACK"); s != "" {
			h, err := handlers.Parse(s)
			if err != nil || !confserver.Switchable(h) {
				confWarning += fmt.Sprintf("CP_CONF_FALLBACK=%q ignored (not a handler a NET_CONF channel can take); ", s)
			} else {
				confFallback = h
			}
		}
		tr := &http.Transport{MaxIdleConnsPerHost: confParallel, ResponseHeaderTimeout: confTimeout}
		confClient.Store(&confserver.Client{Addr: confAddr, HTTP: &http.Client{Timeout: confTimeout, Transport: tr}})
		watchClient = &confserver.Client{Addr: confAddr, HTTP: &http.Client{Timeout: 45 * time.Second}}
		if confWarning != "" {
			fmt.Fprintln(os.Stderr, "cloudprofiler:", confWarning)
		}
	})
}

// resolved is a decision checked against the handler catalogue.
type resolved struct {
	handler handlers.Type
	args    []int64
	drop    bool
	format  logfile.Format // -1: the one the program opened with
	info    *logfile.Conf
	version uint64 // the table version it came from (0: a fallback)
}

func check(d confserver.Decision) (resolved, error) {
	r := resolved{format: -1}
	h, err := handlers.Parse(d.Handler)
	if err != nil {
		return r, err
	}
	if !confserver.Switchable(h) {
		return r, fmt.Errorf("handler %s cannot be given to a NET_CONF channel", h)
	}
	args := h.Defaults()
	if len(d.Args) > len(args) {
		return r, fmt.Errorf("%s takes %d argument(s), got %d", h, len(args), len(d.Args))
	}
	copy(args, d.Args)
	for i := range d.Args {
		if err := h.CheckArg(int32(i), args[i], args); err != nil {
			return r, err
		}
	}
	if d.Format != "" {
		if r.format, err = logfile.ParseFormat(d.Format); err != nil {
			return r, err
		}
	}
	r.handler, r.args, r.drop = h, args, d.DropWhenFull && h.Ring()
	r.info = &logfile.Conf{Server: confAddr, Handler: h.String(), Rule: d.Rule, Version: d.Version}
	r.version = d.Version
	return r, nil
}

func fallbackFor(reason string) resolved {
	return resolved{handler: confFallback, args: confFallback.Defaults(), format: -1,
		info: &logfile.Conf{Server: confAddr, Handler: confFallback.String(), Fallback: confWarning + reason}}
}

// resolveAtOpen asks the server, within CP_CONF_TIMEOUT_MS; anything else
// (no server set, unreachable, slow, a decision this library cannot apply)
// gives the fallback handler with the reason, which goes into the header.
func resolveAtOpen(name string) resolved {
	confInit()
	if confAddr == "" {
		return fallbackFor("CP_CONF_SERVER is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), confTimeout)
	defer cancel()
	// At most confParallel requests at once, over kept-alive connections: a
	// thousand threads opening together queue for a moment instead of each
	// dialling the server (and missing the deadline in the crowd).
	select {
	case resolveSlots <- struct{}{}:
		defer func() { <-resolveSlots }()
	case <-ctx.Done():
		return fallbackFor(fmt.Sprintf("configuration server %s: no answer within %v (busy)", confAddr, confTimeout))
	}
	d, err := confClient.Load().Resolve(ctx, confserver.Channel{Name: name, Host: host, PID: os.Getpid()})
	if err != nil {
		return fallbackFor(fmt.Sprintf("configuration server %s: %v", confAddr, err))
	}
	r, err := check(d)
	if err != nil {
		return fallbackFor(fmt.Sprintf("configuration server %s gave %s: %v", confAddr, d.Handler, err))
	}
	return r
}

// watchConf registers an open NET_CONF channel for remote changes. A
// channel that fell back, or whose answer is older than what the watcher has
// seen (the table changed while it opened), is marked stale: the watcher
// asks again for it within a second, and keeps asking while it is stale.
func watchConf(c *channel, version uint64) {
	confMu.Lock()
	defer confMu.Unlock()
	confChans[c] = version == 0 || version < seenVersion.Load()
	if confChans[c] && watchCancel != nil {
		watchCancel() // cut a long poll short
	}
	if !watcherOn && confAddr != "" {
		watcherOn = true
		go confWatcher()
	}
}

func unwatchConf(c *channel) {
	confMu.Lock()
	delete(confChans, c)
	confMu.Unlock()
}

var (
	seenVersion atomic.Uint64      // the newest table version the watcher has acted on
	watchCancel context.CancelFunc // cancels the long poll under way (confMu)
)

func anyStale() bool {
	confMu.Lock()
	defer confMu.Unlock()
	for _, stale := range confChans {
		if stale {
			return true
		}
	}
	return false
}

// confWatcher long-polls the server. It sleeps in the server's answer (30 s
// at most, 1 s while some channel is stale); when the server is unreachable
// it retries every second at most, and re-resolves everything once it is
// back. It runs for the life of the process once a NET_CONF channel opened.
func confWatcher() {
	var since uint64 // 0: answered at once, then everything is re-resolved
	retry := 100 * time.Millisecond
	for {
		stale := anyStale()
		wait := 30 * time.Second
		if stale {
			wait = time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait+10*time.Second)
		confMu.Lock()
		watchCancel = cancel
		confMu.Unlock()
		v, err := watchClient.Watch(ctx, since, wait)
		cut := ctx.Err() == context.Canceled
		cancel()
		if cut { // a stale channel arrived: ask for it now
			if refresh(false) != nil {
				time.Sleep(retry)
			}
			continue
		}
		if err == nil && (v != since || stale) {
			seenVersion.Store(v) // before the channels are listed: see watchConf
			err = refresh(v != since)
			if err == nil {
				since = v
			}
		}
		if err != nil {
			since = 0
			time.Sleep(retry)
			retry = min(2*retry, time.Second)
			continue
		}
		retry = 100 * time.Millisecond
	}
}

// refresh re-resolves the open NET_CONF channels (all of them, or only the
// stale ones) in one request and applies what changed.
func refresh(all bool) error {
	confMu.Lock()
	chans := make([]*channel, 0, len(confChans))
	for c, stale := range confChans {
		if all || stale {
			chans = append(chans, c)
		}
	}
	confMu.Unlock()
	if len(chans) == 0 {
		return nil
	}
	asks := make([]confserver.Channel, len(chans))
	for i, c := range chans {
		asks[i] = confserver.Channel{Name: c.name, Host: host, PID: os.Getpid()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := confClient.Load().ResolveMany(ctx, asks)
	if err != nil {
		return err
	}
	for i, c := range chans {
		r, err := check(ds[i])
		if err != nil {
			fmt.Fprintf(os.Stderr, "cloudprofiler: %s: the configuration server's decision is not usable: %v\n", c.path, err)
			continue
		}
		c.apply(r)
		confMu.Lock()
		if _, open := confChans[c]; open {
			confChans[c] = false
		}
		confMu.Unlock()
	}
	return nil
}

// apply switches a NET_CONF channel to r's handler while threads keep
// logging. Records of a logging handler stay in the file; the switch is an
// event in the file (with the ring position it happened at), so the
// analysis knows where the gaps are.
func (c *channel) apply(r resolved) {
	c.mu.Lock()
	defer c.mu.Unlock()
	drop := atomic.LoadUint32((*uint32)(unsafe.Pointer(&c.slot.drop_when_full))) == 1
	if c.closed || (r.handler == c.cur && slices.Equal(r.args, c.args) && r.drop == drop) {
		return
	}
	c.retire()
	pos := atomic.LoadUint64(c.word()) & countMask // where the old handler's records end
	// Calls that read the old kind before retire finish within
	// nanoseconds; give them a millisecond before their state is reused.
	time.Sleep(time.Millisecond)
	c.cur, c.args = r.handler, r.args
	s := c.slot
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.aux)), 0)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.fpc_count)), 0)
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&s.nc_count)), 0)
	if len(c.args) > 0 {
		atomic.StoreInt64((*int64)(unsafe.Pointer(&s.arg0)), c.args[0])
	}
	if len(c.args) > 1 {
		atomic.StoreInt64((*int64)(unsafe.Pointer(&s.arg1)), c.args[1])
	}
	var err error
	switch {
	case c.cur == handlers.XoY:
		err = c.setXoY()
	case c.cur == handlers.Median:
		err = c.setMedianWindow(c.args[0])
	case c.cur.Counter():
		c.period = c.args[0]
	}
	if err != nil { // out of memory: stay off
		fmt.Fprintf(os.Stderr, "cloudprofiler: %s: switch to %s: %v\n", c.path, c.cur, err)
		c.cur, c.args = handlers.Null, nil
	}
	v := uint32(0)
	if r.drop {
		v = 1
	}
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&s.drop_when_full)), v)
	atomic.StoreInt32((*int32)(unsafe.Pointer(&s.kind)), int32(c.kindValue()))
	c.updateFastPath(false)
	if c.cur.Counter() {
		sampler.add(c)
	}
	ev := logfile.Event{Event: "switch", Handler: c.cur.String(), Args: c.argMap(), Pos: pos}
	if r.info != nil {
		ev.Rule, ev.Version = r.info.Rule, r.info.Version
	}
	if err := c.writeMeta(logfile.KindEvent, ev); err != nil {
		c.setWriteErr(err)
	}
}

// retire stops the handler in effect on a NET_CONF channel (c.mu held): no
// new events reach it, a counter writes its last period, FIRSTLAST puts its
// pair into the ring.
func (c *channel) retire() {
	if c.cur == handlers.FirstLast {
		var v [7]C.uint64_t
		C.cp_firstlast_retire(c.slot, &v[0]) // kind = NULLH under the slot's lock
		for i := 0; i < int(min(v[0], 2)); i++ {
			C.cp_ring_put(c.slot, C.int64_t(v[1+3*i]), v[2+3*i], v[3+3*i])
		}
	}
	atomic.StoreInt32((*int32)(unsafe.Pointer(&c.slot.kind)), C.CP_NULLH)
	c.updateFastPath(false) // revokes an owner; NULLH takes no fast path
	if c.cur.Counter() {
		sampler.remove(c, 0)
	}
}
