package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/trace"
	"cloudprofiler/minrtt"
)

// multiFlag collects a flag given several times, or followed by several
// paths: --logs A B --logs C.
type multiFlag []string

func (m *multiFlag) String() string     { return fmt.Sprint(*m) }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// exitContradiction is analyze's and export's exit status when the logs
// contradict each other (two clocks under one node name, two runs, a TSC
// going back); nothing was written.
const exitContradiction = 4

// logInputs are the flags analyze and export share: the logs, the rounds
// and how to translate them, and the memory and workers for reading them.
type logInputs struct {
	fs     *flag.FlagSet
	cfg    *analyze.Config
	logs   *multiFlag
	method *string
	mem    *int
}

// logInputFlags defines the shared flags on fs, into cfg and logs.
func logInputFlags(fs *flag.FlagSet, cfg *analyze.Config, logs *multiFlag) *logInputs {
	fs.StringVar(&cfg.Rounds, "rounds", "", "directory of MinRTT rounds files (tsc-server --out); not needed when every log comes from one node")
	fs.Var(logs, "logs", "directory of channel logs (walked) or a log file; repeat, or list several after it")
	fs.StringVar(&cfg.Ref, "ref", "", "reference node (default: chosen from the rounds, see minrtt)")
	in := &logInputs{fs: fs, cfg: cfg, logs: logs}
	in.method = fs.String("method", "best", "error bound: best (tightest strict), paper (two MinRTTs), allprobes")
	in.mem = fs.Int("mem-mb", 256, "memory the "+fs.Name()+" aims to stay within, MiB (docs/performance.md says what comes on top)")
	fs.StringVar(&cfg.SpillDir, "spill", "", "directory for records spilled past --mem-mb, about 4 bytes a record, at most 20 (default OUT/.spill)")
	fs.IntVar(&cfg.Workers, "workers", 0, "goroutines decoding and joining (default: one per core)")
	fs.BoolVar(&cfg.OneRun, "one-run", false, "take the logs as one run even where channels were opened again after a time no channel logged (else refused as two runs)")
	return in
}

// parse parses args; then the method, the logs and the memory are in cfg.
// The pipeline shares the memory out (internal/analyze/pipeline.go); it is
// the Go runtime's soft limit too: the collector works harder instead of
// letting the heap grow past it.
// Go's flag package stops at the first non-flag: the paths that follow
// --logs are taken as more log paths, and parsing goes on after them.
func (in *logInputs) parse(args []string) error {
	for len(args) > 0 {
		if err := in.fs.Parse(args); err != nil {
			return err
		}
		rest := in.fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(*in.logs) == 0 {
			return fmt.Errorf("%s: unexpected argument %q", in.fs.Name(), rest[0])
		}
		i := 0
		for i < len(rest) && (len(rest[i]) == 0 || rest[i][0] != '-') {
			*in.logs = append(*in.logs, rest[i])
			i++
		}
		args = rest[i:]
	}
	switch *in.method {
	case "best":
		in.cfg.Method = minrtt.MethodBest
	case "paper":
		in.cfg.Method = minrtt.MethodPaper
	case "allprobes":
		in.cfg.Method = minrtt.MethodAllProbes
	default:
		return fmt.Errorf("%s: --method must be best, paper or allprobes, not %q", in.fs.Name(), *in.method)
	}
	if *in.mem < 16 {
		return fmt.Errorf("%s: --mem-mb must be at least 16", in.fs.Name())
	}
	in.cfg.Logs = *in.logs
	in.cfg.MemBytes = int64(*in.mem) << 20
	debug.SetMemoryLimit(in.cfg.MemBytes)
	return nil
}

// runAnalyze: cloudprofiler analyze [--rounds DIR] --logs DIR... --out DIR.
func runAnalyze(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("analyze", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg analyze.Config
	var logs multiFlag
	in := logInputFlags(fs, &cfg, &logs)
	fs.StringVar(&cfg.Out, "out", "", "directory for the results (created)")
	order := fs.String("order", "", `channel order of the topology, first to last: "node/name" or "name", comma-separated (default: found from the data)`)
	fs.BoolVar(&cfg.NoDurations, "no-durations", false, "do not write durations.parquet (one row per duration), only summaries")
	fs.BoolVar(&cfg.DurationsCSV, "durations-csv", false, "also write durations.csv (about 180 bytes a duration: 18 GB for 100M; Parquet takes 25 to 40)")
	quiet := fs.Bool("quiet", false, "no progress line on stderr")
	floor := fs.Bool("decode-only", false, "only decode the tuple records, as the analysis does, and say how fast (the floor analyze is measured against); writes nothing")
	strict := fs.Bool("strict", false, "exit with status 3 when a log file is damaged or misses records it accepted (the results are still written)")
	// The capacity analysis: channels named "OPERATOR[#INSTANCE] in|out|sent|count".
	checkCapacity := capacityFlags(fs, &cfg, true, true)
	fs.BoolVar(&cfg.NoCapacity, "no-capacity", false, "skip the capacity analysis (service rates, bottleneck) even when channels mark operators")
	// The critical-path analysis: the same marks.
	fs.DurationVar(&cfg.Slice, "slice", analyze.DefaultSlice, "critical path: length of the time slices (reference clock) from the run's first tuple record, e.g. 1s, 100ms")
	fs.BoolVar(&cfg.NoCriticalPath, "no-critical-path", false, "skip the critical-path analysis and the latency breakdown even when channels mark operators")
	// Mace: the same marks, the capacity analysis's costs.
	fs.DurationVar(&cfg.MaceWindow, "mace-window", analyze.DefaultMaceWindow, "Mace: length of the windows (reference clock) tuples are grouped in by their stimulus (their first record), e.g. 1s, 10ms")
	var whatIf multiFlag
	fs.Var(&whatIf, "what-if", "Mace: a scenario to predict: rate=x2, cost:OP=0.5, colocate:A,B, or several changes separated by ';' (repeat for several scenarios)")
	fs.Float64Var(&cfg.MaceFit, "mace-fit", 0, "Mace: take each instance's cost from the first windows that hold this share of the tuples, e.g. 0.08 (default: all of them)")
	fs.StringVar(&cfg.MaceCosts, "mace-costs", "", "Mace: take each operator's cost from another run's mace-costs.csv")
	fs.BoolVar(&cfg.NoMace, "no-mace", false, "skip the Mace analysis even when channels mark operators")
	// The report and the trace (docs/report.md).
	fs.BoolVar(&cfg.NoReport, "no-report", false, "write no report.html (and keep no aggregates over time for it)")
	fs.StringVar(&cfg.Trace, "trace", "", "also write a trace of a sample of tuples to this file: in Perfetto's protobuf format where its name ends in .pftrace, else in the Trace Event Format's JSON (ui.perfetto.dev opens both, chrome://tracing the JSON)")
	fs.IntVar(&cfg.TraceSample, "trace-sample", analyze.DefaultTraceSample, "--trace: how many tuples: the slowest tenth end to end, the rest a uniform sample")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the analysis to this file (go tool pprof): where analyze's time goes")
	if err := in.parse(args); err != nil {
		return err
	}
	if cfg.MaceWindow <= 0 {
		return fmt.Errorf("analyze: --mace-window must be a positive duration (1s, 10ms), not %s", cfg.MaceWindow)
	}
	if !(cfg.MaceFit >= 0 && cfg.MaceFit <= 1) {
		return fmt.Errorf("analyze: --mace-fit must be a share of the tuples, above 0 and at most 1 (0.08: the first 8%%), not %v", cfg.MaceFit)
	}
	if cfg.Slice <= 0 {
		return fmt.Errorf("analyze: --slice must be a positive duration (1s, 100ms), not %s", cfg.Slice)
	}
	if err := checkCapacity(); err != nil {
		return err
	}
	if cfg.TraceSample < 1 {
		return fmt.Errorf("analyze: --trace-sample must be at least 1 tuple, not %d", cfg.TraceSample)
	}
	if cfg.Trace != "" {
		if st, err := os.Stat(cfg.Trace); err == nil && st.IsDir() {
			return fmt.Errorf("analyze: --trace names a file to write, and %s is a directory", cfg.Trace)
		}
	}
	cfg.WhatIf = whatIf
	if *order != "" {
		for _, o := range strings.Split(*order, ",") {
			if o = strings.TrimSpace(o); o != "" {
				cfg.Order = append(cfg.Order, o)
			}
		}
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	if *floor {
		start := time.Now()
		n, err := analyze.DecodeFloor(cfg)
		if err != nil {
			return err
		}
		el := time.Since(start).Seconds()
		fmt.Fprintf(stdout, "decoded %d records in %.3f s: %.1fM records/s\n", n, el, float64(n)/el/1e6)
		return nil
	}
	stop, err := startCPUProfile("analyze", *cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	start := time.Now()
	res, err := analyze.Run(cfg)
	if errors.Is(err, analyze.ErrContradiction) {
		return &exitCode{exitContradiction, err.Error()}
	}
	if err != nil {
		return err
	}
	if err := res.WriteText(stdout); err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	fmt.Fprintf(stdout, "analysed %d records in %.3f s: %.1fM records/s\n", res.Records, el, float64(res.Records)/el/1e6)
	for _, f := range res.Files {
		fmt.Fprintf(stdout, "wrote %s\n", f)
	}
	if !cfg.NoReport {
		fmt.Fprintf(stdout, "report: %s (open it in a browser)\n", filepath.Join(cfg.Out, "report.html"))
	}
	if res.TraceNote != "" {
		fmt.Fprintf(stderr, "cloudprofiler: analyze: note: %s\n", res.TraceNote)
	}
	if t := res.Trace; t != nil {
		where := "ui.perfetto.dev or chrome://tracing"
		if trace.IsProto(cfg.Trace) {
			where = "ui.perfetto.dev"
		}
		fmt.Fprintf(stdout, "trace: %s (%d tuples, the %d slowest among them; %d slices, %d flows; %d counter tracks): open it in %s\n",
			cfg.Trace, t.Tuples, t.Slowest, t.Slices, t.Flows, t.Counters, where)
	}
	for _, s := range res.SkippedFiles {
		fmt.Fprintf(stderr, "cloudprofiler: analyze: WARNING: %s\n", s)
	}
	bad := res.Incomplete()
	for _, c := range bad {
		for _, p := range c.Problems {
			fmt.Fprintf(stderr, "cloudprofiler: analyze: WARNING: %s: %s\n", c.Path, p)
		}
	}
	if len(bad) > 0 && *strict {
		return &exitCode{exitDamaged, fmt.Sprintf("analyze: %d of %d log files damaged or incomplete (--strict)", len(bad), len(res.Channels))}
	}
	return nil
}

// capacityFlags defines the capacity analysis's flags on fs (analyze;
// join-part takes the window, merge-parts the rest); the function it
// returns checks them after parsing and sets cfg.
func capacityFlags(fs *flag.FlagSet, cfg *analyze.Config, window, rows bool) func() error {
	if window {
		fs.DurationVar(&cfg.Window, "window", analyze.DefaultWindow, "capacity: length of the time windows (reference clock) from the run's first tuple record, e.g. 1s, 250ms")
	}
	var target rateValue
	if rows {
		fs.Var(&target, "target-rate", "capacity: a source rate, tuples per second (250000, 250k, 1.5M), for the parallelism each operator needs (DS2's rule)")
		fs.IntVar(&cfg.MinTuples, "min-tuples", analyze.DefaultMinTuples, "capacity: fewest paired tuples (in and out) for a service rate; fewer: \"not enough data\"")
	}
	return func() error {
		if window && cfg.Window <= 0 {
			return fmt.Errorf("%s: --window must be a positive duration (1s, 250ms), not %s", fs.Name(), cfg.Window)
		}
		if !rows {
			return nil
		}
		if cfg.MinTuples < 1 {
			return fmt.Errorf("%s: --min-tuples must be at least 1, not %d", fs.Name(), cfg.MinTuples)
		}
		if t := float64(target); t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
			return fmt.Errorf("%s: --target-rate must be a rate in tuples per second (250000, 250k, 1.5M), not %s", fs.Name(), target.String())
		}
		cfg.TargetRate = float64(target)
		return nil
	}
}

// startCPUProfile writes a Go CPU profile to path ("": none) until stop.
func startCPUProfile(cmd, path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: --cpuprofile: %w", cmd, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: --cpuprofile: %w", cmd, err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
