package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"cloudprofiler/datagen"
)

// exitCode is an error that sets the process's exit status: gen send exits
// 3 when the rate was not reached and 4 when the receiver lost tuples.
type exitCode struct {
	code int
	msg  string
}

func (e *exitCode) Error() string { return e.msg }

// rateValue parses tuples per second: 250000, 250k, 1.5M, 1e6.
type rateValue float64

func (r *rateValue) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) }
func (r *rateValue) Set(s string) error {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a rate: %q (tuples per second: 250000, 250k, 1.5M)", s)
	}
	*r = rateValue(v * mult)
	return nil
}

// resolutionValue is an absolute rate (50k) or a share of the answer (2%).
type resolutionValue struct{ abs, rel float64 }

func (r *resolutionValue) String() string {
	if r.rel > 0 {
		return strconv.FormatFloat(100*r.rel, 'g', -1, 64) + "%"
	}
	return strconv.FormatFloat(r.abs, 'g', -1, 64)
}

func (r *resolutionValue) Set(s string) error {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || !(v > 0 && v < 100) {
			return fmt.Errorf("not a share: %q (0%% < share < 100%%)", s)
		}
		*r = resolutionValue{rel: v / 100}
		return nil
	}
	var v rateValue
	if err := v.Set(s); err != nil {
		return err
	}
	if !(v > 0) {
		return fmt.Errorf("resolution must be > 0, not %q", s)
	}
	*r = resolutionValue{abs: float64(v)}
	return nil
}

// runGen: cloudprofiler gen send|recv|maxrate|tuples.
func runGen(stdout, stderr io.Writer, args []string) error {
	if len(args) == 0 {
		return errors.New("gen: send, recv, maxrate or tuples (see cloudprofiler help)")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, genUsage)
		return flag.ErrHelp
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// After the first signal the default action is back: a second Ctrl-C
	// ends the process at once.
	context.AfterFunc(ctx, stop)
	switch args[0] {
	case "send":
		return genSend(ctx, stdout, stderr, args[1:])
	case "recv":
		return genRecv(ctx, stdout, stderr, args[1:])
	case "maxrate":
		return genMaxRate(ctx, stdout, stderr, args[1:])
	case "tuples":
		return genTuples(stdout, stderr, args[1:])
	}
	return fmt.Errorf("gen: unknown subcommand %q: send, recv, maxrate or tuples", args[0])
}

// genUsage is gen's part of the usage; each subcommand's --help lists its flags.
const genUsage = `usage: cloudprofiler gen SUBCOMMAND [FLAGS]

subcommands:
  send      send tuples over TCP at a controlled rate
  recv      receive, count per sender, report gaps and reordering
  maxrate   the highest rate a receiver sustains without loss
  tuples    write a tuples file of synthetic ad events

cloudprofiler gen SUBCOMMAND --help lists its flags.
`

// senderFlags are the flags send and maxrate share.
type senderFlags struct {
	to        string
	duration  time.Duration
	threads   int
	tuples    string
	synthetic bool
	events    int
	bucket    time.Duration
	name      string
	reportTO  time.Duration
}

func (s *senderFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.to, "to", "", "receiver address host:port (required)")
	fs.DurationVar(&s.duration, "duration", 10*time.Second, "length of a run")
	fs.IntVar(&s.threads, "threads", 1, "sending threads, one TCP connection each; each sends rate/threads")
	fs.StringVar(&s.tuples, "tuples", "", "file of serialized tuples (u32 big-endian length + bytes each), cycled")
	fs.BoolVar(&s.synthetic, "synthetic", false, "send Yahoo-streaming-benchmark-shaped ad events (JSON)")
	fs.IntVar(&s.events, "synthetic-count", 10000, "distinct synthetic events, cycled")
	fs.DurationVar(&s.bucket, "bucket", time.Millisecond, "time one bucket spans at the target rate (tuples per bucket = rate/threads * this)")
	fs.StringVar(&s.name, "name", "", "this sender's name in the receiver's reports (default host-pid)")
	fs.DurationVar(&s.reportTO, "report-timeout", 10*time.Second, "how long to wait, after the last tuple, for the receiver's REPORT")
}

func (s *senderFlags) config() (datagen.SendConfig, string, error) {
	c := datagen.SendConfig{To: s.to, Duration: s.duration, Threads: s.threads, BucketInterval: s.bucket, Name: s.name,
		ReportTimeout: s.reportTO}
	var what string
	switch {
	case s.tuples != "" && s.synthetic:
		return c, "", errors.New("--tuples and --synthetic: choose one")
	case s.tuples != "":
		p, err := datagen.LoadTuples(s.tuples)
		if err != nil {
			return c, "", err
		}
		c.Payloads, what = p, fmt.Sprintf("%d tuples from %s", len(p), s.tuples)
	case s.synthetic:
		if s.events < 1 {
			return c, "", errors.New("--synthetic-count must be >= 1")
		}
		c.Payloads, what = datagen.Synthetic(s.events, 1), fmt.Sprintf("%d synthetic ad events", s.events)
	default:
		return c, "", errors.New("say what to send: --tuples FILE or --synthetic")
	}
	n := 0
	for _, p := range c.Payloads {
		n += len(p)
	}
	return c, fmt.Sprintf("%s, %d B average", what, n/len(c.Payloads)), nil
}

func genSend(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("gen send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf senderFlags
	sf.register(fs)
	var rate rateValue
	fs.Var(&rate, "rate", "target tuples per second, all threads together (250000, 250k, 1.5M)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, what, err := sf.config()
	if err != nil {
		return fmt.Errorf("gen send: %w", err)
	}
	cfg.Rate = float64(rate)
	if err := cfg.Check(); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "gen send: %d thread(s) to %s, %.0f tuples/s for %s (%s)\n", cfg.Threads, cfg.To, cfg.Rate, cfg.Duration, what)
	res, err := datagen.Send(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		js, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(stdout, string(js))
	} else {
		printSend(stdout, res)
	}
	if ctx.Err() != nil {
		return &exitCode{130, "gen send: interrupted; what was sent is above"}
	}
	return sendVerdict(res)
}

func printSend(w io.Writer, res *datagen.SendResult) {
	fmt.Fprintf(w, "%6s %12s %9s %10s %10s %12s %10s %12s\n", "thread", "tuples", "buckets", "elapsed", "max lag", "received", "lost", "out of order")
	for _, t := range res.Threads {
		rcv, lost, ooo := "-", "-", "-"
		if t.Report != nil {
			rcv, lost, ooo = strconv.FormatUint(t.Report.Received, 10), strconv.FormatUint(t.Report.Lost, 10), strconv.FormatUint(t.Report.OutOfOrder, 10)
		}
		fmt.Fprintf(w, "%6d %12d %9d %9.3fs %10s %12s %10s %12s\n", t.Thread, t.Tuples, t.Buckets, t.Elapsed.Seconds(),
			t.MaxLag.Round(time.Microsecond), rcv, lost, ooo)
		if t.Err != nil {
			fmt.Fprintf(w, "       thread %d: %v\n", t.Thread, t.Err)
		}
	}
	verdict := "reached"
	if !res.Reached {
		verdict = "NOT REACHED"
	}
	fmt.Fprintf(w, "sent %d of %d tuples: %.0f tuples/s, %.2f%% of the target %.0f (%s)\n",
		res.Tuples, res.Planned, res.Achieved, 100*res.Achieved/res.Target, res.Target, verdict)
	switch {
	case res.ReceiverSaw:
		fmt.Fprintf(w, "receiver: received %d, lost %d (dropped by it %d), out of order %d\n", res.Received, res.Lost, res.Dropped, res.OutOfOrder)
		if len(res.FirstGaps) > 0 {
			fmt.Fprintf(w, "first missing id ranges: %v", res.FirstGaps)
			if res.GapsTruncated {
				fmt.Fprint(w, " (and more)")
			}
			fmt.Fprintln(w)
		}
	case res.Reports > 0:
		fmt.Fprintf(w, "receiver: %d of %d threads got a report: received %d, lost %d\n", res.Reports, len(res.Threads), res.Received, res.Lost)
	default:
		fmt.Fprintln(w, "receiver: no report (it does not answer END with REPORT)")
	}
}

func sendVerdict(res *datagen.SendResult) error {
	if res.Lost > 0 || (res.ReceiverSaw && res.Received < res.Tuples) {
		return &exitCode{4, fmt.Sprintf("gen send: the receiver lost %d of %d tuples", res.Lost, res.Tuples)}
	}
	if !res.Reached {
		return &exitCode{3, fmt.Sprintf("gen send: rate not reached: %.0f tuples/s is %.2f%% of %.0f", res.Achieved,
			100*res.Achieved/res.Target, res.Target)}
	}
	return nil
}

func genRecv(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("gen recv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "", "address to listen on, host:port (required)")
	var capacity rateValue
	fs.Var(&capacity, "capacity", "act as a system under test that processes at most this many tuples/s, dropping what its queue cannot hold (default: unlimited)")
	queue := fs.Int("queue", 10000, "with --capacity: tuples buffered before dropping")
	asJSON := fs.Bool("json", false, "print each stream's report as a JSON line")
	maxConns := fs.Int("max-conns", 1024, "connections open at once, at most; more are closed at once")
	helloTO := fs.Duration("hello-timeout", 10*time.Second, "a connection must send its whole HELLO within this")
	idleTO := fs.Duration("idle-timeout", 5*time.Minute, "after its HELLO, a connection that sends nothing for this long is closed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *listen == "":
		return errors.New("gen recv: --listen ADDR is required")
	case *maxConns < 1 || *helloTO <= 0 || *idleTO <= 0:
		return errors.New("gen recv: --max-conns, --hello-timeout and --idle-timeout must be > 0")
	}
	type runKey struct {
		sender string
		run    uint64
	}
	var mu sync.Mutex
	runs := map[runKey][]datagen.Report{}
	cfg := datagen.ReceiverConfig{Listen: *listen, Capacity: float64(capacity), Queue: *queue, MaxConns: *maxConns,
		HelloTimeout: *helloTO, IdleTimeout: *idleTO, Logf: logTo(stderr)}
	cfg.OnReport = func(r datagen.Report) {
		mu.Lock()
		defer mu.Unlock()
		if *asJSON {
			js, _ := json.Marshal(r)
			fmt.Fprintln(stdout, string(js))
		} else {
			fmt.Fprintf(stdout, "run %d %s thread %d/%d: received %d of %d, lost %d, dropped %d, out of order %d, %.0f tuples/s",
				r.RunID, r.Sender, r.Thread, r.Threads, r.Received, r.Sent, r.Lost, r.Dropped, r.OutOfOrder, float64(r.Received)/max(r.Seconds, 1e-9))
			if r.Duplicates > 0 || r.OutOfRange > 0 {
				fmt.Fprintf(stdout, ", duplicates %d, out of range %d", r.Duplicates, r.OutOfRange)
			}
			if r.Error != "" {
				fmt.Fprintf(stdout, " (%s)", r.Error)
			}
			fmt.Fprintln(stdout)
		}
		k := runKey{r.Sender, r.RunID}
		runs[k] = append(runs[k], r)
		if len(runs[k]) == int(r.Threads) && !*asJSON {
			var sent, rcv, lost, secs float64
			for _, x := range runs[k] {
				sent, rcv, lost, secs = sent+float64(x.Sent), rcv+float64(x.Received), lost+float64(x.Lost), max(secs, x.Seconds)
			}
			fmt.Fprintf(stdout, "run %d %s: %d threads, received %.0f of %.0f sent, lost %.0f, %.0f tuples/s\n",
				r.RunID, r.Sender, r.Threads, rcv, sent, lost, rcv/max(secs, 1e-9))
			delete(runs, k)
		}
	}
	r, err := datagen.NewReceiver(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "gen recv: listening on %s", r.Addr())
	if capacity > 0 {
		fmt.Fprintf(stderr, ", processing at most %.0f tuples/s, queue %d", float64(capacity), *queue)
	}
	fmt.Fprintln(stderr)
	return r.Serve(ctx)
}

func genMaxRate(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("gen maxrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf senderFlags
	sf.register(fs)
	var start, maxR, minR rateValue
	var res resolutionValue
	fs.Var(&start, "start", "first rate tried, tuples/s (required)")
	fs.Var(&maxR, "max", "highest rate tried (default 1e9)")
	fs.Var(&minR, "min", "lowest rate tried (default 1)")
	fs.Var(&res, "resolution", "stop when the answer is known to within this many tuples/s (50k) or this share of it (2%) (default 1%)")
	pause := fs.Duration("pause", time.Second, "pause between runs, for the system under test to drain")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, what, err := sf.config()
	if err != nil {
		return fmt.Errorf("gen maxrate: %w", err)
	}
	fmt.Fprintf(stderr, "gen maxrate: %d thread(s) to %s, runs of %s (%s)\n", cfg.Threads, cfg.To, cfg.Duration, what)
	fmt.Fprintf(stdout, "%4s %-8s %12s %12s %12s %12s %10s  %s\n", "step", "phase", "rate", "achieved", "sent", "received", "lost", "result")
	out, err := datagen.MaxRate(ctx, datagen.MaxRateConfig{Send: cfg, Start: float64(start), Max: float64(maxR), Min: float64(minR),
		Resolution: res.abs, RelResolution: res.rel, Pause: *pause, OnStep: func(s datagen.Step) {
			verdict := "ok"
			if !s.OK {
				verdict = "FAIL: " + s.Why
			}
			fmt.Fprintf(stdout, "%4d %-8s %12.0f %12.0f %12d %12d %10d  %s\n", s.N, s.Phase, s.Rate, s.Achieved, s.Sent, s.Received, s.Lost, verdict)
		}})
	if err != nil {
		if ctx.Err() != nil {
			return &exitCode{130, "gen maxrate: interrupted; the runs so far are above"}
		}
		return err
	}
	switch {
	case out.Max == 0:
		fmt.Fprintf(stdout, "no rate down to %.0f tuples/s ran without loss\n", out.FirstFail)
		return &exitCode{4, "gen maxrate: nothing sustained"}
	case out.FirstFail == 0:
		fmt.Fprintf(stdout, "maximum sustainable throughput: at least %.0f tuples/s (the --max ceiling; nothing failed)\n", out.Max)
	default:
		fmt.Fprintf(stdout, "maximum sustainable throughput: %.0f tuples/s (%.0f failed; %d runs)\n", out.Max, out.FirstFail, len(out.Steps))
	}
	return nil
}

func genTuples(stdout, stderr io.Writer, args []string) error {
	fs := flag.NewFlagSet("gen tuples", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("synthetic", 10000, "how many synthetic ad events")
	seed := fs.Int64("seed", 1, "random seed")
	out := fs.String("out", "", "file to write (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *n < 1 {
		return errors.New("gen tuples: --out FILE and --synthetic N >= 1 are required")
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := datagen.WriteTuples(f, datagen.Synthetic(*n, *seed)); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d tuples to %s\n", *n, *out)
	return nil
}
