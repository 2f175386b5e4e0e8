package results

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// every has a column of each kind the package writes.
type every struct {
	I64  int64   `parquet:"i64"`
	U64  uint64  `parquet:"u64"`
	I32  int32   `parquet:"i32"`
	F64  float64 `parquet:"f64"`
	Name string  `parquet:"name,dict"`
	Text string  `parquet:"text"`
	B    bool    `parquet:"b"`
	skip int     // unexported: not a column
	Skip []byte  `parquet:"-"`
}

func everyRows() []every {
	u := []uint64{0, 1, 1 << 63, 1<<63 + 12345, math.MaxUint64 - 1, math.MaxUint64, 70_000_000_123}
	i := []int64{0, -1, math.MinInt64, math.MaxInt64, 42}
	i32 := []int32{0, math.MinInt32, math.MaxInt32, 3}
	f := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64,
		math.SmallestNonzeroFloat64, 1.0 / 3, -123456.789e-300}
	s := []string{"", "a out", "a,b", `say "hi"`, "'single'", "µs ± → 日本語 🚀", "line\nbreak\r\n", "tab\there", "nul\x00byte", strings.Repeat("x", 5000)}
	var rows []every
	for k := 0; k < 3000; k++ {
		rows = append(rows, every{
			I64:  i[k%len(i)],
			U64:  u[k%len(u)],
			I32:  i32[k%len(i32)],
			F64:  f[k%len(f)],
			Name: s[k%len(s)],
			Text: s[(k/3)%len(s)],
			B:    k%3 == 0,
		})
	}
	return rows
}

// requireSameRows compares rows field by field, floats by their bits (NaN
// equals NaN, -0 differs from 0).
func requireSameRows(t *testing.T, want, got []every) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for k := range want {
		w, g := want[k], got[k]
		require.Equal(t, math.Float64bits(w.F64), math.Float64bits(g.F64), "row %d: f64 %v, read %v", k, w.F64, g.F64)
		w.F64, g.F64 = 0, 0
		w.skip, w.Skip = 0, nil
		require.Equal(t, w, g, "row %d", k)
	}
}

func openParquet(t *testing.T, path string) *parquet.File {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	require.NoError(t, err)
	pf, err := parquet.OpenFile(f, st.Size())
	require.NoError(t, err)
	return pf
}

// requireOnly says the directory holds exactly these names.
func requireOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if names == nil {
		names = []string{}
	}
	if got == nil {
		got = []string{}
	}
	require.ElementsMatch(t, names, got)
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "every.parquet")
	rows := everyRows()
	w, err := Create[every](path)
	require.NoError(t, err)
	defer w.Abort()
	requireOnly(t, dir, "every.parquet.partial")
	// Batches of uneven sizes, one empty.
	for _, b := range [][2]int{{0, 1}, {1, 1}, {1, 1000}, {1000, 2999}, {2999, 3000}} {
		require.NoError(t, w.Write(rows[b[0]:b[1]]))
	}
	require.NoError(t, w.Close())
	requireOnly(t, dir, "every.parquet")
	require.NoError(t, w.Close(), "a second Close changes nothing")
	w.Abort() // after Close: keeps the file
	requireOnly(t, dir, "every.parquet")

	got, err := ReadAll[every](path)
	require.NoError(t, err)
	requireSameRows(t, rows, got)

	// The types and encodings other readers see.
	pf := openParquet(t, path)
	want := map[string]string{"i64": "INT(64,true)", "u64": "INT(64,false)", "i32": "INT(32,true)",
		"f64": "DOUBLE", "name": "STRING", "text": "STRING", "b": "BOOLEAN"}
	var cols []string
	for _, f := range pf.Schema().Fields() {
		cols = append(cols, f.Name())
		require.Equal(t, want[f.Name()], f.Type().String(), f.Name())
		require.True(t, f.Required(), f.Name())
	}
	require.Equal(t, []string{"i64", "u64", "i32", "f64", "name", "text", "b"}, cols)
	md := pf.Metadata()
	require.Len(t, md.RowGroups, 1)
	for _, c := range md.RowGroups[0].Columns {
		name := c.MetaData.PathInSchema[0]
		require.Equal(t, format.Zstd, c.MetaData.Codec, name)
		switch name {
		case "name":
			require.Contains(t, c.MetaData.Encoding, format.RLEDictionary, name)
		case "f64":
			require.Contains(t, c.MetaData.Encoding, format.ByteStreamSplit, name)
		}
	}
}

// NoBounds leaves the named columns' min and max out of the row groups
// and the page index, and only theirs; the rows read back the same.
func TestNoBounds(t *testing.T) {
	rows := everyRows()
	for _, skip := range [][]string{nil, {"name"}, {"name", "text"}} {
		path := filepath.Join(t.TempDir(), "every.parquet")
		w, err := Create[every](path, NoBounds(skip...))
		require.NoError(t, err)
		defer w.Abort()
		require.NoError(t, w.Write(rows))
		require.NoError(t, w.Close())
		got, err := ReadAll[every](path)
		require.NoError(t, err)
		requireSameRows(t, rows, got)
		pf := openParquet(t, path)
		for i, c := range pf.Metadata().RowGroups[0].Columns {
			name := c.MetaData.PathInSchema[0]
			st := c.MetaData.Statistics
			ix, err := pf.RowGroups()[0].ColumnChunks()[i].ColumnIndex()
			require.NoError(t, err, name)
			if slices.Contains(skip, name) {
				require.Empty(t, st.MinValue, name)
				require.Empty(t, st.MaxValue, name)
				require.Empty(t, ix.MaxValue(0).Bytes(), name)
			} else if name != "b" {
				require.NotEmpty(t, st.MaxValue, name)
				require.NotEmpty(t, ix.MaxValue(0).Bytes(), name)
			}
		}
	}
}

// FastestCompression writes the same rows, zstd at its fastest level:
// read back as written, and a compressible column's pages larger than at
// the default level (the level was applied).
func TestFastestCompression(t *testing.T) {
	rows := make([]deltaRow, 200_000)
	for i := range rows {
		rows[i] = deltaRow{I: int64(i % 1000 * i), U: uint64(i*i) % 7919}
	}
	size := func(opts ...Option) int64 {
		path := filepath.Join(t.TempDir(), "rows.parquet")
		w, err := Create[deltaRow](path, opts...)
		require.NoError(t, err)
		defer w.Abort()
		require.NoError(t, w.Write(rows))
		require.NoError(t, w.Close())
		got, err := ReadAll[deltaRow](path)
		require.NoError(t, err)
		require.Equal(t, rows, got)
		st, err := os.Stat(path)
		require.NoError(t, err)
		return st.Size()
	}
	def, fast := size(), size(FastestCompression())
	t.Logf("%d bytes at zstd's default level, %d at its fastest", def, fast)
	require.Greater(t, fast, def)
}

// Row groups end at the row limit and at the byte limit, whatever the
// batches; the rows come back in order.
func TestRowGroups(t *testing.T) {
	rows := everyRows()
	t.Run("rows", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "rows.parquet")
		w, err := create[every](path, limits{rows: 1000, bytes: 1 << 40})
		require.NoError(t, err)
		defer w.Abort()
		var all []every
		for _, n := range []int{1, 998, 2, 1500, 7, 3000, 2000, 492} {
			b := rows[:n]
			all = append(all, b...)
			require.NoError(t, w.Write(b))
		}
		require.NoError(t, w.Close())
		got, err := ReadAll[every](path)
		require.NoError(t, err)
		requireSameRows(t, all, got)
		md := openParquet(t, path).Metadata()
		require.Len(t, md.RowGroups, 8) // 8000 rows
		for _, rg := range md.RowGroups {
			require.EqualValues(t, 1000, rg.NumRows)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bytes.parquet")
		const limit = 256 << 10
		w, err := create[durationRow](path, limits{rows: 1 << 20, bytes: limit})
		require.NoError(t, err)
		defer w.Abort()
		g := newDurationGen()
		batch := make([]durationRow, 10000)
		var all []durationRow
		for range 20 {
			g.fill(batch)
			all = append(all, batch...)
			require.NoError(t, w.Write(batch))
		}
		require.NoError(t, w.Close())
		got, err := ReadAll[durationRow](path)
		require.NoError(t, err)
		require.Equal(t, all, got) // no NaN here
		md := openParquet(t, path).Metadata()
		require.Greater(t, len(md.RowGroups), 5)
		for i, rg := range md.RowGroups[:len(md.RowGroups)-1] {
			// Checked after each chunk of rows: past the limit by at most
			// one chunk (about 37 bytes a row).
			require.Less(t, rg.TotalCompressedSize, int64(limit+chunkRows*60), "row group %d", i)
			require.Greater(t, rg.TotalCompressedSize, int64(limit/2), "row group %d", i)
		}
	})
	t.Run("default", func(t *testing.T) {
		type id struct {
			ID int64 `parquet:"id,delta"`
		}
		path := filepath.Join(t.TempDir(), "default.parquet")
		w, err := Create[id](path)
		require.NoError(t, err)
		defer w.Abort()
		rows := make([]id, 100_000)
		n := 0
		for n < rowGroupRows+5 {
			b := rows[:min(len(rows), rowGroupRows+5-n)]
			for k := range b {
				b[k].ID = int64(n + k)
			}
			require.NoError(t, w.Write(b))
			n += len(b)
		}
		require.NoError(t, w.Close())
		md := openParquet(t, path).Metadata()
		require.Len(t, md.RowGroups, 2)
		require.EqualValues(t, rowGroupRows, md.RowGroups[0].NumRows)
		require.EqualValues(t, 5, md.RowGroups[1].NumRows)
		got, err := ReadAll[id](path)
		require.NoError(t, err)
		require.Len(t, got, rowGroupRows+5)
		for k, r := range got {
			if r.ID != int64(k) {
				require.Equal(t, int64(k), r.ID)
			}
		}
	})
}

// No rows: a valid file with the schema and no row groups.
func TestZeroRows(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "empty.parquet")
	w, err := Create[every](path)
	require.NoError(t, err)
	require.NoError(t, w.Write(nil))
	require.NoError(t, w.Close())
	requireOnly(t, dir, "empty.parquet")
	pf := openParquet(t, path)
	require.EqualValues(t, 0, pf.NumRows())
	require.Len(t, pf.Schema().Fields(), 7)
	require.Equal(t, "INT(64,false)", pf.Schema().Fields()[1].Type().String())
	got, err := ReadAll[every](path)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.parquet")
	require.NoError(t, os.WriteFile(path, []byte("an earlier run's table"), 0o644))
	w, err := Create[every](path)
	require.NoError(t, err)
	requireOnly(t, dir, "t.parquet.partial") // the earlier table is gone
	require.NoError(t, w.Write(everyRows()))
	w.Abort()
	requireOnly(t, dir)
	w.Abort()
	requireOnly(t, dir)
	require.ErrorContains(t, w.Write(everyRows()), "aborted")
	require.ErrorContains(t, w.Close(), "aborted")
	requireOnly(t, dir)
}

// Row types the package does not write are refused by Create, naming the
// field, before any file is made.
func TestBadRowTypes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.parquet")
	type noTag struct {
		A int64 `parquet:"a"`
		B int64
	}
	type emptyName struct {
		A int64 `parquet:",dict"`
	}
	type wrongKind struct {
		A int `parquet:"a"`
	}
	type nested struct {
		A struct{ B int64 } `parquet:"a"`
	}
	type badOption struct {
		A float64 `parquet:"a,delta"`
	}
	type none struct{ a int64 }
	_, err := Create[noTag](p)
	require.ErrorContains(t, err, "noTag.B has no column name")
	_, err = Create[emptyName](p)
	require.ErrorContains(t, err, "emptyName.A has no column name")
	_, err = Create[wrongKind](p)
	require.ErrorContains(t, err, `wrongKind.A (column "a") is a int: columns are int64, uint64, int32, float64, string or bool`)
	_, err = Create[nested](p)
	require.ErrorContains(t, err, `nested.A (column "a") is a struct`)
	_, err = Create[badOption](p)
	require.ErrorContains(t, err, "delta")
	_, err = Create[none](p)
	require.ErrorContains(t, err, "has no columns")
	_, err = Create[int64](p)
	require.ErrorContains(t, err, "not a struct")
	require.ErrorContains(t, err, p)
	requireOnly(t, dir)
}

// ReadAll refuses a row type whose columns the file does not have as such.
func TestReadAllChecksColumns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "every.parquet")
	w, err := Create[every](path)
	require.NoError(t, err)
	require.NoError(t, w.Write(everyRows()))
	require.NoError(t, w.Close())

	type subset struct {
		U64 uint64 `parquet:"u64"`
		B   bool   `parquet:"b"`
	}
	got, err := ReadAll[subset](path)
	require.NoError(t, err)
	require.Len(t, got, 3000)
	require.Equal(t, subset{U64: 0, B: true}, got[0])
	require.Equal(t, subset{U64: 1<<63 + 12345, B: true}, got[3])

	type missing struct {
		Other int64 `parquet:"other"`
	}
	_, err = ReadAll[missing](path)
	require.ErrorContains(t, err, `column "other" is not in the file`)
	require.ErrorContains(t, err, path)

	type signed struct {
		U64 int64 `parquet:"u64"`
	}
	_, err = ReadAll[signed](path)
	require.ErrorContains(t, err, `column "u64" is INT(64,false) in the file, INT(64,true) in results.signed`)

	_, err = ReadAll[every](path + ".nothere")
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A full disk, on a 1 MiB tmpfs: the error names the file and says the
// disk is full, and neither the file nor its .partial is left.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v); TestFullDiskInjected covers the same without one", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	g := newDurationGen()
	batch := make([]durationRow, 50_000) // about 1.9 MB once written

	t.Run("at Close", func(t *testing.T) {
		// One row group, held until Close: Close finds the disk full.
		path := filepath.Join(dir, "durations.parquet")
		w, err := Create[durationRow](path)
		require.NoError(t, err)
		defer w.Abort()
		g.fill(batch)
		require.NoError(t, w.Write(batch))
		err = w.Close()
		requireFull(t, err, path)
		requireOnly(t, dir)
		require.Equal(t, err, w.Close(), "Close again: the same error")
		w.Abort()
		requireOnly(t, dir)
	})
	t.Run("at Write", func(t *testing.T) {
		// Small row groups: a Write that ends one finds the disk full.
		path := filepath.Join(dir, "durations.parquet")
		w, err := create[durationRow](path, limits{rows: 10_000, bytes: 64 << 20})
		require.NoError(t, err)
		defer w.Abort()
		for k := 0; ; k++ {
			require.Less(t, k, 10, "the disk never filled")
			g.fill(batch)
			if err = w.Write(batch); err != nil {
				break
			}
		}
		requireFull(t, err, path)
		requireOnly(t, dir) // removed at once, before Close or Abort
		require.Equal(t, err, w.Write(batch))
		require.Equal(t, err, w.Close())
		requireOnly(t, dir)
	})
	// The disk is empty again: a small table fits.
	path := filepath.Join(dir, "small.parquet")
	w, err := Create[every](path)
	require.NoError(t, err)
	require.NoError(t, w.Write(everyRows()[:100]))
	require.NoError(t, w.Close())
	requireOnly(t, dir, "small.parquet")
	require.NoError(t, os.Remove(path))
}

func requireFull(t *testing.T, err error, path string) {
	t.Helper()
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.ErrorContains(t, err, "results: writing "+path+": the disk is full: ")
	require.ErrorContains(t, err, "no space left on device")
}

// fullFile fails every write with ENOSPC once it has taken room bytes, as
// a file on a full disk does (the rest of the file is real).
type fullFile struct {
	*os.File
	room int
}

func (f *fullFile) Write(p []byte) (int, error) {
	if len(p) <= f.room {
		f.room -= len(p)
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:f.room])
	f.room = 0
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

// openFull opens files as open does, each full once it has taken room
// bytes.
func openFull(open func(string) (file, error), room int) func(string) (file, error) {
	return func(name string) (file, error) {
		f, err := open(name)
		if err != nil {
			return nil, err
		}
		return &fullFile{File: f.(*os.File), room: room}, nil
	}
}

// The same as TestFullDisk without a tmpfs: the disk fills at the first
// row group's write, at the footer's, and at the last byte.
func TestFullDiskInjected(t *testing.T) {
	rows := everyRows()
	good := filepath.Join(t.TempDir(), "good.parquet")
	w, err := Create[every](good)
	require.NoError(t, err)
	require.NoError(t, w.Write(rows))
	require.NoError(t, w.Close())
	st, err := os.Stat(good)
	require.NoError(t, err)

	old := openFile
	defer func() { openFile = old }()
	for _, room := range []int{0, 100, int(st.Size()) / 2, int(st.Size()) - 1} {
		openFile = openFull(old, room)
		dir := t.TempDir()
		path := filepath.Join(dir, "every.parquet")
		w, err := Create[every](path)
		require.NoError(t, err)
		require.NoError(t, w.Write(rows)) // held in memory
		err = w.Close()
		requireFull(t, err, path)
		require.ErrorContains(t, err, "every.parquet.partial", "room %d", room)
		requireOnly(t, dir)
		w.Abort()
		requireOnly(t, dir)
	}

	// Failing at Create itself.
	openFile = func(name string) (file, error) {
		return nil, &os.PathError{Op: "open", Path: name, Err: syscall.ENOSPC}
	}
	dir := t.TempDir()
	_, err = Create[every](filepath.Join(dir, "x.parquet"))
	requireFull(t, err, filepath.Join(dir, "x.parquet"))
	requireOnly(t, dir)
}

// A rename that fails (the target is a directory) leaves no .partial.
func TestRenameFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.parquet")
	w, err := Create[every](path)
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(path, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(path, "x"), nil, 0o644))
	require.NoError(t, w.Write(everyRows()))
	err = w.Close()
	require.Error(t, err)
	require.ErrorContains(t, err, "results: writing "+path+": ")
	var le *os.LinkError
	require.True(t, errors.As(err, &le), "%v", err)
	requireOnly(t, dir, "t.parquet")
}

// durationRow is the analysis's durations table.
type durationRow struct {
	TupleID             int64   `parquet:"tuple_id"`
	FromNode            string  `parquet:"from_node,dict"`
	FromChannel         string  `parquet:"from_channel,dict"`
	ToNode              string  `parquet:"to_node,dict"`
	ToChannel           string  `parquet:"to_channel,dict"`
	Kind                string  `parquet:"kind,dict"`
	StartTSC            uint64  `parquet:"start_tsc"`
	EndTSC              uint64  `parquet:"end_tsc"`
	Cycles              float64 `parquet:"cycles"`
	ErrorCycles         float64 `parquet:"error_cycles"`
	Seconds             float64 `parquet:"seconds"`
	ErrorSeconds        float64 `parquet:"error_seconds"`
	Scenario            int32   `parquet:"scenario"`
	PaperErrorCycles    float64 `parquet:"paper_error_cycles"`
	BaselineErrorCycles float64 `parquet:"baseline_error_cycles"`
}

// durationGen makes durations like a two-node topology's: four a tuple
// (a transfer, two computes, the end-to-end), 100k tuples/s at 3 GHz, the
// estimates noisy in their last bits and the error bounds slowly varying.
type durationGen struct {
	i   int64
	rng *rand.Rand
	tsc [4]uint64
	fr  [4]float64
}

func newDurationGen() *durationGen { return &durationGen{rng: rand.New(rand.NewPCG(1, 2))} }

func (g *durationGen) fill(rows []durationRow) {
	type hop struct {
		fn, fc, tn, tc, kind string
		from, to             int
		scenario             int32
	}
	hops := [4]hop{
		{"a", "a out", "b", "b in", "transfer", 0, 1, 1},
		{"b", "b in", "b", "b work", "compute", 1, 2, 0},
		{"b", "b work", "b", "b out", "compute", 2, 3, 0},
		{"a", "a out", "b", "b out", "end_to_end", 0, 3, 2},
	}
	for k := range rows {
		i := g.i
		g.i++
		h, tid := i%4, i/4
		if h == 0 {
			base := uint64(7e10) + uint64(tid)*30000 + uint64(g.rng.IntN(5000))
			tr := uint64(80000 * math.Exp(0.3*g.rng.NormFloat64()))
			c1 := uint64(3000 * math.Exp(0.5*g.rng.NormFloat64()))
			c2 := uint64(20000 * math.Exp(0.4*g.rng.NormFloat64()))
			g.tsc = [4]uint64{base, base + tr, base + tr + c1, base + tr + c1 + c2}
			for j := range g.fr {
				g.fr[j] = g.rng.Float64() - 0.5
			}
		}
		p := hops[h]
		s, e := g.tsc[p.from], g.tsc[p.to]
		errc := 1000 + 300*math.Sin(float64(s)/3e10)
		if p.fn == p.tn {
			errc *= 0.01
		}
		cycles := float64(e-s) + g.fr[h]*errc*0.1
		rows[k] = durationRow{
			TupleID: tid, FromNode: p.fn, FromChannel: p.fc, ToNode: p.tn, ToChannel: p.tc, Kind: p.kind,
			StartTSC: s, EndTSC: e, Cycles: cycles, ErrorCycles: errc, Seconds: cycles / 3e9, ErrorSeconds: errc / 3e9,
			Scenario: p.scenario, PaperErrorCycles: errc*1.7 + 123.456, BaselineErrorCycles: errc*4.2 + 50000.125,
		}
	}
}

// BenchmarkWriteDurations writes b.N rows of the durations table to one
// file, in batches of 64Ki rows (made once, their ids and TSCs moved on
// for each batch), Close included.
func BenchmarkWriteDurations(b *testing.B) { benchWriteDurations(b, 1) }

// benchWriteDurations writes durations with lanes (0: one a core).
func benchWriteDurations(b *testing.B, lanes int) {
	if lanes == 0 {
		lanes = runtime.GOMAXPROCS(0)
	}
	path := filepath.Join(b.TempDir(), "durations.parquet")
	batch := make([]durationRow, 64<<10)
	newDurationGen().fill(batch)
	const span = 64 << 10 / 4 * 30000 // TSC cycles a batch covers
	b.ReportAllocs()
	b.ResetTimer()
	w, err := CreateLanes[durationRow](path, lanes)
	require.NoError(b, err)
	defer w.Abort()
	for n := 0; n < b.N; n += len(batch) {
		rows := batch[:min(len(batch), b.N-n)]
		if n > 0 {
			for k := range rows {
				rows[k].TupleID += int64(len(batch) / 4)
				rows[k].StartTSC += span
				rows[k].EndTSC += span
			}
		}
		if err := w.Write(rows); err != nil {
			break
		}
	}
	require.NoError(b, w.Close())
	b.StopTimer()
	st, err := os.Stat(path)
	require.NoError(b, err)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(st.Size())/float64(b.N), "bytes/row")
}

// The writer's codec is zstd, as any reader decodes it.
func TestZstdCodec(t *testing.T) {
	c := newZstdLevel(1, zstd.SpeedDefault)
	require.Equal(t, "ZSTD", c.String())
	require.Equal(t, format.Zstd, c.CompressionCodec())
	src := []byte(strings.Repeat("durations ", 100_000))
	enc, err := c.Encode(nil, src)
	require.NoError(t, err)
	require.Less(t, len(enc), len(src)/100)
	dec, err := c.Decode(nil, enc)
	require.NoError(t, err)
	require.Equal(t, src, dec)
}

// deltaRow has DELTA_BINARY_PACKED integers, as durations.parquet's ids
// and TSCs.
type deltaRow struct {
	I int64  `parquet:"i,delta"`
	U uint64 `parquet:"u,delta"`
}

// Delta-encoded integers come back as written across their whole range:
// deltas that wrap (TSCs at and past 2^63, ids from the minimum to the
// maximum), runs of equal values, and climbing ones.
func TestDeltaIntegers(t *testing.T) {
	rows := []deltaRow{{math.MinInt64, 0}, {math.MaxInt64, math.MaxUint64}, {0, 1 << 63}, {-1, 1<<63 - 1}, {-1, 1<<63 - 1}}
	for i := range 5000 {
		rows = append(rows, deltaRow{int64(i / 4), 1<<63 - 2500 + uint64(i)*3})
	}
	path := filepath.Join(t.TempDir(), "delta.parquet")
	w, err := Create[deltaRow](path)
	require.NoError(t, err)
	defer w.Abort()
	require.NoError(t, w.Write(rows))
	require.NoError(t, w.Close())
	got, err := ReadAll[deltaRow](path)
	require.NoError(t, err)
	require.Equal(t, rows, got)
	for _, c := range openParquet(t, path).Metadata().RowGroups[0].Columns {
		require.Contains(t, c.MetaData.Encoding, format.DeltaBinaryPacked, c.MetaData.PathInSchema[0])
	}
}
