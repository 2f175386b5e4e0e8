// Package netns makes the end-to-end tests' hosts: network namespaces on a
// bridge, a node each, processes started inside them (tests/multinode,
// tests/cluster). Needs root and iproute2; everything it makes goes away
// in the test's cleanup, and namespaces an earlier run left behind (its
// process gone) are removed first.
package netns

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Lab is a set of network namespaces this test made: a hub holding a bridge
// and one namespace per node, each joined to the bridge by a veth pair.
// Addresses are in subnet, which exists only inside these namespaces.
// Everything (processes, then namespaces) goes away in t.Cleanup.
type Lab struct {
	t      *testing.T
	prefix string            // cpt-<pid>-<tag>: every namespace name starts with it
	Hub    string            // the hub namespace
	HubIP  string            // the hub's address on the bridge
	NS     map[string]string // node -> namespace
	IP     map[string]string // node -> address
	dir    string            // process output files

	mu    sync.Mutex
	procs []*Proc
}

const subnet = "10.77.0" // /24, inside the test's namespaces only

// ip runs the ip(8) command and fails the test on error.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// removeStaleNamespaces deletes namespaces left by an earlier run of this
// test that died without its cleanup (named cpt-<pid>-..., pid gone).
func removeStaleNamespaces(t *testing.T) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, "cpt-")
		if !ok {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its test is still running
		}
		killNamespacePids(name)
		if err := exec.Command("ip", "netns", "del", name).Run(); err == nil {
			t.Logf("removed namespace %s left by an earlier run", name)
		}
	}
}

// killNamespacePids kills every process still running in a namespace this
// test made (stray children of the processes it started).
func killNamespacePids(ns string) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// Available says why namespaces cannot be made here ("" when they can):
// a test skips with it.
func Available() string {
	if os.Geteuid() != 0 {
		return "needs root for network namespaces (ip netns)"
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns does not work here: %v %s", err, out)
	}
	return ""
}

// New makes the hub and one namespace per node, named cpt-<pid>-<tag>-.
// Node i gets address subnet.(10+i), the hub subnet.1. Process output
// goes to files in dir.
func New(t *testing.T, tag string, nodes []string, dir string) *Lab {
	removeStaleNamespaces(t)
	l := &Lab{
		t: t, prefix: fmt.Sprintf("cpt-%d-%s", os.Getpid(), tag), dir: dir,
		NS: map[string]string{}, IP: map[string]string{},
	}
	l.Hub, l.HubIP = l.prefix+"-hub", subnet+".1"
	var (
		all     = []string{l.Hub}
		allMu   sync.Mutex
		tearing sync.Once
	)
	teardown := func() {
		tearing.Do(func() {
			allMu.Lock()
			defer allMu.Unlock()
			for _, ns := range all {
				killNamespacePids(ns)
			}
			for _, ns := range all {
				if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
					fmt.Fprintf(os.Stderr, "ip netns del %s: %v %s\n", ns, err, out)
				}
			}
		})
	}
	t.Cleanup(teardown)
	// go test -timeout panics without running cleanups: tear down just
	// before it (the blocked step then fails, its processes gone).
	if deadline, ok := t.Deadline(); ok {
		watchdog := time.AfterFunc(time.Until(deadline)-5*time.Second, func() {
			fmt.Fprintln(os.Stderr, "netns: the test deadline is near: killing its processes, deleting its namespaces")
			teardown()
		})
		t.Cleanup(func() { watchdog.Stop() })
	}
	ipCmd(t, "netns", "add", l.Hub)
	ipCmd(t, "-n", l.Hub, "link", "set", "lo", "up")
	ipCmd(t, "-n", l.Hub, "link", "add", "br0", "type", "bridge")
	ipCmd(t, "-n", l.Hub, "addr", "add", l.HubIP+"/24", "dev", "br0")
	ipCmd(t, "-n", l.Hub, "link", "set", "br0", "up")
	for i, n := range nodes {
		ns := fmt.Sprintf("%s-%s", l.prefix, n)
		allMu.Lock()
		all = append(all, ns)
		allMu.Unlock()
		l.NS[n], l.IP[n] = ns, fmt.Sprintf("%s.%d", subnet, 10+i)
		ipCmd(t, "netns", "add", ns)
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
		// Both ends are created inside our namespaces: nothing touches the
		// host's own interfaces.
		port := fmt.Sprintf("v%d", i)
		ipCmd(t, "-n", l.Hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns)
		ipCmd(t, "-n", l.Hub, "link", "set", port, "master", "br0")
		ipCmd(t, "-n", l.Hub, "link", "set", port, "up")
		ipCmd(t, "-n", ns, "addr", "add", l.IP[n]+"/24", "dev", "eth0")
		ipCmd(t, "-n", ns, "link", "set", "eth0", "up")
	}
	// Processes die before their namespaces (cleanups run last-in first-out).
	t.Cleanup(l.killAll)
	return l
}

// Proc is a process started inside a namespace, its output in files.
type Proc struct {
	Name     string
	cmd      *exec.Cmd
	Out, Err string // stdout and stderr files
	done     chan struct{}
	waitErr  error
}

// Start runs argv inside namespace ns with env added to a clean copy of the
// environment (no CP_* variables inherited), in its own process group.
func (l *Lab) Start(name, ns string, env []string, argv ...string) *Proc {
	l.t.Helper()
	p := &Proc{
		Name: name, done: make(chan struct{}),
		Out: filepath.Join(l.dir, name+".out"), Err: filepath.Join(l.dir, name+".err"),
	}
	fo, err := os.Create(p.Out)
	if err != nil {
		l.t.Fatal(err)
	}
	fe, err := os.Create(p.Err)
	if err != nil {
		l.t.Fatal(err)
	}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	p.cmd.Env = append(CleanEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = fo, fe
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		l.t.Fatalf("%s: %v", name, err)
	}
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	go func() {
		p.waitErr = p.cmd.Wait()
		fo.Close()
		fe.Close()
		close(p.done)
	}()
	return p
}

// Wait waits up to d for p to exit and returns its error (a timeout is one).
func (p *Proc) Wait(d time.Duration) error {
	select {
	case <-p.done:
		if p.waitErr != nil {
			return fmt.Errorf("%s: %v\nstderr: %s", p.Name, p.waitErr, Tail(p.Err))
		}
		return nil
	case <-time.After(d):
		return fmt.Errorf("%s: still running after %v\nstderr: %s", p.Name, d, Tail(p.Err))
	}
}

// WaitOutput waits up to d for text to appear in p's stderr, and fails the
// test if p exits first or the time runs out.
func (p *Proc) WaitOutput(t *testing.T, text string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if b, _ := os.ReadFile(p.Err); bytes.Contains(b, []byte(text)) {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before saying %q: %v\nstderr: %s", p.Name, text, p.waitErr, Tail(p.Err))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not say %q within %v\nstderr: %s", p.Name, text, d, Tail(p.Err))
		}
	}
}

// Stop sends SIGTERM to p's process group and waits up to d, then kills it.
func (p *Proc) Stop(d time.Duration) {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(d):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (l *Lab) killAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.procs {
		select {
		case <-p.done:
		default:
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
}

// Run runs argv inside ns to completion (at most d) and returns its stdout.
func (l *Lab) Run(d time.Duration, ns string, env []string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Env = append(CleanEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: %v\nstderr: %s", strings.Join(argv, " "), err, lastLines(errb.String(), 20))
	}
	return out.String(), nil
}

// CleanEnv is this process's environment without CP_* variables.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CP_") {
			env = append(env, kv)
		}
	}
	return env
}

// Tail returns the last lines of a file, for error messages.
func Tail(path string) string {
	b, _ := os.ReadFile(path)
	return lastLines(string(b), 20)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Kill sends SIGKILL to p's process group (as kill -9 does, nothing runs
// after it) and waits for it to end.
func (p *Proc) Kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}
