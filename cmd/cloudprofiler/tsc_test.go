package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloudprofiler/minrtt"
	"cloudprofiler/tsc"

	"github.com/stretchr/testify/require"
)

// syncBuf collects a child's output while the test reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// child is a running cloudprofiler process.
type child struct {
	cmd    *exec.Cmd
	stderr *syncBuf
	done   chan error
}

func startChild(t *testing.T, bin string, env []string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), stderr: &syncBuf{}, done: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stderr = c.stderr
	require.NoError(t, c.cmd.Start())
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("%s stderr:\n%s", args[0], c.stderr.String())
		}
	})
	return c
}

// exit waits for the child to end by itself within d.
func (c *child) exit(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		return err
	case <-time.After(d):
		t.Fatalf("%v did not exit within %v\n%s", c.cmd.Args, d, c.stderr.String())
		return nil
	}
}

// buildTool builds the command into a temporary directory: the test runs
// the real binary, as a node would.
func buildTool(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cloudprofiler")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// A tsc-server, tsc-client processes with their own CP_FAKE_TSC, and
// tsc-round: the file holds every probe, consistent with the fake counters;
// a client killed with SIGKILL mid-round is listed missing; SIGTERM ends
// clients and server promptly with status 0.
func TestTSCCommands(t *testing.T) {
	bin := buildTool(t)
	out := t.TempDir()

	help, _ := exec.Command(bin, "--help").CombinedOutput()
	for _, c := range []string{"tsc-server", "tsc-client", "tsc-round"} {
		require.Contains(t, string(help), c)
	}

	srv := exec.Command(bin, "tsc-server", "--listen", "127.0.0.1:0", "--out", out, "--probes", "30", "--interval-us", "100")
	pipe, err := srv.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, srv.Start())
	srvDone := make(chan error, 1)
	srvLog := &syncBuf{}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			select {
			case first <- sc.Text():
			default:
			}
			srvLog.Write([]byte(sc.Text() + "\n"))
		}
		srvDone <- srv.Wait()
	}()
	defer func() {
		srv.Process.Kill()
		if t.Failed() {
			t.Logf("server stderr:\n%s", srvLog.String())
		}
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("tsc-server said nothing")
	}
	require.Contains(t, line, "listening on ")
	addr := strings.TrimSuffix(strings.Fields(strings.SplitN(line, "listening on ", 2)[1])[0], ",")

	round := func(args ...string) (string, string, error) {
		var o, e bytes.Buffer
		cmd := exec.Command(bin, append([]string{"tsc-round", "--server", addr}, args...)...)
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err
	}

	// No nodes: the round cannot run, and says why.
	_, stderr, err := round("--label", "before")
	require.Error(t, err)
	require.Contains(t, stderr, "at least 2")

	// A bad CP_FAKE_TSC stops a client at once, clearly.
	bad := startChild(t, bin, []string{"CP_FAKE_TSC=fast"}, "tsc-client", "--server", addr, "--node", "x")
	require.Error(t, bad.exit(t, 10*time.Second))
	require.Contains(t, bad.stderr.String(), "CP_FAKE_TSC")

	fakes := map[string]string{"a": "1.0003:2000000000000", "b": "0.9998:7"}
	clients := map[string]*child{}
	for name, spec := range fakes {
		clients[name] = startChild(t, bin, []string{"CP_FAKE_TSC=" + spec}, "tsc-client", "--server", addr, "--node", name)
	}
	stdout, stderr, err := round("--label", "before", "--wait-nodes", "2", "--wait-timeout", "10s")
	require.NoError(t, err, stderr)
	t.Logf("tsc-round:\n%s", stdout)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	path := lines[0]
	require.Equal(t, filepath.Join(out, "round-000001.json"), path)
	require.Regexp(t, `a -> b: 30/30 probes, min RTT [0-9.]+ us`, stdout)
	require.Regexp(t, `b -> a: 30/30 probes, min RTT [0-9.]+ us`, stdout)

	r, err := minrtt.ReadRound(path)
	require.NoError(t, err)
	require.Equal(t, "before", r.Label)
	require.Len(t, r.Dirs, 2)
	hw := tsc.HardwareFreq().Hz
	fk := map[string]tsc.Fake{}
	for _, n := range r.Nodes {
		f, err := tsc.ParseFake(fakes[n.Name])
		require.NoError(t, err)
		fk[n.Name] = f
		// Each process finds the hardware frequency itself (maybe by a
		// 50 ms calibration), so it agrees with ours only roughly.
		require.InEpsilon(t, hw*f.Rate(), n.TSCHz, 5e-3, n.Name)
		require.Contains(t, n.TSCHzSource, "fake rate")
	}
	for _, d := range r.Dirs {
		require.Len(t, d.Probes, 30, d.Error)
		fo, fr := fk[d.Origin], fk[d.Responder]
		for _, p := range d.Probes {
			// Truth: the responder's raw counter, mapped into the origin's
			// counter, lies within [Send, Recv].
			lo, hi := preimage(fr, p.Resp)
			require.LessOrEqual(t, lo, hi)
			require.LessOrEqual(t, fo.Apply(lo), p.Recv)
			require.GreaterOrEqual(t, fo.Apply(hi), p.Send)
		}
	}

	// A third node whose probes are slow (5ms emulated forward delay each)
	// is killed with SIGKILL while it probes: the round completes without it.
	c := startChild(t, bin, []string{"CP_FAKE_TSC=1.2:5"}, "tsc-client", "--server", addr, "--node", "c", "--inject", "fwd=5ms")
	type result struct {
		stdout, stderr string
		err            error
	}
	res := make(chan result, 1)
	go func() {
		o, e, err := round("--label", "during", "--wait-nodes", "3", "--wait-timeout", "10s")
		res <- result{o, e, err}
	}()
	require.Eventually(t, func() bool { return strings.Contains(c.stderr.String(), "registered") }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(150 * time.Millisecond) // c originates in the second step, for >= 150 ms
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	var got result
	select {
	case got = <-res:
	case <-time.After(30 * time.Second):
		t.Fatal("the round did not finish")
	}
	require.NoError(t, got.err, got.stderr)
	t.Logf("tsc-round with c killed:\n%s", got.stdout)
	require.Contains(t, got.stdout, "missing c: ")
	r, err = minrtt.ReadRound(strings.SplitN(got.stdout, "\n", 2)[0])
	require.NoError(t, err)
	require.Equal(t, []string{"c"}, missingNames(r))
	for _, d := range r.Dirs {
		if d.Origin != "c" && d.Responder != "c" {
			require.Len(t, d.Probes, 30)
		}
	}

	// SIGTERM: clients and server exit 0, promptly.
	for name, cl := range clients {
		require.NoError(t, cl.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, cl.exit(t, 3*time.Second), name)
		require.Contains(t, cl.stderr.String(), "stopped")
	}
	require.NoError(t, srv.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-srvDone:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("tsc-server did not stop on SIGTERM")
	}
	rs, err := minrtt.ReadRounds(out)
	require.NoError(t, err)
	require.Len(t, rs, 2)
}

// A client started before its server comes up keeps trying and registers.
func TestTSCClientWaitsForServer(t *testing.T) {
	bin := buildTool(t)
	ln, err := netListenFree()
	require.NoError(t, err)
	cl := startChild(t, bin, nil, "tsc-client", "--server", ln, "--node", "early")
	time.Sleep(300 * time.Millisecond)
	srv := startChild(t, bin, nil, "tsc-server", "--listen", ln, "--out", t.TempDir())
	require.Eventually(t, func() bool { return strings.Contains(srv.stderr.String(), "node early registered") },
		10*time.Second, 20*time.Millisecond, "client stderr:\n%s", cl.stderr.String())
	require.NoError(t, cl.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cl.exit(t, 3*time.Second))
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, srv.exit(t, 3*time.Second))
}

// netListenFree picks a free loopback TCP port and frees it again.
func netListenFree() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func missingNames(r *minrtt.Round) []string {
	var ns []string
	for _, m := range r.Missing {
		ns = append(ns, m.Node)
	}
	return ns
}

// preimage is the range of raw TSC values that f maps to v.
func preimage(f tsc.Fake, v uint64) (lo, hi uint64) {
	search := func(pred func(uint64) bool) uint64 {
		a, b := uint64(0), uint64(1)<<62
		for a < b {
			m := a + (b-a)/2
			if pred(m) {
				b = m
			} else {
				a = m + 1
			}
		}
		return a
	}
	lo = search(func(x uint64) bool { return f.Apply(x) >= v })
	hi = search(func(x uint64) bool { return f.Apply(x) > v }) - 1
	return lo, hi
}

// tsc-server's limits are flags, checked before it listens.
func TestTSCServerLimitFlags(t *testing.T) {
	var errb bytes.Buffer
	err := runTSCServer(&errb, []string{"--listen", "127.0.0.1:0", "--out", t.TempDir(), "--max-conns", "0"})
	require.ErrorContains(t, err, "--max-conns must be > 0")
	err = runTSCServer(&errb, []string{"--listen", "127.0.0.1:0", "--out", t.TempDir(), "--message-timeout", "0s"})
	require.ErrorContains(t, err, "durations must be positive")
}
