package capacity

import (
	"bufio"
	"bytes"
	"cloudprofiler/tests/internal/testrun"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// costs are the pipeline's operators: A is fast, B the bottleneck.
type costs struct {
	a, b  string  // work per tuple
	bRate float64 // B's nominal service rate, tuples/s
}

var (
	// The direct measurements and gen maxrate: 10,000 tuples/s at B keep
	// the sender and the pipeline's other threads well within the second
	// vCPU, also while a busy process shares the machine. On this VM a
	// tuple's spin is lengthened by about 0.5 us on average (interrupts and
	// the hypervisor taking the CPU across its end: the truth's spun_mean
	// against mean_cycles), 2-3% of a 20 us tuple: A's 40 us keep that
	// near 1%.
	direct = costs{"40us", "100us", 1e4}
)

// env is what the tests need from the build.
type env struct {
	tool, tandem string
	udpstage     string // examples/pipeline/udpstage (CP_UDPSTAGE)
	count        bool   // the library has CP_SERVICERATE (tandem can open count channels)
	countWhy     string // why not
	capacity     bool   // analyze has the capacity analysis
}

var (
	envOnce sync.Once
	theEnv  env
	envSkip string
	envErr  error
)

// needEnv skips the test unless CP_TOOL and CP_TANDEM name the built tool
// and pipeline (`make test-capacity` sets them), and finds out what they
// can do.
func needEnv(t *testing.T) env {
	t.Helper()
	envOnce.Do(func() {
		e := env{tool: os.Getenv("CP_TOOL"), tandem: os.Getenv("CP_TANDEM"), udpstage: os.Getenv("CP_UDPSTAGE")}
		if e.tool == "" || e.tandem == "" || e.udpstage == "" {
			envSkip = "CP_TOOL, CP_TANDEM and CP_UDPSTAGE (paths of build/cloudprofiler, build/tandem and build/udpstage) are not set: run `make test-capacity`"
			return
		}
		for _, p := range []*string{&e.tool, &e.tandem, &e.udpstage} {
			abs, err := filepath.Abs(*p)
			if err != nil {
				envErr = err
				return
			}
			if _, err := os.Stat(abs); err != nil {
				envSkip = fmt.Sprintf("%s is missing (make build): %v", abs, err)
				return
			}
			*p = abs
		}
		help, _ := exec.Command(e.tool, "analyze", "--help").CombinedOutput()
		e.capacity = strings.Contains(string(help), "no-capacity")
		// Can the library open count channels? A one-tuple run says.
		dir, err := os.MkdirTemp("", "cp-capacity-probe")
		if err != nil {
			envErr = err
			return
		}
		defer os.RemoveAll(dir)
		r := testrun.Run(20*time.Second, []string{"CP_LOG_DIR=" + dir}, e.tandem, "--tuples", "1", "--rate", "max", "--no-rt")
		switch {
		case r.Err == nil:
			e.count = true
		case strings.Contains(r.Stderr, "no CP_SERVICERATE") || strings.Contains(r.Stderr, "CP_MarkBlocked/CP_ServiceRate"):
			e.countWhy = strings.TrimSpace(r.Stderr)
		default:
			envErr = fmt.Errorf("tandem does not run: %v\n%s", r.Err, r.Stderr)
			return
		}
		theEnv = e
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	if envSkip != "" {
		t.Skip(envSkip)
	}
	return theEnv
}

// needCapacity skips a test that checks analyze's capacity rows when the
// tool has no capacity analysis (no --no-capacity flag).
func needCapacity(t *testing.T, e env) {
	t.Helper()
	if !e.capacity {
		t.Skipf("%s analyze has no capacity analysis (no --no-capacity flag): build it from a tree with internal/capacity", e.tool)
	}
}

// countArgs is how tandem runs: with count channels when the library has them.
func countArgs(e env) []string {
	if e.count {
		return nil
	}
	return []string{"--no-count"}
}

// ---- the pipeline's truth (tandem's JSON line) ----

type phaseTruth struct {
	Tuples     int64   `json:"tuples"`
	MeanCycles float64 `json:"mean_cycles"`
	TrueRate   float64 `json:"true_rate"`
	SpunMean   float64 `json:"spun_mean_cycles"`
	WallRate   float64 `json:"wall_rate"`
}

type srAnswer struct {
	Rate         float64 `json:"rate"`
	Running      float64 `json:"running"`
	PeriodS      float64 `json:"period_s"`
	Samples      int64   `json:"samples"`
	Periods      int64   `json:"periods"`
	Convergences int64   `json:"convergences"`
	Converged    bool    `json:"converged"`
}

type opTruth struct {
	Name string `json:"name"`
	phaseTruth
	WaitsInput      int64        `json:"waits_input"`
	WaitsOutput     int64        `json:"waits_output"`
	PreemptedTuples int64        `json:"preempted_tuples"`
	PreemptedS      float64      `json:"preempted_s"`
	LongestGapS     float64      `json:"longest_gap_s"`
	PhaseAfter      int64        `json:"phase_after"`
	Phases          []phaseTruth `json:"phases"`
	ServiceRate     *srAnswer    `json:"service_rate"`
}

type estimate struct {
	Op           string  `json:"op"`
	TS           float64 `json:"t_s"`
	Rate         float64 `json:"rate"`
	BTuples      int64   `json:"b_tuples"`
	Convergences int64   `json:"convergences"`
}

type truth struct {
	TscHz    float64 `json:"tsc_hz"`
	ElapsedS float64 `json:"elapsed_s"`
	Source   struct {
		Mode   string  `json:"mode"`
		Rate   float64 `json:"rate"`
		Tuples int64   `json:"tuples"`
	} `json:"source"`
	Operators []opTruth `json:"operators"`
	Sink      struct {
		Tuples int64 `json:"tuples"`
	} `json:"sink"`
	Estimates []estimate `json:"estimates"`
	Streams   *struct {
		Ended    int64 `json:"ended"`
		Reported int64 `json:"reported"`
		Received int64 `json:"received"`
		Lost     int64 `json:"lost"`
	} `json:"streams"`
}

func (tr *truth) op(name string) *opTruth {
	for i := range tr.Operators {
		if tr.Operators[i].Name == name {
			return &tr.Operators[i]
		}
	}
	return nil
}

// envExcess is how much longer than drawn the operator's spins took: the
// CPU was taken from it (interrupts, the hypervisor) across a tuple's end.
func (o *opTruth) envExcess() float64 { return o.SpunMean/o.MeanCycles - 1 }

func parseTruth(stdout string) (*truth, error) {
	line := strings.TrimSpace(stdout)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	var tr truth
	if err := json.Unmarshal([]byte(line), &tr); err != nil {
		return nil, fmt.Errorf("tandem's truth line: %v: %q", err, line)
	}
	if tr.op("A") == nil || tr.op("B") == nil || !(tr.TscHz > 0) {
		return nil, fmt.Errorf("tandem's truth line has no A, B or tsc_hz: %q", line)
	}
	return &tr, nil
}

// runTandem runs the pipeline to its end with its logs in logs.
func runTandem(t *testing.T, e env, logs string, args ...string) *truth {
	t.Helper()
	argv := append([]string{e.tandem}, append(countArgs(e), args...)...)
	r := testrun.Run(60*time.Second, []string{"CP_LOG_DIR=" + logs}, argv...)
	if r.Err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), r.Err, r.Stderr)
	}
	tr, err := parseTruth(r.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Sink.Tuples != tr.Source.Tuples || tr.op("B").Tuples != tr.Source.Tuples {
		t.Fatalf("source sent %d, B took %d, sink %d", tr.Source.Tuples, tr.op("B").Tuples, tr.Sink.Tuples)
	}
	return tr
}

// ---- analyze and capacity.csv ----

// analyze runs `cloudprofiler analyze` on logs into out; it fails the test
// on an error or a panic.
func analyze(t *testing.T, e env, logs, out string, extra ...string) string {
	t.Helper()
	argv := append([]string{e.tool, "analyze", "--quiet", "--no-durations", "--logs", logs, "--out", out}, extra...)
	r := testrun.Run(120*time.Second, nil, argv...)
	if r.Err != nil || testrun.Panicked(r.Stderr) {
		t.Fatalf("%s: %v\n%s%s", strings.Join(argv[1:], " "), r.Err, r.Stdout, r.Stderr)
	}
	return r.Stdout + r.Stderr
}

// capRow is one row of capacity.csv, by column name.
type capRow map[string]string

func (r capRow) f(col string) float64 {
	v, err := strconv.ParseFloat(r[col], 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

func (r capRow) String() string {
	var b strings.Builder
	for _, c := range []string{"level", "window", "operator", "instance", "method", "tuples_in", "tuples_out", "arrivals_per_s",
		"departures_per_s", "busy_share", "blocked_share", "service_rate", "max_source_rate", "bottleneck", "note"} {
		fmt.Fprintf(&b, "%s=%s ", c, r[c])
	}
	return b.String()
}

var capColumns = strings.Split("level,window,start_s,end_s,operator,instance,node,pid,method,tuples_in,tuples_out,"+
	"arrivals_per_s,departures_per_s,busy_share,blocked_share,own_us,handoff_us,cost_us,cost_low_us,cost_high_us,backlogged,"+
	"service_rate,service_rate_low,service_rate_high,capacity,capacity_low,capacity_high,load,headroom,"+
	"selectivity,instances,skew,reach,lost,max_source_rate,bottleneck,parallelism_needed,note", ",")

func readCapacity(t *testing.T, out string) []capRow {
	t.Helper()
	recs, err := testrun.ReadCSV(filepath.Join(out, "capacity.csv"), capColumns)
	if err != nil {
		t.Fatalf("analyze wrote no readable capacity.csv: %v", err)
	}
	rows := make([]capRow, len(recs))
	for i, r := range recs {
		rows[i] = capRow(r)
	}
	return rows
}

// wholeRun finds the whole-run row of an operator (level "operator") or of
// its only instance (level "instance") for a method.
func wholeRun(t *testing.T, rows []capRow, level, op, method string) capRow {
	t.Helper()
	var found []capRow
	for _, r := range rows {
		if r["level"] == level && r["window"] == "-1" && r["operator"] == op && r["method"] == method {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("capacity.csv: %d whole-run %s rows of %s by %s, want 1", len(found), level, op, method)
	}
	return found[0]
}

// ---- the logs themselves ----

// ownService reads an operator's in and out channels from the logs
// (`cloudprofiler dump --csv`) and returns the mean of out - in over the
// tuples in both, in cycles: what the analysis should find, computed apart
// from it.
func ownService(t *testing.T, e env, logs, op string) (mean float64, n int) {
	t.Helper()
	read := func(role string) map[int64]uint64 {
		files, _ := filepath.Glob(filepath.Join(logs, "*-"+op+"_0_"+role+".cplog"))
		if len(files) != 1 {
			t.Fatalf("%d log files of %s#0 %s in %s", len(files), op, role, logs)
		}
		out, err := exec.Command(e.tool, "dump", "--csv", files[0]).Output()
		var ee *exec.ExitError
		if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 3) { // 3: read, with problems
			t.Fatalf("dump --csv %s: %v", files[0], err)
		}
		m := map[int64]uint64{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Scan() // header
		for sc.Scan() {
			id, tsc, ok := strings.Cut(sc.Text(), ",")
			if !ok {
				continue
			}
			i, err1 := strconv.ParseInt(id, 10, 64)
			v, err2 := strconv.ParseUint(tsc, 10, 64)
			if err1 == nil && err2 == nil {
				m[i] = v
			}
		}
		return m
	}
	in, out := read("in"), read("out")
	var sum float64
	for id, a := range in {
		if b, ok := out[id]; ok && b >= a {
			sum += float64(b - a)
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no tuple of %s has both in and out", op)
	}
	return sum / float64(n), n
}

// ---- processes that run beside the test ----

// bg is a process started in the background, its stderr collected.
type bg struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	mu     sync.Mutex
	errb   bytes.Buffer
	done   chan struct{}
	waitEr error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func start(t *testing.T, extraEnv []string, argv ...string) *bg {
	t.Helper()
	p := &bg{done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), extraEnv...)
	p.cmd.Stdout = lockedWriter{&p.mu, &p.out}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.errb}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.waitEr = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { // never leave it behind
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *bg) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errb.String()
}

func (p *bg) stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitFor waits until stderr has a line containing text and returns it.
func (p *bg) waitFor(t *testing.T, text string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(p.stderr(), "\n") {
			if strings.Contains(l, text) {
				return l
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s ended before saying %q: %v\n%s", p.cmd.Path, text, p.waitEr, p.stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not say %q within %s:\n%s", p.cmd.Path, text, d, p.stderr())
	return ""
}

func (p *bg) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.waitEr
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not end within %s:\n%s", p.cmd.Path, d, p.stderr())
		return nil
	}
}

func (p *bg) signal(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

// ---- figures ----

// quantiles of xs (sorted copy): min, 10%, 50%, 90%, max.
func quantiles(xs []float64) string {
	if len(xs) == 0 {
		return "none"
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	q := func(p float64) float64 { return s[int(math.Round(p*float64(len(s)-1)))] }
	return fmt.Sprintf("min %+.1f%%, p10 %+.1f%%, median %+.1f%%, p90 %+.1f%%, max %+.1f%%",
		100*q(0), 100*q(0.1), 100*q(0.5), 100*q(0.9), 100*q(1))
}

func pct(x float64) string { return fmt.Sprintf("%+.2f%%", 100*x) }

// problems is what one attempt of a test found wrong.
type problems []string

func (ps *problems) add(format string, args ...any) { *ps = append(*ps, fmt.Sprintf(format, args...)) }

// hog keeps a process spinning on the machine until the test ends: the
// other tenant of a shared 2-vCPU VM.
func hog(t *testing.T, e env) {
	t.Helper()
	p := start(t, nil, e.udpstage, "burn", "600")
	t.Cleanup(func() { p.signal(syscall.SIGKILL) })
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
