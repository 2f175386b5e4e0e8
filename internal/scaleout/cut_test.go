package scaleout

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/internal/racetest"
	"cloudprofiler/internal/results"
	"cloudprofiler/internal/simlogs"
	"cloudprofiler/minrtt"
)

// cutStart is the synthetic rounds' wall clock at true time 0.
const cutStart = int64(1_795_000_000_000_000_000)

// writeCutTopology writes writeTopology's run (tuples from 1 to 1.8 s,
// true time), with a counter and a FIRSTLAST channel, and gives its
// rounds the wall-clock times they ran at; the sink's log is damaged (a
// line that is no record).
func writeCutTopology(t *testing.T, dir string) {
	t.Helper()
	writeTopology(t, dir, 20000, 11)
	logs := filepath.Join(dir, "logs")
	writeCountsAndRun(t, logs)
	rounds, err := minrtt.ReadRounds(filepath.Join(dir, "rounds"))
	require.NoError(t, err)
	for _, r := range rounds {
		at := map[string]float64{"before": 0, "after": 60}[r.Label]
		r.StartedNs, r.EndedNs = cutStart+int64(at*1e9), cutStart+int64((at+0.1)*1e9)
		_, err := minrtt.WriteRound(filepath.Join(dir, "rounds"), r)
		require.NoError(t, err)
	}
	sinks, _ := filepath.Glob(filepath.Join(logs, "c-*sink_in*"))
	require.Len(t, sinks, 1)
	b, err := os.ReadFile(sinks[0])
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	lines[100] = "damaged"
	require.NoError(t, os.WriteFile(sinks[0], []byte(strings.Join(lines, "\n")), 0o644))
}

// trueTime is when a record of node was logged, in true seconds (the
// synthetic counters are known).
func trueTime(node string, tsc uint64) float64 {
	for _, n := range simlogs.TopologyNodes {
		if n.Name == node {
			return (float64(tsc) - n.Off) / n.Hz
		}
	}
	panic(node)
}

// A cut keeps every record logged inside the range and none outside it,
// worked out from the synthetic run's true times (within 1 ms of the
// ends: the rounds' translation and the start of the first round); the
// same cut whether the range is given in seconds or as wall-clock times;
// and analyze reads it: durations equal to the whole run's for every pair
// of records inside, the critical path and Mace run, the counter's first
// period begun where the period before it ended, the damage of the
// source said.
func TestCutKeepsTheRange(t *testing.T) {
	dir := t.TempDir()
	writeCutTopology(t, dir)
	cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b"}
	const from, to, slack = 1.2, 1.5, 1e-3
	cut := filepath.Join(dir, "cut")
	ecfg := ExportConfig{Config: cfg, From: "1.2", To: "1.5"}
	ecfg.Out = cut
	res, err := Cut(ecfg)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, res.Nodes)

	wall := func(s float64) string { return time.Unix(0, cutStart+int64(s*1e9)).UTC().Format(time.RFC3339Nano) }
	cut2 := filepath.Join(dir, "cut2")
	ecfg.Out, ecfg.From, ecfg.To = cut2, wall(from), wall(to)
	_, err = Cut(ecfg)
	require.NoError(t, err)

	// Every record, by its true time.
	kept := map[string]int{}
	for _, n := range []string{"a", "b", "c"} {
		for k, v := range logRecords(t, filepath.Join(cut, "logs", n)) {
			kept[k] += v
		}
		files, _ := filepath.Glob(filepath.Join(cut, "logs", n, "*"))
		for _, f := range files {
			b1, err := os.ReadFile(f)
			require.NoError(t, err)
			b2, err := os.ReadFile(filepath.Join(cut2, "logs", n, filepath.Base(f)))
			require.NoError(t, err)
			require.Equal(t, b1, b2, "the cut of seconds and the cut of wall-clock times: %s", f)
		}
	}
	inside, outside := 0, 0
	for k, n := range logRecords(t, filepath.Join(dir, "logs")) {
		var label string
		var id int64
		var tsc uint64
		f := strings.Fields(k)
		_, err := fmt.Sscanf(f[len(f)-2]+" "+f[len(f)-1], "%d %d", &id, &tsc)
		require.NoError(t, err)
		label = strings.Join(f[:len(f)-2], " ")
		if strings.HasSuffix(label, "source run") {
			continue // FIRSTLAST: checked below with the analysis
		}
		tt := trueTime(label[:1], tsc)
		switch {
		case tt >= from+slack && tt < to-slack:
			require.Equal(t, n, kept[k], "logged at %.6f s, inside: %s", tt, k)
			inside++
		case tt < from-slack || tt >= to+slack:
			require.Zero(t, kept[k], "logged at %.6f s, outside: %s", tt, k)
			outside++
		}
	}
	require.Greater(t, inside, 25000)
	require.Greater(t, outside, 50000)

	// analyze reads the cut, every analysis on.
	full := cfg
	full.Out = filepath.Join(dir, "full")
	_, err = analyze.Run(full)
	require.NoError(t, err)
	cfgCut := analyze.Config{Rounds: filepath.Join(cut, "rounds"), Logs: []string{filepath.Join(cut, "logs")}, Ref: "b", Out: filepath.Join(dir, "cut-analysis")}
	got, err := analyze.Run(cfgCut)
	require.NoError(t, err)
	require.NotEmpty(t, got.CritPath, "the critical path ran on the cut")
	wantRows, err := results.ReadAll[analyze.DurationRow](filepath.Join(full.Out, "durations.parquet"))
	require.NoError(t, err)
	gotRows, err := results.ReadAll[analyze.DurationRow](filepath.Join(cfgCut.Out, "durations.parquet"))
	require.NoError(t, err)
	key := func(r analyze.DurationRow) string { return fmt.Sprintf("%+v", r) }
	all := map[string]int{}
	for _, r := range wantRows {
		all[key(r)]++
	}
	mustHave := 0
	for _, r := range wantRows {
		a, b := trueTime(r.FromNode, r.StartTSC), trueTime(r.ToNode, r.EndTSC)
		if a >= from+slack && b < to-slack {
			mustHave++
		}
	}
	e2e := map[int64][]analyze.DurationRow{} // the whole run's end-to-end rows by tuple
	for _, r := range wantRows {
		if r.Kind == analyze.KindEndToEnd {
			e2e[r.TupleID] = append(e2e[r.TupleID], r)
		}
	}
	in := 0
	for _, r := range gotRows {
		if r.TupleID == 99999999 {
			// writeTopology's channel that logs one id over and over: the
			// whole run leaves it out (more records than a tuple's), the
			// cut holds fewer of them.
			continue
		}
		if r.Kind == analyze.KindEndToEnd && all[key(r)] == 0 {
			// A tuple the range cut short: its end-to-end runs between its
			// first and last records inside, the whole run's from before
			// the start or past the end.
			ws := e2e[r.TupleID]
			require.NotEmpty(t, ws, "%+v", r)
			for _, w := range ws {
				a, b := trueTime(w.FromNode, w.StartTSC), trueTime(w.ToNode, w.EndTSC)
				require.True(t, a < from+slack || b >= to-slack, "%+v against the whole run's %+v", r, w)
			}
			continue
		}
		require.Positive(t, all[key(r)], "a duration of the cut that the whole run does not have: %+v", r)
		all[key(r)]--
		if a, b := trueTime(r.FromNode, r.StartTSC), trueTime(r.ToNode, r.EndTSC); a >= from+slack && b < to-slack {
			in++
		}
	}
	require.Equal(t, mustHave, in, "every duration between two records inside the range")
	tp, err := os.ReadFile(filepath.Join(cfgCut.Out, "throughput.csv"))
	require.NoError(t, err)
	require.Regexp(t, `\nc,sink rate,[0-9.]+,0\.300000,3000,`, string(tp), "the period ending at 1.4 s began at 1.1 s, where the one before it ended")
	require.Equal(t, 1, strings.Count(string(tp), "sink rate"))
	// A cut of the cut, the same range: the same throughput (its counter's
	// first period still begins where the one before it ended).
	cut3 := ExportConfig{Config: analyze.Config{Rounds: cfgCut.Rounds, Logs: cfgCut.Logs, Ref: "b", Out: filepath.Join(dir, "cut3")}, From: "1.2", To: "1.5"}
	_, err = Cut(cut3)
	require.NoError(t, err)
	again := analyze.Config{Rounds: filepath.Join(cut3.Out, "rounds"), Logs: []string{filepath.Join(cut3.Out, "logs")}, Ref: "b", Out: filepath.Join(dir, "cut3-analysis")}
	_, err = analyze.Run(again)
	require.NoError(t, err)
	tp3, err := os.ReadFile(filepath.Join(again.Out, "throughput.csv"))
	require.NoError(t, err)
	require.Equal(t, string(tp), string(tp3))

	var said []string
	for _, c := range got.Incomplete() {
		said = append(said, c.Problems...)
	}
	require.Len(t, said, 1)
	require.Regexp(t, `^before the cut, in .*sink_in.*: 1 damaged lines skipped$`, said[0])
	sum, err := os.ReadFile(filepath.Join(cfgCut.Out, "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(sum), "before the cut")
}

// What cannot make a cut is refused before anything is written; a cut of
// another range into the same directory too.
func TestCutRefusals(t *testing.T) {
	dir := t.TempDir()
	writeCutTopology(t, dir)
	cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b", Out: filepath.Join(dir, "cut")}
	for _, c := range []struct{ from, to, want string }{
		{"", "", "give --from, --to or both"},
		{"1.5", "1.2", "is not before --to"},
		{"yesterday", "", `--from "yesterday": a wall-clock time`},
		{"", "NaN", `--to "NaN"`},
		{"2300-01-01T00:00:00Z", "", "--from 2300-01-01T00:00:00Z: outside the times a range can hold (1677-09-21T00:12:43Z to 2262-04-11T23:47:16Z)"},
		{"0001-01-01T00:00:00Z", "9999-01-01T00:00:00Z", "--from 0001-01-01T00:00:00Z: outside the times"},
		{"1000", "", "keeps none of the "},           // after the run
		{"", "-1000", "the run's records lie from "}, // before it
	} {
		_, err := Cut(ExportConfig{Config: cfg, From: c.from, To: c.to})
		require.ErrorContains(t, err, c.want)
		_, err = os.Stat(cfg.Out)
		require.ErrorIs(t, err, os.ErrNotExist, "nothing written")
	}
	// Only nodes a and b's logs, then c's into the same cut: one cut.
	for _, n := range []string{"a", "b"} {
		logs, _ := filepath.Glob(filepath.Join(dir, "logs", n+"-*"))
		c := cfg
		c.Logs = logs
		_, err := Cut(ExportConfig{Config: c, From: "1.2"})
		require.NoError(t, err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "c-*"))
	c := cfg
	c.Logs = logs
	_, err := Cut(ExportConfig{Config: c, From: "1.3"})
	require.ErrorContains(t, err, "holds a cut of another range")
	_, err = Cut(ExportConfig{Config: c, From: "1.2"})
	require.NoError(t, err)
	ents, err := os.ReadDir(filepath.Join(cfg.Out, "logs"))
	require.NoError(t, err)
	require.Len(t, ents, 3)
	// A directory of something else is not written into.
	other := filepath.Join(dir, "other")
	require.NoError(t, os.MkdirAll(other, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine\n"), 0o644))
	c.Out = other
	_, err = Cut(ExportConfig{Config: c, From: "1.2"})
	require.ErrorContains(t, err, "holds no cut.json")
	left, _ := os.ReadDir(other)
	require.Len(t, left, 1)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	require.Equal(t, []string{"notes.txt"}, names)
}

// A cut tests a record's raw reading against the range translated into
// its node's counter once (minrtt.ReadingRange) instead of translating the
// record: the same records are kept as by translating each one, the ends
// included exactly as before (from in, to out). Checked on the
// topology's logs (three nodes, the reference b, each method) with the
// ends placed on records' own estimates and a hair either side of them,
// so that the records nearest each end (the one on it, its neighbours
// just inside and just outside) decide: every record of every channel
// against its translation, then whole cuts (cutChannel) against the
// records, counter periods and first period's start that translating
// each record picks.
//
// Pure arithmetic on the test's goroutine (the cuts run one after the
// other): the export's tests cover cutChannel on the workers under -race.
func TestCutRangeIsTheTranslation(t *testing.T) {
	racetest.Arithmetic(t)
	dir := t.TempDir()
	writeCutTopology(t, dir)
	for _, meth := range []minrtt.Method{minrtt.MethodBest, minrtt.MethodPaper, minrtt.MethodAllProbes} {
		cfg := analyze.Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")}, Ref: "b", Method: meth,
			NoCapacity: true, NoCriticalPath: true, NoMace: true, NoReport: true, NoDurations: true}
		pr, err := analyze.Prepare(cfg)
		require.NoError(t, err)
		chans, model := pr.Channels(), pr.Model()
		// Every channel's records (counter periods as records of their
		// end) and their estimates, by node.
		type rec struct {
			r   logfile.Record
			est float64
		}
		recs := make([][]rec, len(chans))
		ests := map[int][]float64{}
		for i, c := range chans {
			lf, err := logfile.Open(c.Path)
			require.NoError(t, err)
			add := func(r logfile.Record) {
				v := model.PointRelIdx(pr.Node(i), r.TSC).Est
				recs[i] = append(recs[i], rec{r, v})
				if c.Role != analyze.RoleLineage {
					ests[pr.Node(i)] = append(ests[pr.Node(i)], v)
				}
			}
			if c.Role == analyze.RoleCounter {
				err = lf.Counters(func(r logfile.CounterRecord) error { add(logfile.Record{TSC: r.TSC}); return nil })
			} else {
				err = lf.Records(func(r logfile.Record) error { add(r); return nil })
			}
			if !errors.Is(err, logfile.ErrDamaged) {
				require.NoError(t, err)
			}
			lf.Close()
		}
		nodes := []int{model.NodeIndex("a"), model.NodeIndex("b"), model.NodeIndex("c")}
		for _, n := range nodes {
			sort.Float64s(ests[n])
			require.Greater(t, len(ests[n]), 10000)
		}
		at := func(node, permille int) float64 { e := ests[nodes[node]]; return e[len(e)*permille/1000] }
		up := func(v float64) float64 { return math.Nextafter(v, math.Inf(1)) }
		down := func(v float64) float64 { return math.Nextafter(v, math.Inf(-1)) }
		ranges := [][2]float64{
			{at(0, 300), at(2, 700)}, {at(1, 200), at(0, 600)}, {at(2, 450), at(1, 550)},
			{up(at(0, 300)), down(at(2, 700))}, {down(at(1, 200)), up(at(0, 600))},
			{math.Inf(-1), at(2, 500)}, {at(1, 500), math.Inf(1)},
		}
		nearIn, nearOut, onEnd := 0, 0, 0
		for ri, rg := range ranges {
			from, to := rg[0], rg[1]
			rrs := map[int]*minrtt.ReadingRange{}
			for _, n := range nodes {
				rrs[n] = model.RangeIdx(n, from, to)
				require.Less(t, rrs[n].Bands(), uint64(1)<<24, "%s: node %d: the integer test decides", meth, n)
			}
			// Every record's test, against its translation.
			for i, c := range chans {
				if c.Role == analyze.RoleLineage {
					continue
				}
				rr := rrs[pr.Node(i)]
				for _, r := range recs[i] {
					// Plain comparisons, not require's: millions of calls, and
					// require's reflection took most of this test's time under -race.
					want := r.est >= from && r.est < to
					if got := rr.Contains(r.r.TSC); got != want {
						t.Fatalf("%s: %s reading %d, estimate %v, in [%v, %v): Contains %v, want %v", meth, c.Label(), r.r.TSC, r.est, from, to, got, want)
					}
					if got := rr.Before(r.r.TSC); got != (r.est < from) {
						t.Fatalf("%s: %s reading %d, estimate %v, from %v: Before %v", meth, c.Label(), r.r.TSC, r.est, from, got)
					}
					if r.est == from || r.est == to {
						onEnd++
					}
					// Within 100k reference cycles (40 us) of an end.
					if d := math.Min(math.Abs(r.est-from), math.Abs(r.est-to)); d < 1e5 {
						if want {
							nearIn++
						} else {
							nearOut++
						}
					}
				}
			}
			// Whole cuts, against translating each record: every range with
			// the best method; with the others, whose ranges differ from
			// its only in rr (tested record by record above), three (a
			// range, its ends moved by an ulp, an open end): cutting reads
			// every channel whole: most of this test's time under -race.
			if meth != minrtt.MethodBest && ri != 0 && ri != 3 && ri != 5 {
				continue
			}
			meta := CutMeta{FromNs: 1, ToNs: 2, FromCycles: from, ToCycles: to}
			span := &cycleSpan{lo: math.Inf(1), hi: math.Inf(-1)}
			for i, c := range chans {
				dst := filepath.Join(dir, "cuts", fmt.Sprintf("%s-%v-%v", meth, from, to), cutName(chans, i))
				_, _, err := cutChannel(pr, i, dst, meta, rrs[pr.Node(i)], span)
				require.NoError(t, err)
				var want []logfile.Record
				var start uint64
				for _, r := range recs[i] {
					switch {
					case c.Role == analyze.RoleLineage || r.est >= from && r.est < to:
						want = append(want, r.r)
					case len(want) == 0 && r.est < from:
						start = r.r.TSC // a period that ended before the range
					}
				}
				lf, err := logfile.Open(dst)
				require.NoError(t, err)
				var got []logfile.Record
				if c.Role == analyze.RoleCounter {
					err = lf.Counters(func(r logfile.CounterRecord) error { got = append(got, logfile.Record{TSC: r.TSC}); return nil })
					require.Equal(t, start, lf.Header.Cut.PeriodStartTSC, "%s: %s: the first period's start", meth, c.Label())
				} else {
					err = lf.Records(func(r logfile.Record) error { got = append(got, r); return nil })
				}
				require.NoError(t, err)
				lf.Close()
				require.Equal(t, want, got, "%s: %s in [%v, %v)", meth, c.Label(), from, to)
			}
		}
		// The ends were among the records: some on them, inside and out.
		require.Greater(t, nearIn, 20, "%s", meth)
		require.Greater(t, nearOut, 20, "%s", meth)
		require.GreaterOrEqual(t, onEnd, 8, "%s", meth)
	}
}
