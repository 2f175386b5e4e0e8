package results

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/parquet-go/parquet-go"
)

// Lanes: a file's columns encoded and compressed on several goroutines at
// once (CreateLanes). Encoding and compressing the pages is nearly all of a
// Writer's work (zstd alone took 70% of it on the durations table), and in
// a row group one column does not depend on another: lane i takes columns
// i, i+n, i+2n, ... of every chunk of rows Write hands over, into a
// parquet.ConcurrentRowGroupWriter the lanes share. When every lane has
// finished a row group's columns, the last one commits it to the file;
// while it does, the lanes go on into a second row group writer, so the
// caller and the lanes wait for a commit only when both writers are full.
// The file holds the rows in Write's order, in row groups of lim.rows rows,
// as a Writer with one lane writes them.
//
// A row group ends at lim.rows rows only: no lane sees all its columns, so
// lim.bytes is not checked (use lanes for tables of narrow rows, as the
// durations). Memory: two row groups (the package comment's bound for one,
// twice) and up to laneQueue chunks of rows copied from Write's.

// laneRows is how many rows a lane takes column by column.
const laneRows = 256

// laneQueue is how many chunks of rows a lane may have waiting.
const laneQueue = 8

// laneSet is a Writer's lanes.
type laneSet[T any] struct {
	w      *Writer[T]
	cols   []colOf // per leaf column of T, where its value is in a row
	lanes  []*lane[T]
	groups [2]*laneGroup // row groups in turn: seq % 2
	free   chan *laneChunk[T]

	curRows int64 // rows handed over for the row group being filled
	seq     int   // that row group, in Write's order

	mu      sync.Mutex
	turn    *sync.Cond // a row group committed, or a failure
	err     error      // the first error of any lane
	wg      sync.WaitGroup
	stopped bool
}

// laneGroup is one of the two row group writers.
type laneGroup struct {
	rg      *parquet.ConcurrentRowGroupWriter
	pending atomic.Int32 // lanes not done with its current row group
	done    int          // the last row group it committed (mu)
}

type lane[T any] struct {
	cols []int // the columns it encodes
	jobs chan laneJob[T]
	vals []parquet.Value
}

// laneJob is a chunk of rows of row group g, or (chunk nil) its end.
type laneJob[T any] struct {
	chunk *laneChunk[T]
	g     *laneGroup
	seq   int
}

// laneChunk is a copy of rows every lane reads; the last one frees it.
type laneChunk[T any] struct {
	rows []T
	refs atomic.Int32
}

// colOf is one column's field in T: its offset and kind.
type colOf struct {
	off  uintptr
	kind reflect.Kind
}

func newLaneSet[T any](w *Writer[T], n int) (*laneSet[T], error) {
	s := &laneSet[T]{w: w, free: make(chan *laneChunk[T], laneQueue+2)}
	s.turn = sync.NewCond(&s.mu)
	schema, err := schemaOf[T]()
	if err != nil {
		return nil, err
	}
	t := reflect.TypeFor[T]()
	byName := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, _ := columnName(f); f.IsExported() && name != "" && f.Tag.Get("parquet") != "-" {
			byName[name] = f
		}
	}
	for _, path := range schema.Columns() {
		f, ok := byName[strings.Join(path, ".")]
		if !ok {
			return nil, fmt.Errorf("column %q has no field in %v", strings.Join(path, "."), t)
		}
		s.cols = append(s.cols, colOf{off: f.Offset, kind: f.Type.Kind()})
	}
	n = min(n, len(s.cols))
	for i := range s.groups {
		s.groups[i] = &laneGroup{rg: w.pw.BeginRowGroup(), done: i - 2}
	}
	for i := range n {
		l := &lane[T]{jobs: make(chan laneJob[T], laneQueue)}
		for c := i; c < len(s.cols); c += n {
			l.cols = append(l.cols, c)
		}
		s.lanes = append(s.lanes, l)
	}
	for _, l := range s.lanes {
		s.wg.Add(1)
		go s.run(l)
	}
	return s, nil
}

// write hands a copy of rows to every lane (the caller may reuse rows).
func (s *laneSet[T]) write(rows []T) error {
	for len(rows) > 0 {
		if s.curRows == 0 && !s.begin() {
			return s.failed()
		}
		n := min(len(rows), chunkRows, int(s.w.lim.rows-s.curRows))
		var c *laneChunk[T]
		select {
		case c = <-s.free:
		default:
			c = &laneChunk[T]{rows: make([]T, 0, chunkRows)}
		}
		c.rows = append(c.rows[:0], rows[:n]...)
		rows = rows[n:]
		c.refs.Store(int32(len(s.lanes)))
		g := s.groups[s.seq%2]
		for _, l := range s.lanes {
			l.jobs <- laneJob[T]{chunk: c, g: g, seq: s.seq}
		}
		s.curRows += int64(n)
		if s.curRows == s.w.lim.rows {
			s.end()
		}
	}
	return s.failed()
}

// begin waits until row group seq's writer has committed the row group two
// before it; false: a lane failed.
func (s *laneSet[T]) begin() bool {
	g := s.groups[s.seq%2]
	s.mu.Lock()
	for g.done != s.seq-2 && s.err == nil {
		s.turn.Wait()
	}
	ok := s.err == nil
	s.mu.Unlock()
	g.pending.Store(int32(len(s.lanes)))
	return ok
}

// end ends the row group being filled.
func (s *laneSet[T]) end() {
	if s.curRows == 0 {
		return
	}
	g := s.groups[s.seq%2]
	for _, l := range s.lanes {
		l.jobs <- laneJob[T]{g: g, seq: s.seq}
	}
	s.curRows = 0
	s.seq++
}

// finish ends the last row group and waits for every lane to commit.
func (s *laneSet[T]) finish() error {
	s.end()
	s.stop()
	return s.failed()
}

// stop ends the lanes (after a failure, what they hold is dropped).
func (s *laneSet[T]) stop() {
	if s.stopped {
		return
	}
	s.stopped = true
	for _, l := range s.lanes {
		close(l.jobs)
	}
	s.wg.Wait()
}

func (s *laneSet[T]) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *laneSet[T]) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.turn.Broadcast()
}

// run is one lane: it encodes its columns of every chunk into the chunk's
// row group, and the last lane done with a row group commits it.
func (s *laneSet[T]) run(l *lane[T]) {
	defer s.wg.Done()
	for job := range l.jobs {
		if s.failed() != nil {
			continue // drained, so that write never blocks
		}
		var err error
		if job.chunk != nil {
			err = s.encode(l, job.g.rg, job.chunk.rows)
			if job.chunk.refs.Add(-1) == 0 {
				select {
				case s.free <- job.chunk:
				default:
				}
			}
		} else {
			err = s.finishGroup(l, job.g, job.seq)
		}
		if err != nil {
			s.fail(err)
		}
	}
}

// finishGroup flushes the lane's columns of row group seq; the last lane
// to do so commits it. Row group seq-1's last lane committed it before it
// took any of seq's chunks, so commits come in order.
func (s *laneSet[T]) finishGroup(l *lane[T], g *laneGroup, seq int) error {
	cws := g.rg.ColumnWriters()
	for _, c := range l.cols {
		if err := cws[c].Flush(); err != nil {
			return err
		}
	}
	if g.pending.Add(-1) != 0 {
		return nil
	}
	if _, err := g.rg.Commit(); err != nil {
		return err
	}
	s.mu.Lock()
	g.done = seq
	s.mu.Unlock()
	s.turn.Broadcast()
	return nil
}

// encode writes the lane's columns of rows into rg.
func (s *laneSet[T]) encode(l *lane[T], rg *parquet.ConcurrentRowGroupWriter, rows []T) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parquet-go: %v", r)
		}
	}()
	cws := rg.ColumnWriters()
	// A few rows at a time, so that each column's pass over them finds
	// them in the cache.
	for len(rows) > 0 {
		n := min(len(rows), laneRows)
		for _, c := range l.cols {
			l.vals = columnValues(l.vals, rows[:n], s.cols[c])
			if _, err := cws[c].WriteRowValues(l.vals); err != nil {
				return err
			}
		}
		rows = rows[n:]
	}
	clear(l.vals) // no strings kept alive
	return nil
}

// columnValues is column col of every row, in vals' array (a loop per kind).
func columnValues[T any](vals []parquet.Value, rows []T, col colOf) []parquet.Value {
	if cap(vals) < len(rows) {
		vals = make([]parquet.Value, len(rows))
	}
	vals = vals[:len(rows)]
	if len(rows) == 0 {
		return vals
	}
	p, size := unsafe.Add(unsafe.Pointer(&rows[0]), col.off), unsafe.Sizeof(rows[0])
	switch col.kind {
	case reflect.Int64:
		for i := range vals {
			vals[i] = parquet.Int64Value(*(*int64)(unsafe.Add(p, uintptr(i)*size)))
		}
	case reflect.Uint64:
		for i := range vals {
			vals[i] = parquet.Int64Value(int64(*(*uint64)(unsafe.Add(p, uintptr(i)*size))))
		}
	case reflect.Int32:
		for i := range vals {
			vals[i] = parquet.Int32Value(*(*int32)(unsafe.Add(p, uintptr(i)*size)))
		}
	case reflect.Float64:
		for i := range vals {
			vals[i] = parquet.DoubleValue(*(*float64)(unsafe.Add(p, uintptr(i)*size)))
		}
	case reflect.Bool:
		for i := range vals {
			vals[i] = parquet.BooleanValue(*(*bool)(unsafe.Add(p, uintptr(i)*size)))
		}
	case reflect.String:
		for i := range vals {
			str := *(*string)(unsafe.Add(p, uintptr(i)*size))
			vals[i] = parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(str), len(str)))
		}
	default:
		panic("results: a column kind checkRowType lets through and columnValues lacks")
	}
	return vals
}

var errAborted = errors.New("aborted")
