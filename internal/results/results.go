// Package results writes the analysis's result tables as Parquet files.
//
// A table is a slice of a row struct; its fields' `parquet` tags name the
// columns, in github.com/parquet-go/parquet-go's tag syntax:
//
//	type Duration struct {
//		TupleID  int64   `parquet:"tuple_id"`
//		Kind     string  `parquet:"kind,dict"`
//		StartTSC uint64  `parquet:"start_tsc"`
//		Cycles   float64 `parquet:"cycles"`
//		Scenario int32   `parquet:"scenario"`
//		Exact    bool    `parquet:"exact"`
//	}
//
// Every exported field needs a tag that names its column (`parquet:"-"`
// leaves a field out), and must be one of these kinds, each a required
// (non-null) column; the encoding is the one used unless the tag says
// otherwise:
//
//	int64    INT64, PLAIN
//	uint64   INT64 with the logical type INTEGER(64, unsigned), PLAIN:
//	         pandas and pyarrow read it as uint64, DuckDB as UBIGINT, so
//	         TSCs at or above 2^63 come back as written
//	int32    INT32, PLAIN
//	float64  DOUBLE, BYTE_STREAM_SPLIT (NaN, ±Inf and -0 kept)
//	string   BYTE_ARRAY with the logical type STRING, DELTA_LENGTH_BYTE_ARRAY
//	bool     BOOLEAN, PLAIN
//
// Options after the name are parquet-go's: `dict` dictionary-encodes a
// column: use it for every string with few distinct values (node, channel,
// kind names), which then costs a few bits a row and can be read as a
// categorical. `delta`, `plain` and `split` choose another encoding;
// `snappy`, `zstd` and `uncompressed` another compression for the column.
// Pages are compressed with zstd (level 3; FastestCompression: its fastest
// level). Floats are BYTE_STREAM_SPLIT
// because on the durations table that was 4% smaller and 1.7 times faster
// to write than PLAIN; pyarrow
// and DuckDB read it (pyarrow 26, DuckDB 2.0 checked).
//
// A file is written to path+".partial" and renamed to path only by a Close
// that succeeded (after an fsync), so a failed or interrupted analysis
// never leaves a file that looks complete; Create removes a file already
// at path, so what is there after a failure is never an earlier run's
// table either. A write that fails removes the .partial at once; its error
// names the file, and says so when the disk is full.
//
// Memory: a Writer holds one row group until it is full (1Mi rows, or
// 64 MiB of compressed pages and values not yet in a page, whichever comes
// first) and written out: for each column the pages compressed so far and
// one page of up to 256 KiB being filled, plus about 1 MB of compressor
// state. Writing the 15-column durations table (37 bytes a row in the
// file), a Writer held at most 52 MB, whatever the number of rows; the
// caller's batches are the caller's. CreateLanes encodes a row group's
// columns on several goroutines at once and holds two row groups and a
// few chunks of rows (lanes.go).
package results

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"
)

// Row groups end at whichever limit comes first.
const (
	rowGroupRows  = 1 << 20
	rowGroupBytes = 64 << 20
	// Write hands rows to the library in chunks of this many, and checks the
	// row group's size after each.
	chunkRows = 4096
)

// limits lets the tests use small row groups; noBounds is NoBounds',
// fastest FastestCompression's.
type limits struct {
	rows     int64
	bytes    int64
	noBounds []string
	fastest  bool
}

// Option changes how Create and CreateLanes write a file.
type Option func(*limits)

// NoBounds leaves the min and max of the named top-level columns out of
// the file: out of their pages' statistics and their row groups'. For a
// dictionary column of a few strings whose bounds no reader filters by,
// that is most of its cost: parquet-go looks up and compares every value
// of every page to find them (with the other page statistics, a fifth of
// the export's CPU for its two channel columns).
func NoBounds(columns ...string) Option {
	return func(l *limits) { l.noBounds = append(l.noBounds, columns...) }
}

// FastestCompression compresses the pages with zstd's fastest level
// instead of its default: for a file another stage reads once (an
// export's partitions), where the writer's time counts more than the
// file's bytes.
func FastestCompression() Option {
	return func(l *limits) { l.fastest = true }
}

func (l limits) with(opts []Option) limits {
	l.noBounds = slices.Clone(l.noBounds)
	for _, o := range opts {
		o(&l)
	}
	return l
}

var defaultLimits = limits{rows: rowGroupRows, bytes: rowGroupBytes}

// Writer writes one Parquet file of rows of type T. It is not safe for
// use by several goroutines at once.
type Writer[T any] struct {
	path, partial string
	f             file
	out           *countingWriter
	pw            *parquet.GenericWriter[T]
	lim           limits
	err           error // the first error; every later call returns it
	closed        bool  // the file is closed: nothing more is written
	aborted       bool
	lanes         *laneSet[T] // nil: row groups are encoded in Write (lanes.go)
}

// file is what a Writer needs of its *os.File (tests replace it).
type file interface {
	io.Writer
	Sync() error
	Close() error
}

// openFile creates the .partial file (tests replace it).
var openFile = func(name string) (file, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

// Create starts writing a Parquet file of rows of type T at path. It writes
// to path+".partial" and only Close renames it to path, so a failed or
// interrupted analysis never leaves a file that looks complete.
func Create[T any](path string, opts ...Option) (*Writer[T], error) {
	return create[T](path, defaultLimits.with(opts))
}

// CreateLanes is Create with row groups encoded and compressed on lanes
// goroutines at once (lanes.go): the same rows in the same order, written
// about lanes times as fast when the cores are free, for a row group's
// memory per lane. Write then returns before its rows are encoded; an
// error of a lane comes back from a later Write or from Close.
func CreateLanes[T any](path string, lanes int, opts ...Option) (*Writer[T], error) {
	return createLanes[T](path, defaultLimits.with(opts), lanes)
}

func create[T any](path string, lim limits) (*Writer[T], error) {
	return createLanes[T](path, lim, 1)
}

// createLanes makes the Writer, its compressor ready for lanes pages at
// once, and its lanes when more than one.
func createLanes[T any](path string, lim limits, lanes int) (*Writer[T], error) {
	if err := checkRowType[T](); err != nil {
		return nil, fmt.Errorf("results: writing %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("results: writing %s: removing the old file: %w", path, err)
	}
	partial := path + ".partial"
	f, err := openFile(partial)
	if err != nil {
		return nil, fmt.Errorf("results: writing %s: %w", path, describe(err))
	}
	w := &Writer[T]{path: path, partial: partial, f: f, out: &countingWriter{w: f}, lim: lim}
	w.pw, err = newParquetWriter[T](w.out, lim, lanes)
	if err == nil && lanes > 1 {
		w.lanes, err = newLaneSet(w, lanes)
	}
	if err != nil {
		w.fail(err)
		return nil, w.err
	}
	return w, nil
}

func newParquetWriter[T any](out io.Writer, lim limits, lanes int) (pw *parquet.GenericWriter[T], err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parquet-go: %v", r)
		}
	}()
	level := zstd.SpeedDefault
	if lim.fastest {
		level = zstd.SpeedFastest
	}
	opts := []parquet.WriterOption{
		parquet.Compression(newZstdLevel(lanes, level)),
		parquet.DefaultEncodingFor(parquet.Double, &parquet.ByteStreamSplit),
		parquet.MaxRowsPerRowGroup(lim.rows),
	}
	for _, c := range lim.noBounds {
		opts = append(opts, parquet.SkipPageBounds(c), parquet.SkipPageStatistics(c))
	}
	return parquet.NewGenericWriter[T](out, opts...), nil
}

// Write appends rows. It may be called many times with batches of any
// size; a row group is written out whenever it is full.
func (w *Writer[T]) Write(rows []T) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return w.closedError()
	}
	if w.lanes != nil {
		if err := w.lanes.write(rows); err != nil {
			return w.fail(err)
		}
		return nil
	}
	for len(rows) > 0 {
		n := min(len(rows), chunkRows)
		if _, err := w.pw.Write(rows[:n]); err != nil {
			return w.fail(err)
		}
		rows = rows[n:]
		// Size is the bytes written out plus the row group held (its pages
		// compressed, the page being filled not yet).
		if w.pw.Size()-w.out.n >= w.lim.bytes {
			if err := w.pw.Flush(); err != nil {
				return w.fail(err)
			}
		}
	}
	return nil
}

// Close writes what is left and the footer, closes the file and renames it
// from path+".partial" to path. On any error it removes the .partial and
// returns the error; calling it again returns the same error.
func (w *Writer[T]) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.aborted {
		return w.closedError()
	}
	if w.closed {
		return nil
	}
	if w.lanes != nil {
		if err := w.lanes.finish(); err != nil {
			return w.fail(err)
		}
	}
	if err := w.pw.Close(); err != nil {
		return w.fail(err)
	}
	// Sync, so that after a crash the file at path is whole or missing.
	if err := w.f.Sync(); err != nil {
		return w.fail(err)
	}
	w.closed = true
	if err := w.f.Close(); err != nil {
		return w.fail(err)
	}
	if err := os.Rename(w.partial, w.path); err != nil {
		return w.fail(err)
	}
	return nil
}

// Abort removes the .partial file, if Close has not renamed it. It is safe
// to call more than once and after Close, so `defer w.Abort()` after Create
// cleans up every way out of the caller.
func (w *Writer[T]) Abort() {
	if w.closed || w.err != nil {
		return
	}
	w.closed, w.aborted = true, true
	if w.lanes != nil {
		w.lanes.fail(errAborted)
		w.lanes.stop()
	}
	w.f.Close()
	os.Remove(w.partial)
}

func (w *Writer[T]) closedError() error {
	if w.aborted {
		return fmt.Errorf("results: writing %s: the writer was aborted", w.path)
	}
	return fmt.Errorf("results: writing %s: the writer is closed", w.path)
}

// fail records the first error, removes the .partial file and returns the
// error, naming path.
func (w *Writer[T]) fail(err error) error {
	if w.err == nil {
		w.err = fmt.Errorf("results: writing %s: %w", w.path, describe(err))
	}
	if w.lanes != nil { // no lane writes to the file once it is closed
		w.lanes.fail(err)
		w.lanes.stop()
	}
	if !w.closed {
		w.closed = true
		w.f.Close()
	}
	os.Remove(w.partial)
	return w.err
}

// describe says in words what a full disk is; other errors are left as
// they are.
func describe(err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("the disk is full: %w", err)
	case errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("the disk quota is used up: %w", err)
	}
	return err
}

// countingWriter counts the bytes written out, so that the bytes a
// row group holds are the writer's Size less these.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ReadAll reads every row of the Parquet file at path. Each column of T
// must be in the file with the same type (a column of the file that T
// lacks is skipped), so that a test never compares zeros that were not
// read. It is meant for tests and small tables: it holds all rows.
func ReadAll[T any](path string) ([]T, error) {
	fail := func(err error) ([]T, error) { return nil, fmt.Errorf("results: reading %s: %w", path, err) }
	if err := checkRowType[T](); err != nil {
		return fail(err)
	}
	want, err := schemaOf[T]()
	if err != nil {
		return fail(err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return fail(err)
	}
	for _, col := range want.Columns() {
		name := strings.Join(col, ".")
		w, _ := want.Lookup(col...)
		got, ok := pf.Schema().Lookup(col...)
		if !ok {
			return fail(fmt.Errorf("column %q is not in the file", name))
		}
		if g, t := typeName(got.Node), typeName(w.Node); g != t {
			return fail(fmt.Errorf("column %q is %s in the file, %s in %T", name, g, t, *new(T)))
		}
	}
	rows := make([]T, pf.NumRows())
	r := parquet.NewGenericReader[T](pf)
	defer r.Close()
	n := 0
	for n < len(rows) {
		k, err := r.Read(rows[n:])
		n += k
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
	}
	if n != len(rows) {
		return fail(fmt.Errorf("read %d of its %d rows", n, len(rows)))
	}
	return rows, nil
}

func typeName(n parquet.Node) string {
	s := n.Type().String()
	if n.Optional() {
		s = "optional " + s
	}
	if n.Repeated() {
		s = "repeated " + s
	}
	return s
}

func schemaOf[T any]() (s *parquet.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("parquet-go: %v", r)
		}
	}()
	return parquet.SchemaOf(new(T)), nil
}

// columnName is the column a field's tag names (before its options), and
// whether it has a tag; a tag of "-" leaves the field out.
func columnName(f reflect.StructField) (string, bool) {
	tag, ok := f.Tag.Lookup("parquet")
	name, _, _ := strings.Cut(tag, ",")
	return name, ok
}

// checkRowType says what is wrong with T as a row type, if anything: it
// must be a struct whose exported fields are each tagged with a column name
// (or "-") and of a kind the package comment lists. The library's own
// checks of the tags' options run when the schema is made.
func checkRowType[T any]() error {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("the row type %v is not a struct", t)
	}
	cols := 0
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Tag.Get("parquet") == "-" {
			continue
		}
		name, ok := columnName(f)
		if !ok || name == "" {
			return fmt.Errorf("%v.%s has no column name: tag it `parquet:\"name\"` (or `parquet:\"-\"` to leave it out)", t, f.Name)
		}
		switch f.Type.Kind() {
		case reflect.Int64, reflect.Uint64, reflect.Int32, reflect.Float64, reflect.String, reflect.Bool:
		default:
			return fmt.Errorf("%v.%s (column %q) is a %v: columns are int64, uint64, int32, float64, string or bool", t, f.Name, name, f.Type)
		}
		cols++
	}
	if cols == 0 {
		return fmt.Errorf("the row type %v has no columns", t)
	}
	if _, err := schemaOf[T](); err != nil {
		return fmt.Errorf("the row type %v: %w", t, err)
	}
	return nil
}

// zstdCodec compresses pages with zstd at its default level (3) like
// parquet-go's own codec, but with a 1 MiB window instead of 8 MiB: pages
// are at most a few hundred KiB, and the larger window only held 32 MB more
// of history per writer. It decodes with parquet-go's codec.
type zstdCodec struct {
	enc *zstd.Encoder
	pqzstd.Codec
}

// newZstdLevel compresses at level up to lanes pages at once (one encoder
// each).
func newZstdLevel(lanes int, level zstd.EncoderLevel) *zstdCodec {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(max(lanes, 1)),
		zstd.WithWindowSize(1<<20), zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false))
	if err != nil {
		panic(err) // only for invalid options
	}
	return &zstdCodec{enc: enc}
}

func (c *zstdCodec) Encode(dst, src []byte) ([]byte, error) {
	return c.enc.EncodeAll(src, dst[:0]), nil
}
