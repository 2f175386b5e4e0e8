// Package analyze turns the channel logs of many nodes and the MinRTT rounds
// into durations in one reference TSC, each with a strict error bound
// (package minrtt does the arithmetic): tuple records are joined on tuple id
// across channels, and every hop of every tuple becomes a duration. It also
// reads FIRSTLAST channels (run duration), periodic counters (throughput over
// time) and FOX_START return logs (the return-trip method, for comparison).
//
// Memory is bounded: tuple records are held in memory up to a budget, then
// spilled to 64 partition files by tuple id and joined one partition at a
// time; per-pair statistics keep exact quantiles up to 2^20 durations and a
// 0.1 % histogram after that.
package analyze

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/critpath"
	"cloudprofiler/internal/mace"
	"cloudprofiler/internal/report"
	"cloudprofiler/internal/timeline"
	"cloudprofiler/internal/trace"
	"cloudprofiler/minrtt"
)

// Config is one analysis.
type Config struct {
	Rounds      string   // directory of round-*.json (tsc-server --out)
	Logs        []string // directories (walked) or channel files
	Out         string   // output directory, created
	Ref         string   // reference node; "" lets minrtt choose
	Method      minrtt.Method
	Order       []string // channel order of the topology ("node/name" or "name"), first to last; the rest ranked from the data (order.go)
	NoDurations bool     // write no durations file (summaries only)
	// DurationsCSV writes durations.csv beside durations.parquet: about
	// 180 bytes a duration (18 GB for 100M), against 25 to 40 in Parquet.
	DurationsCSV bool
	MemBytes     int64     // memory the pipeline aims to stay within (default 256 MiB; pipeline.go says how it is shared)
	Workers      int       // goroutines decoding and joining (default GOMAXPROCS)
	SpillDir     string    // where records spill past the budget (default Out/.spill)
	Progress     io.Writer // a progress line every progressEvery once a run is longer than that (nil: none)
	// OneRun takes the logs as one run even where they look like several
	// (channels opened again after a time no channel logged, or files
	// naming different runs in CP_RUN: contradict.go).
	OneRun bool
	// The capacity analysis (capacity.go, package capacity): windows of
	// Window (default 1 s) from the run's first tuple record; fewer than
	// MinTuples (default 30) paired tuples in a row give no service rate;
	// TargetRate > 0 (source tuples per second) asks for the parallelism
	// each operator needs. NoCapacity skips it.
	Window     time.Duration
	MinTuples  int
	TargetRate float64
	NoCapacity bool
	// The critical-path analysis (critpath.go, package critpath): each
	// slice's critical path, slices of Slice (default 1 s) from the run's
	// first tuple record, and the tail's latency taken apart.
	// NoCriticalPath skips it.
	Slice          time.Duration
	NoCriticalPath bool

	testWrongSample bool // the sample's channel order is reversed (a test of the second attempt)
	testIDGroup     uint // > 0: partitions take ids in groups of 2^testIDGroup (idGroup's, for a run too small for it)
	testMergeAll    bool // every partition is joined by merging its ascending runs (join.go), however many
	// testNoCostWalk: with NoCriticalPath, the visits are not walked
	// either, and capacity has no cost model, as on an export's
	// partitions (a test that they give analyze's rows).
	testNoCostWalk bool
	// The Mace analysis (mace.go, package mace): the maximum latency
	// predicted from load per window of MaceWindow (default 1 s), beside
	// the measured one; WhatIf scenarios (rate=x2, cost:OP=0.5,
	// colocate:A,B; several changes in one separated by ';'); costs from
	// the first MaceFit of the tuples (0: all), or from another run's
	// mace-costs.csv (MaceCosts). NoMace skips it.
	MaceWindow time.Duration
	WhatIf     []string
	MaceFit    float64
	MaceCosts  string
	NoMace     bool

	noFastCritPath bool // the critical path without the departure indexes (critpath.Config.Fast): a test compares

	// The report (report.html, package report) and the trace (timeline.go,
	// package trace): NoReport writes no report.html and keeps no
	// aggregates over time; Trace names a trace file to write (Perfetto's
	// protobuf where trace.IsProto says so, else the Trace Event Format's
	// JSON) with a sample of TraceSample tuples (default 1000: the slowest
	// tenth, the rest uniform) and each instance's counters.
	NoReport    bool
	Trace       string
	TraceSample int
}

// Incomplete lists the channels whose files are damaged or miss records
// they accepted (their valid records were analysed).
func (r *Result) Incomplete() []*Channel {
	var out []*Channel
	for _, c := range r.Channels {
		if len(c.Problems) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// maxTupleEvents is the most records one tuple id may have; an id seen more
// often is reused (not one tuple's way) and is left out, and said so.
const maxTupleEvents = 4096

// Kinds of duration.
const (
	KindCompute   = report.KindCompute
	KindTransfer  = report.KindTransfer
	KindEndToEnd  = report.KindEndToEnd
	KindReturnRTT = report.KindReturnRTT
)

// PairKey names the channels a duration runs between.
type PairKey struct {
	Kind     string
	From, To int // channel indices
}

// PairStats is the summary of one pair's durations, in reference cycles.
type PairStats struct {
	Key             PairKey
	Dur, Err        *Stats
	Paper, Baseline *Stats
	Scenarios       [4]uint64
	// return_trip only (Key.To is the tuple's last channel): the return-trip
	// duration minus ours from start to that channel, and our bound there.
	RetErr, OursErr *Stats
	// kept counts, over all workers, the durations kept for exact
	// quantiles (aggregate.go); nil once merged.
	kept *atomic.Uint64
	// series is the pair's durations over time (timeline.go; nil without
	// the report, or past its memory).
	series *timeline.Series
}

// Result is what Run found; the files in Out say the same at length.
type Result struct {
	Ref       string
	RefHz     float64
	Channels  []*Channel
	Records   uint64 // tuple records read
	Tuples    uint64 // distinct tuple ids joined
	Durations uint64
	Spilled   uint64 // records that went through the spill files
	// Tuple ids with more than maxTupleEvents records (reused ids): left out.
	SkippedTuples, SkippedRecords uint64
	// SkippedFiles: what the logs' directories held under a log's name that
	// is no regular file (a FIFO would hang a reader), one sentence each.
	SkippedFiles []string
	Pairs        []*PairStats
	Order        []string // channel labels in the order hops follow
	Runs         []RunSpan
	Files        []string
	// Capacity is the capacity analysis (nil without one: CapacityNote
	// says why).
	Capacity     *capacity.Result
	CapacityNote string
	// CritPath is the critical-path analysis (nil without one: CritPathNote
	// says why).
	CritPath     *critpath.Result
	CritPathNote string
	// Mace is the Mace analysis (nil without one: MaceNote says why).
	Mace     *mace.Result
	MaceNote string
	// Lineage (lineage.go): LINEAGE channels read, their (output, input)
	// records, and the distinct output ids followed to their last input.
	LineageChannels              int
	LineagePairs, LineageOutputs uint64
	// Trace says what --trace's file holds (nil without one).
	Trace *trace.Stats
	// TraceNote says how --trace-sample was capped ("" when it was not).
	TraceNote string
}

type analysis struct {
	cfg      Config
	model    *minrtt.Model
	res      *Result
	chans    []*Channel
	pairs    map[PairKey]*PairStats
	t0       float64     // earliest reference estimate seen: time zero of the reports
	retOf    map[int]int // return-log channel -> its FOX_START channel
	rank     []int       // channel -> its place in the hop order (order.go)
	chNode   []int       // channel -> its node's index in the model
	procOf   []int       // channel -> its process (node and pid), numbered
	isReturn []bool      // channel -> a FOX_START return log
	keptMu   sync.Mutex
	kept     map[PairKey]*atomic.Uint64 // per pair: durations the workers keep exactly
	// keptFrom, when set, is where a pair's count of kept durations starts
	// (a partition of an export: ExactLimit for a pair that may have more
	// durations than that in the whole export, which then keeps none).
	keptFrom func(PairKey) uint64
	progress progress
	// noCostModel says why capacity has no cost model ("": it has one
	// when the visits are walked).
	noCostModel string
	// counter channel -> its periods (throughput.csv), for the report
	throughput map[int][]ThroughputPoint
	cap        capState           // the capacity analysis (capacity.go)
	cp         cpState            // the critical-path analysis (critpath.go)
	cpCur      *critpath.Analysis // the current join's (pipeline.go)
	mace       maceState          // the Mace analysis (mace.go)
	tl         timelineState      // the report's aggregates over time and the trace's sample (timeline.go)
	// per channel, its smallest and largest TSC (decode): the run's span
	tscMin, tscMax []uint64
	// Per channel: its records note its thread's waits (logfile.Header.Waits;
	// each record's note travels with it through the spill, decodeFile).
	notesWaits []bool
	// per channel, the records decoded
	chanRecords []uint64
	// per channel, its TSC's largest step back (decode; contradict.go)
	stepBack []stepBack
}

// outputs are the files an analysis may write into Out. A run removes
// those an earlier run left there first, and its own when it fails: what
// is in Out is one whole run's results or nothing.
var outputs = []string{"durations.parquet", "durations.csv", "summary.parquet", "summary.csv", "summary.txt",
	"model.json", "report.html", "runs.parquet", "runs.csv", "throughput.parquet", "throughput.csv",
	"capacity.parquet", "capacity.csv", "criticalpath.csv", "breakdown.csv",
	"mace.csv", "mace-costs.csv"}

// Run performs the analysis and writes its files into cfg.Out.
func Run(cfg Config) (*Result, error) {
	if cfg.Out == "" {
		return nil, errors.New("analyze: --logs and --out are required (and --rounds when the logs come from several nodes)")
	}
	a, err := prepare(cfg)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	for _, name := range outputs {
		for _, f := range []string{name, name + ".partial"} {
			if err := os.Remove(filepath.Join(cfg.Out, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	// What a run that was killed left in the default spill directory (Out
	// is one run's at a time; a --spill DIR may be shared, and is left alone).
	if cfg.SpillDir == "" {
		stale, _ := filepath.Glob(filepath.Join(cfg.Out, ".spill", spillPrefix+"*"))
		for _, d := range stale {
			os.RemoveAll(d)
		}
	}
	res, err := a.run()
	if err != nil {
		for _, name := range outputs {
			os.Remove(filepath.Join(a.cfg.Out, name))
			os.Remove(filepath.Join(a.cfg.Out, name+".partial"))
		}
		return nil, err
	}
	return res, nil
}

// prepare reads the channel files' headers and the rounds.
func prepare(cfg Config) (*analysis, error) {
	if len(cfg.Logs) == 0 {
		return nil, errors.New("analyze: --logs and --out are required (and --rounds when the logs come from several nodes)")
	}
	if cfg.MemBytes <= 0 {
		cfg.MemBytes = 256 << 20
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.TraceSample <= 0 {
		cfg.TraceSample = DefaultTraceSample
	}
	var traceNote string
	if c := TraceSampleCap(cfg.MemBytes); cfg.Trace != "" && cfg.TraceSample > c {
		traceNote = fmt.Sprintf("--trace-sample %d: capped at %d tuples (a sampled tuple takes about 2 KiB until the trace is written: a quarter of --mem-mb %d holds %d; and at most %d, a trace of about 44 MB); give a larger --mem-mb for more",
			cfg.TraceSample, c, cfg.MemBytes>>20, cfg.MemBytes/4/traceTupleBytes, maxTraceTuples)
		cfg.TraceSample = c
	}
	if err := checkMaceConfig(&cfg); err != nil {
		return nil, err
	}
	if err := checkCritPathConfig(&cfg); err != nil {
		return nil, err
	}
	if err := checkCapacityConfig(&cfg); err != nil {
		return nil, err
	}
	chans, skipped, err := findChannels(cfg.Logs)
	if err != nil {
		return nil, err
	}
	model, rounds, err := buildModel(cfg, chans)
	if err != nil {
		return nil, err
	}
	if err := checkHeaders(chans, rounds, cfg.OneRun); err != nil {
		return nil, err
	}
	// Every second the analysis writes is cycles over this frequency: one
	// below 1 Hz (0 from a header that knew none, 1e-300) gave NaN and
	// infinities in every file.
	if hz := model.RefHz(); !(hz >= 1) || math.IsInf(hz, 0) {
		return nil, fmt.Errorf("analyze: the reference node %s has a TSC frequency of %g Hz: no durations in seconds can be had from it (its log headers' tsc_hz, or the rounds' for it)", model.Ref(), hz)
	}
	known := map[string]bool{}
	for _, n := range model.Nodes() {
		known[n] = true
	}
	for _, c := range chans {
		c.node = model.NodeIndex(c.Node)
		if !known[c.Node] {
			return nil, fmt.Errorf("%s: channel %q is on node %q, which no round measured (nodes in the rounds: %s); set CP_NODE to the name given to tsc-client --node",
				c.Path, c.Name, c.Node, strings.Join(model.Nodes(), ", "))
		}
	}
	return newAnalysis(cfg, model, chans, &Result{SkippedFiles: skipped, TraceNote: traceNote})
}

// newAnalysis is the analysis of chans with model (res: what prepare
// found before).
func newAnalysis(cfg Config, model *minrtt.Model, chans []*Channel, res *Result) (*analysis, error) {
	res.Ref, res.RefHz, res.Channels = model.Ref(), model.RefHz(), chans
	a := &analysis{cfg: cfg, model: model, chans: chans, pairs: map[PairKey]*PairStats{}, t0: math.Inf(1), res: res}
	a.linkReturnLogs()
	a.indexChannels()
	a.tscMin, a.tscMax = make([]uint64, len(chans)), make([]uint64, len(chans))
	a.notesWaits = make([]bool, len(chans))
	for i := range a.tscMin {
		a.tscMin[i] = math.MaxUint64
	}
	if err := a.planCapacity(); err != nil {
		return nil, err
	}
	if cfg.testNoCostWalk {
		a.noCostModel = NoWalkOnPartitions
	}
	// A --order naming no channel is refused now, not after the decoding.
	if _, err := a.rankChannels(orderVotes{}); err != nil {
		return nil, err
	}
	return a, nil
}

// indexChannels numbers each channel's node and process for the hot loops.
func (a *analysis) indexChannels() {
	procs := map[string]int{}
	a.chNode, a.procOf, a.isReturn = nil, nil, nil
	for _, c := range a.chans {
		a.chNode = append(a.chNode, c.node)
		key := fmt.Sprintf("%s\x00%d", c.Node, c.PID)
		if _, ok := procs[key]; !ok {
			procs[key] = len(procs)
		}
		a.procOf = append(a.procOf, procs[key])
		a.isReturn = append(a.isReturn, c.Role == RoleReturn)
	}
}

func (a *analysis) run() (*Result, error) {
	cfg := a.cfg
	a.progress.start = time.Now()
	if cfg.Progress != nil {
		stop := make(chan struct{})
		defer close(stop)
		go a.progress.report(cfg.Progress, progressEvery, progressEvery, stop)
	}
	if err := a.joinTuples(); err != nil {
		return nil, err
	}
	a.progress.stage.Store("write")
	if err := a.runSpans(); err != nil {
		return nil, err
	}
	if err := a.writeThroughput(); err != nil {
		return nil, err
	}
	// The walk of the visits (the critical path's) sums the cost model
	// that capacity and Mace read.
	if err := a.writeCritPath(); err != nil {
		return nil, err
	}
	if err := a.writeCapacity(); err != nil {
		return nil, err
	}
	if err := a.writeMace(); err != nil {
		return nil, err
	}
	if err := a.writeTrace(); err != nil {
		return nil, err
	}
	for _, p := range a.pairs {
		a.res.Pairs = append(a.res.Pairs, p)
	}
	sort.Slice(a.res.Pairs, func(i, j int) bool { return a.less(a.res.Pairs[i].Key, a.res.Pairs[j].Key) })
	if err := a.writeSummaries(); err != nil {
		return nil, err
	}
	return a.res, nil
}

// buildModel translates every node's TSC into the reference's: from the
// rounds; or, with no --rounds and every log from one node, that node's own
// counter (exact: no translation is needed inside one machine).
func buildModel(cfg Config, chans []*Channel) (*minrtt.Model, []*minrtt.Round, error) {
	if cfg.Rounds == "" {
		nodes := map[string]bool{}
		var names []string
		for _, c := range chans {
			if !nodes[c.Node] {
				nodes[c.Node] = true
				names = append(names, c.Node)
			}
		}
		if len(names) != 1 {
			sort.Strings(names)
			return nil, nil, fmt.Errorf("analyze: the logs come from %d nodes (%s): --rounds (tsc-server --out) is required to translate between them",
				len(names), strings.Join(names, ", "))
		}
		if cfg.Ref != "" && cfg.Ref != names[0] {
			return nil, nil, fmt.Errorf("analyze: reference node %q: the logs come from node %q only", cfg.Ref, names[0])
		}
		origin, hz := uint64(0), 0.0
		for i, c := range chans {
			if o := c.Header.OpenSync.TSC; i == 0 || o < origin {
				origin = o
			}
			if c.Hz > 0 {
				hz = c.Hz
			}
		}
		model, err := minrtt.NewSingleNodeModel(names[0], hz, origin, cfg.Method)
		return model, nil, err
	}
	rounds, err := minrtt.ReadRounds(cfg.Rounds)
	if err != nil {
		return nil, nil, fmt.Errorf("rounds: %w", err)
	}
	model, err := minrtt.NewModel(rounds, minrtt.Options{Ref: cfg.Ref, Method: cfg.Method})
	if err != nil {
		return nil, nil, fmt.Errorf("rounds: %w", err)
	}
	return model, rounds, nil
}

func kindRank(k string) int {
	switch k {
	case KindCompute:
		return 0
	case KindTransfer:
		return 1
	case KindEndToEnd:
		return 2
	}
	return 3
}

func (a *analysis) less(x, y PairKey) bool {
	if kindRank(x.Kind) != kindRank(y.Kind) {
		return kindRank(x.Kind) < kindRank(y.Kind)
	}
	if x.From != y.From {
		return a.chans[x.From].Label() < a.chans[y.From].Label()
	}
	return a.chans[x.To].Label() < a.chans[y.To].Label()
}

// linkReturnLogs pairs each FOX_START return log with the FOX_START channel
// of the same process and name.
func (a *analysis) linkReturnLogs() {
	a.retOf = map[int]int{}
	for i, r := range a.chans {
		if r.Role != RoleReturn {
			continue
		}
		for j, s := range a.chans {
			if s.Role == RoleTuples && s.Handler == "FOX_START" && s.Node == r.Node && s.PID == r.PID && s.Name == r.Name {
				a.retOf[i] = j
			}
		}
	}
}

func writeFile(path string, fn func(w io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	err = fn(w)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
