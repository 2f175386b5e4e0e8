package confserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func rawDo(t *testing.T, method, u, body, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var e apiError
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

// Registration needs no token; a later one of the same name replaces the
// earlier and says so; the registry is not in the rules file nor versioned.
func TestRetStartsRegisterListGetReplace(t *testing.T) {
	f := start(t, "")
	ctx := context.Background()
	before, _ := os.ReadFile(f.path)
	tab0, _ := f.c.Rules(ctx)

	l, err := f.anon.RetStarts(ctx)
	require.NoError(t, err)
	require.Empty(t, l)
	require.NotNil(t, l, "an empty list is [] in JSON")

	t0 := time.Now().UTC()
	e, err := f.anon.RegisterRetStart(ctx, "spout out", RetStart{Addr: "10.0.0.1:7100", Host: "node-a", PID: 42, Node: "n1"})
	require.NoError(t, err)
	require.Equal(t, "spout out", e.Name)
	require.Equal(t, "10.0.0.1:7100", e.Addr)
	require.Nil(t, e.Replaced)
	require.WithinDuration(t, t0, e.Registered, 5*time.Second)
	_, err = f.anon.RegisterRetStart(ctx, "a/b c", RetStart{Addr: "[::1]:9", PID: 7})
	require.NoError(t, err)

	got, err := f.anon.RetStart(ctx, "a/b c")
	require.NoError(t, err)
	require.Equal(t, "[::1]:9", got.Addr)
	l, err = f.anon.RetStarts(ctx)
	require.NoError(t, err)
	require.Len(t, l, 2)
	require.Equal(t, "a/b c", l[0].Name, "by name")
	require.Equal(t, RetStart{Name: "spout out", Addr: "10.0.0.1:7100", Host: "node-a", PID: 42, Node: "n1", Registered: e.Registered}, l[1])

	time.Sleep(2 * time.Millisecond)
	e2, err := f.anon.RegisterRetStart(ctx, "spout out", RetStart{Addr: "10.0.0.2:7100", Host: "node-b", PID: 43})
	require.NoError(t, err)
	require.Equal(t, &RetStartRef{Addr: "10.0.0.1:7100", Host: "node-a", PID: 42, Registered: e.Registered}, e2.Replaced)
	require.True(t, e2.Registered.After(e.Registered))
	l, _ = f.anon.RetStarts(ctx)
	require.Len(t, l, 2)
	require.Equal(t, "10.0.0.2:7100", l[1].Addr)
	require.NotNil(t, l[1].Replaced, "the listing says what was replaced, and when")

	_, err = f.anon.RetStart(ctx, "nope")
	require.ErrorContains(t, err, "404")
	require.ErrorContains(t, err, `no start point named "nope" (2 registered: "a/b c", "spout out")`)

	after, _ := os.ReadFile(f.path)
	require.Equal(t, string(before), string(after), "not in the rules file")
	tab1, _ := f.c.Rules(ctx)
	require.Equal(t, tab0.Version, tab1.Version, "not versioned")

	// A server without a token takes registrations too.
	st, err := Open(t.TempDir() + "/r.json")
	require.NoError(t, err)
	ro := httptestServer(t, &Server{Store: st})
	_, err = ro.RegisterRetStart(ctx, "x", RetStart{Addr: "127.0.0.1:1", PID: 1})
	require.NoError(t, err)
}

func httptestServer(t *testing.T, s *Server) *Client { return &Client{Addr: serve(t, s)} }

// Only the registrant removes its entry (pid, and host and addr when given);
// the operator's token removes any.
func TestRetStartsDelete(t *testing.T) {
	f := start(t, "")
	ctx := context.Background()
	reg := func(name string) {
		_, err := f.anon.RegisterRetStart(ctx, name, RetStart{Addr: "10.0.0.1:7100", Host: "node-a", PID: 42})
		require.NoError(t, err)
	}
	reg("s1")
	reg("s2")
	code, msg := rawDo(t, "DELETE", f.url+"/v1/ret-starts/s1", "", "")
	require.Equal(t, 400, code)
	require.Contains(t, msg, "pid")
	require.ErrorContains(t, f.anon.DeregisterRetStart(ctx, "s1", 43, "", ""), "409")
	require.ErrorContains(t, f.anon.DeregisterRetStart(ctx, "s1", 42, "node-b", ""), "registered by pid 42 on host \"node-a\"")
	require.ErrorContains(t, f.anon.DeregisterRetStart(ctx, "s1", 42, "node-a", "10.0.0.1:7101"), "409")
	code, _ = rawDo(t, "DELETE", f.url+"/v1/ret-starts/s1?pid=x", "", "")
	require.Equal(t, 400, code)
	wrong := Client{Addr: f.c.Addr, Token: "nope"}
	require.ErrorContains(t, wrong.DeregisterRetStart(ctx, "s1", 0, "", ""), "401")
	l, _ := f.anon.RetStarts(ctx)
	require.Len(t, l, 2, "nothing removed so far")

	require.NoError(t, f.anon.DeregisterRetStart(ctx, "s1", 42, "node-a", "10.0.0.1:7100"))
	require.ErrorContains(t, f.anon.DeregisterRetStart(ctx, "s1", 42, "", ""), "404")
	require.NoError(t, f.c.DeregisterRetStart(ctx, "s2", 0, "", ""), "the operator removes any")
	l, _ = f.anon.RetStarts(ctx)
	require.Empty(t, l)
}

// Malformed registrations get 400 naming the problem and change nothing.
func TestRetStartsBadRequests(t *testing.T) {
	f := start(t, "")
	for _, c := range []struct{ name, body, want string }{
		{"s", `{"addr":"10.0.0.1","pid":1}`, "want ip:port"},
		{"s", `{"addr":"10.0.0.1:0","pid":1}`, "port 0"},
		{"s", `{"addr":"node-a:7100","pid":1}`, "IP address"},
		{"s", `{"addr":"0.0.0.0:7100","pid":1}`, "unspecified"},
		{"s", `{"addr":"[::]:7100","pid":1}`, "unspecified"},
		{"s", `{"addr":"10.0.0.1:70000","pid":1}`, "want ip:port"},
		{"s", `{"pid":1}`, "addr missing"},
		{"s", `{"addr":"10.0.0.1:7100"}`, "pid 0"},
		{"s", `{"addr":"10.0.0.1:7100","pid":-3}`, "pid -3"},
		{"s", `{"addr":"10.0.0.1:7100","pid":1,"colour":"red"}`, "unknown field"},
		{"s", `{"addr":"10.0.0.1:7100","pid":1} {}`, "data after"},
		{"s", `{"addr":`, "malformed JSON"},
		{"s", `{"name":"t","addr":"10.0.0.1:7100","pid":1}`, "not the URL's"},
		{"s", `{"addr":"10.0.0.1:7100","pid":1,"host":"` + strings.Repeat("h", 256) + `"}`, "host of 256 bytes"},
		{"s", `{"addr":"10.0.0.1:7100","pid":1,"node":"a\nb"}`, "node holds a control character"},
		{"a%01b", `{"addr":"10.0.0.1:7100","pid":1}`, "control character"},
		{"%ff", `{"addr":"10.0.0.1:7100","pid":1}`, "UTF-8"},
		{strings.Repeat("n", MaxRetStartName+1), `{"addr":"10.0.0.1:7100","pid":1}`, "name of 1025 bytes"},
	} {
		code, msg := rawDo(t, "PUT", f.url+"/v1/ret-starts/"+c.name, c.body, "")
		require.Equal(t, 400, code, "%s %s: %s", c.name, c.body, msg)
		require.Contains(t, msg, c.want, c.body)
	}
	code, msg := rawDo(t, "PUT", f.url+"/v1/ret-starts/s", `{"addr":"10.0.0.1:7100","pid":1,"host":"`+strings.Repeat("h", 5000)+`"}`, "")
	require.Equal(t, 413, code, msg)
	l, err := f.anon.RetStarts(context.Background())
	require.NoError(t, err)
	require.Empty(t, l)
}

// At most MaxRetStarts entries; replacing one still works when full.
func TestRetStartsBounded(t *testing.T) {
	f := start(t, "")
	ctx := context.Background()
	for i := 0; i < MaxRetStarts; i++ {
		_, err := f.anon.RegisterRetStart(ctx, fmt.Sprintf("s%d", i), RetStart{Addr: "10.0.0.1:7100", PID: i + 1})
		require.NoError(t, err)
	}
	_, err := f.anon.RegisterRetStart(ctx, "one more", RetStart{Addr: "10.0.0.1:7100", PID: 1})
	require.ErrorContains(t, err, "507")
	require.ErrorContains(t, err, "1024 start points registered")
	_, err = f.anon.RegisterRetStart(ctx, "s5", RetStart{Addr: "10.0.0.2:7100", PID: 99})
	require.NoError(t, err, "a replacement takes no new room")
	l, err := f.anon.RetStarts(ctx)
	require.NoError(t, err)
	require.Len(t, l, MaxRetStarts)

	// A full registry of the largest legal entries, each replaced once,
	// still lists within what the client reads.
	g := start(t, "")
	big := RetStart{Addr: "[1111:2222:3333:4444:5555:6666:7777:8888]:65535", PID: 1 << 30,
		Host: strings.Repeat("h", 255), Node: strings.Repeat("d", 64)}
	for round := 0; round < 2; round++ {
		for i := 0; i < MaxRetStarts; i++ {
			_, err := g.anon.RegisterRetStart(ctx, fmt.Sprintf("%s%04d", strings.Repeat("n", MaxRetStartName-4), i), big)
			require.NoError(t, err)
		}
	}
	l, err = g.anon.RetStarts(ctx)
	require.NoError(t, err)
	require.Len(t, l, MaxRetStarts)
	require.NotNil(t, l[MaxRetStarts-1].Replaced)
}

// "." and ".." would be cleaned out of the URL path: refused by name.
func TestRetStartNameDotSegments(t *testing.T) {
	for _, n := range []string{".", ".."} {
		require.ErrorContains(t, ValidRetStartName(n), "URL path segment", n)
	}
	require.NoError(t, ValidRetStartName("..."))
	f := start(t, "")
	_, err := f.anon.RegisterRetStart(context.Background(), "..", RetStart{Addr: "10.0.0.1:7100", PID: 1})
	require.ErrorContains(t, err, "URL path segment")
}
