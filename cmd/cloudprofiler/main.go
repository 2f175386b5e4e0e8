// Command cloudprofiler is the command-line tool: `dump` decodes channel logs.
// Later subcommands (confserver, tsc-server, analyze, gen) join it here.
package main

import (
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
          [--method best|paper|allprobes] [--mem-mb 256] [--no-durations]
                         durations between channels across nodes in one
                         reference TSC, each with a strict error bound
                         (--rounds: needed when the logs come from several nodes)
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
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "cloudprofiler: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cloudprofiler:", err)
		os.Exit(1)
	}
}
