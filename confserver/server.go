package confserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Server serves a Store over HTTP (API.md). Writes to the rules need the
// bearer token; with no token configured, every rule write is refused. The
// return-trip start points (retstarts.go) are registered without it.
type Server struct {
	Store *Store
	Token string
	// MaxWatch caps how long one watch request may wait (default 60 s).
	MaxWatch time.Duration
	// Starts is the registry of return-trip start points (in memory; a new
	// one if nil when Handler is called).
	Starts *RetStarts
	// Limits bound what clients can hold of the server when it runs with
	// Serve (timeouts, connections, header size).
	Limits Limits

	conns atomic.Pointer[connLimiter] // Serve's
}

const (
	maxBody  = 1 << 20
	maxBatch = 20000 // channels per POST /v1/resolve
)

type apiError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, format string, a ...any) {
	writeJSON(w, code, apiError{fmt.Sprintf(format, a...)})
}

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler {
	if s.Starts == nil {
		s.Starts = NewRetStarts()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/rules", s.getRules)
	mux.HandleFunc("PUT /v1/rules", s.auth(s.putRules))
	mux.HandleFunc("POST /v1/rules", s.auth(s.addRule))
	mux.HandleFunc("GET /v1/rules/{id}", s.getRule)
	mux.HandleFunc("PUT /v1/rules/{id}", s.auth(s.putRule))
	mux.HandleFunc("DELETE /v1/rules/{id}", s.auth(s.deleteRule))
	mux.HandleFunc("GET /v1/resolve", s.resolveOne)
	mux.HandleFunc("POST /v1/resolve", s.resolveMany)
	mux.HandleFunc("GET /v1/watch", s.watch)
	mux.HandleFunc("GET /v1/ret-starts", s.listRetStarts)
	mux.HandleFunc("GET /v1/ret-starts/{name}", s.getRetStart)
	mux.HandleFunc("PUT /v1/ret-starts/{name}", s.putRetStart)
	mux.HandleFunc("DELETE /v1/ret-starts/{name}", s.deleteRetStart)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "no such endpoint: %s %s (see API.md)", r.Method, r.URL.Path)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == http.NoBody {
			answering(r) // nothing more to wait for from the client
		}
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.Token == "" {
			fail(w, http.StatusUnauthorized, "this server has no token configured: writes are disabled")
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(s.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			fail(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next(w, r)
	}
}

// decode reads a JSON body of at most limit bytes strictly (unknown
// fields and trailing data are errors), or answers why not: 413 too large,
// 408 not in before the read timeout, 400 malformed.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		fail(w, http.StatusRequestEntityTooLarge, "body larger than %d bytes", limit)
		return false
	case errors.As(err, &ne) && ne.Timeout():
		fail(w, http.StatusRequestTimeout, "the body did not arrive in time")
		return false
	case err != nil:
		fail(w, http.StatusBadRequest, "reading the body: %v", err)
		return false
	}
	answering(r)
	if err := decodeJSON(b, v); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return false
	}
	return true
}

// decodeJSON parses b strictly: unknown fields and trailing data are errors.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("malformed JSON: data after the value")
	}
	return nil
}

func (s *Server) getRules(w http.ResponseWriter, r *http.Request) {
	t, _ := s.Store.Snapshot()
	writeJSON(w, http.StatusOK, t)
}

func (s *Server) update(w http.ResponseWriter, code int, change func(t *Table) error) {
	t, err := s.Store.Update(change)
	var nf notFound
	switch {
	case errors.As(err, &nf):
		fail(w, http.StatusNotFound, "%v", err)
	case err != nil && strings.HasPrefix(err.Error(), "writing "):
		fail(w, http.StatusInternalServerError, "%v", err)
	case err != nil:
		fail(w, http.StatusBadRequest, "%v (the table is unchanged)", err)
	default:
		writeJSON(w, code, t)
	}
}

type notFound string

func (n notFound) Error() string { return "no rule with id " + strconv.Quote(string(n)) }

func (s *Server) putRules(w http.ResponseWriter, r *http.Request) {
	var in Table
	if !decode(w, r, maxBody, &in) {
		return
	}
	s.update(w, http.StatusOK, func(t *Table) error {
		t.Rules, t.Default = in.Rules, in.Default
		if t.Rules == nil {
			t.Rules = []Rule{}
		}
		return nil
	})
}

func (s *Server) addRule(w http.ResponseWriter, r *http.Request) {
	var in Rule
	if !decode(w, r, maxBody, &in) {
		return
	}
	pos := -1
	if p := r.URL.Query().Get("position"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, "position %q: want an index >= 0", p)
			return
		}
		pos = n
	}
	s.update(w, http.StatusCreated, func(t *Table) error {
		if in.ID == "" { // make one up that no rule has
			used := map[string]bool{}
			for _, r := range t.Rules {
				used[r.ID] = true
			}
			for n := t.Version + 1; in.ID == "" || used[in.ID]; n++ {
				in.ID = fmt.Sprintf("r%d", n)
			}
		}
		if pos < 0 || pos > len(t.Rules) {
			pos = len(t.Rules)
		}
		t.Rules = append(t.Rules[:pos], append([]Rule{in}, t.Rules[pos:]...)...)
		return nil
	})
}

func (s *Server) getRule(w http.ResponseWriter, r *http.Request) {
	t, _ := s.Store.Snapshot()
	for _, rule := range t.Rules {
		if rule.ID == r.PathValue("id") {
			writeJSON(w, http.StatusOK, rule)
			return
		}
	}
	fail(w, http.StatusNotFound, "%v", notFound(r.PathValue("id")))
}

func (s *Server) putRule(w http.ResponseWriter, r *http.Request) {
	var in Rule
	if !decode(w, r, maxBody, &in) {
		return
	}
	id := r.PathValue("id")
	if in.ID != "" && in.ID != id {
		fail(w, http.StatusBadRequest, "the body's id %q is not the URL's %q", in.ID, id)
		return
	}
	in.ID = id
	s.update(w, http.StatusOK, func(t *Table) error {
		for i := range t.Rules {
			if t.Rules[i].ID == id {
				t.Rules[i] = in
				return nil
			}
		}
		t.Rules = append(t.Rules, in) // PUT creates
		return nil
	})
}

func (s *Server) deleteRule(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.update(w, http.StatusOK, func(t *Table) error {
		for i := range t.Rules {
			if t.Rules[i].ID == id {
				t.Rules = append(t.Rules[:i], t.Rules[i+1:]...)
				return nil
			}
		}
		return notFound(id)
	})
}

func (s *Server) resolveOne(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c := Channel{Name: q.Get("name"), Host: q.Get("host")}
	if !q.Has("name") {
		fail(w, http.StatusBadRequest, "resolve needs ?name=")
		return
	}
	if p := q.Get("pid"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, "pid %q: want a number >= 0", p)
			return
		}
		c.PID = n
	}
	if err := c.Check(); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, s.Store.Resolve(c))
}

func (s *Server) resolveMany(w http.ResponseWriter, r *http.Request) {
	var in []Channel
	if !decode(w, r, maxBody, &in) {
		return
	}
	if err := checkBatch(in); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, s.Store.ResolveMany(in))
}

func checkBatch(in []Channel) error {
	if len(in) > maxBatch {
		return fmt.Errorf("%d channels in one request; at most %d", len(in), maxBatch)
	}
	for i, c := range in {
		if err := c.Check(); err != nil {
			return fmt.Errorf("channel %d: %v", i, err)
		}
	}
	return nil
}

// watch answers when the table's version passes ?since=, or after ?timeout=
// (milliseconds, default and cap MaxWatch), with the current version.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, err := strconv.ParseUint(q.Get("since"), 10, 64)
	if err != nil {
		fail(w, http.StatusBadRequest, "watch needs ?since=VERSION")
		return
	}
	max := s.MaxWatch
	if max <= 0 {
		max = 60 * time.Second
	}
	wait := max
	if ms := q.Get("timeout"); ms != "" {
		n, err := strconv.Atoi(ms)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, "timeout %q: want milliseconds >= 0", ms)
			return
		}
		wait = min(time.Duration(n)*time.Millisecond, max)
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	// The answer is written after the wait: the write timeout starts then.
	if wt := s.Limits.withDefaults().WriteTimeout; s.conns.Load() != nil {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + wt))
	}
	for {
		t, changed := s.Store.Snapshot()
		if t.Version > since {
			writeJSON(w, http.StatusOK, map[string]uint64{"version": t.Version})
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			writeJSON(w, http.StatusOK, map[string]uint64{"version": t.Version})
			return
		}
	}
}
