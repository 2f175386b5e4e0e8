package results

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A Writer with lanes writes the same rows in the same order, in row
// groups of the same rows, as one without; whatever the batches and the
// number of lanes (more lanes than columns included).
func TestLanesSameRows(t *testing.T) {
	rows := everyRows()
	batches := []int{1, 998, 2, 1500, 7, 3000, 2000, 492, 3000, 3000}
	write := func(path string, lanes int) []every {
		w, err := createLanes[every](path, limits{rows: 1000, bytes: 1 << 40}, lanes)
		require.NoError(t, err)
		defer w.Abort()
		var all []every
		for k, n := range batches {
			b := append([]every(nil), rows[k*7%100:][:n]...)
			all = append(all, b...)
			require.NoError(t, w.Write(b))
			clear(b) // the caller may reuse its rows once Write returns
		}
		require.NoError(t, w.Close())
		return all
	}
	dir := t.TempDir()
	want := write(filepath.Join(dir, "one.parquet"), 1)
	oneMeta := openParquet(t, filepath.Join(dir, "one.parquet")).Metadata()
	for _, lanes := range []int{2, 3, 7, 64} {
		path := filepath.Join(dir, "lanes.parquet")
		requireSameRows(t, want, write(path, lanes)) // the same rows were written
		got, err := ReadAll[every](path)
		require.NoError(t, err)
		requireSameRows(t, want, got)
		md := openParquet(t, path).Metadata()
		require.Len(t, md.RowGroups, len(oneMeta.RowGroups), "lanes %d", lanes)
		for i, rg := range md.RowGroups {
			require.Equal(t, oneMeta.RowGroups[i].NumRows, rg.NumRows, "lanes %d, row group %d", lanes, i)
			for c, cc := range rg.Columns {
				one := oneMeta.RowGroups[i].Columns[c].MetaData
				require.Equal(t, one.Encoding, cc.MetaData.Encoding, "lanes %d, column %v", lanes, cc.MetaData.PathInSchema)
				require.Equal(t, one.Codec, cc.MetaData.Codec)
			}
		}
		requireOnly(t, dir, "one.parquet", "lanes.parquet")
		require.NoError(t, os.Remove(path))
	}
}

// Zero rows with lanes: a file with no row group, as without.
func TestLanesZeroRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.parquet")
	w, err := CreateLanes[every](path, 4)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	got, err := ReadAll[every](path)
	require.NoError(t, err)
	require.Empty(t, got)
}

// A full disk with lanes: the error names the file and says the disk is
// full, from the Write or the Close that finds it; the .partial is gone,
// no lane is left running (Close and Abort return), and later calls
// return the same error.
func TestLanesFullDisk(t *testing.T) {
	g := newDurationGen()
	batch := make([]durationRow, 20_000)
	old := openFile
	defer func() { openFile = old }()
	for _, room := range []int{0, 4, 100_000, 1_000_000} {
		openFile = openFull(old, room)
		dir := t.TempDir()
		path := filepath.Join(dir, "durations.parquet")
		w, err := createLanes[durationRow](path, limits{rows: 10_000, bytes: 64 << 20}, 3)
		require.NoError(t, err)
		for k := 0; k < 50 && err == nil; k++ {
			g.fill(batch)
			err = w.Write(batch)
		}
		if err == nil {
			err = w.Close()
		}
		requireFull(t, err, path)
		requireOnly(t, dir)
		require.Equal(t, err, w.Write(batch))
		require.Equal(t, err, w.Close())
		w.Abort()
		requireOnly(t, dir)
	}
}

// Abort with lanes at work removes the file and stops them.
func TestLanesAbort(t *testing.T) {
	dir := t.TempDir()
	w, err := createLanes[durationRow](filepath.Join(dir, "d.parquet"), limits{rows: 10_000, bytes: 64 << 20}, 2)
	require.NoError(t, err)
	batch := make([]durationRow, 25_000)
	newDurationGen().fill(batch)
	require.NoError(t, w.Write(batch))
	w.Abort()
	requireOnly(t, dir)
	require.Error(t, w.Write(batch))
	require.Error(t, w.Close())
}

// BenchmarkWriteDurationsLanes is BenchmarkWriteDurations on every core.
func BenchmarkWriteDurationsLanes(b *testing.B) { benchWriteDurations(b, 0) }
