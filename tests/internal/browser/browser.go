// Package browser drives a real headless Chromium for the report's tests
// through the DevTools protocol over a pipe (--remote-debugging-pipe: JSON
// messages ended by a NUL byte on file descriptors 3 and 4), so that no
// port is opened and no WebSocket library is needed. A page records what a
// person would not want: console errors, uncaught exceptions, and every
// request that leaves the page.
package browser

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Find is the Chromium to run: $CP_CHROMIUM, else chromium,
// chromium-browser or google-chrome on the PATH.
func Find() (string, error) {
	if p := os.Getenv("CP_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on the PATH (Debian's package chromium; .ci/run installs it)")
}

// Browser is one headless Chromium.
type Browser struct {
	cmd     *exec.Cmd
	out     *os.File // its fd 3: commands
	in      *os.File // its fd 4: replies and events
	dir     string
	mu      sync.Mutex
	next    int
	pending map[int]chan message
	events  []message
	changed chan struct{}
	done    chan struct{}
	stderr  *os.File
}

type message struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// Start starts Chromium with a profile in dir (created; removed by Close).
func Start(dir string) (*Browser, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stderr, err := os.Create(filepath.Join(dir, "chromium.log"))
	if err != nil {
		return nil, err
	}
	c := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--disable-component-update",
		"--hide-scrollbars", "--mute-audio", "--font-render-hinting=none", "about:blank")
	c.ExtraFiles = []*os.File{cmdR, evW}
	c.Stderr, c.Stdout = stderr, stderr
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	cmdR.Close()
	evW.Close()
	b := &Browser{cmd: c, out: cmdW, in: evR, dir: dir, pending: map[int]chan message{}, changed: make(chan struct{}), done: make(chan struct{}), stderr: stderr}
	go b.read()
	return b, nil
}

func (b *Browser) read() {
	defer close(b.done)
	r := bufio.NewReaderSize(b.in, 1<<20)
	for {
		raw, err := r.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch := b.pending[m.ID]; ch != nil {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else {
			b.events = append(b.events, m)
			close(b.changed)
			b.changed = make(chan struct{})
		}
		b.mu.Unlock()
	}
}

// Call sends a command (to a page's session, or the browser's with "")
// and decodes its result into result (nil: ignored).
func (b *Browser) Call(session, method string, params, result any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan message, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.out.Write(append(raw, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("%s: chromium closed its pipe (its log: %s)", method, b.stderr.Name())
		}
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: no answer in 60 s", method)
	}
}

// waitEvent waits up to limit for an event of a session matching method,
// from index from of the events on.
func (b *Browser) waitEvent(session, method string, from int, limit time.Duration) error {
	deadline := time.After(limit)
	for {
		b.mu.Lock()
		for _, e := range b.events[from:] {
			if e.Method == method && e.SessionID == session {
				b.mu.Unlock()
				return nil
			}
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-b.done:
			return fmt.Errorf("chromium ended while waiting for %s", method)
		case <-deadline:
			return fmt.Errorf("no %s within %s", method, limit)
		}
	}
}

// Close ends the browser and removes its profile.
func (b *Browser) Close() {
	_ = b.Call("", "Browser.close", nil, nil)
	b.out.Close()
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
	}
	b.cmd.Wait()
	b.in.Close()
	b.stderr.Close()
	os.RemoveAll(filepath.Join(b.dir, "profile"))
}

// Page is one tab with a page loaded.
type Page struct {
	b       *Browser
	session string
	url     string
	from    int // its events start here
}

// Open loads url in a new tab width px wide and waits for its load event.
func (b *Browser) Open(url string, width, height int) (*Page, error) {
	var t struct {
		TargetID string `json:"targetId"`
	}
	if err := b.Call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &t); err != nil {
		return nil, err
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.Call("", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &s); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: s.SessionID, url: url}
	for _, m := range []string{"Runtime.enable", "Log.enable", "Network.enable", "Page.enable"} {
		if err := b.Call(p.session, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := b.Call(p.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	b.mu.Lock()
	p.from = len(b.events)
	b.mu.Unlock()
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.Call(p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return nil, err
	}
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("%s: %s", url, nav.ErrorText)
	}
	if err := b.waitEvent(p.session, "Page.loadEventFired", p.from, 60*time.Second); err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return p, nil
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// (returned by value: make it JSON-like) into v.
func (p *Page) Eval(expr string, v any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.Call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluating %q: %s", expr, r.ExceptionDetails.Text)
	}
	return json.Unmarshal(r.Result.Value, v)
}

// Problems are what the page did that a self-contained, correct page does
// not: console errors and warnings, uncaught exceptions, log entries of
// level error or warning (a blocked request, a policy violation), and
// requests for anything but the page itself.
func (p *Page) Problems() []string {
	p.b.mu.Lock()
	evs := append([]message(nil), p.b.events[p.from:]...)
	p.b.mu.Unlock()
	var out []string
	for _, e := range evs {
		if e.SessionID != p.session {
			continue
		}
		switch e.Method {
		case "Runtime.consoleAPICalled":
			var c struct {
				Type string `json:"type"`
				Args []struct {
					Value       any    `json:"value"`
					Description string `json:"description"`
				} `json:"args"`
			}
			json.Unmarshal(e.Params, &c)
			if c.Type == "error" || c.Type == "warning" || c.Type == "assert" {
				var parts []string
				for _, a := range c.Args {
					parts = append(parts, fmt.Sprint(a.Value, a.Description))
				}
				out = append(out, "console."+c.Type+": "+strings.Join(parts, " "))
			}
		case "Runtime.exceptionThrown":
			out = append(out, "exception: "+string(e.Params))
		case "Log.entryAdded":
			var l struct {
				Entry struct {
					Level, Text, URL, Source string
				} `json:"entry"`
			}
			json.Unmarshal(e.Params, &l)
			if l.Entry.Level == "error" || l.Entry.Level == "warning" {
				out = append(out, fmt.Sprintf("log %s (%s): %s %s", l.Entry.Level, l.Entry.Source, l.Entry.Text, l.Entry.URL))
			}
		case "Network.requestWillBeSent":
			var r struct {
				Request struct {
					URL string `json:"url"`
				} `json:"request"`
			}
			json.Unmarshal(e.Params, &r)
			if r.Request.URL != p.url {
				out = append(out, "request: "+r.Request.URL)
			}
		}
	}
	return out
}

// Screenshot saves the whole page (or its first maxHeight pixels, when
// maxHeight > 0) as a PNG.
func (p *Page) Screenshot(path string, maxHeight int) error {
	var m struct {
		CSSContentSize struct {
			Width, Height float64
		} `json:"cssContentSize"`
	}
	if err := p.b.Call(p.session, "Page.getLayoutMetrics", nil, &m); err != nil {
		return err
	}
	h := m.CSSContentSize.Height
	if maxHeight > 0 && h > float64(maxHeight) {
		h = float64(maxHeight)
	}
	var shot struct {
		Data string `json:"data"`
	}
	err := p.b.Call(p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": h, "scale": 1}}, &shot)
	if err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
