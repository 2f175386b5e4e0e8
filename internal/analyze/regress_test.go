package analyze

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/logfile"
)

// reviewChans writes nch single-node IDENTITY channels (one process each
// unless sameProc) whose lines are given by rec(ch) and returns the logs dir.
func reviewChans(t *testing.T, dir string, nch int, sameProc bool, rec func(ch int) []string) string {
	t.Helper()
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	for ch := 0; ch < nch; ch++ {
		pid := 100 + ch
		if sameProc {
			pid = 7
		}
		h := logfile.Header{Node: "n", Host: "h", PID: pid, Channel: ch + 1, Name: fmt.Sprintf("c%03d", ch), Handler: "IDENTITY", TSCHz: 2e9}
		writeASCII(t, logs, h, rec(ch))
	}
	return logs
}

// Regression tests from a review of the pipeline: each failed before the
// fix it names.

// reviewPlan does what joinTuples does up to the join: plan and decode.
func reviewPlan(t testing.TB, cfg Config) (*analysis, *partitions) {
	t.Helper()
	a, err := prepare(cfg)
	require.NoError(t, err)
	total, files := a.tupleFiles()
	spill := cfg.SpillDir
	if spill == "" {
		spill = filepath.Join(cfg.Out, ".spill")
	}
	ps, err := partitionPlan(total, files, a.cfg.Workers, a.cfg.MemBytes, spill)
	require.NoError(t, err)
	t.Cleanup(ps.close)
	require.NoError(t, a.decodeAll(ps, a.cfg.Workers))
	return a, ps
}

// Records in memory stay within a quarter of --mem-mb with many small
// channel files: a part-filled block a file leaves is kept at its size, not
// with the capacity of a whole block (64 KiB each, many times the budget).
func TestInMemoryBlocksStayWithinBudget(t *testing.T) {
	dir := t.TempDir()
	logs := reviewChans(t, dir, 64, false, func(ch int) []string {
		var out []string
		for id := 0; id < 50; id++ {
			out = append(out, fmt.Sprintf("%d,%d", id, uint64(1e12+id*1e7+ch*1000)))
		}
		return out
	})
	budget := int64(8 << 20)
	_, ps := reviewPlan(t, Config{Logs: []string{logs}, Out: filepath.Join(dir, "out"), MemBytes: budget, Workers: 1})
	require.False(t, ps.spill, "3,200 records fit in memory")
	held, used := 0, 0
	for _, b := range ps.mem {
		held += cap(b)
		used += len(b)
	}
	t.Logf("records: %d bytes; blocks held in memory: %d bytes (%d blocks); budget %d, a quarter %d", used, held, len(ps.mem), budget, budget/4)
	require.LessOrEqual(t, int64(held), budget/4, "the in-memory records stay within a quarter of the budget")
}

// Two analyses given the same --spill DIR (a scratch disk, say) keep their
// files apart: each spills into a directory of its own inside it (they
// shared spill-0, ..., and each read the other's records as its own).
func TestSharedSpillDirKeepsRunsApart(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	mk := func(dir string, shift int) string {
		return reviewChans(t, dir, 2, false, func(ch int) []string {
			var out []string
			for id := 0; id < 20000; id++ {
				out = append(out, fmt.Sprintf("%d,%d", id, uint64(1e12+id*1e5+ch*(1000+shift))))
			}
			return out
		})
	}
	logsA, logsB := mk(dirA, 0), mk(dirB, 500)
	spill := filepath.Join(t.TempDir(), "scratch")
	cfgA := Config{Logs: []string{logsA}, Out: filepath.Join(dirA, "out"), MemBytes: 64 << 10, Workers: 1, SpillDir: spill}
	cfgB := cfgA
	cfgB.Logs, cfgB.Out = []string{logsB}, filepath.Join(dirB, "out")

	a, ps := reviewPlan(t, cfgA)
	require.True(t, ps.spill)
	reviewPlan(t, cfgB) // B decodes while A joins, say
	w := a.newWorker(nil, nil)
	var joinErr error
	durs := map[float64]int{}
	for k := 0; k < ps.n && joinErr == nil; k++ {
		if joinErr = ps.read(k, &w.part); joinErr != nil {
			break
		}
		joinErr = w.joinPartition(&w.part, func(evs []event) error {
			evs = w.translate(evs)
			if len(evs) == 2 {
				durs[evs[1].est-evs[0].est]++
			}
			return nil
		})
	}
	require.NoError(t, joinErr, "analysis A cannot read its spill back")
	require.Equal(t, map[float64]int{1000: 20000}, durs, "analysis A's durations are its own (all 1000 cycles)")
}

// logfile.RecordBatches counts the positions of an ASCII block cut short
// once in Summary.MissingPos (it counted them as the block's shortfall and
// again as the gap to the next frame: 4 for 2).
func TestRecordBatchesCountsMissingPositionsOnce(t *testing.T) {
	dir := t.TempDir()
	h := logfile.Header{Node: "n", Host: "h", PID: 1, Channel: 1, Name: "c", Handler: "IDENTITY", TSCHz: 2e9,
		Version: logfile.Version, ByteOrder: "little", Format: "ASCII_TSC", FormatID: int32(logfile.ASCIITSC),
		RecordSize: 16, Columns: []string{"tuple_id", "tsc"}, BlockRecords: 8}
	js, err := json.Marshal(h)
	require.NoError(t, err)
	// Block 0..4 holds only 3 lines before the next block (5..6) starts.
	body := logfile.ASCIIMagic + "\n#header " + string(js) + "\n" +
		"#block 0 5\n1,100\n2,200\n3,300\n#block 5 2\n6,600\n7,700\n" +
		`#trailer {"reason":"close","positions":7}` + "\n"
	path := filepath.Join(dir, "n-1-c.cplog.txt")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
	lf, err := logfile.Open(path)
	require.NoError(t, err)
	defer lf.Close()
	var n int
	err = lf.RecordBatches(func(rs []logfile.Record) error { n += len(rs); return nil })
	t.Logf("records %d, err %v", n, err)
	require.Equal(t, 5, n)
	require.EqualValues(t, 2, lf.Summary.MissingPos, "positions 3 and 4 are missing")
}

// A reused id (a channel logging a constant: left out, and said so) is not
// gathered whole before it is skipped: its first records vote as they
// stream past (200k records of one id took 17 MB of events under a 4 MiB
// budget).
func TestReusedIDIsNotGatheredWhole(t *testing.T) {
	dir := t.TempDir()
	logs := reviewChans(t, dir, 2, false, func(ch int) []string {
		var out []string
		for i := 0; i < 100000; i++ {
			out = append(out, fmt.Sprintf("%d,%d", 42, uint64(1e12+i*1e5+ch*1000)))
		}
		return out
	})
	budget := int64(4 << 20)
	a, ps := reviewPlan(t, Config{Logs: []string{logs}, Out: filepath.Join(dir, "out"), MemBytes: budget, Workers: 1})
	w := a.newWorker(nil, nil)
	for k := 0; k < ps.n; k++ {
		require.NoError(t, w.partition(ps, k))
	}
	evBytes := int64(cap(w.evs)) * int64(unsafe.Sizeof(event{}))
	t.Logf("events held for one skipped id: %d (%d bytes); budget %d, the join's quarter %d", cap(w.evs), evBytes, budget, budget/4)
	require.LessOrEqual(t, evBytes, budget/4, "a tuple id that is skipped anyway is not gathered whole")
}

// What a killed run left in --out (.partial files, its directory in the
// default spill directory) is removed by the next run.
func TestInterruptedRunLeftoversRemoved(t *testing.T) {
	dir := t.TempDir()
	logs := reviewChans(t, dir, 2, false, func(ch int) []string {
		var out []string
		for id := 0; id < 20000; id++ {
			out = append(out, fmt.Sprintf("%d,%d", id, uint64(1e12+id*1e5+ch*1000)))
		}
		return out
	})
	out := filepath.Join(dir, "out")
	// What a run with 4 workers, killed while it joined, left.
	require.NoError(t, os.MkdirAll(filepath.Join(out, ".spill"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(out, ".spill", spillPrefix+"123"), 0o755))
	for _, name := range []string{".spill/" + spillPrefix + "123/spill-0", ".spill/" + spillPrefix + "123/spill-3", "durations.parquet.partial", "durations.csv.partial"} {
		require.NoError(t, os.WriteFile(filepath.Join(out, name), make([]byte, 1<<16), 0o644))
	}
	res, err := Run(Config{Logs: []string{logs}, Out: out, MemBytes: 64 << 10, Workers: 2})
	require.NoError(t, err)
	require.NotZero(t, res.Spilled)
	var left []string
	filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.Contains(p, ".spill") || strings.HasSuffix(p, ".partial")) {
			rel, _ := filepath.Rel(out, p)
			left = append(left, rel)
		}
		return nil
	})
	require.Empty(t, left, "an interrupted run's spill files and partial results are left in --out after a successful run")
}

// A --order that names no channel is refused before any record is read.
func TestBadOrderRefusedBeforeDecoding(t *testing.T) {
	dir := t.TempDir()
	logs := reviewChans(t, dir, 2, false, func(ch int) []string { return []string{"1,1000", "2,2000"} })
	_, err := prepare(Config{Logs: []string{logs}, Order: []string{"n/c000", "n/nope"}})
	require.ErrorContains(t, err, `--order: no channel "n/nope" (channels: n/c000, n/c001)`)
}
