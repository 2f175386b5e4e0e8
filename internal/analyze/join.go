package analyze

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// event is one tuple record of one channel, on its way to the join.
type event struct {
	id  int64
	tsc uint64
	ch  uint32  // index into the analysis's channels
	est float64 // reference TSC estimate (relative to the model's origin)
	err float64 // and its bound
}

const eventDiskSize = 20 // id, tsc, ch: little-endian on the spill files

// joiner groups events by tuple id in bounded memory. Events are kept in
// memory up to a budget; past it they are spilled to partition files by a
// hash of the tuple id, and each partition is later grouped on its own, so a
// tuple's events always meet in one partition.
type joiner struct {
	dir     string // spill directory (created on the first spill)
	budget  int    // events kept in memory before spilling
	mem     []event
	parts   []*os.File
	writers []*bufio.Writer
	spilled uint64
	buf     [eventDiskSize]byte
}

const numPartitions = 64

func newJoiner(dir string, budget int) *joiner {
	if budget < 1024 {
		budget = 1024
	}
	return &joiner{dir: dir, budget: budget}
}

func partitionOf(id int64) int {
	x := uint64(id) * 0x9E3779B97F4A7C15 // Fibonacci hashing: sequential ids spread evenly
	return int(x >> (64 - 6))
}

func (j *joiner) add(e event) error {
	if j.parts == nil {
		j.mem = append(j.mem, e)
		if len(j.mem) < j.budget {
			return nil
		}
		if err := j.openParts(); err != nil {
			return err
		}
		for _, m := range j.mem {
			if err := j.spill(m); err != nil {
				return err
			}
		}
		j.mem = nil
		return nil
	}
	return j.spill(e)
}

func (j *joiner) openParts() error {
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return fmt.Errorf("spill directory: %w", err)
	}
	for i := 0; i < numPartitions; i++ {
		f, err := os.Create(filepath.Join(j.dir, fmt.Sprintf("part-%02d", i)))
		if err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		j.parts = append(j.parts, f)
		j.writers = append(j.writers, bufio.NewWriterSize(f, 64<<10))
	}
	return nil
}

func (j *joiner) spill(e event) error {
	binary.LittleEndian.PutUint64(j.buf[0:], uint64(e.id))
	binary.LittleEndian.PutUint64(j.buf[8:], e.tsc)
	binary.LittleEndian.PutUint32(j.buf[16:], e.ch)
	j.spilled++
	if _, err := j.writers[partitionOf(e.id)].Write(j.buf[:]); err != nil {
		return fmt.Errorf("spill: %w", err)
	}
	return nil
}

// each calls fn with the events of every partition, sorted by tuple id and
// then by est (which fill computes first, per partition). It may be called
// again; close removes the spill files.
func (j *joiner) each(fill func([]event), fn func([]event) error) error {
	sortEv := func(evs []event) {
		fill(evs)
		slices.SortFunc(evs, func(a, b event) int {
			if a.id != b.id {
				if a.id < b.id {
					return -1
				}
				return 1
			}
			switch {
			case a.est < b.est:
				return -1
			case a.est > b.est:
				return 1
			}
			return int(a.ch) - int(b.ch)
		})
	}
	if j.parts == nil {
		sortEv(j.mem)
		return fn(j.mem)
	}
	var evs []event
	for i, f := range j.parts {
		if err := j.writers[i].Flush(); err != nil {
			return fmt.Errorf("spill: %w", err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		evs = evs[:0]
		r := bufio.NewReaderSize(f, 256<<10)
		var b [eventDiskSize]byte
		for {
			if _, err := io.ReadFull(r, b[:]); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("spill %s: %w", f.Name(), err)
			}
			evs = append(evs, event{id: int64(binary.LittleEndian.Uint64(b[0:])),
				tsc: binary.LittleEndian.Uint64(b[8:]), ch: binary.LittleEndian.Uint32(b[16:])})
		}
		sortEv(evs)
		if err := fn(evs); err != nil {
			return err
		}
	}
	return nil
}

func (j *joiner) close() {
	for _, f := range j.parts {
		f.Close()
		os.Remove(f.Name())
	}
	os.Remove(j.dir)
}
