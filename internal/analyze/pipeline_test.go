package analyze

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/results"
	"cloudprofiler/internal/simlogs"
)

// writeTopology writes rounds and logs of a 3-node pipeline with n tuples
// (simlogs.WriteTopology), one id reused past maxTupleEvents.
func writeTopology(t testing.TB, dir string, n int, seed int64) {
	t.Helper()
	simlogs.WriteTopology(t, dir, n, seed, maxTupleEvents+1)
}

// The pipeline's results are the old analysis's (reference_test.go): every
// count, every statistic to the bit, every durations row, with the records
// in memory or spilled, on one worker or several, and when the sample's
// channel order is not the final one.
func TestPipelineMatchesReference(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 15000, 3) // 30,000 tuples took 90 s under -race on a slow day; every case spills at 64 KiB still
	matchesReference(t, Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b"}, dir, 50000, 64<<10)
}

// The same where most tuples take the columnar core (shape.go): without
// the return log, a tuple is one record on each of four channels, and the
// tuples the core does not take (delivered twice at the sink, the reused
// id) come between them, so that the per-tuple path and the batches
// alternate within a partition (TestColumnsTakeTheCommonShape).
func TestPipelineMatchesReferenceInColumns(t *testing.T) {
	dir := t.TempDir()
	logs := writeTopologyNoReturn(t, dir, 12000, 5) // 48,000 durations: the other test's 30,000 tuples took a minute under -race
	matchesReference(t, Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{logs}, Ref: "b"}, dir, 40000, 64<<10)
}

// writeTopologyNoReturn is writeTopology without the source's return log;
// it returns the logs' directory.
func writeTopologyNoReturn(t testing.TB, dir string, n int, seed int64) string {
	writeTopology(t, dir, n, seed)
	logs := filepath.Join(dir, "logs")
	ents, err := os.ReadDir(logs)
	require.NoError(t, err)
	removed := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(logs, e.Name()))
		require.NoError(t, err)
		if strings.Contains(strings.SplitN(string(b), "\n", 3)[1], `"return"`) {
			require.NoError(t, os.Remove(filepath.Join(logs, e.Name())))
			removed++
		}
	}
	require.Equal(t, 1, removed, "the return log")
	return logs
}

// The same on logs the library wrote (binary, zstd): `make test-analyze-data`
// generates them as `make bench-analyze` does, smaller, and points
// CP_ANALYZE_DATA at them (rounds/ and logs/ inside).
func TestPipelineMatchesReferenceOnLogs(t *testing.T) {
	data := os.Getenv("CP_ANALYZE_DATA")
	if data == "" {
		t.Skip("CP_ANALYZE_DATA is not set (make test-analyze-data sets it)")
	}
	matchesReference(t, Config{Rounds: filepath.Join(data, "rounds"), Logs: []string{filepath.Join(data, "logs")}, Ref: "a"}, t.TempDir(), 1000, 4<<20)
}

// matchesReference runs the pipeline in memory and with spillMem (a budget
// that spills) and compares it with the old analysis.
func matchesReference(t *testing.T, base Config, dir string, minRows int, spillMem int64) {
	refCfg := base
	refCfg.Out = filepath.Join(dir, "ref")
	ref, err := prepare(refCfg)
	require.NoError(t, err)
	refRows, err := refJoinTuples(ref, 5000)
	require.NoError(t, err)
	sort.Strings(refRows)
	require.Greater(t, len(refRows), minRows)

	// The capacity analysis's rows (its channels follow the naming rule)
	// are the same in every configuration, to the bit.
	var capacityCSV string
	for _, c := range []struct {
		name    string
		mem     int64
		workers int
		wrong   bool
		group   uint
		merge   bool
	}{
		{"memory-1", 256 << 20, 1, false, 0, false},
		{"memory-2", 256 << 20, 2, false, 0, false},
		{"spill-1", spillMem, 1, false, 0, false},
		{"spill-3", spillMem, 3, false, 0, false},
		{"second-attempt", spillMem, 2, true, 0, false},
		{"spill-id-groups", spillMem, 2, false, 5, false}, // idGroup's groups of 32 ids, which a run this small does not take
		{"memory-merged", 256 << 20, 2, false, 0, true},   // partitions of many runs merged (eachMerged), not sorted
		{"spill-merged", spillMem, 3, false, 5, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.Out, cfg.MemBytes, cfg.Workers, cfg.DurationsCSV, cfg.testWrongSample = filepath.Join(dir, c.name), c.mem, c.workers, true, c.wrong
			cfg.testIDGroup, cfg.testMergeAll = c.group, c.merge
			require.NoError(t, os.MkdirAll(cfg.Out, 0o755))
			a, err := prepare(cfg)
			require.NoError(t, err)
			require.NoError(t, a.joinTuples())
			if c.mem == spillMem {
				require.Equal(t, a.res.Records, a.res.Spilled)
			} else {
				require.Zero(t, a.res.Spilled)
			}
			require.Equal(t, ref.res.Records, a.res.Records)
			require.Equal(t, ref.res.Tuples, a.res.Tuples)
			require.Equal(t, ref.res.Durations, a.res.Durations)
			require.Equal(t, ref.res.SkippedTuples, a.res.SkippedTuples)
			require.Equal(t, ref.res.SkippedRecords, a.res.SkippedRecords)
			require.Equal(t, ref.res.Order, a.res.Order)
			require.Equal(t, ref.rank, a.rank)
			require.Equal(t, math.Float64bits(ref.t0), math.Float64bits(a.t0))
			require.Len(t, a.pairs, len(ref.pairs))
			for k, rp := range ref.pairs {
				p := a.pairs[k]
				require.NotNil(t, p, "pair %v", k)
				require.Equal(t, rp.Scenarios, p.Scenarios)
				for i, s := range []*Stats{p.Dur, p.Err, p.Paper, p.Baseline, p.RetErr, p.OursErr} {
					rs := []*Stats{rp.Dur, rp.Err, rp.Paper, rp.Baseline, rp.RetErr, rp.OursErr}[i]
					if rs == nil {
						require.Nil(t, s)
						continue
					}
					require.Equal(t, rs.N, s.N)
					require.Equal(t, rs.Exact(), s.Exact())
					qs := []float64{0, 0.001, 0.25, 0.5, 0.75, 0.99, 0.999, 1}
					want, got := rs.Quantiles(qs...), s.Quantiles(qs...)
					for j := range qs {
						require.Equal(t, math.Float64bits(want[j]), math.Float64bits(got[j]), "pair %v stats %d q %v", k, i, qs[j])
					}
					require.Equal(t, math.Float64bits(rs.Min), math.Float64bits(s.Min))
					require.Equal(t, math.Float64bits(rs.Max), math.Float64bits(s.Max))
				}
			}
			b, err := os.ReadFile(filepath.Join(cfg.Out, "durations.csv"))
			require.NoError(t, err)
			rows := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			require.Equal(t, strings.TrimSuffix(durationsCSVHeader, "\n"), rows[0])
			rows = rows[1:]
			inOrder := strings.Join(rows, "\n")
			sort.Strings(rows)
			require.Equal(t, len(refRows), len(rows))
			for i := range rows {
				if rows[i] != refRows[i] {
					require.Equal(t, refRows[i], rows[i], "row %d", i)
				}
			}
			// durations.parquet holds the same rows, typed.
			prows, err := results.ReadAll[DurationRow](filepath.Join(cfg.Out, "durations.parquet"))
			require.NoError(t, err)
			require.Len(t, prows, len(refRows))
			lines := make([]string, len(prows))
			for i := range prows {
				lines[i] = strings.TrimSuffix(string(appendDurationCSV(nil, &prows[i])), "\n")
			}
			require.Equal(t, inOrder, strings.Join(lines, "\n"), "the CSV and Parquet rows, in the same order")
			sort.Strings(lines)
			require.Equal(t, refRows, lines)
			_, err = os.Stat(filepath.Join(cfg.Out, ".spill"))
			require.True(t, os.IsNotExist(err), "spill files removed")

			require.NotNil(t, a.cap.acc)
			var cb strings.Builder
			crows := a.cap.plan.Rows(a.cap.acc, a.cap.win, nil, a.cp.costs, capacity.Config{Hz: a.model.RefHz(), MinTuples: 30, Rank: a.rank}).Rows
			require.NotEmpty(t, crows)
			require.NoError(t, writeCapacityCSV(&cb, crows))
			if capacityCSV == "" {
				capacityCSV = cb.String()
			}
			require.Equal(t, capacityCSV, cb.String())
		})
	}
}

// A spill directory that fills up: a clear error that says what to do, no
// spill files left, and no results in Out, not even an earlier run's.
func TestSpillDiskFull(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 30000, 5)
	spill := filepath.Join(t.TempDir(), "spill")
	require.NoError(t, os.MkdirAll(spill, 0o755))
	if err := unix.Mount("tmpfs", spill, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v)", err)
	}
	t.Cleanup(func() { unix.Unmount(spill, unix.MNT_DETACH) })
	out := filepath.Join(dir, "out")
	cfg := Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Out: out, Ref: "a"}
	_, err := Run(cfg) // an earlier run, whole
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(out, "summary.txt"))

	cfg.MemBytes, cfg.SpillDir = 64<<10, spill
	_, err = Run(cfg)
	require.Error(t, err)
	require.Contains(t, err.Error(), "spill")
	require.Contains(t, err.Error(), "no space left on device")
	t.Log(err)
	left, err := os.ReadDir(spill)
	require.NoError(t, err)
	require.Empty(t, left, "spill files removed")
	left, err = os.ReadDir(out)
	require.NoError(t, err)
	require.Empty(t, left, "no results that look whole")
}

// One pass of partitioning has its limits: a budget that cannot index the
// spilled blocks of that many records is refused before anything is read,
// with the budget that would do; the budget it names does.
func TestPartitionPlanLimits(t *testing.T) {
	for _, c := range []struct {
		total  uint64
		mem    int64
		fits   bool
		spills bool
	}{
		{1e6, 256 << 20, true, false}, {1e8, 64 << 20, true, true}, {1e8, 256 << 20, true, true},
		{1e9, 256 << 20, true, true}, {1e9, 64 << 20, false, true},
	} {
		p, err := partitionPlan(c.total, 4, 2, c.mem, t.TempDir())
		if !c.fits {
			require.Error(t, err)
			require.Contains(t, err.Error(), "give --mem-mb")
			var need int64
			_, scanErr := fmt.Sscanf(err.Error()[strings.Index(err.Error(), "give --mem-mb ")+len("give --mem-mb "):], "%d", &need)
			require.NoError(t, scanErr)
			_, err = partitionPlan(c.total, 4, 2, need<<20, t.TempDir())
			require.NoError(t, err, "the budget it names")
			continue
		}
		require.NoError(t, err, "%d records in %d MiB", c.total, c.mem>>20)
		require.Equal(t, c.spills, p.spill)
		_, _, _, index := planSizes(c.total, 4, 2, c.mem, 0)
		require.LessOrEqual(t, index, indexBudget(c.mem))
		t.Logf("%d records, %d MiB: %d partitions, %d records a block, index %d KiB", c.total, c.mem>>20, p.n, p.blockEvents, index>>10)
	}
}

// analyze's partitions take consecutive ids in groups (idGroup), hashed so
// that the partitions stay even: dense ids, four records a tuple, leave no
// partition more than 1 % from the mean; every id of a group goes to its
// group's partition; an export's partitions hash each id (export.json's
// exportHash), group or not.
func TestIDGroupsKeepPartitionsEven(t *testing.T) {
	require.Zero(t, idGroup(1000, 8), "a small run: each id hashed")
	require.EqualValues(t, 8, idGroup(40e6, 128), "the bench's 40M records")
	require.EqualValues(t, 3, idGroup(40e6, 4096), "a partition of 10,000 records: groups of 8 ids")
	require.EqualValues(t, 8, idGroup(1e12, 8), "at most 2^8 ids")
	for _, c := range []struct {
		total uint64
		mem   int64
	}{{8e6, 256 << 20}, {4e7, 256 << 20}, {4e7, 64 << 20}, {2e8, 256 << 20}} {
		p, err := partitionPlan(c.total, 4, 2, c.mem, t.TempDir())
		require.NoError(t, err)
		require.Equal(t, idGroup(c.total, p.n), p.group)
		require.Positive(t, p.group)
		ids := c.total / 4
		count := make([]uint64, p.n)
		prev := -1
		for id := int64(0); id < int64(ids); id++ {
			k := p.partitionOf(id)
			count[k]++
			if id&(1<<p.group-1) != 0 && k != prev {
				t.Fatalf("id %d went to partition %d, the id before it to %d: groups of %d", id, k, prev, 1<<p.group)
			}
			prev = k
		}
		mean := float64(ids) / float64(p.n)
		lo, hi := slices.Min(count), slices.Max(count)
		t.Logf("%d records, %d MiB: %d partitions, groups of %d ids: %.2f to %.2f %% of the mean", c.total, c.mem>>20, p.n, 1<<p.group, 100*float64(lo)/mean, 100*float64(hi)/mean)
		require.Less(t, float64(hi), 1.01*mean)
		require.Greater(t, float64(lo), 0.99*mean)

		e, err := partitionPlanAtLeast(c.total, 4, 2, c.mem, t.TempDir(), 64)
		require.NoError(t, err)
		require.Zero(t, e.group, "an export's partitions")
		for _, id := range []int64{0, 1, 2, 63, 64, 1 << 40, -5} {
			require.Equal(t, int((uint64(id)*0x9E3779B97F4A7C15)>>(64-bits.TrailingZeros(uint(e.n)))), e.partitionOf(id))
		}
	}
}

// The progress line says the stage, the records read of the total, the
// rate, and in the join the partitions done.
func TestProgressLine(t *testing.T) {
	var p progress
	p.start = time.Now().Add(-2 * time.Second)
	p.total, p.nparts = 1000, 16
	p.records.Store(500)
	p.stage.Store("join")
	p.parts.Store(3)
	r, w := io.Pipe()
	stop := make(chan struct{})
	go p.report(w, 0, time.Hour, stop)
	line, err := bufio.NewReader(r).ReadString('\n')
	close(stop)
	require.NoError(t, err)
	require.Regexp(t, `^analyze: +2\.\d s  join  records 500 of 1000 \(0\.0M/s\)  partitions 3 of 16\n$`, line)
}

// An output directory that fills up while durations.parquet is written: the
// workers stop, the error names the file and says the disk is full, and
// nothing is left in Out.
func TestOutDiskFull(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 30000, 6)
	out := filepath.Join(t.TempDir(), "out")
	require.NoError(t, os.MkdirAll(out, 0o755))
	if err := unix.Mount("tmpfs", out, "tmpfs", 0, "size=512k"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v)", err)
	}
	t.Cleanup(func() { unix.Unmount(out, unix.MNT_DETACH) })
	for _, workers := range []int{1, 2} {
		cfg := Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Out: out, Ref: "a",
			Workers: workers, SpillDir: filepath.Join(dir, "spill"), MemBytes: 64 << 10}
		done := make(chan error, 1)
		go func() { _, err := Run(cfg); done <- err }()
		select {
		case err := <-done:
			require.Error(t, err)
			require.Contains(t, err.Error(), "durations.parquet")
			require.Contains(t, err.Error(), "full")
		case <-time.After(60 * time.Second):
			t.Fatal("the analysis hangs when its output disk is full")
		}
		left, err := os.ReadDir(out)
		require.NoError(t, err)
		require.Empty(t, left, "nothing left in Out (workers %d)", workers)
	}
}
