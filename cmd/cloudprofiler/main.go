// Command cloudprofiler is the command-line tool: `dump` decodes channel logs.
// Later subcommands (confserver, tsc-server, analyze, gen) join it here.
package main

import (
	"errors"
	"fmt"
	"os"
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
                         sustainable source rate (capacity.csv, README "Capacity")
          [--slice 1s] [--no-critical-path]
                         the same marks give each slice's critical path and the
                         tail's latency taken apart into compute, queueing and
                         transfer (criticalpath.csv, breakdown.csv, README
                         "Where the latency goes")
          [--mace-window 1s] [--what-if rate=x2|cost:OP=0.5|colocate:A,B]...
          [--mace-fit 0.08] [--mace-costs FILE] [--no-mace]
                         the same marks give the largest latency predicted from
                         load per window beside the measured one, and what-if
                         scenarios (mace.csv, README "Mace")
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
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dump":
		err = dump(os.Stdout, os.Stderr, os.Args[2:])
	case "confserver":
		err = runConfServer(os.Stderr, os.Args[2:])
	case "conf":
		err = runConf(os.Stdout, os.Stderr, os.Args[2:])
	case "analyze":
		err = runAnalyze(os.Stdout, os.Stderr, os.Args[2:])
	case "tsc-server":
		err = runTSCServer(os.Stderr, os.Args[2:])
	case "tsc-client":
		err = runTSCClient(os.Stderr, os.Args[2:])
	case "tsc-round":
		err = runTSCRound(os.Stdout, os.Stderr, os.Args[2:])
	case "gen":
		err = runGen(os.Stdout, os.Stderr, os.Args[2:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "cloudprofiler: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cloudprofiler:", err)
		var ec *exitCode
		if errors.As(err, &ec) {
			os.Exit(ec.code)
		}
		os.Exit(1)
	}
}
