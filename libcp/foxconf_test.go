package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"cloudprofiler/confserver"
	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
)

// The ReT start node found through the configuration server: FOX_START
// registers its listen address under its name (tests: a real server process
// on loopback, as the NET_CONF tests run it), FOX_END without CP_RET_START
// finds it there, and removes it at close.

func retStarts(t *testing.T) []confserver.RetStart {
	t.Helper()
	c := &confserver.Client{Addr: conf.addr}
	l, err := c.RetStarts(context.Background())
	require.NoError(t, err)
	return l
}

func setenv(t *testing.T, k, v string) {
	t.Helper()
	old, had := os.LookupEnv(k)
	os.Setenv(k, v)
	t.Cleanup(func() {
		if had {
			os.Setenv(k, old)
		} else {
			os.Unsetenv(k)
		}
	})
}

// waitReturns waits until a START channel's return log has n ReTACKs.
func waitReturns(t *testing.T, sc *channel, n uint64) {
	t.Helper()
	rv := sc.retLog.recv
	deadline := time.Now().Add(10 * time.Second)
	for rv.received.Load() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func TestFoxStartFoundThroughConfServer(t *testing.T) {
	startConfServer(t)
	require.Empty(t, retStarts(t))
	setenv(t, "CP_RET_LISTEN", "") // 0.0.0.0:0: the address toward the server (127.0.0.1) is registered
	setenv(t, "CP_RET_START", "")
	setenv(t, "CP_RET_START_NAME", "")
	const name = "fox cs start"
	start, sc := open(t, name, logfile.ZstdTSC, handlers.FoxStart)
	_, port, err := net.SplitHostPort(sc.fox.listen)
	require.NoError(t, err)
	bound, err := netip.ParseAddrPort(sc.fox.listen)
	require.NoError(t, err)
	require.True(t, bound.Addr().IsUnspecified(), sc.fox.listen)
	want := "127.0.0.1:" + port
	l := retStarts(t)
	require.Len(t, l, 1)
	require.Equal(t, name, l[0].Name)
	require.Equal(t, want, l[0].Addr)
	require.Equal(t, os.Getpid(), l[0].PID)
	require.Equal(t, host, l[0].Host)

	t0 := time.Now()
	end, ec := open(t, "fox cs end", logfile.ZstdTSC, handlers.FoxEnd)
	require.Less(t, time.Since(t0), time.Second)
	const n = 2000
	for i := 0; i < n; i++ {
		require.Zero(t, logTS(start, int64(i)))
		require.Zero(t, logTS(end, int64(i)))
		if i%50 == 49 {
			time.Sleep(200 * time.Microsecond)
		}
	}
	waitReturns(t, sc, n)
	require.NoError(t, closeChannel(end, "close"))
	require.NoError(t, closeChannel(start, "close"))
	require.Empty(t, retStarts(t), "deregistered at close")

	srecs, slf := readRecords(t, sc.path)
	erecs, elf := readRecords(t, ec.path)
	rrecs, _ := readRecords(t, sc.retLog.path)
	require.Len(t, srecs, n)
	require.Len(t, erecs, n)
	require.Len(t, rrecs, n, "kernel drops %d", sc.retLog.recv.ovfl.Load())
	s, e, r := byID(t, srecs), byID(t, erecs), byID(t, rrecs)
	for i := int64(0); i < n; i++ {
		require.Contains(t, r, i)
		require.GreaterOrEqual(t, r[i], e[i])
		require.GreaterOrEqual(t, e[i], s[i])
	}
	require.Equal(t, fmt.Sprintf("confserver %s name %q addr %s", conf.addr, name, want), slf.Header.Fox.Registered)
	require.Equal(t, fmt.Sprintf("confserver %s name %q", conf.addr, name), elf.Header.Fox.StartFoundVia)
	require.Equal(t, want, elf.Header.Fox.Start)
	require.Equal(t, want, elf.Header.Fox.StartAddr)
	require.Equal(t, uint64(n), elf.Summary.Trailer.Fox.Sent)
}

func requireConfigErr(t *testing.T, name string, parts ...string) string {
	t.Helper()
	_, err := openChannel(name, logfile.BinaryTSC, handlers.FoxEnd)
	require.Error(t, err)
	require.Equal(t, int32(-16), codeOf(err), "%v", err)
	for _, p := range parts {
		require.Contains(t, err.Error(), p)
	}
	return err.Error()
}

// None registered, an unknown CP_RET_START_NAME, several without a name:
// CP_ERR_CONFIG saying which server, what it has and what to set.
// CP_RET_START_NAME picks one; CP_RET_START wins over both.
func TestFoxStartConfServerChoices(t *testing.T) {
	startConfServer(t)
	require.Empty(t, retStarts(t))
	setenv(t, "CP_RET_LISTEN", "127.0.0.1:0")
	setenv(t, "CP_RET_START", "")
	setenv(t, "CP_RET_START_NAME", "")
	requireConfigErr(t, "fox cs none", conf.addr, "no start point registered", "CP_RET_START=host:port")

	a, ac := open(t, "fox two a", logfile.BinaryTSC, handlers.FoxStart)
	b, bc := open(t, "fox two b", logfile.BinaryTSC, handlers.FoxStart)
	require.Len(t, retStarts(t), 2)
	msg := requireConfigErr(t, "fox cs several", conf.addr, `"fox two a" at `+ac.fox.listen, `"fox two b" at `+bc.fox.listen, "CP_RET_START_NAME")
	t.Log(msg)

	os.Setenv("CP_RET_START_NAME", "fox two c")
	requireConfigErr(t, "fox cs unknown", conf.addr, `CP_RET_START_NAME="fox two c"`, `"fox two a"`, `"fox two b"`)

	os.Setenv("CP_RET_START_NAME", "fox two b")
	end, ec := open(t, "fox cs b", logfile.BinaryTSC, handlers.FoxEnd)
	for i := 0; i < 100; i++ {
		require.Zero(t, logTS(b, int64(i)))
		require.Zero(t, logTS(end, int64(i)))
	}
	waitReturns(t, bc, 100)
	require.Zero(t, ac.retLog.recv.received.Load())
	require.NoError(t, closeChannel(end, "close"))
	_, elf := readRecords(t, ec.path)
	require.Equal(t, fmt.Sprintf("confserver %s name %q", conf.addr, "fox two b"), elf.Header.Fox.StartFoundVia)
	require.Equal(t, bc.fox.listen, elf.Header.Fox.Start)

	os.Setenv("CP_RET_START", ac.fox.listen)
	end, ec = open(t, "fox cs wins", logfile.BinaryTSC, handlers.FoxEnd)
	require.NoError(t, closeChannel(end, "close"))
	_, elf = readRecords(t, ec.path)
	require.Equal(t, "CP_RET_START", elf.Header.Fox.StartFoundVia)
	require.Equal(t, ac.fox.listen, elf.Header.Fox.Start)
	os.Setenv("CP_RET_START", "")

	require.NoError(t, closeChannel(a, "close"))
	l := retStarts(t)
	require.Len(t, l, 1)
	require.Equal(t, "fox two b", l[0].Name)
	require.NoError(t, closeChannel(b, "close"))
	require.Empty(t, retStarts(t))
}

// A START's deregistration leaves alone an entry of the same name that
// another process registered since.
func TestFoxStartReplacedIsNotRemoved(t *testing.T) {
	startConfServer(t)
	setenv(t, "CP_RET_LISTEN", "127.0.0.1:0")
	ch, _ := open(t, "fox replaced", logfile.BinaryTSC, handlers.FoxStart)
	c := &confserver.Client{Addr: conf.addr, Token: confToken}
	ctx := context.Background()
	_, err := c.RegisterRetStart(ctx, "fox replaced", confserver.RetStart{Addr: "127.0.0.1:9", Host: "elsewhere", PID: 1})
	require.NoError(t, err)
	require.NoError(t, closeChannel(ch, "close"))
	l := retStarts(t)
	require.Len(t, l, 1)
	require.Equal(t, "elsewhere", l[0].Host)
	require.NoError(t, c.DeregisterRetStart(ctx, "fox replaced", 0, "", ""))
}

// An unreachable server (nothing listening, or a server that never
// answers): FOX_END fails with CP_ERR_CONFIG within CP_CONF_TIMEOUT_MS
// (500 ms in these tests); FOX_START opens anyway and says why it is not
// registered.
func TestFoxStartConfServerUnreachable(t *testing.T) {
	confSetup(t)
	stopConfServer()
	setenv(t, "CP_RET_LISTEN", "127.0.0.1:0")
	setenv(t, "CP_RET_START", "")
	setenv(t, "CP_RET_START_NAME", "")
	requireConfigErr(t, "fox down", "CP_CONF_SERVER="+conf.addr, "gave no answer", "CP_RET_START=host:port")
	ch, sc := open(t, "fox down start", logfile.BinaryTSC, handlers.FoxStart)
	require.NoError(t, closeChannel(ch, "close"))
	_, slf := readRecords(t, sc.path)
	require.True(t, strings.HasPrefix(slf.Header.Fox.Registered, "no: configuration server "+conf.addr), slf.Header.Fox.Registered)

	silentServer(t, conf.addr)
	t0 := time.Now()
	requireConfigErr(t, "fox slow", "CP_CONF_SERVER="+conf.addr, "within 500ms", "CP_RET_START=host:port")
	took := time.Since(t0)
	require.GreaterOrEqual(t, took, 400*time.Millisecond)
	require.Less(t, took, 1500*time.Millisecond, "bounded by CP_CONF_TIMEOUT_MS")
	t0 = time.Now()
	ch, sc = open(t, "fox slow start", logfile.BinaryTSC, handlers.FoxStart)
	require.Less(t, time.Since(t0), 1500*time.Millisecond)
	require.NoError(t, closeChannel(ch, "close"))
	_, slf = readRecords(t, sc.path)
	require.True(t, strings.HasPrefix(slf.Header.Fox.Registered, "no: configuration server "+conf.addr), slf.Header.Fox.Registered)
}
