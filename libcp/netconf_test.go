package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloudprofiler/confserver"
	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
)

// A real configuration server process (the cloudprofiler binary, built
// once), on a loopback port fixed for the whole test binary so that it can
// be killed and started again where the library expects it.
var conf struct {
	once      sync.Once
	err       error
	bin, addr string
	rules     string
	cmd       *exec.Cmd
}

const confToken = "test-token"

func confSetup(t *testing.T) {
	t.Helper()
	conf.once.Do(func() {
		dir, err := os.MkdirTemp("", "cpconf")
		if err != nil {
			conf.err = err
			return
		}
		conf.bin = filepath.Join(dir, "cloudprofiler")
		out, err := exec.Command("go", "build", "-o", conf.bin, "../cmd/cloudprofiler").CombinedOutput()
		if err != nil {
			conf.err = err
			t.Logf("%s", out)
			return
		}
		conf.rules = filepath.Join(dir, "rules.json")
		conf.addr = os.Getenv("CP_CONF_SERVER")
	})
	require.NoError(t, conf.err)
	require.Equal(t, conf.addr, os.Getenv("CP_CONF_SERVER"), "TestMain points the library at the test server")
}

func startConfServer(t *testing.T) {
	t.Helper()
	confSetup(t)
	if conf.cmd != nil {
		return
	}
	cmd := exec.Command(conf.bin, "confserver", "--listen", conf.addr, "--config", conf.rules)
	cmd.Env = append(os.Environ(), "CP_CONF_TOKEN="+confToken)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stderr).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, "listening on")
	go func() { // keep draining its stderr
		b := make([]byte, 4096)
		for {
			if _, err := stderr.Read(b); err != nil {
				return
			}
		}
	}()
	conf.cmd = cmd
}

func stopConfServer() {
	if conf.cmd != nil {
		conf.cmd.Process.Kill()
		conf.cmd.Wait()
		conf.cmd = nil
	}
}

func setRule(t *testing.T, r confserver.Rule) {
	t.Helper()
	c := &confserver.Client{Addr: conf.addr, Token: confToken}
	_, err := c.SetRule(context.Background(), r)
	require.NoError(t, err)
}

func current(c *channel) handlers.Type {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// waitFor waits until the channel runs handler h and says how long that took.
func waitFor(t *testing.T, c *channel, h handlers.Type, within time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	for current(c) != h {
		if time.Since(t0) > within {
			t.Fatalf("channel still runs %s, not %s, after %v", current(c), h, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(t0)
}

func TestNetConfResolvesAtOpen(t *testing.T) {
	startConfServer(t)
	setRule(t, confserver.Rule{ID: "open", Name: "nc open*", Handler: "XOY", Args: []int64{1, 2}, Format: "ZSTD_TSC"})
	ch, c := open(t, "nc open 1", logfile.BinaryTSC, handlers.NetConf)
	require.Equal(t, handlers.XoY, current(c))
	for i := 0; i < 1000; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readRecords(t, c.path)
	require.Len(t, recs, 500, "XOY x=1 y=2: the even ids")
	require.Equal(t, "NET_CONF", lf.Header.Handler)
	require.Equal(t, "ZSTD_TSC", lf.Header.Format, "the rule's format")
	require.NotNil(t, lf.Header.Conf)
	require.Equal(t, "open", lf.Header.Conf.Rule)
	require.Empty(t, lf.Header.Conf.Fallback)
}

// Off, on, off while four threads log: every reserved ring position holds
// its record, nothing doubled, and each switch is in the file.
func TestNetConfSwitchesUnderLoad(t *testing.T) {
	startConfServer(t)
	setRule(t, confserver.Rule{ID: "sw", Name: "nc switch", Handler: "NULLH"})
	ch, c := open(t, "nc switch", logfile.BinaryTSC, handlers.NetConf)
	require.Equal(t, handlers.Null, current(c))
	require.Equal(t, int32(handlers.Null), int32(c.slot.kind), "resolved to NULLH: the NULLH path itself")
	require.Equal(t, int32(fastNull), c.fastPath(), "LogTS decides on NULLH from the selector")

	var stop atomic.Bool
	var wg sync.WaitGroup
	var calls atomic.Int64
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				if rc := logTS(ch, int64(g)<<32|int64(i)); rc != 0 {
					t.Errorf("LogTS: %d", rc)
					return
				}
				calls.Add(1)
			}
		}(g)
	}
	time.Sleep(50 * time.Millisecond)
	setRule(t, confserver.Rule{ID: "sw", Name: "nc switch", Handler: "BUFFER_IDENTITY"})
	on := waitFor(t, c, handlers.BufferIdentity, 2*time.Second)
	time.Sleep(100 * time.Millisecond)
	setRule(t, confserver.Rule{ID: "sw", Name: "nc switch", Handler: "PERIODICCOUNTER", Args: []int64{10_000_000}})
	waitFor(t, c, handlers.PeriodicCounter, 2*time.Second)
	time.Sleep(50 * time.Millisecond)
	setRule(t, confserver.Rule{ID: "sw", Name: "nc switch", Handler: "NULLH"})
	off := waitFor(t, c, handlers.Null, 2*time.Second)
	time.Sleep(20 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	require.NoError(t, closeChannel(ch, "close"))
	t.Logf("switch on took %v, off %v; %d LogTS calls", on, off, calls.Load())
	require.Less(t, on, time.Second)
	require.Less(t, off, time.Second)

	recs, lf := readRecords(t, c.path)
	require.NotEmpty(t, recs)
	require.Equal(t, uint64(len(recs)), lf.Summary.Trailer.Positions, "every reserved position has its record")
	require.Zero(t, lf.Summary.Holes)
	require.Zero(t, lf.Summary.Duplicates)
	seen := map[int64]bool{}
	for _, r := range recs {
		require.False(t, seen[r.TupleID])
		seen[r.TupleID] = true
	}
	var switches []string
	for _, ev := range lf.Summary.Events {
		if ev.Event == "switch" {
			switches = append(switches, ev.Handler)
		}
	}
	require.Equal(t, []string{"BUFFER_IDENTITY", "PERIODICCOUNTER", "NULLH"}, switches)
	counts, _ := readCounters(t, c.path)
	require.NotEmpty(t, counts, "the counter's periods are in the same file")
	sum := uint64(0)
	for _, r := range counts {
		sum += r.Count
	}
	require.Greater(t, sum, uint64(0))
}

// The server down: OpenChannel returns within the timeout with the
// fallback, says why in the header, and once the server is back the channel
// takes its rule.
func TestNetConfServerDownThenBack(t *testing.T) {
	startConfServer(t)
	setRule(t, confserver.Rule{ID: "down", Name: "nc down*", Handler: "BUFFER_IDENTITY"})
	stopConfServer()
	t0 := time.Now()
	ch, c := open(t, "nc down 1", logfile.S2TSC, handlers.NetConf)
	took := time.Since(t0)
	require.Less(t, took, time.Second, "bounded by CP_CONF_TIMEOUT_MS")
	require.Equal(t, handlers.Null, current(c), "the fallback")
	require.Contains(t, c.conf.Fallback, conf.addr)

	startConfServer(t)
	back := waitFor(t, c, handlers.BufferIdentity, 5*time.Second)
	t.Logf("open with the server down took %v; the rule applied %v after the restart", took, back)
	for i := 0; i < 100; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readRecords(t, c.path)
	require.Len(t, recs, 100)
	require.Contains(t, lf.Header.Conf.Fallback, "configuration server")
}

// A slow server (it accepts the connection but never answers) costs the
// same bounded wait.
func TestNetConfSlowServer(t *testing.T) {
	confSetup(t)
	stopConfServer()
	silentServer(t, conf.addr)
	t0 := time.Now()
	ch, c := open(t, "nc slow", logfile.BinaryTSC, handlers.NetConf)
	require.Less(t, time.Since(t0), 2*time.Second)
	require.Equal(t, handlers.Null, current(c))
	require.NoError(t, closeChannel(ch, "close"))
}

// 1,000 NET_CONF channels open at once, all resolved by the server.
func TestNetConfThousandOpensAtOnce(t *testing.T) {
	startConfServer(t)
	setRule(t, confserver.Rule{ID: "many", Name: "nc many *", Handler: "FASTPERIODICCOUNTER"})
	var wg sync.WaitGroup
	hs := make([]int64, 1000)
	errs := make([]error, 1000)
	t0 := time.Now()
	for i := range hs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			hs[i], errs[i] = openChannel("nc many "+strings.Repeat("x", i%7)+string(rune('a'+i%26)), logfile.BinaryTSC, handlers.NetConf)
		}(i)
	}
	wg.Wait()
	t.Logf("1000 NET_CONF opens took %v", time.Since(t0))
	// Under load some opens may hit CP_CONF_TIMEOUT_MS (500 ms here) and
	// start on the fallback; the watcher must then bring each to its rule.
	var chans []*channel
	fallbacks := 0
	for i, h := range hs {
		require.NoError(t, errs[i])
		c, err := lookup(h)
		require.NoError(t, err)
		chans = append(chans, c)
		if current(c) != handlers.FastPeriodicCounter {
			fallbacks++
		}
	}
	t.Logf("%d of 1000 opened on the fallback", fallbacks)
	for _, c := range chans {
		waitFor(t, c, handlers.FastPeriodicCounter, 10*time.Second)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	for _, h := range hs {
		require.NoError(t, closeChannel(h, "close"))
	}
}

// FIRSTLAST on a NET_CONF channel: its pair goes through the ring, at a
// switch and at close.
func TestNetConfFirstLast(t *testing.T) {
	startConfServer(t)
	setRule(t, confserver.Rule{ID: "fl", Name: "nc fl", Handler: "FIRSTLAST"})
	ch, c := open(t, "nc fl", logfile.ASCII, handlers.NetConf)
	for i := 10; i < 20; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	setRule(t, confserver.Rule{ID: "fl", Name: "nc fl", Handler: "BUFFER_IDENTITY"})
	waitFor(t, c, handlers.BufferIdentity, 2*time.Second)
	require.Zero(t, logTS(ch, 100))
	setRule(t, confserver.Rule{ID: "fl", Name: "nc fl", Handler: "FIRSTLAST"})
	waitFor(t, c, handlers.FirstLast, 2*time.Second)
	for i := 200; i < 205; i++ {
		require.Zero(t, logTS(ch, int64(i)))
	}
	require.NoError(t, closeChannel(ch, "close"))
	recs, lf := readRecords(t, c.path)
	require.Equal(t, []int64{10, 19, 100, 200, 204}, ids(recs))
	require.Zero(t, lf.Summary.Holes)
}

// One failed answer while the server and the watcher are fine: the channel
// opened on the fallback is asked again for within about a second.
func TestNetConfFallbackRetriedWhileServerIsUp(t *testing.T) {
	startConfServer(t)
	setRule(t, confserver.Rule{ID: "retry", Name: "nc retry*", Handler: "BUFFER_IDENTITY"})
	warm, _ := open(t, "nc retry warm", logfile.BinaryTSC, handlers.NetConf) // the watcher is running
	good := confClient.Load()
	confClient.Store(&confserver.Client{Addr: "127.0.0.1:1", HTTP: good.HTTP}) // nothing listens there
	ch, c := open(t, "nc retry 1", logfile.BinaryTSC, handlers.NetConf)
	confClient.Store(good)
	require.Equal(t, handlers.Null, current(c))
	took := waitFor(t, c, handlers.BufferIdentity, 3*time.Second)
	t.Logf("fallback replaced by the rule after %v", took)
	require.NoError(t, closeChannel(ch, "close"))
	require.NoError(t, closeChannel(warm, "close"))
}

// silentServer listens on addr and holds every connection open without a
// word, until the test ends: a configuration server that never answers.
func silentServer(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // hold it open, say nothing
		}
	}()
}
