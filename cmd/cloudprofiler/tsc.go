package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"cloudprofiler/minrtt/probe"
	"cloudprofiler/tsc"
)

// logTo returns a Logf that writes whole lines to w (safe for goroutines).
func logTo(w io.Writer) func(string, ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// parseFlags parses flags only: a stray argument is an error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q (flags only)", fs.Name(), fs.Arg(0))
	}
	return nil
}

// runTSCServer: cloudprofiler tsc-server --listen ADDR --out DIR [--probes N]
// [--interval-us US] [--every D] [--round-timeout D] [--probe-timeout D]
func runTSCServer(stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("tsc-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "TCP address for clients and round requests (required; no default address)")
	out := fs.String("out", "", "directory for the rounds files (required)")
	probes := fs.Int("probes", 100, "probes per direction per round")
	intervalUs := fs.Int("interval-us", 200, "microseconds between an origin's probe sends")
	every := fs.Duration("every", 0, `also run a round labelled "during" this often (0: only on request)`)
	roundTimeout := fs.Duration("round-timeout", 10*time.Second, "how long to wait for a node's result in a round before listing it missing")
	probeTimeout := fs.Duration("probe-timeout", 50*time.Millisecond, "how long an origin waits for one reply")
	maxConns := fs.Int("max-conns", probe.DefaultMaxConns, "control connections open at once; one more is refused")
	helloTO := fs.Duration("hello-timeout", 10*time.Second, "a connection's first message (hello or round request) must arrive within this")
	messageTO := fs.Duration("message-timeout", 30*time.Second, "a node's message, once begun, must arrive whole within this")
	maxWait := fs.Duration("max-wait", 10*time.Minute, "the longest a round request may wait for its nodes")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *listen == "":
		return errors.New("tsc-server: --listen ADDR is required")
	case *out == "":
		return errors.New("tsc-server: --out DIR is required")
	case *probes <= 0 || *probes > 10000:
		return errors.New("tsc-server: --probes must be in [1, 10000]")
	case *intervalUs < 0 || *intervalUs > 1000000:
		return errors.New("tsc-server: --interval-us must be 0..1000000 (at most a second between probes)")
	case *roundTimeout <= 0 || *probeTimeout <= 0 || *every < 0 || *helloTO <= 0 || *messageTO <= 0 || *maxWait <= 0:
		return errors.New("tsc-server: durations must be positive")
	case *maxConns < 1:
		return errors.New("tsc-server: --max-conns must be > 0")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s := &probe.Server{Listen: *listen, OutDir: *out, Probes: *probes,
		Interval: time.Duration(*intervalUs) * time.Microsecond, ProbeTimeout: *probeTimeout,
		RoundTimeout: *roundTimeout, Every: *every, MaxConns: *maxConns, HelloTimeout: *helloTO,
		MessageTimeout: *messageTO, MaxWait: *maxWait, Logf: logTo(stderr)}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("tsc-server: %w", err)
	}
	fmt.Fprintf(stderr, "tsc-server: listening on %s, rounds into %s, %d probes per direction %dus apart\n",
		s.Addr(), *out, *probes, *intervalUs)
	<-ctx.Done()
	s.Close()
	fmt.Fprintln(stderr, "tsc-server: stopped")
	return nil
}

// runTSCClient: cloudprofiler tsc-client --server ADDR --node NAME
// [--listen-udp ADDR] [--inject SPEC] [--timestamps kernel|user]
func runTSCClient(stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("tsc-client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "TSC server host:port (required)")
	node := fs.String("node", "", "this node's name (required, unique)")
	listenUDP := fs.String("listen-udp", "", "UDP probe address (default: the IP used to reach the server, port 0)")
	inject := fs.String("inject", "", "emulated delay, e.g. fwd=40us,rev=10us,jitter=30us,spike=0.02:400us,seed=1 (in the process: before the kernel's timestamps, so only probes timed by the process see it)")
	stamps := fs.String("timestamps", "kernel", "how probes are timed: kernel (the kernels' software timestamps of each packet where both nodes' kernels give them, else as user) or user (the counter read by this process around each send and receive)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *server == "" || *node == "" {
		return errors.New("tsc-client: --server ADDR and --node NAME are required")
	}
	if *stamps != "kernel" && *stamps != "user" {
		return fmt.Errorf("tsc-client: --timestamps %q: kernel or user", *stamps)
	}
	// The counter must be the node's before anything reads it.
	if err := tsc.FakeFromEnv(); err != nil {
		return fmt.Errorf("tsc-client: %w", err)
	}
	inj, err := probe.ParseInject(*inject)
	if err != nil {
		return fmt.Errorf("tsc-client: --%w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	c := &probe.Client{Server: *server, Node: *node, ListenUDP: *listenUDP, Inject: inj, Logf: logTo(stderr),
		UserTimestamps: *stamps == "user"}
	if inj != nil {
		fmt.Fprintf(stderr, "tsc-client %s: injecting %s\n", *node, inj)
	}
	if err := c.Run(ctx); err != nil {
		return fmt.Errorf("tsc-client: %w", err)
	}
	fmt.Fprintf(stderr, "tsc-client %s: stopped\n", *node)
	return nil
}

// runTSCRound: cloudprofiler tsc-round --server ADDR [--label L]
// [--wait-nodes N --wait-timeout D] [--timeout D]
func runTSCRound(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("tsc-round", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "TSC server host:port (required)")
	label := fs.String("label", "manual", `the round's label: "before", "after", "during" or any text`)
	waitNodes := fs.Int("wait-nodes", 0, "first wait until this many nodes are registered (and for the server to listen: it may be starting)")
	waitTimeout := fs.Duration("wait-timeout", 10*time.Second, "how long to wait for the server and the nodes")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up on the server's answer after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *server == "" {
		return errors.New("tsc-round: --server ADDR is required")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout+*waitTimeout)
	defer cancel()
	path, sum, err := probe.RequestRound(ctx, *server, probe.RoundRequest{Label: *label,
		WaitNodes: *waitNodes, WaitTimeout: *waitTimeout})
	if err != nil {
		return fmt.Errorf("tsc-round: %w", err)
	}
	fmt.Fprintln(stdout, path)
	fmt.Fprintf(stdout, "round %d %q: %d nodes, %d probes per direction\n", sum.Round, sum.Label, sum.Nodes, sum.PerDir)
	for _, d := range sum.Dirs {
		line := fmt.Sprintf("%s -> %s: %d/%d probes", d.Origin, d.Responder, d.Probes, d.Sent)
		if d.Probes > 0 {
			line += fmt.Sprintf(", min RTT %.1f us", d.MinRTTMicros())
			if d.MinRTTUser > 0 {
				line += fmt.Sprintf(" (kernel timestamps; %.1f us as the processes timed them)", d.MinRTTUserMicros())
			}
		}
		if d.Timestamps != "" && d.Timestamps != "kernel" {
			line += " [timestamps " + d.Timestamps + "]"
		}
		if d.Error != "" {
			line += " (" + d.Error + ")"
		}
		fmt.Fprintln(stdout, line)
	}
	for _, m := range sum.Missing {
		fmt.Fprintf(stdout, "missing %s: %s\n", m.Node, m.Why)
	}
	who := make([]string, 0, len(sum.Malformed))
	for w := range sum.Malformed {
		who = append(who, w)
	}
	sort.Strings(who)
	for _, w := range who {
		fmt.Fprintf(stdout, "malformed packets or messages dropped by %s: %d\n", w, sum.Malformed[w])
	}
	return nil
}
