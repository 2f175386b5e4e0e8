package confserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// Return-trip (ReT) start points: where FOX_START channels receive ReTACKs,
// registered by the library when such a channel opens, so that FOX_END
// channels on other nodes can find the start node without CP_RET_START.
//
// The registry lives in memory only: it is not in the rules file, has no
// version and wakes no watcher. A restarted server starts empty (channels
// opened before register again only when they are reopened).
//
// Registering needs no token (library processes do not hold the operator's
// token), so each registration is bounded: a valid name, an IP address with
// a non-zero port, a small body, at most MaxRetStarts entries. Removing an
// entry without the token needs the registrant's pid (and its host and
// address when given); with the token, any entry can be removed.

// RetStart is one registered start point.
type RetStart struct {
	Name       string    `json:"name"`           // the FOX_START channel's name
	Addr       string    `json:"addr"`           // ip:port ReTACKs go to
	Host       string    `json:"host,omitempty"` // the registrant's host name
	PID        int       `json:"pid"`            // the registrant's process id
	Node       string    `json:"node,omitempty"` // the registrant's CP_NODE
	Registered time.Time `json:"registered"`     // when the server took it
	// Replaced is the registration of the same name this one replaced, if any.
	Replaced *RetStartRef `json:"replaced,omitempty"`
}

// RetStartRef identifies a replaced registration.
type RetStartRef struct {
	Addr       string    `json:"addr"`
	Host       string    `json:"host,omitempty"`
	PID        int       `json:"pid"`
	Registered time.Time `json:"registered"`
}

// RetStartList is the answer to GET /v1/ret-starts.
type RetStartList struct {
	Starts []RetStart `json:"starts"` // by name
}

const (
	MaxRetStarts    = 1024 // entries the registry keeps
	MaxRetStartName = 1024 // bytes
	maxRetStartBody = 4096 // bytes of a PUT body
	maxRetHost      = 255
	maxRetNode      = 64
)

// RetStarts is the in-memory registry.
type RetStarts struct {
	mu sync.Mutex
	m  map[string]RetStart
}

func NewRetStarts() *RetStarts { return &RetStarts{m: map[string]RetStart{}} }

// List returns every entry, by name.
func (r *RetStarts) List() []RetStart {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RetStart, 0, len(r.m))
	for _, s := range r.m {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b RetStart) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (r *RetStarts) get(name string) (RetStart, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[name]
	return s, ok
}

var errRegistryFull = errors.New("registry full")

func (r *RetStarts) put(s RetStart) (RetStart, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.m[s.Name]
	if !ok && len(r.m) >= MaxRetStarts {
		return s, errRegistryFull
	}
	if ok {
		s.Replaced = &RetStartRef{Addr: old.Addr, Host: old.Host, PID: old.PID, Registered: old.Registered}
	}
	r.m[s.Name] = s
	return s, nil
}

// ValidRetStartName says what is wrong with a start point's name, if anything:
// 1..MaxRetStartName bytes of UTF-8 without control characters.
func ValidRetStartName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) > MaxRetStartName:
		return fmt.Errorf("name of %d bytes; at most %d", len(name), MaxRetStartName)
	case !utf8.ValidString(name):
		return errors.New("name is not valid UTF-8")
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return errors.New("name holds a control character")
	case name == "." || name == "..":
		// A URL path segment of its own that HTTP path cleaning removes.
		return fmt.Errorf("name %q cannot be registered (a URL path segment)", name)
	}
	return nil
}

// ValidRetStartAddr checks an ip:port a FOX_END channel can send to: an IP
// address (not a host name, not 0.0.0.0 or ::) and a non-zero port.
func ValidRetStartAddr(addr string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(addr)
	switch {
	case addr == "":
		return ap, errors.New("addr missing: want ip:port")
	case err != nil:
		return ap, fmt.Errorf("addr %q: want ip:port with an IP address (%v)", addr, err)
	case ap.Port() == 0:
		return ap, fmt.Errorf("addr %q: port 0", addr)
	case ap.Addr().IsUnspecified():
		return ap, fmt.Errorf("addr %q: an unspecified address; register one the FOX_END nodes can reach", addr)
	case ap.Addr().Zone() != "":
		return ap, fmt.Errorf("addr %q: a zoned address means nothing on other hosts", addr)
	}
	return ap, nil
}

func validText(what, s string, max int) error {
	switch {
	case len(s) > max:
		return fmt.Errorf("%s of %d bytes; at most %d", what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return fmt.Errorf("%s holds a control character", what)
	}
	return nil
}

// retStartIn is a PUT body.
type retStartIn struct {
	Name string `json:"name"` // optional; must be the URL's
	Addr string `json:"addr"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	Node string `json:"node"`
}

func (s *Server) putRetStart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := ValidRetStartName(name); err != nil {
		fail(w, http.StatusBadRequest, "start point: %v", err)
		return
	}
	var in retStartIn
	if !decode(w, r, maxRetStartBody, &in) {
		return
	}
	if in.Name != "" && in.Name != name {
		fail(w, http.StatusBadRequest, "the body's name %q is not the URL's %q", in.Name, name)
		return
	}
	ap, err := ValidRetStartAddr(in.Addr)
	if err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	if in.PID <= 0 {
		fail(w, http.StatusBadRequest, "pid %d: want the registrant's process id (> 0)", in.PID)
		return
	}
	if err := validText("host", in.Host, maxRetHost); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := validText("node", in.Node, maxRetNode); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	e, err := s.Starts.put(RetStart{Name: name, Addr: ap.String(), Host: in.Host, PID: in.PID, Node: in.Node,
		Registered: time.Now().UTC()})
	if err != nil {
		fail(w, http.StatusInsufficientStorage, "%d start points registered, the most this server keeps; remove some (DELETE /v1/ret-starts/{name})", MaxRetStarts)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func (s *Server) listRetStarts(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, RetStartList{Starts: s.Starts.List()})
}

func (s *Server) getRetStart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if e, ok := s.Starts.get(name); ok {
		writeJSON(w, http.StatusOK, e)
		return
	}
	fail(w, http.StatusNotFound, "no start point named %q (%s)", name, s.Starts.summary(8))
}

// summary names up to n entries, for error messages.
func (r *RetStarts) summary(n int) string {
	all := r.List()
	if len(all) == 0 {
		return "none is registered"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d registered: ", len(all))
	for i, e := range all {
		if i == n {
			fmt.Fprintf(&b, ", and %d more", len(all)-n)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", e.Name)
	}
	return b.String()
}

// deleteRetStart removes an entry: the registrant's own (?pid= matches, and
// ?host= and ?addr= when given), or any with the operator's token.
func (s *Server) deleteRetStart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	q := r.URL.Query()
	operator := false
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if s.Token == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(s.Token)) != 1 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			fail(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		operator = true
	}
	pid := 0
	if p := q.Get("pid"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			fail(w, http.StatusBadRequest, "pid %q: want a process id > 0", p)
			return
		}
		pid = n
	} else if !operator {
		fail(w, http.StatusBadRequest, "removing a start point needs ?pid= (the registrant's), or the operator's bearer token")
		return
	}
	// Decided under the registry's lock, answered after it: a client slow
	// to read its answer holds no one up.
	rs := s.Starts
	rs.mu.Lock()
	e, ok := rs.m[name]
	mine := ok && !(pid != 0 && e.PID != pid || q.Has("host") && e.Host != q.Get("host") || q.Has("addr") && e.Addr != q.Get("addr"))
	if mine {
		delete(rs.m, name)
	}
	rs.mu.Unlock()
	switch {
	case !ok:
		fail(w, http.StatusNotFound, "no start point named %q", name)
	case !mine:
		fail(w, http.StatusConflict, "start point %q is registered by pid %d on host %q at %s, not by this request's registrant: left in place",
			name, e.PID, e.Host, e.Addr)
	default:
		writeJSON(w, http.StatusOK, e)
	}
}
