// Command cloudprofiler is the command-line tool: `dump` decodes channel logs.
// Later subcommands (confserver, tsc-server, analyze, gen) join it here.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"cloudprofiler/internal/version"
)

const usage = `usage: cloudprofiler COMMAND [ARGS]

commands:
  dump [--csv] [--counters] FILE...   decode channel log files (any format)
  confserver --listen ADDR --config FILE [--token-file F]
                         serve channel configuration (confserver/API.md)
  conf [--server ADDR] list | get ID | set RULE-JSON | delete ID | resolve NAME
                         read and change a configuration server's rules
  tsc-server --listen ADDR --out DIR [--probes 100] [--interval-us 200] [--every D] [--round-timeout 10s]
  tsc-client --server ADDR --node NAME [--listen-udp ADDR] [--inject SPEC]
  tsc-round --server ADDR [--label L] [--wait-nodes N --wait-timeout D]
                         MinRTT rounds between nodes (minrtt/probe/PROTOCOL.md)
  analyze [--rounds DIR] --logs DIR... --out DIR [--ref NODE] [--order CH,CH,...]
          [--method best|paper|allprobes] [--mem-mb 256] [--no-durations] [--strict]
                         durations between channels across nodes in one
                         reference TSC, each with a strict error bound
                         (--rounds: needed when the logs come from several nodes);
                         damaged or incomplete logs are reported, exit 3 with --strict;
          [--window 1s] [--target-rate R] [--min-tuples 30] [--no-capacity]
                         channels named "OP[#INST] in|out|sent|count" give each
                         operator's service rate, the bottleneck and the highest
                         sustainable source rate (capacity.csv, docs/capacity.md)
          [--slice 1s] [--no-critical-path]
                         the same marks give each slice's critical path and the
                         tail's latency taken apart into compute, queueing and
                         transfer (criticalpath.csv, breakdown.csv,
                         docs/critical-path.md)
          [--mace-window 1s] [--what-if rate=x2|cost:OP=0.5|colocate:A,B]...
          [--mace-fit 0.08] [--mace-costs FILE] [--no-mace]
                         the same marks give the largest latency predicted from
                         load per window beside the measured one, and what-if
                         scenarios (mace.csv, docs/mace.md)
          [--trace FILE [--trace-sample 1000]] [--durations-csv] [--no-report]
          [--quiet] [--workers N] [--spill DIR] [--one-run] [--decode-only]
                         a Perfetto trace of a sample of tuples; durations.csv
                         beside durations.parquet; no report.html; no progress
                         line; decoding goroutines; where records past --mem-mb
                         go; logs taken as one run; decode only, say how fast
  export [--rounds DIR] --logs DIR... --out DIR [--partitions 64] [--ref NODE]
         [--method M] [--mem-mb 256] [--spill DIR] [--workers N] [--one-run]
                         the tuple records translated into the reference clock,
                         as Parquet partitioned by tuple id, for the analysis
                         on Apache Spark (docs/spark.md); one node at a time
                         or all at once, into one directory
  export --format logs --from T --to T [--rounds DIR] --logs DIR... --out DIR
                         the logs cut to a time range (RFC 3339, or seconds
                         after the first round began), every node's into one
                         directory, for analyze on one machine: the critical
                         path, Mace and capacity of a range of a large run
  join-part --export DIR --records FILE... --state FILE [--rank-json JSON --durations FILE]
  merge-parts --export DIR [--out DIR | --state FILE] STATE...
                         the analysis of an export a partition at a time, and the
                         merge: the stages the Spark job runs (docs/spark.md)
  (dump exits 3 when a file is damaged or misses records it accepted)
  gen send --to ADDR --rate R --duration D [--threads T] (--tuples FILE | --synthetic)
                         send tuples over TCP at a controlled rate (datagen/FRAMING.md);
                         exit 3: rate not reached, 4: the receiver lost tuples
  gen recv --listen ADDR [--capacity R --queue N]
                         receive, count per sender, report gaps and reordering
  gen maxrate --to ADDR --start R --duration D [--threads T] [--resolution R] (--tuples F | --synthetic)
                         the highest rate the receiver sustains without loss
  gen tuples --synthetic N --out FILE
                         write a tuples file of synthetic ad events

cloudprofiler COMMAND --help (gen SUBCOMMAND --help) lists every flag of a command.
cloudprofiler --version prints the version and the commit it was built from.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs one command and returns the process's exit status. --help (or
// -h) anywhere before a command's operands prints its usage, every flag, on
// stdout and exits 0.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	// A command's flag set writes its usage to the writer it is given as
	// stderr: with --help that is what the user asked for, so stdout.
	errw := stderr
	if wantsHelp(args[1:]) {
		errw = stdout
	}
	var err error
	switch args[0] {
	case "dump":
		err = dump(stdout, errw, args[1:])
	case "confserver":
		err = runConfServer(errw, args[1:])
	case "conf":
		err = runConf(stdout, errw, args[1:])
	case "analyze":
		err = runAnalyze(stdout, errw, args[1:])
	case "export":
		err = runExport(stdout, errw, args[1:])
	case "join-part":
		err = runJoinPart(stdout, errw, args[1:])
	case "merge-parts":
		err = runMergeParts(stdout, errw, args[1:])
	case "tsc-server":
		err = runTSCServer(errw, args[1:])
	case "tsc-client":
		err = runTSCClient(errw, args[1:])
	case "tsc-round":
		err = runTSCRound(stdout, errw, args[1:])
	case "gen":
		err = runGen(stdout, errw, args[1:])
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, version.String())
		return 0
	default:
		fmt.Fprintf(stderr, "cloudprofiler: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "cloudprofiler:", err)
		var ec *exitCode
		if errors.As(err, &ec) {
			return ec.code
		}
		return 1
	}
	return 0
}

// wantsHelp tells whether args ask for help before any operand (where the
// flag package would still read them as flags).
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch {
		case a == "-h" || a == "-help" || a == "--help":
			return true
		case a == "--":
			return false
		}
	}
	return false
}
