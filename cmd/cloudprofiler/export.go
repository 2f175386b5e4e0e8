package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"time"

	"cloudprofiler/internal/analyze"
)

// runExport: cloudprofiler export [--rounds DIR] --logs DIR... --out DIR
// [--partitions 64]: the tuple records, translated, as partitioned Parquet
// for the analysis on Spark (docs/spark.md).
func runExport(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg analyze.ExportConfig
	var logs multiFlag
	fs.StringVar(&cfg.Rounds, "rounds", "", "directory of MinRTT rounds files (tsc-server --out); not needed when every log comes from one node; every node of one export takes the same")
	fs.Var(&logs, "logs", "directory of channel logs (walked) or a log file; repeat, or list several after it")
	fs.StringVar(&cfg.Out, "out", "", "the export's directory: created, or one that exports of other nodes wrote into")
	fs.StringVar(&cfg.Ref, "ref", "", "reference node (default: chosen from the rounds, see minrtt); every node of one export takes the same")
	method := fs.String("method", "best", "error bound: best (tightest strict), paper (two MinRTTs), allprobes")
	fs.IntVar(&cfg.Partitions, "partitions", analyze.DefaultExportPartitions, "partitions by tuple id, a power of two: the join's tasks (every node of one export takes the same)")
	mem := fs.Int("mem-mb", 256, "memory the export aims to stay within, MiB")
	fs.StringVar(&cfg.SpillDir, "spill", "", "directory for records spilled past --mem-mb (default OUT/.spill)")
	fs.IntVar(&cfg.Workers, "workers", 0, "goroutines decoding and writing (default: one per core)")
	quiet := fs.Bool("quiet", false, "say nothing on stderr about damaged logs")
	fs.BoolVar(&cfg.OneRun, "one-run", false, "take the logs as one run even where channels were opened again after a time no channel logged (else refused as two runs)")
	const exitContradiction = 4
	if err := parseWithLogs(fs, args, &logs); err != nil {
		return err
	}
	var err error
	if cfg.Method, err = parseMethod(fs.Name(), *method); err != nil {
		return err
	}
	if *mem < 16 {
		return fmt.Errorf("export: --mem-mb must be at least 16")
	}
	cfg.Logs = logs
	cfg.MemBytes = int64(*mem) << 20
	debug.SetMemoryLimit(cfg.MemBytes)
	start := time.Now()
	res, err := analyze.Export(cfg)
	if errors.Is(err, analyze.ErrContradiction) {
		return &exitCode{exitContradiction, err.Error()}
	}
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	if !*quiet {
		for _, c := range res.Problems {
			for _, p := range c.Problems {
				fmt.Fprintf(stderr, "cloudprofiler: export: %s: %s (its valid records were exported)\n", c.Path, p)
			}
		}
	}
	fmt.Fprintf(stdout, "exported %d tuple records of %d channels (nodes %v) in %.3f s: %d files in %d partitions, %.1f MB, into %s\n",
		res.Channels.Records, len(res.Channels.Channels), res.Channels.Nodes, el, res.Files, res.Meta.Partitions, float64(res.Bytes)/1e6, cfg.Out)
	return nil
}
