package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"cloudprofiler/internal/analyze"
	"cloudprofiler/internal/scaleout"
)

// The two stages the analysis on Spark runs (docs/spark.md): join-part on
// every partition of an export, then merge-parts on their states. They
// are for the job (the Python package's cloudprofiler.spark) more than for
// people, who run `analyze` on one machine.

// runJoinPart: cloudprofiler join-part --export DIR --records FILE...
// --state FILE [--rank-json JSON --durations FILE] [--partition P].
func runJoinPart(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("join-part", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg scaleout.PartConfig
	var recs multiFlag
	fs.StringVar(&cfg.Export, "export", "", "the export's directory (export.json, channels/, rounds/; the records may be elsewhere)")
	fs.Var(&recs, "records", "a Parquet file of the partition's records (repeat)")
	rank := fs.String("rank-json", "", `the channel order to join with, each channel's place as a JSON list (merge-parts prints it as "rank"); none: the votes only`)
	fs.StringVar(&cfg.Durations, "durations", "", "write the partition's durations to this Parquet file (with --rank-json)")
	fs.StringVar(&cfg.State, "state", "", "write the partition's state (votes, per-pair statistics, counts) to this file, for merge-parts")
	fs.IntVar(&cfg.Partition, "partition", -1, "the export partition the records are: every tuple id must hash to it (-1: not checked)")
	var capCfg analyze.Config
	checkCapacity := capacityFlags(fs, &capCfg, true, false)
	fs.BoolVar(&cfg.NoCapacity, "no-capacity", false, "no capacity sums even when channels mark operators")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the join to this file (go tool pprof): where its time goes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkCapacity(); err != nil {
		return err
	}
	cfg.Window = capCfg.Window
	if fs.NArg() > 0 {
		return fmt.Errorf("join-part: unexpected argument %q", fs.Arg(0))
	}
	if cfg.Export == "" || cfg.State == "" {
		return errors.New("join-part: --export and --state are required")
	}
	cfg.Records = recs
	if *rank != "" {
		if err := json.Unmarshal([]byte(*rank), &cfg.Rank); err != nil || cfg.Rank == nil {
			return fmt.Errorf("join-part: --rank-json must be a JSON list of each channel's place, as merge-parts prints it (%v)", err)
		}
	}
	stop, err := startCPUProfile("join-part", *cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	return scaleout.RunPart(cfg)
}

// runMergeParts: cloudprofiler merge-parts --export DIR [--out DIR] STATE...
// It prints {"rank": [...], "order": [...], "rejoin": bool, ...} on stdout:
// rank is the channel order for join-part, order the tuple channels in it;
// rejoin says the
// states' votes give another order than they were joined with, which the
// partitions are to be joined with again (nothing written then).
func runMergeParts(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("merge-parts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg analyze.Config
	export := fs.String("export", "", "the export's directory (export.json, channels/, rounds/)")
	fs.StringVar(&cfg.Out, "out", "", "write summary.csv, summary.parquet, summary.txt, model.json, and throughput, runs and capacity where the export has them, here (states joined with an order)")
	stateOut := fs.String("state", "", "write the states merged into one state here instead (a merge in a tree), and nothing else")
	checkCapacity := capacityFlags(fs, &cfg, false, true) // the windows: join-part's, in the states
	fs.BoolVar(&cfg.NoCapacity, "no-capacity", false, "no capacity.csv even when channels mark operators (the states' sums are left)")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the merge to this file (go tool pprof): where its time goes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := checkCapacity(); err != nil {
		return err
	}
	if *export == "" || fs.NArg() == 0 {
		return errors.New("merge-parts: --export and the states (join-part --state) are required")
	}
	stop, err := startCPUProfile("merge-parts", *cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	res, err := scaleout.MergeParts(cfg, *export, fs.Args(), *stateOut)
	if *stateOut != "" {
		return err
	}
	rejoin := errors.Is(err, scaleout.ErrOtherOrder)
	if err != nil && !rejoin {
		return err
	}
	out := struct {
		Rank      []int    `json:"rank"`
		Order     []string `json:"order"`
		Rejoin    bool     `json:"rejoin"`
		Records   uint64   `json:"records"`
		Tuples    uint64   `json:"tuples"`
		Durations uint64   `json:"durations"`
	}{res.Rank, res.Order, rejoin, res.Records, res.Tuples, res.Durations}
	return json.NewEncoder(stdout).Encode(out)
}
