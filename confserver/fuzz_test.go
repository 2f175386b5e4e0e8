package confserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// refMatch is the glob matcher written the plain way, to check Match
// against: dynamic programming over both strings (quadratic), dp[i][j]
// saying whether g[i:] matches s[j:].
func refMatch(g, s string) bool {
	w := len(s) + 1
	dp := make([]bool, (len(g)+2)*w)
	dp[len(g)*w+len(s)] = true
	for i := len(g) - 1; i >= 0; i-- {
		for j := len(s); j >= 0; j-- {
			more := j < len(s)
			var r bool
			switch {
			case g[i] == '*':
				r = dp[(i+1)*w+j] || more && dp[i*w+j+1]
			case !more:
			case g[i] == '?':
				r = dp[(i+1)*w+j+1]
			case g[i] == '\\' && i+1 < len(g):
				r = s[j] == g[i+1] && dp[(i+2)*w+j+1]
			default:
				r = s[j] == g[i] && dp[(i+1)*w+j+1]
			}
			dp[i*w+j] = r
		}
	}
	return dp[0]
}

// FuzzMatch: the matcher never panics, agrees with refMatch, and never does
// more than len(name) * words steps.
func FuzzMatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, glob, name string) {
		if len(glob) > MaxGlob || len(name) > MaxName {
			return
		}
		g := compileGlob(glob)
		ok, steps := g.matchSteps(name)
		require.LessOrEqual(t, steps, len(name)*g.words)
		require.Equal(t, refMatch(glob, name), ok, "%q ~ %q", glob, name)
		require.Equal(t, ok, Match(glob, name))
	})
}

// fuzzServer is a server without a rules file for the fuzz targets that
// go through the HTTP handlers (nothing they do writes it).
func fuzzServer(f *testing.F) *Server {
	st, err := Open(filepath.Join(f.TempDir(), "rules.json"))
	require.NoError(f, err)
	_, err = st.Update(func(t *Table) error {
		t.Rules = []Rule{{ID: "maps", Name: "map*", Handler: "XOY"}, {ID: "a", Host: "node-?", PID: 7, Handler: "MEDIAN"},
			{ID: "esc", Name: `\*lit*`, Handler: "NULLH"}}
		return nil
	})
	require.NoError(f, err)
	return &Server{Store: st}
}

// answer serves one request through the handler (no network: each run is
// a few microseconds) and checks the answer is JSON with a code API.md
// lists.
func answer(t *testing.T, h http.Handler, method, path string, body []byte, codes ...int) (int, []byte) {
	req := httptest.NewRequest(method, "http://confserver"+path, bytes.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Contains(t, codes, rec.Code, "%s %s %q: %s", method, path, body, rec.Body)
	if rec.Code/100 == 3 { // the mux cleaning a path ("/v1/ret-starts/..")
		return rec.Code, nil
	}
	require.True(t, json.Valid(rec.Body.Bytes()), "%s", rec.Body)
	if rec.Code != 200 {
		var e apiError
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
		require.NotEmpty(t, e.Error)
	}
	return rec.Code, rec.Body.Bytes()
}

// FuzzResolveBody: POST /v1/resolve with any body answers 200 with one
// decision per channel, or 400/413 saying why.
func FuzzResolveBody(f *testing.F) {
	h := fuzzServer(f).Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		code, out := answer(t, h, "POST", "/v1/resolve", body, 200, 400, 413)
		if code != 200 {
			return
		}
		var in []Channel
		require.NoError(t, json.Unmarshal(body, &in))
		var ds []Decision
		require.NoError(t, json.Unmarshal(out, &ds))
		require.Len(t, ds, len(in))
		for _, d := range ds {
			require.NotEmpty(t, d.Rule)
			require.NotNil(t, d.Args)
		}
	})
}

// FuzzRuleBody: a rule's or a table's JSON (the bodies of POST and PUT
// /v1/rules[/{id}]) decodes strictly and validates, or is refused with an
// error; a valid one compiles and resolves.
func FuzzRuleBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Rule
		if decodeJSON(body, &r) == nil && r.Validate() == nil {
			r.ID = "x"
			tab := Table{Rules: []Rule{r}}
			require.NoError(t, tab.Validate())
			d := compileTable(tab).resolve(Channel{Name: "map 1", Host: "node-a", PID: 7})
			require.Contains(t, []string{"x", "default"}, d.Rule)
			require.Equal(t, d.Rule == "x", (r.Name == "" || Match(r.Name, "map 1")) && (r.Host == "" || Match(r.Host, "node-a")) &&
				(r.PID == 0 || r.PID == 7))
		}
		var tab Table
		if decodeJSON(body, &tab) == nil && tab.Validate() == nil {
			d := compileTable(tab).resolve(Channel{Name: "map 1"})
			require.NotEmpty(t, d.Handler)
		}
	})
}

// FuzzRetStartBody: PUT /v1/ret-starts/{name} with any name and body
// registers (and the entry reads back) or answers 400/413 saying why.
func FuzzRetStartBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		h := (&Server{Starts: NewRetStarts()}).Handler()
		path := "/v1/ret-starts/" + url.PathEscape(name)
		code, out := answer(t, h, "PUT", path, body, 200, 301, 307, 400, 404, 413)
		if code != 200 {
			return
		}
		var e RetStart
		require.NoError(t, json.Unmarshal(out, &e))
		_, back := answer(t, h, "GET", path, nil, 200)
		var got RetStart
		require.NoError(t, json.Unmarshal(back, &got))
		require.Equal(t, e.Addr, got.Addr)
		require.Equal(t, e.PID, got.PID)
	})
}
