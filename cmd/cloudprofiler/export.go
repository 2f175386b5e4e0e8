package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/scaleout"
)

// runExport: cloudprofiler export [--rounds DIR] --logs DIR... --out DIR
// [--partitions 64]: the tuple records, translated, as partitioned Parquet
// for the analysis on Spark (docs/spark.md); with --format logs --from T
// --to T, the logs cut to a time range, for analyze on one machine.
func runExport(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg scaleout.ExportConfig
	var logs multiFlag
	// Every node of one export takes the same rounds, --ref, --method and
	// --partitions (export refuses others).
	in := logInputFlags(fs, &cfg.Config, &logs)
	fs.StringVar(&cfg.Out, "out", "", "the export's directory: created, or one that exports of other nodes wrote into")
	fs.IntVar(&cfg.Partitions, "partitions", scaleout.DefaultExportPartitions, "partitions by tuple id, a power of two: the join's tasks (every node of one export takes the same)")
	format := fs.String("format", "parquet", "parquet: the tuple records, partitioned, for the analysis on Spark; logs: the logs cut to --from, --to, for analyze on one machine")
	fs.StringVar(&cfg.From, "from", "", "with --format logs: the range's start, a wall-clock time (RFC 3339: 2026-11-28T14:03:00Z) or seconds after the first round began (120.5)")
	fs.StringVar(&cfg.To, "to", "", "with --format logs: the range's end (not in it), as --from")
	quiet := fs.Bool("quiet", false, "say nothing on stderr about damaged logs")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the export to this file (go tool pprof): where its time goes")
	if err := in.parse(args); err != nil {
		return err
	}
	stop, err := startCPUProfile("export", *cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	start := time.Now()
	switch *format {
	case "logs":
		return runCut(stdout, stderr, cfg, *quiet, start)
	case "parquet":
		if cfg.From != "" || cfg.To != "" {
			return errors.New("export: --from and --to cut logs (--format logs) for analyze on one machine; the Parquet export takes the whole run")
		}
	default:
		return fmt.Errorf("export: --format %q: parquet or logs", *format)
	}
	res, err := scaleout.Export(cfg)
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

// runCut: export --format logs: the logs cut to a time range.
func runCut(stdout, stderr io.Writer, cfg scaleout.ExportConfig, quiet bool, start time.Time) error {
	res, err := scaleout.Cut(cfg)
	if errors.Is(err, analyze.ErrContradiction) {
		return &exitCode{exitContradiction, err.Error()}
	}
	if err != nil {
		return err
	}
	if !quiet {
		for _, c := range res.Problems {
			for _, p := range c.Problems {
				fmt.Fprintf(stderr, "cloudprofiler: export: %s: %s (said again in its cut)\n", c.Path, p)
			}
		}
	}
	next := "analyze --logs " + filepath.Join(cfg.Out, "logs")
	if cfg.Rounds != "" {
		next += " --rounds " + filepath.Join(cfg.Out, "rounds")
	}
	fmt.Fprintf(stdout, "cut %d of %d records (nodes %v) to [%s, %s) in %.3f s: %d files into %s (then: %s)\n",
		res.Kept, res.Read, res.Nodes, res.Meta.FromText(), res.Meta.ToText(), time.Since(start).Seconds(), res.Files,
		filepath.Join(cfg.Out, "logs"), next)
	return nil
}
