package scaleout

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/results"
	"cloudprofiler/internal/simlogs"
)

// exportRecords reads every row of an export's records, by partition.
func exportRecords(t *testing.T, out string) map[int][]ExportRow {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(out, "records", "part=*", "*.parquet"))
	require.NoError(t, err)
	parts := map[int][]ExportRow{}
	for _, f := range files {
		p, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(f)), "part="))
		require.NoError(t, err, f)
		rows, err := results.ReadAll[ExportRow](f)
		require.NoError(t, err)
		parts[p] = append(parts[p], rows...)
	}
	return parts
}

// logRecords is every tuple and return record of the logs under dir, as
// "label id tsc" (a multiset: counted).
func logRecords(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.cplog*"))
	require.NoError(t, err)
	out := map[string]int{}
	for _, f := range files {
		lf, err := logfile.Open(f)
		require.NoError(t, err)
		if lf.Header.Counter() {
			lf.Close()
			continue
		}
		label := lf.Header.Node + "/" + lf.Header.Name
		err = lf.RecordBatches(func(rs []logfile.Record) error {
			for _, r := range rs {
				out[fmt.Sprintf("%s %d %d", label, r.TupleID, r.TSC)]++
			}
			return nil
		})
		if !errors.Is(err, logfile.ErrDamaged) { // a damaged file's valid records are read
			require.NoError(t, err)
		}
		lf.Close()
	}
	return out
}

// An export holds every tuple record of the logs once, in the partition
// its id hashes to (worked out here), with an estimate within its bound
// of the true reference reading (the synthetic nodes' counters are known:
// writeTopology), in memory and spilled, on one worker or two, and one
// node at a time as all at once.
func TestExportPartitionsAndTranslates(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 20000, 5)
	logs := filepath.Join(dir, "logs")
	want := logRecords(t, logs)
	nodes := map[string]simlogs.Node{}
	for _, n := range simlogs.TopologyNodes {
		nodes[n.Name] = n
	}
	ref := nodes["b"]
	for _, c := range []struct {
		name    string
		mem     int64
		workers int
		split   bool
	}{{"memory-1", 256 << 20, 1, false}, {"spill-2", 64 << 10, 2, false}, {"node-at-a-time", 256 << 20, 2, true}} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "export")
			base := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Ref: "b", MemBytes: c.mem, Workers: c.workers}
			if c.split {
				// Each node's logs alone, as each node would export them.
				for _, n := range []string{"a", "b", "c"} {
					nd := filepath.Join(t.TempDir(), n)
					require.NoError(t, os.MkdirAll(nd, 0o755))
					files, _ := filepath.Glob(filepath.Join(logs, n+"-*"))
					require.NotEmpty(t, files)
					for _, f := range files {
						b, err := os.ReadFile(f)
						require.NoError(t, err)
						require.NoError(t, os.WriteFile(filepath.Join(nd, filepath.Base(f)), b, 0o644))
					}
					cfg := base
					cfg.Logs, cfg.Out = []string{nd}, out
					_, err := Export(ExportConfig{Config: cfg, Partitions: 4})
					require.NoError(t, err, n)
				}
			} else {
				cfg := base
				cfg.Logs, cfg.Out = []string{logs}, out
				res, err := Export(ExportConfig{Config: cfg, Partitions: 4})
				require.NoError(t, err)
				require.Equal(t, 4, res.Files)
			}
			got := map[string]int{}
			n := 0
			origin := exportOrigin(t, out)
			for p, rows := range exportRecords(t, out) {
				for _, r := range rows {
					require.Equal(t, p, int((uint64(r.TupleID)*0x9E3779B97F4A7C15)>>62), "id %d", r.TupleID)
					got[fmt.Sprintf("%s %d %d", r.Channel, r.TupleID, uint64(r.TSC))]++
					// The true time of the reading, and the reference counter then.
					node := nodes[strings.Split(r.Channel, "/")[0]]
					tt := (float64(uint64(r.TSC)) - node.Off) / node.Hz
					truth := ref.Off + ref.Hz*tt
					require.LessOrEqual(t, math.Abs(r.EstCycles+float64(origin)-truth), r.ErrCycles+2, "%+v", r)
					n++
				}
			}
			require.Equal(t, want, got)
			require.Equal(t, 20000*5+20000/97+1+reusedRecords, n)
		})
	}
}

// idxOf is the index of the tuple channel labelled label in the export's
// numbering.
func idxOf(t *testing.T, ex, label string) int {
	a, _, err := prepareExport(analyze.Config{}, ex)
	require.NoError(t, err)
	for i, c := range a.Channels() {
		if c.Label() == label && c.Role == analyze.RoleTuples {
			return i
		}
	}
	t.Fatalf("no channel %s", label)
	return -1
}

func exportOrigin(t *testing.T, out string) uint64 {
	m, err := readExportMeta(out)
	require.NoError(t, err)
	return m.Origin
}

// The partitions joined one at a time (join-part) and merged (merge-parts)
// give analyze's results: summary.csv byte for byte, the durations as a
// set of rows; with the order from a sample's votes, and again when the
// partitions were first joined with a wrong order.
func TestExportPartsMatchAnalyze(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 20000, 7)
	// Counter and FIRSTLAST channels beside the tuples: their logs go into
	// the export whole (logs/), and merge-parts writes throughput and runs
	// from them as analyze does. The sink's counter opens before the first
	// tuple, so its first period starts the run's time line.
	writeCountsAndRun(t, filepath.Join(dir, "logs"))
	// Capacity on, without its cost model (the visits not walked), as on
	// partitions: the relay marks its in and out.
	cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b",
		Out: filepath.Join(dir, "analyze"), NoMace: true, NoReport: true, Window: 200 * time.Millisecond}
	_, err := analyze.Run(cfg.AsOnPartitions())
	require.NoError(t, err)
	wantRows, err := results.ReadAll[analyze.DurationRow](filepath.Join(cfg.Out, "durations.parquet"))
	require.NoError(t, err)
	wantCSV, err := os.ReadFile(filepath.Join(cfg.Out, "summary.csv"))
	require.NoError(t, err)

	ex := filepath.Join(dir, "export")
	files := exportParts(t, cfg, ex, 8)
	work := t.TempDir()
	join := func(rank []int, durations bool) []string {
		var states []string
		for p, f := range files {
			st := filepath.Join(work, fmt.Sprintf("state-%d", p))
			pc := PartConfig{Export: ex, Records: []string{f}, State: st, Partition: p, Rank: rank, Window: cfg.Window}
			if durations {
				pc.Durations = filepath.Join(work, fmt.Sprintf("durations-%d.parquet", p))
			}
			require.NoError(t, RunPart(pc))
			states = append(states, st)
		}
		return states
	}
	// The order from partition 0's votes alone.
	require.NoError(t, RunPart(PartConfig{Export: ex, Records: files[:1], State: filepath.Join(work, "votes"), Partition: 0}))
	sample, err := MergeParts(analyze.Config{}, ex, []string{filepath.Join(work, "votes")}, "")
	require.NoError(t, err)
	txt, err := os.ReadFile(filepath.Join(cfg.Out, "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(txt), "channel order: "+strings.Join(sample.Order, " -> ")+"\n")

	// A wrong order first: merge-parts says so, and gives the right one.
	wrong := append([]int(nil), sample.Rank...)
	in, out := idxOf(t, ex, "b/relay in"), idxOf(t, ex, "b/relay out")
	wrong[in], wrong[out] = wrong[out], wrong[in] // relay in and relay out swapped
	_, err = MergeParts(analyze.Config{Out: filepath.Join(work, "wrong")}, ex, join(wrong, false), "")
	require.ErrorIs(t, err, ErrOtherOrder)
	_, err = os.Stat(filepath.Join(work, "wrong", "summary.csv"))
	require.True(t, errors.Is(err, os.ErrNotExist), "nothing written after a wrong order")

	// Merged in a tree (two halves to a state each, then those), as the
	// Spark job merges on its executors: the same results.
	states := join(sample.Rank, true)
	half := len(states) / 2
	for i, st := range [][]string{states[:half], states[half:]} {
		_, err := MergeParts(analyze.Config{}, ex, st, filepath.Join(work, fmt.Sprintf("half-%d", i)))
		require.NoError(t, err)
	}
	merged, err := MergeParts(analyze.Config{Out: filepath.Join(work, "merged")}, ex, []string{filepath.Join(work, "half-0"), filepath.Join(work, "half-1")}, "")
	require.NoError(t, err)
	require.Equal(t, sample.Rank, merged.Rank)
	for _, name := range []string{"summary.csv", "throughput.csv", "runs.csv", "capacity.csv"} {
		want, err := os.ReadFile(filepath.Join(cfg.Out, name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(work, "merged", name))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), name)
	}
	require.Contains(t, string(wantCSV), "b/relay in")
	tp, err := os.ReadFile(filepath.Join(cfg.Out, "throughput.csv"))
	require.NoError(t, err)
	require.Contains(t, string(tp), "c,sink rate,0.300000,0.300000,1000,") // the counter's first period starts the time line
	capCSV, err := os.ReadFile(filepath.Join(cfg.Out, "capacity.csv"))
	require.NoError(t, err)
	require.Regexp(t, `\ninstance,2,.*,relay,`, string(capCSV), "rows per window of the relay")
	require.Contains(t, string(capCSV), "no cost model (on partitions")
	for _, name := range []string{"throughput.parquet", "runs.parquet", "capacity.parquet"} {
		_, err := os.Stat(filepath.Join(work, "merged", name))
		require.NoError(t, err, name)
	}
	var gotRows []analyze.DurationRow
	for p := range files {
		rows, err := results.ReadAll[analyze.DurationRow](filepath.Join(work, fmt.Sprintf("durations-%d.parquet", p)))
		require.NoError(t, err)
		gotRows = append(gotRows, rows...)
	}
	keys := func(rs []analyze.DurationRow) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = fmt.Sprintf("%+v", r)
		}
		sort.Strings(out)
		return out
	}
	require.Equal(t, len(wantRows), len(gotRows))
	require.Equal(t, keys(wantRows), keys(gotRows))

	// Partitions joined with other windows do not merge.
	other := filepath.Join(work, "state-other")
	require.NoError(t, RunPart(PartConfig{Export: ex, Records: files[1:2], State: other, Partition: 1, Rank: sample.Rank}))
	_, err = MergeParts(analyze.Config{}, ex, []string{states[0], other}, "")
	require.ErrorContains(t, err, "every partition is joined with one --window")
	require.NoError(t, RunPart(PartConfig{Export: ex, Records: files[1:2], State: other, Partition: 1, Rank: sample.Rank, NoCapacity: true}))
	_, err = MergeParts(analyze.Config{}, ex, []string{states[0], other}, "")
	require.ErrorContains(t, err, "one joined with capacity's sums, the other without")

	// Records of another partition are refused, not joined.
	err = RunPart(PartConfig{Export: ex, Records: files[1:2], State: filepath.Join(work, "x"), Partition: 0})
	require.ErrorContains(t, err, "belongs to partition 1, not 0")
}

// What cannot make one export is refused before anything is written.
func TestExportRefusals(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 500, 1)
	base := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b"}
	out := filepath.Join(t.TempDir(), "ex")
	cfg := base
	cfg.Out = out
	_, err := Export(ExportConfig{Config: cfg, Partitions: 3})
	require.ErrorContains(t, err, "a power of two")
	_, err = Export(ExportConfig{Config: cfg, Partitions: 4})
	require.NoError(t, err)
	before := exportRecords(t, out)
	// The same nodes again: replaced, the same records.
	_, err = Export(ExportConfig{Config: cfg, Partitions: 4})
	require.NoError(t, err)
	require.Equal(t, before, exportRecords(t, out))
	// Other partitions, another reference: refused.
	_, err = Export(ExportConfig{Config: cfg, Partitions: 8})
	require.ErrorContains(t, err, "one export's nodes must agree")
	other := cfg
	other.Ref = "a"
	_, err = Export(ExportConfig{Config: other, Partitions: 4})
	require.ErrorContains(t, err, "one export's nodes must agree")
	// One node of those already in it: its records would be there twice.
	one := cfg
	one.Logs = nil
	files, _ := filepath.Glob(filepath.Join(dir, "logs", "c-*"))
	one.Logs = files
	_, err = Export(ExportConfig{Config: one, Partitions: 4})
	require.ErrorContains(t, err, "node c is already in")
	require.Equal(t, before, exportRecords(t, out))
	// A directory that holds something else.
	busy := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(busy, "mine.txt"), []byte("x"), 0o644))
	cfg.Out = busy
	_, err = Export(ExportConfig{Config: cfg, Partitions: 4})
	require.ErrorContains(t, err, "is not empty and holds no export.json")
	b, err := os.ReadFile(filepath.Join(busy, "mine.txt"))
	require.NoError(t, err)
	require.Equal(t, "x", string(b))
	entries, _ := os.ReadDir(busy)
	require.Len(t, entries, 1)
}

// writeCountsAndRun adds to writeTopology's logs a counter channel on the
// sink (periods ending at 0.8, 1.1 and 1.4 s, opened at 0.5 s: before the
// first tuple) and a FIRSTLAST channel on the source (1 and 1.7 s).
func writeCountsAndRun(t *testing.T, logs string) {
	t.Helper()
	a, c := simlogs.TopologyNodes[0], simlogs.TopologyNodes[2]
	var counts []string
	for s := 1; s <= 3; s++ {
		counts = append(counts, fmt.Sprintf("%d,%d,0", c.At(0.5+float64(s)*0.3), 1000*s))
	}
	rate := logfile.Header{Node: c.Name, Host: "h", PID: 30, Channel: 7, Name: "sink rate", Handler: "PERIODICCOUNTER", TSCHz: c.Hz}
	rate.OpenSync.TSC = c.At(0.5)
	simlogs.WriteASCII(t, logs, rate, counts)
	simlogs.WriteASCII(t, logs, logfile.Header{Node: a.Name, Host: "h", PID: 10, Channel: 8, Name: "source run", Handler: "FIRSTLAST", TSCHz: a.Hz},
		[]string{fmt.Sprintf("3,%d", a.At(1)), fmt.Sprintf("4,%d", a.At(1.7))})
}

// exportParts exports cfg's logs into ex with parts partitions, each of
// which gets records, and returns their files in partition order.
func exportParts(t testing.TB, cfg analyze.Config, ex string, parts int) []string {
	t.Helper()
	cfg.Out = ex
	_, err := Export(ExportConfig{Config: cfg, Partitions: parts})
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(ex, "records", "part=*", "*.parquet"))
	require.NoError(t, err)
	require.Len(t, files, parts)
	sort.Strings(files)
	return files
}

// Every record of an export counts once: join-part holds the records it is
// given against the export's counts per channel and partition (a file given
// twice or copied, a file missing: refused), and merge-parts takes each
// partition from one state and wants every partition with records.
func TestPartsCountEachRecordOnce(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 2000, 3)
	ex := filepath.Join(dir, "export")
	cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b"}
	files := exportParts(t, cfg, ex, 4)
	work := t.TempDir()
	part := func(name string, p int, records ...string) error {
		return RunPart(PartConfig{Export: ex, Records: records, State: filepath.Join(work, name), Partition: p, NoCapacity: true})
	}

	// join-part: a file twice, a copy beside it, a file missing.
	err := part("twice", 1, files[1], files[1])
	require.ErrorContains(t, err, "partition 1, channel ")
	require.ErrorContains(t, err, "a records file given twice, or a copy of one")
	cp := filepath.Join(work, "copy.parquet")
	b, err := os.ReadFile(files[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cp, b, 0o644))
	require.ErrorContains(t, part("copy", -1, files[1], cp), "a records file given twice, or a copy of one")
	err = part("none", 2)
	require.ErrorContains(t, err, "0 records read, the export wrote")
	require.ErrorContains(t, err, filepath.Join("records", "part=00002")+"/")
	for _, name := range []string{"twice", "copy", "none"} {
		_, err := os.Stat(filepath.Join(work, name))
		require.True(t, errors.Is(err, os.ErrNotExist), "no state for %s", name)
	}

	// The order from the votes, then every partition joined with it.
	require.NoError(t, part("votes", 0, files[0]))
	sample, err := MergeParts(analyze.Config{}, ex, []string{filepath.Join(work, "votes")}, "")
	require.NoError(t, err, "votes only: a sample of the partitions gives the order")
	var states []string
	for p, f := range files {
		st := filepath.Join(work, fmt.Sprintf("state-%d", p))
		require.NoError(t, RunPart(PartConfig{Export: ex, Records: []string{f}, State: st, Partition: p, Rank: sample.Rank, NoCapacity: true}))
		states = append(states, st)
	}
	merge := func(out string, st ...string) (*MergeResult, error) {
		return MergeParts(analyze.Config{Out: filepath.Join(work, out), NoCapacity: true}, ex, st, "")
	}
	_, err = merge("dup", append(slices.Clone(states), states[1])...)
	require.ErrorContains(t, err, "both hold partition 1: a state given twice")
	_, err = merge("short", states[0], states[1], states[3])
	require.ErrorContains(t, err, "no state holds partition 2 (")
	for _, out := range []string{"dup", "short"} {
		_, err := os.Stat(filepath.Join(work, out, "summary.csv"))
		require.True(t, errors.Is(err, os.ErrNotExist), "nothing written for %s", out)
	}
	// In a tree: a half's state holds its partitions; one of them again
	// beside it is refused, the rest merge.
	_, err = MergeParts(analyze.Config{NoCapacity: true}, ex, states[:2], filepath.Join(work, "half"))
	require.NoError(t, err)
	_, err = merge("tree-dup", filepath.Join(work, "half"), states[1], states[2], states[3])
	require.ErrorContains(t, err, "both hold partition 1")
	res, err := merge("tree", filepath.Join(work, "half"), states[2], states[3])
	require.NoError(t, err)
	whole, err := merge("flat", states...)
	require.NoError(t, err)
	require.Equal(t, whole.Tuples, res.Tuples)
	// Two partitions in one join-part (no --partition): each channel's
	// records of both, in the room the export's counts give for all four,
	// move up together; merged with the other two, the same summary.
	require.NoError(t, RunPart(PartConfig{Export: ex, Records: []string{files[0], files[2]}, State: filepath.Join(work, "pair"),
		Partition: -1, Rank: sample.Rank, NoCapacity: true}))
	paired, err := merge("paired", filepath.Join(work, "pair"), states[1], states[3])
	require.NoError(t, err)
	require.Equal(t, whole.Tuples, paired.Tuples)
	flatCSV, err := os.ReadFile(filepath.Join(work, "flat", "summary.csv"))
	require.NoError(t, err)
	pairedCSV, err := os.ReadFile(filepath.Join(work, "paired", "summary.csv"))
	require.NoError(t, err)
	require.Equal(t, string(flatCSV), string(pairedCSV))
	acfg := cfg
	acfg.Out, acfg.NoCapacity, acfg.NoCriticalPath, acfg.NoMace, acfg.NoReport = filepath.Join(work, "analyze"), true, true, true, true
	all, err := analyze.Run(acfg)
	require.NoError(t, err)
	require.Equal(t, all.Tuples, whole.Tuples, "the partitions merged count what analyze counts")

	// A node's channels listed twice (two exports into one directory at
	// once): refused by every stage.
	metas, _ := filepath.Glob(filepath.Join(ex, "channels", "*.json"))
	require.Len(t, metas, 1)
	b, err = os.ReadFile(metas[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ex, "channels", "zz.json"), b, 0o644))
	require.ErrorContains(t, part("listed-twice", 0, files[0]), "was exported into this directory twice")
}

// A log directory given twice under two names (a copy) is refused, naming
// both files: its records would count twice.
func TestLogsGivenTwiceRefused(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 200, 5)
	logs, copyDir := filepath.Join(dir, "logs"), filepath.Join(dir, "logs-copy")
	require.NoError(t, os.CopyFS(copyDir, os.DirFS(logs)))
	cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{logs, copyDir}, Ref: "b", Out: filepath.Join(dir, "out"), NoCapacity: true}
	_, err := analyze.Run(cfg)
	require.ErrorContains(t, err, "are the same channel's log")
	require.ErrorContains(t, err, "a log directory given twice")
	require.ErrorContains(t, err, copyDir)
	cfg.Logs = []string{logs}
	_, err = analyze.Run(cfg)
	require.NoError(t, err, "each once")
}

// FuzzMergeParts gives merge-parts the partitions' states in any order,
// some twice, some missing: with each partition once it counts what
// analyze counts; a partition twice is refused as such, and so is one
// missing. The seeds run under `go test`; `go test -fuzz FuzzMergeParts`
// explores more. The export, its 8 partitions' states and analyze's count
// come first, once.
func FuzzMergeParts(f *testing.F) {
	dir := f.TempDir()
	writeTopology(f, dir, 1000, 9)
	cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b"}
	ex := filepath.Join(dir, "export")
	files := exportParts(f, cfg, ex, 8)
	require.NoError(f, RunPart(PartConfig{Export: ex, Records: files, State: filepath.Join(dir, "votes"), Partition: -1, NoCapacity: true}))
	votes, err := MergeParts(analyze.Config{}, ex, []string{filepath.Join(dir, "votes")}, "")
	require.NoError(f, err)
	var states []string
	for p, file := range files {
		st := filepath.Join(dir, fmt.Sprintf("state-%d", p))
		require.NoError(f, RunPart(PartConfig{Export: ex, Records: []string{file}, State: st, Partition: p, Rank: votes.Rank, NoCapacity: true}))
		states = append(states, st)
	}
	acfg := cfg
	acfg.Out, acfg.NoCapacity, acfg.NoCriticalPath, acfg.NoMace, acfg.NoReport = filepath.Join(dir, "analyze"), true, true, true, true
	all, err := analyze.Run(acfg)
	require.NoError(f, err)

	for _, seed := range [][]byte{
		{0, 1, 2, 3, 4, 5, 6, 7}, {7, 6, 5, 4, 3, 2, 1, 0}, {3, 1, 4, 0, 5, 2, 6, 7},
		{0, 1, 2, 3, 4, 5, 6, 7, 1}, {0, 0}, {2, 3}, {0, 1, 2, 3, 4, 5, 6}, {5, 6, 7, 0, 1, 2, 3, 4, 4},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, picks []byte) {
		if len(picks) == 0 || len(picks) > 24 {
			t.Skip()
		}
		var given []string
		count := make([]int, len(states))
		for _, b := range picks {
			p := int(b) % len(states)
			given = append(given, states[p])
			count[p]++
		}
		res, err := MergeParts(analyze.Config{NoCapacity: true}, ex, given, "")
		switch {
		case slices.ContainsFunc(count, func(n int) bool { return n > 1 }):
			require.ErrorContains(t, err, "a state given twice")
		case slices.Contains(count, 0):
			require.ErrorContains(t, err, "no state holds partition")
		default:
			require.NoError(t, err)
			require.Equal(t, all.Tuples, res.Tuples, "each partition once: analyze's count")
		}
	})
}

// A partition keeps no exact values of a pair whose channels each hold
// more records in the whole export than the bound (partExactBound): the
// states carry histograms only, and the merged summary says its quantiles
// are the histograms' (summary.csv's quantiles column), its counts,
// minima and maxima still the exact run's.
func TestPartKeepsNoExactPastTheBound(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 3000, 7)
	cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b",
		Out: filepath.Join(dir, "analyze"), NoCapacity: true, NoCriticalPath: true, NoMace: true, NoReport: true, NoDurations: true}
	_, err := analyze.Run(cfg)
	require.NoError(t, err)
	ex := filepath.Join(dir, "export")
	files := exportParts(t, cfg, ex, 4)
	work := t.TempDir()
	var votes []string
	for p, f := range files {
		votes = append(votes, filepath.Join(work, fmt.Sprintf("votes-%d", p)))
		require.NoError(t, RunPart(PartConfig{Export: ex, Records: []string{f}, State: votes[p], Partition: p}))
	}
	order, err := MergeParts(analyze.Config{}, ex, votes, "")
	require.NoError(t, err)
	summary := func(name string) ([][]string, int64) {
		var states []string
		var size int64
		for p, f := range files {
			st := filepath.Join(work, fmt.Sprintf("%s-%d", name, p))
			require.NoError(t, RunPart(PartConfig{Export: ex, Records: []string{f}, State: st, Partition: p, Rank: order.Rank, NoCapacity: true}))
			fi, err := os.Stat(st)
			require.NoError(t, err)
			size += fi.Size()
			states = append(states, st)
		}
		out := filepath.Join(work, name)
		_, err := MergeParts(analyze.Config{Out: out, NoCapacity: true}, ex, states, "")
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(out, "summary.csv"))
		require.NoError(t, err)
		var rows [][]string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			rows = append(rows, strings.Split(l, ","))
		}
		return rows, size
	}
	exact, exactBytes := summary("exact")
	b, err := os.ReadFile(filepath.Join(cfg.Out, "summary.csv"))
	require.NoError(t, err)
	require.Equal(t, strings.TrimSpace(string(b)), func() string {
		var ls []string
		for _, r := range exact {
			ls = append(ls, strings.Join(r, ","))
		}
		return strings.Join(ls, "\n")
	}(), "under the bound: analyze's summary, exact")

	defer func(b uint64) { partExactBound = b }(partExactBound)
	partExactBound = 1000 // each tuple channel holds 3,000 records
	hist, histBytes := summary("hist")
	require.Len(t, hist, len(exact))
	q := len(exact[0]) - 1
	require.Equal(t, "quantiles", exact[0][q])
	switched := 0
	for i := 1; i < len(exact); i++ {
		require.Equal(t, exact[i][:5], hist[i][:5], "kind, from, to, count, min")
		require.Equal(t, exact[i][9], hist[i][9], "max")
		require.Equal(t, "exact", exact[i][q])
		if hist[i][q] == "histogram-0.1%" {
			switched++
		} else {
			require.Equal(t, exact[i], hist[i])
		}
	}
	require.Positive(t, switched, "some pair's quantiles came from the histograms")
	// (At this size a histogram takes more bytes than 750 values: the
	// states shrink only where a pair's values outnumber its buckets.)
	t.Logf("%d of %d pairs from the histograms; states %d bytes with exact values, %d without", switched, len(exact)-1, exactBytes, histBytes)
}
