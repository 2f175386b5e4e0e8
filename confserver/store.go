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
)

// Store holds the table, writes every change to its file atomically (a crash
// mid-write leaves the old file or the new one, never a broken one), and
// wakes watchers.
type Store struct {
	mu      sync.Mutex
	path    string
	table   Table
	changed chan struct{} // closed and replaced on every change
}

// Open loads the table from path. A missing file starts an empty table (all
// channels get the default, NULLH) and is created.
func Open(path string) (*Store, error) {
	s := &Store{path: path, changed: make(chan struct{})}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.table = Table{Version: 1, Rules: []Rule{}, Default: Rule{Handler: "NULLH"}}
		if err := s.table.Validate(); err != nil {
			return nil, err
		}
		return s, writeAtomic(path, s.table)
	case err != nil:
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s.table); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if s.table.Rules == nil {
		s.table.Rules = []Rule{}
	}
	if err := s.table.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if s.table.Version == 0 {
		s.table.Version = 1
	}
	return s, nil
}

// Snapshot returns a copy of the table and a channel closed at its next change.
func (s *Store) Snapshot() (Table, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.clone(), s.changed
}

// Resolve answers for one channel.
func (s *Store) Resolve(c Channel) Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.Resolve(c)
}

// Update applies change to a copy of the table; if the result is valid and
// written to disk, it becomes the table, with the next version.
func (s *Store) Update(change func(t *Table) error) (Table, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.table.clone()
	if err := change(&t); err != nil {
		return s.table.clone(), err
	}
	if err := t.Validate(); err != nil {
		return s.table.clone(), err
	}
	t.Version = s.table.Version + 1
	if err := writeAtomic(s.path, t); err != nil {
		return s.table.clone(), fmt.Errorf("writing %s: %w", s.path, err)
	}
	s.table = t
	close(s.changed)
	s.changed = make(chan struct{})
	return t.clone(), nil
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

// writeAtomic writes the table next to path, syncs it, and renames it over
// path, then syncs the directory.
func writeAtomic(path string, t Table) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
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
