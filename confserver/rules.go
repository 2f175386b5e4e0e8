// Package confserver is the configuration server: a table of rules that says,
// per channel (name glob, host, pid), which handler, format and arguments a
// NET_CONF channel gets, served over HTTP/JSON (see API.md), kept in a JSON
// file that every change rewrites atomically.
package confserver

import (
	"fmt"

	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"
)

// Rule matches channels and says what they get. Empty match fields match
// anything. The first rule that matches wins; the table's default otherwise.
type Rule struct {
	ID           string  `json:"id,omitempty"`
	Name         string  `json:"name,omitempty"` // glob on the channel name: * any run, ? one byte, \ escapes
	Host         string  `json:"host,omitempty"` // glob on the host name
	PID          int     `json:"pid,omitempty"`  // 0: any
	Handler      string  `json:"handler"`        // as in the C header without CP_: NULLH, BUFFER_IDENTITY, ...
	Format       string  `json:"format,omitempty"`
	Args         []int64 `json:"args,omitempty"` // arg0, arg1; missing ones take the handler's defaults
	DropWhenFull bool    `json:"drop_when_full,omitempty"`
}

// Table is the whole configuration. Version grows by one with every change.
type Table struct {
	Version uint64 `json:"version"`
	Rules   []Rule `json:"rules"`
	Default Rule   `json:"default"`
}

// Decision is what a channel gets.
type Decision struct {
	Handler      string  `json:"handler"`
	Format       string  `json:"format,omitempty"` // empty: the format the program opened with
	Args         []int64 `json:"args"`
	DropWhenFull bool    `json:"drop_when_full,omitempty"`
	Rule         string  `json:"rule"` // the matching rule's id, or "default"
	Version      uint64  `json:"version"`
}

// Channel identifies a channel asking for its decision.
type Channel struct {
	Name string `json:"name"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
}

// Switchable are the handlers a NET_CONF channel can be given (and switched
// between while it runs). IDENTITY writes from the logging thread and
// NET_CONF/FOX/GPIORTT are not local handlers.
func Switchable(h handlers.Type) bool {
	switch h {
	case handlers.BufferIdentity, handlers.BufferIdentityComp, handlers.Median, handlers.Downsample,
		handlers.XoY, handlers.FirstLast, handlers.PeriodicCounter, handlers.FastPeriodicCounter, handlers.Null:
		return true
	}
	return false
}

// Validate checks a rule and fills in its arguments' defaults.
func (r *Rule) Validate() error {
	h, err := handlers.Parse(r.Handler)
	if err != nil {
		return err
	}
	if !Switchable(h) {
		return fmt.Errorf("handler %s cannot be given to a NET_CONF channel (use BUFFER_IDENTITY for IDENTITY)", h)
	}
	if r.Format != "" {
		if _, err := logfile.ParseFormat(r.Format); err != nil {
			return err
		}
	}
	if r.PID < 0 {
		return fmt.Errorf("pid %d: must be >= 0 (0 matches any)", r.PID)
	}
	for _, g := range []string{r.Name, r.Host} {
		if err := checkGlob(g); err != nil {
			return err
		}
	}
	defs := h.Defaults()
	if len(r.Args) > len(defs) {
		return fmt.Errorf("%s takes %d argument(s), got %d", h, len(defs), len(r.Args))
	}
	args := append([]int64(nil), defs...)
	copy(args, r.Args)
	for i := range r.Args {
		if err := h.CheckArg(int32(i), r.Args[i], args); err != nil {
			return err
		}
	}
	r.Args = args
	if r.DropWhenFull && !h.Ring() {
		return fmt.Errorf("drop_when_full: %s has no ring to drop from", h)
	}
	return nil
}

// Validate checks every rule; ids must be unique.
func (t *Table) Validate() error {
	seen := map[string]bool{}
	for i := range t.Rules {
		r := &t.Rules[i]
		if err := r.Validate(); err != nil {
			return fmt.Errorf("rule %d (%q): %w", i, r.ID, err)
		}
		if r.ID == "" {
			return fmt.Errorf("rule %d: no id", i)
		}
		if seen[r.ID] {
			return fmt.Errorf("rule %d: id %q used twice", i, r.ID)
		}
		seen[r.ID] = true
	}
	if t.Default.Handler == "" {
		t.Default.Handler = "NULLH"
	}
	if err := t.Default.Validate(); err != nil {
		return fmt.Errorf("default: %w", err)
	}
	return nil
}

// Resolve returns the decision for a channel: first matching rule, else
// default. It compiles the table's globs first: to resolve many channels,
// the Store keeps them compiled.
func (t *Table) Resolve(c Channel) Decision { return compileTable(*t).resolve(c) }

// Check says what is wrong with a channel asking for its decision, if
// anything: a name or host longer than MaxName or MaxHost bytes, a
// negative pid.
func (c Channel) Check() error {
	switch {
	case c.PID < 0:
		return fmt.Errorf("pid %d: want a number >= 0", c.PID)
	case len(c.Name) > MaxName:
		return fmt.Errorf("channel name of %d bytes; at most %d", len(c.Name), MaxName)
	case len(c.Host) > MaxHost:
		return fmt.Errorf("host of %d bytes; at most %d", len(c.Host), MaxHost)
	}
	return nil
}

// resolver is a table with its globs compiled. It is never changed once
// made: readers share it without a lock.
type resolver struct {
	t     Table
	rules []compiledRule
}

type compiledRule struct {
	name, host *glob // nil: the field is empty and matches anything
}

func compileTable(t Table) *resolver {
	r := &resolver{t: t, rules: make([]compiledRule, len(t.Rules))}
	for i, rule := range t.Rules {
		if rule.Name != "" {
			r.rules[i].name = compileGlob(rule.Name)
		}
		if rule.Host != "" {
			r.rules[i].host = compileGlob(rule.Host)
		}
	}
	return r
}

func (r *resolver) resolve(c Channel) Decision {
	for i, cr := range r.rules {
		rule := &r.t.Rules[i]
		if (cr.name == nil || cr.name.match(c.Name)) && (cr.host == nil || cr.host.match(c.Host)) && (rule.PID == 0 || rule.PID == c.PID) {
			return decision(rule, rule.ID, r.t.Version)
		}
	}
	return decision(&r.t.Default, "default", r.t.Version)
}

// decision copies what the rule gives: the table stays the readers' own.
func decision(r *Rule, id string, version uint64) Decision {
	return Decision{Handler: r.Handler, Format: r.Format, Args: append([]int64{}, r.Args...), DropWhenFull: r.DropWhenFull,
		Rule: id, Version: version}
}
