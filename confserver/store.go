package confserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Store holds the table, writes every change to its file atomically (a crash
// mid-write leaves the old file or the new one, never a broken one), and
// wakes watchers.
//
// Readers never wait for a writer's work: the table in force is an
// immutable value (with its globs compiled) that mu only guards the swap
// of; an update validates, compiles and writes the file under writeMu
// alone, then swaps.
type Store struct {
	writeMu sync.Mutex // one update at a time
	mu      sync.Mutex // guards cur and changed, held for no more than reading or swapping them
	path    string
	cur     *resolver
	changed chan struct{} // closed and replaced on every change
}

// Open loads the table from path. A missing file starts an empty table (all
// channels get the default, NULLH) and is created.
func Open(path string) (*Store, error) {
	s := &Store{path: path, changed: make(chan struct{})}
	// A server killed between writing the next table and renaming it over
	// the file left it behind: that write was never acknowledged.
	if st, err := os.Lstat(tmpPath(path)); err == nil && (st.Mode().IsRegular() || st.Mode()&fs.ModeSymlink != 0) {
		if err := os.Remove(tmpPath(path)); err != nil {
			return nil, fmt.Errorf("removing what an earlier server left: %w", err)
		}
	}
	var t Table
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		t = Table{Version: 1, Rules: []Rule{}, Default: Rule{Handler: "NULLH"}}
		if err := t.Validate(); err != nil {
			return nil, err
		}
		s.cur = compileTable(t)
		return s, writeAtomic(path, t)
	case err != nil:
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if t.Rules == nil {
		t.Rules = []Rule{}
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if t.Version == 0 {
		t.Version = 1
	}
	s.cur = compileTable(t)
	return s, nil
}

// current is the table in force and the channel closed at its next change.
func (s *Store) current() (*resolver, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.changed
}

// Snapshot returns a copy of the table and a channel closed at its next change.
func (s *Store) Snapshot() (Table, <-chan struct{}) {
	r, ch := s.current()
	return r.t.clone(), ch
}

// Resolve answers for one channel.
func (s *Store) Resolve(c Channel) Decision {
	r, _ := s.current()
	return r.resolve(c)
}

// ResolveMany answers for each channel, all from one version of the table.
func (s *Store) ResolveMany(cs []Channel) []Decision {
	r, _ := s.current()
	out := make([]Decision, len(cs))
	for i, c := range cs {
		out[i] = r.resolve(c)
	}
	return out
}

// Update applies change to a copy of the table; if the result is valid and
// written to disk, it becomes the table, with the next version. Readers go
// on with the table before it meanwhile.
func (s *Store) Update(change func(t *Table) error) (Table, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	old, _ := s.current()
	t := old.t.clone()
	if err := change(&t); err != nil {
		return old.t.clone(), err
	}
	if err := t.Validate(); err != nil {
		return old.t.clone(), err
	}
	t.Version = old.t.Version + 1
	if err := writeAtomic(s.path, t); err != nil {
		return old.t.clone(), fmt.Errorf("writing %s: %w", s.path, err)
	}
	r := compileTable(t.clone())
	s.mu.Lock()
	s.cur = r
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return t, nil
}

func (t Table) clone() Table {
	c := t
	c.Rules = make([]Rule, len(t.Rules))
	for i, r := range t.Rules {
		r.Args = append([]int64(nil), r.Args...)
		c.Rules[i] = r
	}
	c.Default.Args = append([]int64(nil), t.Default.Args...)
	return c
}

// tmpPath is where the next table is written before it is renamed over
// path: one fixed name (updates are one at a time, one server per file),
// so a server killed mid-write leaves at most one file, which the next
// Open removes.
func tmpPath(path string) string {
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
}

// writeAtomic writes the table next to path, syncs it, and renames it over
// path, then syncs the directory. The temporary file is never followed
// through a symlink (O_NOFOLLOW): no file of someone else's is written.
func writeAtomic(path string, t Table) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp := tmpPath(path)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm() // keep what the operator set
	}
	err = f.Chmod(mode)
	if err == nil {
		_, err = f.Write(append(b, '\n'))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
