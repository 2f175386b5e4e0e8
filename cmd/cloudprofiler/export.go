package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
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
	// Every node of one export takes the same rounds, --ref, --method and
	// --partitions (export refuses others).
	in := logInputFlags(fs, &cfg.Config, &logs)
	fs.StringVar(&cfg.Out, "out", "", "the export's directory: created, or one that exports of other nodes wrote into")
	fs.IntVar(&cfg.Partitions, "partitions", analyze.DefaultExportPartitions, "partitions by tuple id, a power of two: the join's tasks (every node of one export takes the same)")
	quiet := fs.Bool("quiet", false, "say nothing on stderr about damaged logs")
	if err := in.parse(args); err != nil {
		return err
	}
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
