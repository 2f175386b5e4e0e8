package confserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloudprofiler/datagen/nettest"

	"github.com/stretchr/testify/require"
)

// halfRequest opens a connection and sends a request whose body stops
// halfway: what a slowloris client does.
func halfRequest(t *testing.T, addr, method, path string) net.Conn {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	body := `[{"name":"slow channel","host":"h"}]`
	_, err = fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		method, path, len(body), body[:len(body)/2])
	require.NoError(t, err)
	return c
}

// A client that waits (30 s: a bound for a hung test, not a measurement).
func patientClient() *Client {
	return &Client{HTTP: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// 2,000 connections that send half a body, on both endpoints that need no
// token, hold nothing from a client that comes after them: the read
// timeout is an hour here, so only the connection cap can make room.
func TestSlowlorisCannotLockOthersOut(t *testing.T) {
	f := startWith(t, `{"rules":[{"id":"m","name":"map*","handler":"XOY"}]}`, Limits{ReadTimeout: time.Hour})
	addr := strings.TrimPrefix(f.url, "http://")
	const slow = 2000
	for i := 0; i < slow; i++ {
		if i%2 == 0 {
			halfRequest(t, addr, "POST", "/v1/resolve")
		} else {
			halfRequest(t, addr, "PUT", fmt.Sprintf("/v1/ret-starts/s%d", i))
		}
	}
	c := patientClient()
	c.Addr = addr
	ctx := context.Background()
	d, err := c.Resolve(ctx, Channel{Name: "map 1"})
	require.NoError(t, err)
	require.Equal(t, "m", d.Rule)
	ds, err := c.ResolveMany(ctx, []Channel{{Name: "map 2"}, {Name: "reduce"}})
	require.NoError(t, err)
	require.Equal(t, []string{"m", "default"}, []string{ds[0].Rule, ds[1].Rule})
	_, err = c.RegisterRetStart(ctx, "spout", RetStart{Addr: "10.0.0.1:7100", PID: 1})
	require.NoError(t, err)

	st := f.s.Conns()
	t.Logf("after %d slow clients: %+v", slow, st)
	require.LessOrEqual(t, st.Open, 1024)
	require.GreaterOrEqual(t, st.Evicted, uint64(slow-1024), "the slow ones made room")
	require.Zero(t, st.Refused, "none was refused: the slow ones could be evicted")
}

// Connections being answered (long-polling watches) are never evicted:
// past the cap, a new connection is refused instead, and counted.
func TestTheCapKeepsConnectionsBeingAnswered(t *testing.T) {
	f := startWith(t, "", Limits{MaxConns: 3})
	tab, _ := f.s.Store.Snapshot() // not over HTTP: the three watches are the only connections
	watch := func() net.Conn {
		c, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /v1/watch?since=%d&timeout=60000 HTTP/1.1\r\nHost: x\r\n\r\n", tab.Version)
		return c
	}
	ws := []net.Conn{watch(), watch(), watch()}
	require.Eventually(t, func() bool { st := f.s.Conns(); return st.Open == 3 && st.Waiting == 0 },
		30*time.Second, 5*time.Millisecond, "three watches being answered")
	before := f.s.Conns()
	_, err := f.anon.Rules(context.Background())
	require.Error(t, err, "no room: every connection is being answered")
	_, err = f.c.SetRule(context.Background(), Rule{Name: "x", Handler: "NULLH"})
	require.Error(t, err, "no room for the writer either")
	require.GreaterOrEqual(t, f.s.Conns().Refused, before.Refused+2)
	require.Equal(t, before.Evicted, f.s.Conns().Evicted, "no watch was evicted")

	// A watch that leaves frees its connection; the change then wakes the others.
	ws[0].Close()
	require.Eventually(t, func() bool { return f.s.Conns().Open < 3 }, 30*time.Second, 5*time.Millisecond)
	_, err = f.c.SetRule(context.Background(), Rule{Name: "x", Handler: "NULLH"})
	require.NoError(t, err)
	for _, w := range ws[1:] {
		w.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(w), nil)
		require.NoError(t, err)
		var v struct{ Version uint64 }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		require.Equal(t, tab.Version+1, v.Version, "woken by the change")
	}
}

// The read, header and idle timeouts close what a client leaves unfinished.
func TestTimeoutsEndUnfinishedRequests(t *testing.T) {
	f := startWith(t, "", Limits{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 400 * time.Millisecond,
		IdleTimeout: 400 * time.Millisecond})
	addr := strings.TrimPrefix(f.url, "http://")
	// Half the headers: closed.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	fmt.Fprint(c, "GET /v1/rules HTTP/1.1\r\nHost: x\r\n")
	nettest.ClosedByPeer(t, c)

	// Half a body, on each endpoint that takes one without a token: 408.
	for _, ep := range [][2]string{{"POST", "/v1/resolve"}, {"PUT", "/v1/ret-starts/x"}} {
		c := halfRequest(t, addr, ep[0], ep[1])
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, ep)
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, ep)
		resp.Body.Close()
	}

	// A kept-alive connection that asks nothing more: closed.
	c2, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c2.Close()
	fmt.Fprint(c2, "GET /v1/rules HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c2)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	io.Copy(io.Discard, resp.Body)
	c2.SetReadDeadline(time.Now().Add(30 * time.Second))
	rest, err := io.ReadAll(br)
	require.NoError(t, err, "closed by the server")
	require.Empty(t, rest)
}

// Globs and names are bounded; within the bounds, the worst pattern for a
// backtracking matcher costs the linear matcher len(name) * words steps.
func TestGlobAndNameBounds(t *testing.T) {
	f := start(t, "")
	ctx := context.Background()
	worst := "*" + strings.Repeat("a", MaxGlob-2) + "b" // 1024 bytes
	_, err := f.c.SetRule(ctx, Rule{ID: "worst", Name: worst, Handler: "BUFFER_IDENTITY"})
	require.NoError(t, err)
	for _, g := range []string{worst + "c", strings.Repeat("*a", 15000)} {
		_, err = f.c.SetRule(ctx, Rule{ID: "big", Name: g, Handler: "NULLH"})
		require.ErrorContains(t, err, "400")
		require.ErrorContains(t, err, "at most 1024")
		_, err = f.c.SetRule(ctx, Rule{ID: "big", Host: g, Handler: "NULLH"})
		require.ErrorContains(t, err, "at most 1024")
	}

	miss, hit := strings.Repeat("a", MaxName), strings.Repeat("a", MaxName-1)+"b"
	d, err := f.anon.Resolve(ctx, Channel{Name: miss})
	require.NoError(t, err)
	require.Equal(t, "default", d.Rule)
	d, err = f.anon.Resolve(ctx, Channel{Name: hit})
	require.NoError(t, err)
	require.Equal(t, "worst", d.Rule)
	batch := make([]Channel, 200) // 800 KiB of the worst names in one body
	for i := range batch {
		batch[i] = Channel{Name: miss}
	}
	batch[7].Name = hit
	ds, err := f.anon.ResolveMany(ctx, batch)
	require.NoError(t, err)
	for i, d := range ds {
		require.Equal(t, map[bool]string{true: "worst", false: "default"}[i == 7], d.Rule, i)
	}
	g := compileGlob(worst)
	for _, s := range []string{miss, hit, strings.Repeat("ab", MaxName/2)} {
		ok, steps := g.matchSteps(s)
		require.Equal(t, refMatch(worst, s), ok)
		require.LessOrEqual(t, steps, len(s)*g.words, "no backtracking")
	}

	// Past the bounds: refused, saying why.
	_, err = f.anon.Resolve(ctx, Channel{Name: miss + "a"})
	require.ErrorContains(t, err, "400")
	require.ErrorContains(t, err, "at most 4096")
	_, err = f.anon.Resolve(ctx, Channel{Name: "x", Host: strings.Repeat("h", MaxHost+1)})
	require.ErrorContains(t, err, "at most 255")
	_, err = f.anon.ResolveMany(ctx, []Channel{{Name: "ok"}, {Name: strings.Repeat("a", 300<<10)}})
	require.ErrorContains(t, err, "channel 1: channel name of 307200 bytes; at most 4096")
	code, _ := rawDo(t, "GET", f.url+"/v1/resolve?name="+url.QueryEscape(strings.Repeat("a", 300<<10)), "", "")
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, code)
}

// Readers never wait for a writer: while an update is under way (here
// held inside its change), resolves, the table and watches are answered
// from the table before it.
func TestReadersDoNotWaitForAWriter(t *testing.T) {
	f := start(t, `{"rules":[{"id":"m","name":"map*","handler":"XOY"}]}`)
	c := patientClient()
	c.Addr = f.c.Addr
	ctx := context.Background()
	var during []string
	_, err := f.s.Store.Update(func(tab *Table) error {
		d, err := c.Resolve(ctx, Channel{Name: "map 1"})
		require.NoError(t, err)
		ds, err := c.ResolveMany(ctx, []Channel{{Name: "map 2"}})
		require.NoError(t, err)
		old, err := c.Rules(ctx)
		require.NoError(t, err)
		v, err := c.Watch(ctx, old.Version, 0)
		require.NoError(t, err)
		require.Equal(t, old.Version, v)
		during = []string{d.Rule, ds[0].Rule, old.Rules[0].ID}
		tab.Rules = nil
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"m", "m", "m"}, during)
	d, err := c.Resolve(ctx, Channel{Name: "map 1"})
	require.NoError(t, err)
	require.Equal(t, "default", d.Rule, "and the update took")
}

// Random globs over a small alphabet (so that they match often), past one
// word of state (64 tokens) too: the matcher agrees with refMatch.
func TestMatchAgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(alpha string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alpha[rng.IntN(len(alpha))]
		}
		return string(b)
	}
	matched := 0
	for i := 0; i < 5000; i++ {
		g := pick(`ab*?\`, rng.IntN(150))
		s := pick("ab*?\\", rng.IntN(200))
		if i%2 == 0 { // a name made from the glob, so that many match
			var b strings.Builder
			for j := 0; j < len(g); j++ {
				switch {
				case g[j] == '*':
					b.WriteString(pick("ab*", rng.IntN(5)))
				case g[j] == '?':
					b.WriteString(pick(`ab\`, 1))
				case g[j] == '\\' && j+1 < len(g):
					j++
					b.WriteByte(g[j])
				default:
					b.WriteByte(g[j])
				}
			}
			s = b.String()
			if rng.IntN(4) == 0 && len(s) > 0 { // and some that almost do
				s = s[:len(s)-1]
			}
		}
		want := refMatch(g, s)
		require.Equal(t, want, Match(g, s), "%q ~ %q", g, s)
		if want {
			matched++
		}
	}
	require.Greater(t, matched, 1000, "the cases exercise matches, not only misses")
}

// The connection cap stays below the process's file limit.
func TestMaxConnsFitsTheFileLimit(t *testing.T) {
	var rl syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	l := Limits{MaxConns: 1 << 30}.withDefaults()
	require.LessOrEqual(t, uint64(l.MaxConns), rl.Cur-64)
	require.Equal(t, 1024, Limits{}.withDefaults().MaxConns)
	require.Equal(t, 5*time.Second, Limits{}.withDefaults().ReadHeaderTimeout)
}
