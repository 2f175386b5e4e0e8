package confserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		glob, s string
		want    bool
	}{
		{"*", "", true}, {"*", "a/b/c", true}, {"map*", "map entry", true}, {"map*", "reduce", false},
		{"*entry", "map entry", true}, {"m?p", "map", true}, {"m?p", "mp", false}, {"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false}, {`a\*`, "a*", true}, {`a\*`, "ab", false}, {"", "", true}, {"", "x", false},
		{"op-*-in", "op-17-in", true}, {"op-*-in", "op-17-out", false},
	}
	for _, c := range cases {
		require.Equal(t, c.want, Match(c.glob, c.s), "%q ~ %q", c.glob, c.s)
	}
}

type fixture struct {
	url, path string
	c         *Client
	anon      *Client
	s         *Server
}

// start runs a real server (Serve, with its limits) on loopback.
func start(t *testing.T, initial string) *fixture { return startWith(t, initial, Limits{}) }

func startWith(t *testing.T, initial string, lim Limits) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.json")
	if initial != "" {
		require.NoError(t, os.WriteFile(path, []byte(initial), 0o644))
	}
	st, err := Open(path)
	require.NoError(t, err)
	s := &Server{Store: st, Token: "s3cret", MaxWatch: 5 * time.Second, Limits: lim}
	addr := serve(t, s)
	return &fixture{url: "http://" + addr, path: path, s: s, c: &Client{Addr: addr, Token: "s3cret"}, anon: &Client{Addr: addr}}
}

// serve runs s on a loopback port until the test ends; its address.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return ln.Addr().String()
}

func TestMissingFileStartsEmptyAndIsCreated(t *testing.T) {
	f := start(t, "")
	tab, err := f.c.Rules(context.Background())
	require.NoError(t, err)
	require.Empty(t, tab.Rules)
	require.Equal(t, "NULLH", tab.Default.Handler)
	_, err = os.Stat(f.path)
	require.NoError(t, err)
}

func TestRulesResolveFirstMatchWins(t *testing.T) {
	f := start(t, `{"rules":[
	  {"id":"sink","name":"*sink*","handler":"PERIODICCOUNTER","args":[1000000000]},
	  {"id":"hostA","host":"node-a","handler":"BUFFER_IDENTITY","format":"ZSTD_TSC"},
	  {"id":"all-map","name":"map*","handler":"XOY","args":[2]}],
	  "default":{"handler":"NULLH"}}`)
	ctx := context.Background()
	d, err := f.c.Resolve(ctx, Channel{Name: "op sink 3", Host: "node-a"})
	require.NoError(t, err)
	require.Equal(t, "sink", d.Rule)
	require.Equal(t, "PERIODICCOUNTER", d.Handler)
	d, _ = f.c.Resolve(ctx, Channel{Name: "map 1", Host: "node-a"})
	require.Equal(t, "hostA", d.Rule)
	require.Equal(t, "ZSTD_TSC", d.Format)
	d, _ = f.c.Resolve(ctx, Channel{Name: "map 1", Host: "node-b"})
	require.Equal(t, "all-map", d.Rule)
	require.Equal(t, []int64{2, 1024}, d.Args, "missing args take the defaults")
	d, _ = f.c.Resolve(ctx, Channel{Name: "reduce", Host: "node-b", PID: 7})
	require.Equal(t, "default", d.Rule)
	require.Equal(t, "NULLH", d.Handler)
	ds, err := f.c.ResolveMany(ctx, []Channel{{Name: "a sink"}, {Name: "map x"}})
	require.NoError(t, err)
	require.Equal(t, "sink", ds[0].Rule)
	require.Equal(t, "all-map", ds[1].Rule)
}

func TestWritesNeedTheToken(t *testing.T) {
	f := start(t, "")
	ctx := context.Background()
	_, err := f.anon.SetRule(ctx, Rule{Name: "x", Handler: "NULLH"})
	require.ErrorContains(t, err, "401")
	wrong := *f.c
	wrong.Token = "nope"
	_, err = wrong.SetRule(ctx, Rule{Name: "x", Handler: "NULLH"})
	require.ErrorContains(t, err, "401")
	_, err = f.anon.DeleteRule(ctx, "x")
	require.ErrorContains(t, err, "401")
	tab, err := f.c.SetRule(ctx, Rule{Name: "x", Handler: "NULLH"})
	require.NoError(t, err)
	require.Len(t, tab.Rules, 1)

	// No token configured: read-only.
	st, err := Open(filepath.Join(t.TempDir(), "r.json"))
	require.NoError(t, err)
	c := &Client{Addr: serve(t, &Server{Store: st}), Token: "anything"}
	_, err = c.SetRule(ctx, Rule{Name: "x", Handler: "NULLH"})
	require.ErrorContains(t, err, "no token configured")
}

func TestBadRequestsLeaveTheTableUnchanged(t *testing.T) {
	f := start(t, `{"rules":[{"id":"a","name":"x","handler":"NULLH"}]}`)
	ctx := context.Background()
	before, _ := f.c.Rules(ctx)
	bad := []Rule{
		{Name: "x", Handler: "NOPE"},
		{Name: "x", Handler: "IDENTITY"},
		{Name: "x", Handler: "NET_CONF"},
		{Name: "x", Handler: "XOY", Args: []int64{5, 2}},
		{Name: "x", Handler: "DOWNSAMPLE", Args: []int64{0}},
		{Name: "x", Handler: "NULLH", Args: []int64{1}},
		{Name: "x", Handler: "NULLH", Format: "GIF"},
		{Name: `x\`, Handler: "NULLH"},
		{Name: `x\\\`, Handler: "NULLH"},
		{Name: "x", Handler: "FIRSTLAST", DropWhenFull: true},
	}
	for _, r := range bad {
		_, err := f.c.SetRule(ctx, r)
		require.ErrorContains(t, err, "400", "%+v", r)
	}
	for _, body := range []string{`{"name":"x","handler":"NULLH","colour":"red"}`, `{"name":`, `[]`, `{"handler":"NULLH"} {}`} {
		req, _ := http.NewRequest("POST", f.url+"/v1/rules", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e apiError
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		require.Equal(t, 400, resp.StatusCode, body)
		require.NotEmpty(t, e.Error)
	}
	_, err := f.c.DeleteRule(ctx, "zzz")
	require.ErrorContains(t, err, "404")
	after, _ := f.c.Rules(ctx)
	require.Equal(t, before, after)
	st, err := Open(f.path) // and so is the file
	require.NoError(t, err)
	onDisk, _ := st.Snapshot()
	require.Equal(t, before, onDisk)
}

func TestChangesPersistAtomically(t *testing.T) {
	f := start(t, "")
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		_, err := f.c.SetRule(ctx, Rule{Name: "ch*", Handler: "DOWNSAMPLE", Args: []int64{int64(i + 1)}})
		require.NoError(t, err)
	}
	tab, err := f.c.DeleteRule(ctx, "r2")
	require.NoError(t, err)
	st, err := Open(f.path)
	require.NoError(t, err)
	onDisk, _ := st.Snapshot()
	require.Equal(t, tab, onDisk)
	entries, _ := os.ReadDir(filepath.Dir(f.path))
	require.Len(t, entries, 1, "no temporary files left behind")
	fi, err2 := os.Stat(f.path)
	require.NoError(t, err2)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}

func TestWatch(t *testing.T) {
	f := start(t, "")
	ctx := context.Background()
	tab, _ := f.c.Rules(ctx)
	v, err := f.c.Watch(ctx, tab.Version-1, time.Second)
	require.NoError(t, err)
	require.Equal(t, tab.Version, v, "already newer: at once")

	t0 := time.Now()
	v, err = f.c.Watch(ctx, tab.Version, 200*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, tab.Version, v)
	require.GreaterOrEqual(t, time.Since(t0), 150*time.Millisecond, "no change: waits the timeout")

	// Woken by a change: it answers the new version (at its timeout it
	// would answer the old one), however long the machine took.
	got := make(chan uint64)
	go func() {
		v, _ := f.c.Watch(ctx, tab.Version, 5*time.Second)
		got <- v
	}()
	time.Sleep(50 * time.Millisecond)
	_, err = f.c.SetRule(ctx, Rule{Name: "x", Handler: "NULLH"})
	require.NoError(t, err)
	require.Equal(t, tab.Version+1, <-got)
}

// 1,000 channels resolve at once while the rules change under them.
func TestThousandConcurrentResolvesWhileRulesChange(t *testing.T) {
	f := start(t, `{"rules":[{"id":"a","name":"*","handler":"BUFFER_IDENTITY"}]}`)
	ctx := context.Background()
	stop := make(chan struct{})
	writerDone := make(chan struct{})
	defer func() { <-writerDone }() // no write into the test's directory after it
	go func() {
		defer close(writerDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			h := []string{"NULLH", "BUFFER_IDENTITY"}[i%2]
			f.c.SetRule(ctx, Rule{ID: "a", Name: "*", Handler: h})
		}
	}()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}, Timeout: 10 * time.Second}
	c := &Client{Addr: f.c.Addr, HTTP: hc}
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			d, err := c.Resolve(ctx, Channel{Name: "ch", PID: i})
			if err == nil && d.Handler != "NULLH" && d.Handler != "BUFFER_IDENTITY" {
				err = &json.UnsupportedValueError{Str: d.Handler}
			}
			if err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A server killed between writing the next table and renaming it leaves
// the temporary file: the next Open removes it (the write was never
// acknowledged). A symlink planted at that name is never followed: its
// target stays untouched, the update fails with an error, the table in
// force and on disk stay as they were.
func TestStoreTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.json")
	st, err := Open(path)
	require.NoError(t, err)
	_, err = st.Update(func(tb *Table) error {
		tb.Rules = append(tb.Rules, Rule{ID: "ra", Name: "a*", Handler: "NULLH"})
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".rules.json.tmp"), []byte(`{"version": 99, "rul`), 0o600))
	st, err = Open(path)
	require.NoError(t, err)
	tab, _ := st.Snapshot()
	require.Equal(t, uint64(2), tab.Version)
	entries, _ := os.ReadDir(dir)
	require.Len(t, entries, 1, "the leftover is removed")

	victim := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(victim, []byte("someone else's\n"), 0o644))
	require.NoError(t, os.Symlink(victim, filepath.Join(dir, ".rules.json.tmp")))
	_, err = st.Update(func(tb *Table) error {
		tb.Rules = append(tb.Rules, Rule{ID: "rb", Name: "b*", Handler: "NULLH"})
		return nil
	})
	require.Error(t, err)
	b, _ := os.ReadFile(victim)
	require.Equal(t, "someone else's\n", string(b))
	tab, _ = st.Snapshot()
	require.Equal(t, uint64(2), tab.Version)
	st, err = Open(path) // and the next server removes the symlink (not its target)
	require.NoError(t, err)
	_, err = os.Lstat(filepath.Join(dir, ".rules.json.tmp"))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(victim)
	require.NoError(t, err)
}
