package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloudprofiler/tests/internal/netns"
	"cloudprofiler/tests/internal/testrun"
)

// nsCluster is a standalone Flink cluster with a node (a network
// namespace) per process: the JobManager on "jm", TaskManager i on "tmI",
// a TSC client beside each, the TSC server in the hub. REST calls run
// curl inside the JobManager's namespace: the bridge exists only there.
type nsCluster struct {
	t    *testing.T
	l    *netns.Lab
	rest string
	tms  []*netns.Proc
	jm   *netns.Proc
}

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
	c := &nsCluster{t: t, l: l, rest: "http://" + l.IP["jm"] + ":8081"}
	jars, err := filepath.Glob(filepath.Join(e.lib, "*.jar"))
	if err != nil || len(jars) == 0 {
		t.Fatalf("%s: no jars (cd tests/cluster/flink && mvn package)", e.lib)
	}
	cp := strings.Join(append(jars, e.binding), ":")
	logs, rounds := filepath.Join(dir, "logs"), filepath.Join(dir, "rounds")
	env := func(node string) []string {
		return []string{"CP_NODE=" + node, "CP_FAKE_TSC=" + fakes[node], "CP_LOG_DIR=" + filepath.Join(logs, node)}
	}

	// TSC server and clients; a round before.
	server := l.HubIP + ":7400"
	srv := l.Start("tsc-server", l.Hub, nil, e.tool, "tsc-server", "--listen", server, "--out", rounds, "--probes", "300")
	srv.WaitOutput(t, "listening on", 10*time.Second)
	var tsc []*netns.Proc
	for _, n := range nodes {
		tsc = append(tsc, l.Start("tsc-client-"+n, l.NS[n], env(n), e.tool, "tsc-client", "--server", server, "--node", n))
	}
	round := func(label string) {
		out, err := l.Run(60*time.Second, l.Hub, nil, e.tool, "tsc-round", "--server", server, "--label", label, "--wait-nodes", "3", "--wait-timeout", "20s")
		if err != nil {
			t.Fatalf("tsc-round %s: %v", label, err)
		}
		t.Logf("round %s: %s", label, strings.TrimSpace(out))
	}
	round("before")

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

	// The job, to its end.
	const tuples = 20000
	var up struct{ Filename, Status string }
	must(t, json.Unmarshal([]byte(c.curl("-X", "POST", "-F", "jarfile=@"+e.jobJar, c.rest+"/jars/upload")), &up))
	if up.Status != "success" {
		t.Fatalf("/jars/upload: %+v", up)
	}
	body := fmt.Sprintf(`{"entryClass":"io.cloudprofiler.examples.flink.ProfiledJob","programArgsList":["--tuples","%d","--parallelism","2"]}`, tuples)
	var run struct {
		JobID string `json:"jobid"`
	}
	out := c.curl("-X", "POST", "-H", "Content-Type: application/json", "-d", body, c.rest+"/jars/"+filepath.Base(up.Filename)+"/run")
	if json.Unmarshal([]byte(out), &run); run.JobID == "" {
		t.Fatalf("/jars/run: %s", out)
	}
	deadline = time.Now().Add(2 * time.Minute)
	for {
		var j struct{ State string }
		if c.getJSON("/jobs/"+run.JobID, &j) == nil && j.State == "FINISHED" {
			break
		}
		if j.State == "FAILED" || time.Now().After(deadline) {
			t.Fatalf("job %s: %s (logs in %s)", run.JobID, j.State, dir)
		}
		time.Sleep(300 * time.Millisecond)
	}
	round("after")
	for _, p := range append(c.tms, c.jm) {
		p.Stop(20 * time.Second) // SIGTERM, as a daemon is stopped
	}
	for _, p := range append(tsc, srv) {
		p.Stop(5 * time.Second)
	}

	a := testrun.Run(2*time.Minute, nil, e.tool, "analyze", "--rounds", rounds, "--logs", logs, "--out", filepath.Join(dir, "out"), "--ref", "jm", "--strict", "--quiet")
	if a.Err != nil {
		t.Fatalf("analyze: %v\n%s%s", a.Err, a.Stdout, a.Stderr)
	}
	t.Logf("%s", a.Stdout[:strings.Index(a.Stdout, "logs:")])
	if !strings.Contains(a.Stdout, "all 20 files complete and undamaged") || !strings.Contains(a.Stdout, fmt.Sprintf("%d tuples", tuples)) {
		t.Fatalf("analyze:\n%s", a.Stdout)
	}
	for _, n := range []string{"tm0", "tm1"} {
		files, _ := filepath.Glob(filepath.Join(logs, n, "*.cplog*"))
		if len(files) == 0 {
			t.Errorf("TaskManager %s wrote no channel files: parallelism 2 on two one-slot TaskManagers should use both", n)
		}
	}
}
