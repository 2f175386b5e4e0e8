package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/tests/internal/netns"
	"cloudprofiler/tests/internal/testrun"
)

// nsCluster is a standalone Flink cluster with a node (a network
// namespace) per process: the JobManager on "jm", TaskManager i on "tmI",
// a TSC client beside each, the TSC server in the hub. REST calls run
// curl inside the JobManager's namespace: the bridge exists only there.
type nsCluster struct {
	t    *testing.T
	dir  string // everything the test writes
	l    *netns.Lab
	rest string
	tms  []*netns.Proc
	jm   *netns.Proc
}

// flinkOperators are ProfiledJob's marked operators.
var flinkOperators = []string{"0-source", "1-enrich", "2-count", "3-sink"}

// fakes are the nodes' counters: rates and origins apart, as in tests/multinode.
var fakes = map[string]string{"jm": "1:0", "tm0": "0.9996:70000000000", "tm1": "1.00037:-2000000000"}

func (c *nsCluster) curl(args ...string) string {
	c.t.Helper()
	out, err := c.l.Run(60*time.Second, c.l.NS["jm"], nil, append([]string{"curl", "-sS", "--max-time", "50"}, args...)...)
	if err != nil {
		c.t.Fatalf("curl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func (c *nsCluster) getJSON(path string, v any) error {
	out, err := c.l.Run(20*time.Second, c.l.NS["jm"], nil, "curl", "-sS", "--max-time", "10", c.rest+path)
	if err != nil {
		return err
	}
	return json.Unmarshal([]byte(out), v)
}

// TestFlinkClusterInNamespaces: the JobManager and two TaskManagers (one
// slot each: parallelism 2 spans both), each on a node of its own with its
// own counter (CP_FAKE_TSC) and CP_NODE, rounds of TSC probes before and
// after; ProfiledJob submitted as a job jar over REST, to its end; then
// SIGTERM to every daemon, and analyze with the rounds: every file
// complete, every tuple, cross-node hops with their bounds.
func TestFlinkClusterInNamespaces(t *testing.T) {
	e := needFlink(t)
	if why := netns.Available(); why != "" {
		t.Skip(why)
	}
	dir := t.TempDir()
	nodes := []string{"jm", "tm0", "tm1"}
	l := netns.New(t, "flink", nodes, dir)
	c := &nsCluster{t: t, dir: dir, l: l, rest: "http://" + l.IP["jm"] + ":8081"}
	jars, err := filepath.Glob(filepath.Join(e.lib, "*.jar"))
	if err != nil || len(jars) == 0 {
		t.Fatalf("%s: no jars (cd tests/cluster/flink && mvn package)", e.lib)
	}
	cp := strings.Join(append(jars, e.binding), ":")
	logs := filepath.Join(dir, "logs")
	// Blocks of 4096 records (the default is 65536): a TaskManager killed
	// with SIGKILL loses at most its ring (8 blocks a channel) and what
	// the last frame did not hold; with small blocks, run 3's two seconds
	// at 10,000 tuples/s an instance are in frames before the kill.
	env := func(node string) []string {
		return []string{"CP_NODE=" + node, "CP_FAKE_TSC=" + fakes[node], "CP_LOG_DIR=" + filepath.Join(logs, node), "CP_BLOCK_RECORDS=4096"}
	}

	// TSC server and clients; a round before.
	clk := startClocks(t, l, e.tool, dir, nodes, env)
	clk.round("before")

	// The cluster.
	conf := filepath.Join(dir, "conf")
	must(t, os.MkdirAll(conf, 0o755))
	must(t, os.WriteFile(filepath.Join(conf, "config.yaml"), []byte(fmt.Sprintf(`jobmanager:
  rpc: {address: %s, port: 6123}
  bind-host: 0.0.0.0
  memory: {process: {size: 600m}}
taskmanager:
  bind-host: 0.0.0.0
  numberOfTaskSlots: 1
  memory: {process: {size: 1200m}}
rest: {address: %s, bind-address: 0.0.0.0, port: 8081}
parallelism: {default: 2}
metrics: {fetcher: {update-interval: 1000}}
`, l.IP["jm"], l.IP["jm"])), 0o644))
	must(t, os.WriteFile(filepath.Join(conf, "log4j.properties"), []byte("rootLogger.level = INFO\nrootLogger.appenderRef.file.ref = Main\n"+
		"appender.main.name = Main\nappender.main.type = File\nappender.main.fileName = ${sys:log.file}\n"+
		"appender.main.layout.type = PatternLayout\nappender.main.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} - %m%n\n"), 0o644))
	// Every JVM's logs, and its temporary files (blob stores, uploaded
	// jars, the binding's extracted library), in the test's directory:
	// nothing left in /tmp; no perf data file either.
	tmp := filepath.Join(dir, "tmp")
	must(t, os.MkdirAll(tmp, 0o755))
	log := func(name string) []string {
		return []string{"-Dlog.file=" + filepath.Join(dir, name+".log"), "-Dlog4j.configurationFile=file:" + filepath.Join(conf, "log4j.properties"),
			"-Djava.io.tmpdir=" + tmp, "-XX:-UsePerfData"}
	}
	java := func(args ...[]string) []string {
		out := []string{"java"}
		for _, a := range args {
			out = append(out, a...)
		}
		return out
	}
	c.jm = l.Start("jobmanager", l.NS["jm"], env("jm"), java(opens, []string{"-Xmx400m"}, log("jobmanager"),
		[]string{"-cp", cp, "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint", "--configDir", conf})...)
	jvm, dyn := tmResources(t, cp, conf, log("bashjavautils"))
	for _, n := range []string{"tm0", "tm1"} {
		c.tms = append(c.tms, l.Start("taskmanager-"+n, l.NS[n], env(n), java(opens, jvm, log("taskmanager-"+n),
			[]string{"-cp", cp, "org.apache.flink.runtime.taskexecutor.TaskManagerRunner", "--configDir", conf},
			dyn, []string{"-D", "taskmanager.host=" + l.IP[n]})...))
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		var o struct {
			TaskManagers int `json:"taskmanagers"`
		}
		if c.getJSON("/overview", &o) == nil && o.TaskManagers == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 TaskManagers registered within 90 s (logs in %s)", o.TaskManagers, dir)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// Run 1: the job, to its end. Then its files are collected (moved out
	// of the TaskManagers' CP_LOG_DIR, as an operator collects a run's
	// logs): a TaskManager's CP_LOG_DIR is its process's, so the runs that
	// follow would add files of the same channels and tuple ids.
	const tuples = 20000
	jar := c.upload(e.jobJar)
	job := c.run(jar, "--tuples", fmt.Sprint(tuples), "--parallelism", "2")
	c.waitState(job, 2*time.Minute, "FINISHED")
	finished := collect(t, logs, "run1-finished")

	// Run 2: long (100 s at 20,000 tuples/s), cancelled once both
	// TaskManagers have logged for two seconds. Cancelling closes the
	// operators, and with them their channels: complete files.
	slow := []string{"--tuples", "2000000", "--rate", "20000", "--parallelism", "2"}
	job = c.run(jar, slow...)
	c.waitLogging(job, logs)
	c.checkLiveMetrics(job, "1-enrich", 2)
	c.curl("-X", "PATCH", c.rest+"/jobs/"+job+"?mode=cancel")
	c.waitState(job, time.Minute, "CANCELED")
	cancelled := collect(t, logs, "run2-cancelled")

	// Run 3: long again; mid-run, tm0 gets SIGTERM (a daemon stopped: the
	// binding's shutdown path closes its channels) and tm1 SIGKILL (a
	// machine lost: its files end at their last whole frame).
	job = c.run(jar, slow...)
	c.waitLogging(job, logs)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.tms[0].Stop(20 * time.Second) }()
	go func() { defer wg.Done(); c.tms[1].Kill() }()
	wg.Wait()
	stopped := collect(t, logs, "run3-sigterm-kill9")
	clk.round("after")
	c.jm.Stop(20 * time.Second)
	clk.stop()
	rounds := clk.Rounds

	// Run 1, analyzed with the rounds: every file complete, every tuple at
	// every stage exactly once, every duration within its strict bound of
	// the ground truth, the cross-node hops too.
	checkFinished(t, e.tool, rounds, finished, filepath.Join(dir, "out-run1"), "jm", []string{"tm0", "tm1"}, 0, tuples, 9, fakes)
	checkBottleneck(t, filepath.Join(dir, "out-run1"), flinkOperators...)

	// Run 2, cancelled: its files closed, complete, and part of the tuples.
	a := testrun.Run(2*time.Minute, nil, e.tool, "analyze", "--rounds", rounds, "--logs", cancelled, "--out", filepath.Join(dir, "out-run2"), "--ref", "jm", "--strict", "--quiet", "--no-durations")
	if a.Err != nil {
		t.Fatalf("analyze run 2 (cancelled): %v\n%s%s", a.Err, a.Stdout, a.Stderr)
	}
	if !strings.Contains(a.Stdout, "all 26 files complete and undamaged") {
		t.Errorf("analyze run 2 (cancelled): its files are not all complete:\n%s", a.Stdout)
	}
	t.Logf("run 2 (cancelled): %s", firstLine(a.Stdout))

	// Run 3: tm0's files complete (SIGTERM); tm1's decode to their last
	// frame, and analyze says per channel what is missing, with status 3
	// under --strict (the results still written).
	a = testrun.Run(2*time.Minute, nil, e.tool, "analyze", "--rounds", rounds, "--logs", stopped, "--out", filepath.Join(dir, "out-run3"), "--ref", "jm", "--strict", "--quiet", "--no-durations")
	if a.Code != 3 {
		t.Fatalf("analyze run 3 (tm1 killed): exit status %d (%v), want 3: damaged or incomplete logs\n%s%s", a.Code, a.Err, a.Stdout, a.Stderr)
	}
	checkKilled(t, a.Stdout, stopped)
}

// checkLiveMetrics reads the wrappers' gauges of a running job from the
// JobManager's REST API (/jobs/:id/vertices/:vid/metrics), as Flink's web
// UI does: each subtask of the operator's vertex has its four
// cloudprofiler gauges, with tuples marked in and out, and a service rate
// within 30 s (the library's first estimate; whether it converged is
// logged: tests of cloudprofiler-flink hold the rate to the analysis).
func (c *nsCluster) checkLiveMetrics(job, vertex string, subtasks int) {
	c.t.Helper()
	var plan struct{ Vertices []struct{ ID, Name string } }
	must(c.t, c.getJSON("/jobs/"+job, &plan))
	vid := ""
	for _, v := range plan.Vertices {
		if v.Name == vertex {
			vid = v.ID
		}
	}
	if vid == "" {
		c.t.Fatalf("job %s has no vertex %q: %+v", job, vertex, plan.Vertices)
	}
	base := "/jobs/" + job + "/vertices/" + vid + "/metrics"
	gauges := []string{"tuplesIn", "tuplesOut", "capacity"}
	var ids []string
	for s := 0; s < subtasks; s++ {
		for _, g := range gauges {
			ids = append(ids, fmt.Sprintf("%d.%s.cloudprofiler.%s", s, vertex, g))
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got []struct{ ID, Value string }
		c.getJSON(base+"?get="+strings.Join(ids, ","), &got)
		values := map[string]float64{}
		for _, m := range got {
			var v float64
			if _, err := fmt.Sscan(m.Value, &v); err == nil {
				values[m.ID] = v
			}
		}
		ready := len(values) == len(ids)
		for s := 0; s < subtasks && ready; s++ {
			at := func(g string) float64 { return values[fmt.Sprintf("%d.%s.cloudprofiler.%s", s, vertex, g)] }
			ready = at("tuplesIn") > 0 && at("tuplesOut") > 0 && at("capacity") > 0
		}
		if ready {
			c.t.Logf("live metrics of %s (REST): %v", vertex, values)
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the REST API's metrics of %s after 30 s: %v, want each subtask's %v, tuples in and out and a capacity", vertex, values, gauges)
		}
		time.Sleep(time.Second)
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string { return strings.SplitN(s, "\n", 2)[0] }

// upload sends a job jar to the JobManager (POST /jars/upload); its id.
func (c *nsCluster) upload(jar string) string {
	var up struct{ Filename, Status string }
	must(c.t, json.Unmarshal([]byte(c.curl("-X", "POST", "-F", "jarfile=@"+jar, c.rest+"/jars/upload")), &up))
	if up.Status != "success" {
		c.t.Fatalf("/jars/upload: %+v", up)
	}
	return filepath.Base(up.Filename)
}

// run starts ProfiledJob from an uploaded jar (POST /jars/:id/run); the job's id.
func (c *nsCluster) run(jar string, args ...string) string {
	body, _ := json.Marshal(map[string]any{"entryClass": "io.cloudprofiler.examples.flink.ProfiledJob", "programArgsList": args})
	var run struct {
		JobID string `json:"jobid"`
	}
	out := c.curl("-X", "POST", "-H", "Content-Type: application/json", "-d", string(body), c.rest+"/jars/"+jar+"/run")
	if json.Unmarshal([]byte(out), &run); run.JobID == "" {
		c.t.Fatalf("/jars/run: %s", out)
	}
	return run.JobID
}

// waitState polls a job until it is in state, or fails the test.
func (c *nsCluster) waitState(job string, limit time.Duration, state string) {
	deadline := time.Now().Add(limit)
	for {
		var j struct{ State string }
		if c.getJSON("/jobs/"+job, &j) == nil && j.State == state {
			return
		}
		if j.State == "FAILED" || time.Now().After(deadline) {
			c.t.Fatalf("job %s: %s, want %s (logs in %s)", job, j.State, state, c.dir)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// waitLogging waits until the job runs and both TaskManagers have opened
// channels, then two seconds more: the job is mid-flight.
func (c *nsCluster) waitLogging(job, logs string) {
	c.waitState(job, time.Minute, "RUNNING")
	deadline := time.Now().Add(time.Minute)
	for {
		a, _ := filepath.Glob(filepath.Join(logs, "tm0", "*.cplog*"))
		b, _ := filepath.Glob(filepath.Join(logs, "tm1", "*.cplog*"))
		if len(a) > 0 && len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("job %s: RUNNING, but after a minute tm0 has %d channel files and tm1 %d", job, len(a), len(b))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
}

// checkKilled reads analyze's integrity lines for run 3: the files of tm1
// (SIGKILL) are named as not closed, each with what it misses, and each
// decodes to its last whole frame (records in frames written before the
// kill); tm0's (SIGTERM) are not named: complete.
func checkKilled(t *testing.T, stdout, dir string) {
	t.Helper()
	i := strings.Index(stdout, "\nlogs:")
	if i < 0 {
		t.Fatalf("analyze run 3: no logs: section\n%s", stdout)
	}
	integrity := stdout[i+1:]
	if j := strings.Index(integrity, "\n"); j >= 0 {
		// The section: its first line, and those indented under it.
		for k := j + 1; k < len(integrity); {
			next := strings.IndexByte(integrity[k:], '\n')
			if next < 0 || !strings.HasPrefix(integrity[k:], "  ") {
				integrity = integrity[:k]
				break
			}
			k += next + 1
		}
	}
	t.Logf("run 3 (tm0 SIGTERM, tm1 SIGKILL):\n%s", integrity)
	for _, n := range []string{"tm0", "tm1"} {
		files, _ := filepath.Glob(filepath.Join(dir, n, "*.cplog*"))
		if len(files) == 0 {
			t.Errorf("run 3: %s left no files", n)
		}
		decoded := 0
		for _, path := range files {
			named := strings.Contains(integrity, "("+path+")")
			switch {
			case n == "tm0" && named:
				t.Errorf("%s (tm0, stopped with SIGTERM) is named damaged or incomplete", path)
			case n == "tm1" && !named:
				t.Errorf("%s (tm1, killed) is not named damaged or incomplete", path)
			}
			f, err := logfile.Open(path)
			if err != nil {
				t.Errorf("%s does not open: %v", path, err)
				continue
			}
			if f.Header.Counter() {
				err = f.Counters(func(logfile.CounterRecord) error { decoded++; return nil })
			} else {
				err = f.Records(func(logfile.Record) error { decoded++; return nil })
			}
			f.Close()
			if err != nil && !errors.Is(err, logfile.ErrDamaged) {
				t.Errorf("%s: %v", path, err)
			}
		}
		t.Logf("run 3: %s's %d files hold %d records", n, len(files), decoded)
		if decoded == 0 {
			t.Errorf("run 3: %s's files hold no record: the kill came before any frame was written", n)
		}
	}
	if !strings.Contains(integrity, "not closed") || !strings.Contains(integrity, "are not in the file") {
		t.Errorf("run 3: analyze does not say the killed TaskManager's channels were not closed, and what they miss")
	}
}
