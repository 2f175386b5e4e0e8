package critpath

import (
	"cloudprofiler/tests/internal/testrun"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// tools are the built programs the tests run.
type tools struct {
	cli, tandem string
	slice       bool // analyze takes --slice (the critical-path analysis is in)
	lineage     bool // tandem --fork runs: the library has CP_LogLineage
	lineageWhy  string
}

var (
	toolsOnce sync.Once
	theTools  tools
	toolsSkip string
	toolsErr  error
)

// needTools skips the test unless CP_TOOL and CP_TANDEM name the built tool
// and pipeline (`make test-critpath` sets them).
func needTools(t *testing.T) tools {
	t.Helper()
	toolsOnce.Do(func() { theTools, toolsSkip, toolsErr = findTools() })
	if toolsErr != nil {
		t.Fatal(toolsErr)
	}
	if toolsSkip != "" {
		t.Skip(toolsSkip)
	}
	return theTools
}

func findTools() (tools, string, error) {
	tl := tools{cli: os.Getenv("CP_TOOL"), tandem: os.Getenv("CP_TANDEM")}
	if tl.cli == "" || tl.tandem == "" {
		return tl, "CP_TOOL and CP_TANDEM (build/cloudprofiler and build/tandem) are not set: run `make test-critpath`", nil
	}
	for _, p := range []*string{&tl.cli, &tl.tandem} {
		abs, err := filepath.Abs(*p)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			return tl, fmt.Sprintf("%s: %v (make build)", *p, err), nil
		}
		*p = abs
	}
	help := testrun.Run(30*time.Second, nil, tl.cli, "analyze", "--help")
	tl.slice = strings.Contains(help.Stdout+help.Stderr, "-slice")
	dir, err := os.MkdirTemp("", "cp-critpath-probe")
	if err != nil {
		return tl, "", err
	}
	defer os.RemoveAll(dir)
	p := testrun.Run(20*time.Second, []string{"CP_LOG_DIR=" + dir}, tl.tandem, "--no-count", "--no-rt", "--fork", "--tuples", "1", "--rate", "max")
	switch {
	case p.Err == nil:
		tl.lineage = true
	case p.Code == 2:
		tl.lineageWhy = strings.TrimSpace(p.Stderr)
	default:
		return tl, "", fmt.Errorf("tandem --fork does not run: %v\n%s", p.Err, p.Stderr)
	}
	return tl, "", nil
}

// ---- tandem and its truth ----

type opTruth struct {
	Name             string  `json:"name"`
	Tuples           int64   `json:"tuples"`
	MeanCycles       float64 `json:"mean_cycles"`
	SpunMean         float64 `json:"spun_mean_cycles"`
	WaitsInput       int64   `json:"waits_input"`
	WaitedInputS     float64 `json:"waited_input_s"`
	FirstInTSC       uint64  `json:"first_in_tsc"`
	LastOutTSC       uint64  `json:"last_out_tsc"`
	WaitsOutput      int64   `json:"waits_output"`
	PreemptedTuples  int64   `json:"preempted_tuples"`
	LongestGapS      float64 `json:"longest_gap_s"`
	BurstTuples      int64   `json:"burst_tuples"`
	BurstQueueCycles int64   `json:"burst_queue_cycles"`
	BurstWaitCycles  int64   `json:"burst_wait_cycles"`
	BurstAheadCycles float64 `json:"burst_ahead_cycles"`
}

type truth struct {
	TscHz    float64 `json:"tsc_hz"`
	ElapsedS float64 `json:"elapsed_s"`
	Source   struct {
		Tuples int64 `json:"tuples"`
	} `json:"source"`
	Operators []opTruth `json:"operators"`
	Sink      struct {
		Tuples int64 `json:"tuples"`
	} `json:"sink"`
	Burst *struct {
		Tuples  int64 `json:"tuples"`
		FirstID int64 `json:"first_id"`
		LastID  int64 `json:"last_id"`
	} `json:"burst"`
	Fork *struct {
		Outputs int64 `json:"outputs"`
		ALast   int64 `json:"a_last"`
		BLast   int64 `json:"b_last"`
	} `json:"fork"`
}

func (tr *truth) op(name string) opTruth {
	for _, o := range tr.Operators {
		if o.Name == name {
			return o
		}
	}
	return opTruth{Name: name}
}

// pipeline runs tandem with its logs in logs (count channels off: the
// critical path needs the marks only) and returns its truth.
func pipeline(t *testing.T, tl tools, logs string, args ...string) *truth {
	t.Helper()
	argv := append([]string{tl.tandem, "--no-count"}, args...)
	r := testrun.Run(60*time.Second, []string{"CP_LOG_DIR=" + logs}, argv...)
	if r.Err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), r.Err, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	var tr truth
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &tr); err != nil || !(tr.TscHz > 0) {
		t.Fatalf("tandem's truth line: %v: %q", err, r.Stdout)
	}
	if tr.Sink.Tuples != tr.Source.Tuples {
		t.Fatalf("the source sent %d tuples, the sink took %d", tr.Source.Tuples, tr.Sink.Tuples)
	}
	return &tr
}

// ---- analyze ----

// analysis runs `cloudprofiler analyze` on logs into out, with --slice when
// the tool has it; it fails the test on an error or a panic.
func analysis(t *testing.T, tl tools, logs, out, slice string) {
	t.Helper()
	argv := []string{tl.cli, "analyze", "--quiet", "--no-durations", "--no-capacity", "--logs", logs, "--out", out}
	if tl.slice && slice != "" {
		argv = append(argv, "--slice", slice)
	}
	r := testrun.Run(120*time.Second, nil, argv...)
	if r.Err != nil || testrun.Panicked(r.Stderr) {
		t.Fatalf("%s: %v\n%s%s", strings.Join(argv[1:], " "), r.Err, r.Stdout, r.Stderr)
	}
}

// row is one CSV row by column name.
type row map[string]string

func (r row) num(col string) float64 {
	v, err := strconv.ParseFloat(r[col], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// readCSV reads out/name, checking that it has the columns cols; a missing
// file fails the test and says what it waits for.
func readCSV(t *testing.T, out, name string, cols []string) []row {
	t.Helper()
	if _, err := os.Stat(filepath.Join(out, name)); err != nil {
		t.Fatalf("analyze wrote no %s (the critical-path analysis, issue 18, is not in this build?): %v", name, err)
	}
	recs, err := testrun.ReadCSV(filepath.Join(out, name), cols)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]row, len(recs))
	for i, r := range recs {
		rows[i] = row(r)
	}
	return rows
}

var (
	cpColumns = strings.Split("level,slice,start_s,end_s,kind,name,share,participation,consistent,note", ",")
	bdColumns = strings.Split("group,tuples,e2e_mean_us,e2e_bound_us,part,where,mean_us,share,bound_us,total_cycles", ",")
)

// slicePath is one slice of criticalpath.csv (or the whole run).
type slicePath struct {
	key        string // the slice's number, or "run"
	rows       []row
	consistent bool
	note       string
}

// share sums the shares of the slice's rows of a kind (and name, if given).
func (s slicePath) share(kind, name string) float64 {
	var sum float64
	for _, r := range s.rows {
		if r["kind"] == kind && (name == "" || r["name"] == name) {
			sum += r.num("share")
		}
	}
	return sum
}

// part sums the critical participation of the slice's rows of a kind
// (and name, if given).
func (s slicePath) part(kind, name string) float64 {
	var sum float64
	for _, r := range s.rows {
		if r["kind"] == kind && (name == "" || r["name"] == name) {
			sum += r.num("participation")
		}
	}
	return sum
}

func (s slicePath) String() string {
	var parts []string
	for _, r := range s.rows {
		parts = append(parts, fmt.Sprintf("%s %q %.3f", r["kind"], r["name"], r.num("share")))
	}
	return fmt.Sprintf("slice %s [%s]", s.key, strings.Join(parts, ", "))
}

// criticalPath reads criticalpath.csv: the slices in order and the run.
func criticalPath(t *testing.T, out string) (slices []slicePath, run slicePath) {
	t.Helper()
	bySlice := map[string]*slicePath{}
	var order []string
	run = slicePath{key: "run", consistent: true}
	for _, r := range readCSV(t, out, "criticalpath.csv", cpColumns) {
		switch r["level"] {
		case "run":
			run.rows = append(run.rows, r)
		case "slice":
			s := bySlice[r["slice"]]
			if s == nil {
				s = &slicePath{key: r["slice"], consistent: true}
				bySlice[r["slice"]] = s
				order = append(order, r["slice"])
			}
			s.rows = append(s.rows, r)
			if r["consistent"] != "true" {
				s.consistent = false
			}
			if r["note"] != "" && !strings.Contains(s.note, r["note"]) {
				s.note = strings.TrimPrefix(s.note+"; "+r["note"], "; ")
			}
		default:
			t.Errorf("criticalpath.csv: a row of level %q (want slice or run): %v", r["level"], r)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, errA := strconv.Atoi(order[i])
		b, errB := strconv.Atoi(order[j])
		return errA == nil && errB == nil && a < b
	})
	for _, k := range order {
		slices = append(slices, *bySlice[k])
	}
	if len(slices) == 0 || len(run.rows) == 0 {
		t.Fatalf("criticalpath.csv: %d slices, %d whole-run rows", len(slices), len(run.rows))
	}
	return slices, run
}

// checkCriticalPath: in every slice and over the run the shares sum to 1,
// and so does the participation, each row within [0, 1]; every slice is
// consistent unless the run is known not to be (inconsistentOK).
func checkCriticalPath(t *testing.T, slices []slicePath, run slicePath, inconsistentOK bool) {
	t.Helper()
	for _, s := range append(append([]slicePath(nil), slices...), run) {
		var share, part float64
		for _, r := range s.rows {
			sh, pa := r.num("share"), r.num("participation")
			if !(sh >= 0 && sh <= 1+1e-9) || !(pa >= 0 && pa <= 1+1e-9) {
				t.Errorf("%s: a row's share %v or participation %v outside [0, 1]: %v", s.key, r["share"], r["participation"], r)
			}
			share += sh
			part += pa
		}
		if math.Abs(share-1) > 1e-9 || math.Abs(part-1) > 1e-9 {
			t.Errorf("%s: shares sum to %.12f, participation to %.12f (want 1 each)", s, share, part)
		}
		if s.key != "run" && !s.consistent && !inconsistentOK {
			t.Errorf("slice %s is not consistent: %s", s.key, s.note)
		}
		for _, r := range s.rows {
			switch r["kind"] {
			case "operator", "link", "input", "unattributed":
			default:
				t.Errorf("%s: kind %q (want operator, link, input or unattributed)", s.key, r["kind"])
			}
		}
	}
}

// breakdownPart is one part of a breakdown group.
type breakdownPart struct {
	part, where string
	cycles      int64
	row         row
}

// breakdown reads breakdown.csv by group and checks that each group has its
// end-to-end row and that its parts' total_cycles add up to it exactly.
func breakdown(t *testing.T, out string) map[string][]breakdownPart {
	t.Helper()
	groups := map[string][]breakdownPart{}
	for _, r := range readCSV(t, out, "breakdown.csv", bdColumns) {
		c, err := strconv.ParseInt(r["total_cycles"], 10, 64)
		if err != nil {
			t.Errorf("breakdown.csv: total_cycles %q is not an integer: %v", r["total_cycles"], r)
		}
		groups[r["group"]] = append(groups[r["group"]], breakdownPart{r["part"], r["where"], c, r})
	}
	for _, g := range []string{"p99", "median", "all"} {
		if len(groups[g]) == 0 {
			t.Errorf("breakdown.csv has no group %q", g)
		}
	}
	for g, parts := range groups {
		var sum, e2e int64
		n := 0
		for _, p := range parts {
			switch p.part {
			case "end-to-end":
				e2e = p.cycles
				n++
			case "compute", "queue", "transfer", "other":
				sum += p.cycles
			default:
				t.Errorf("breakdown.csv group %s: part %q (want compute, queue, transfer, other or end-to-end)", g, p.part)
			}
		}
		if n != 1 {
			t.Errorf("breakdown.csv group %s: %d end-to-end rows, want 1", g, n)
		}
		if sum != e2e {
			t.Errorf("breakdown.csv group %s: the parts' total_cycles sum to %d, end-to-end is %d (off by %d)", g, sum, e2e, sum-e2e)
		}
	}
	return groups
}

// ---- latencies from the logs themselves ----

// marks reads one channel's records (`cloudprofiler dump --csv`): id -> TSC.
// The file is found by the channel's name as the library writes it
// (*-NAME.cplog, spaces and '#' as '_').
func marks(t *testing.T, tl tools, logs, channel string) map[int64]uint64 {
	t.Helper()
	stem := strings.NewReplacer(" ", "_", "#", "_").Replace(channel)
	files, _ := filepath.Glob(filepath.Join(logs, "*-"+stem+".cplog"))
	if len(files) != 1 {
		t.Fatalf("%d log files of %q in %s", len(files), channel, logs)
	}
	r := testrun.Run(60*time.Second, nil, tl.cli, "dump", "--csv", files[0])
	if r.Code != 0 && r.Code != 3 { // 3: read, with problems
		t.Fatalf("dump --csv %s: %v\n%s", files[0], r.Err, r.Stderr)
	}
	m := map[int64]uint64{}
	for i, l := range strings.Split(r.Stdout, "\n") {
		f := strings.Split(l, ",")
		if i == 0 || len(f) < 2 {
			continue
		}
		id, e1 := strconv.ParseInt(f[0], 10, 64)
		ts, e2 := strconv.ParseUint(f[1], 10, 64)
		if e1 == nil && e2 == nil {
			m[id] = ts
		}
	}
	return m
}

// journey is one tuple's end-to-end latency, placed by when it started.
type journey struct {
	start uint64  // TSC of "source out"
	us    float64 // "source out" to "sink#0 out"
}

// journeys: every tuple's "source out" -> "sink#0 out", in start order.
func journeys(t *testing.T, tl tools, logs string, hz float64) []journey {
	t.Helper()
	from, to := marks(t, tl, logs, "source out"), marks(t, tl, logs, "sink#0 out")
	var js []journey
	for id, a := range from {
		if b, ok := to[id]; ok && b >= a {
			js = append(js, journey{a, float64(b-a) / hz * 1e6})
		}
	}
	if len(js) < len(from)*99/100 {
		t.Fatalf("only %d of %d tuples have both source out and sink#0 out", len(js), len(from))
	}
	sort.Slice(js, func(i, j int) bool { return js[i].start < js[j].start })
	return js
}

// quantile of xs (sorted in place), nearest rank.
func quantile(xs []float64, q float64) float64 {
	sort.Float64s(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(len(xs)-1, i))]
}

// tailByWindow cuts the journeys into n windows of equal counts (by start)
// and returns each window's p99 in us.
func tailByWindow(js []journey, n int) []float64 {
	out := make([]float64, 0, n)
	for w := 0; w < n; w++ {
		part := js[w*len(js)/n : (w+1)*len(js)/n]
		xs := make([]float64, len(part))
		for i, j := range part {
			xs[i] = j.us
		}
		out = append(out, quantile(xs, 0.99))
	}
	return out
}

func median(xs []float64) float64 {
	return quantile(append([]float64(nil), xs...), 0.5)
}
