package confserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// maxResponse caps what the client reads of an answer (the largest is a
// full list of return-trip start points).
const maxResponse = 8 << 20

// Client talks to a configuration server at Addr (host:port).
type Client struct {
	Addr  string
	Token string // for writes
	HTTP  *http.Client
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr+path, body)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e apiError
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s: %s", resp.Status, e.Error)
		}
		return fmt.Errorf("%s", resp.Status)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *Client) Rules(ctx context.Context) (Table, error) {
	var t Table
	return t, c.do(ctx, "GET", "/v1/rules", nil, &t)
}

func (c *Client) Rule(ctx context.Context, id string) (Rule, error) {
	var r Rule
	return r, c.do(ctx, "GET", "/v1/rules/"+url.PathEscape(id), nil, &r)
}

// SetRule creates or replaces the rule with r.ID (appended when new).
func (c *Client) SetRule(ctx context.Context, r Rule) (Table, error) {
	var t Table
	if r.ID == "" {
		return t, c.do(ctx, "POST", "/v1/rules", r, &t)
	}
	return t, c.do(ctx, "PUT", "/v1/rules/"+url.PathEscape(r.ID), r, &t)
}

func (c *Client) DeleteRule(ctx context.Context, id string) (Table, error) {
	var t Table
	return t, c.do(ctx, "DELETE", "/v1/rules/"+url.PathEscape(id), nil, &t)
}

func (c *Client) SetRules(ctx context.Context, t Table) (Table, error) {
	var out Table
	return out, c.do(ctx, "PUT", "/v1/rules", t, &out)
}

func (c *Client) Resolve(ctx context.Context, ch Channel) (Decision, error) {
	var d Decision
	q := url.Values{"name": {ch.Name}, "host": {ch.Host}, "pid": {strconv.Itoa(ch.PID)}}
	return d, c.do(ctx, "GET", "/v1/resolve?"+q.Encode(), nil, &d)
}

func (c *Client) ResolveMany(ctx context.Context, chs []Channel) ([]Decision, error) {
	var d []Decision
	if err := c.do(ctx, "POST", "/v1/resolve", chs, &d); err != nil {
		return nil, err
	}
	if len(d) != len(chs) {
		return nil, fmt.Errorf("asked for %d decisions, got %d", len(chs), len(d))
	}
	return d, nil
}

// Watch waits (up to wait) until the table's version passes since and
// returns the version then.
func (c *Client) Watch(ctx context.Context, since uint64, wait time.Duration) (uint64, error) {
	var v struct{ Version uint64 }
	path := fmt.Sprintf("/v1/watch?since=%d&timeout=%d", since, wait.Milliseconds())
	return v.Version, c.do(ctx, "GET", path, nil, &v)
}

// RegisterRetStart registers (or replaces) the return-trip start point name;
// needs no token. The answer is the entry as the server keeps it.
func (c *Client) RegisterRetStart(ctx context.Context, name string, s RetStart) (RetStart, error) {
	var out RetStart
	if err := ValidRetStartName(name); err != nil {
		return out, err
	}
	in := retStartIn{Addr: s.Addr, Host: s.Host, PID: s.PID, Node: s.Node}
	return out, c.do(ctx, "PUT", "/v1/ret-starts/"+url.PathEscape(name), in, &out)
}

// DeregisterRetStart removes the start point name if pid (and host and addr,
// when not empty) registered it; with the client's token, pid 0 removes
// whatever is registered under name.
func (c *Client) DeregisterRetStart(ctx context.Context, name string, pid int, host, addr string) error {
	q := url.Values{}
	if pid != 0 {
		q.Set("pid", strconv.Itoa(pid))
	}
	if host != "" {
		q.Set("host", host)
	}
	if addr != "" {
		q.Set("addr", addr)
	}
	path := "/v1/ret-starts/" + url.PathEscape(name)
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.do(ctx, "DELETE", path, nil, nil)
}

// RetStarts lists the registered start points, by name.
func (c *Client) RetStarts(ctx context.Context) ([]RetStart, error) {
	var l RetStartList
	return l.Starts, c.do(ctx, "GET", "/v1/ret-starts", nil, &l)
}

// RetStart returns one start point; a missing one is an error saying 404.
func (c *Client) RetStart(ctx context.Context, name string) (RetStart, error) {
	var s RetStart
	if err := ValidRetStartName(name); err != nil {
		return s, err
	}
	return s, c.do(ctx, "GET", "/v1/ret-starts/"+url.PathEscape(name), nil, &s)
}
