// Package cluster runs the engines as users do (issue 16): a standalone
// Flink cluster, a JobManager and TaskManagers each its own JVM, assembled
// from Maven Central (tests/cluster/flink: `mvn package` copies what a
// distribution's lib/ holds), the instrumented job submitted as a job jar
// over REST. TestFlinkStandalone runs it on loopback with one TaskManager;
// TestFlinkClusterInNamespaces gives the JobManager and two TaskManagers
// a node each (network namespaces, own counters) and runs the job to its
// end, cancels a second run, and stops a third with SIGTERM on one
// TaskManager and SIGKILL on the other, holding the results to the ground
// truth (tests/internal/groundtruth).
package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloudprofiler/tests/internal/testrun"
)

// opens are the JVM options the distribution's config.yaml passes every
// Flink process (env.java.opts.all): Flink reflects into the JDK.
var opens = strings.Fields(`-XX:+IgnoreUnrecognizedVMOptions --add-exports=java.base/sun.net.util=ALL-UNNAMED
--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED
--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED
--add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
--add-opens=java.base/java.text=ALL-UNNAMED --add-opens=java.base/java.time=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED
--add-opens=java.base/java.util.concurrent=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED
--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED`)

type flinkEnv struct{ tool, lib, binding, jobJar string }

func needFlink(t *testing.T) flinkEnv {
	t.Helper()
	e := flinkEnv{tool: os.Getenv("CP_TOOL"), lib: os.Getenv("CP_FLINK_LIB"), binding: os.Getenv("CP_BINDING_JAR"), jobJar: os.Getenv("CP_FLINK_JOB_JAR")}
	if e.tool == "" || e.lib == "" || e.binding == "" || e.jobJar == "" {
		t.Skip("CP_TOOL, CP_FLINK_LIB, CP_BINDING_JAR and CP_FLINK_JOB_JAR are not set: run `make test-cluster`")
	}
	return e
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// cluster is a running standalone cluster: its processes, stopped (SIGTERM,
// then SIGKILL after 20 s) when the test ends, also when it fails.
type cluster struct {
	t     *testing.T
	dir   string
	rest  string
	cp    string
	procs []*exec.Cmd
}

// clusterOpts is what a standalone cluster is started with.
type clusterOpts struct {
	taskManagers, slots int
	// noBinding leaves the binding's jar out of lib/ (the classpath): the
	// job jar must carry it.
	noBinding bool
	// conf is added to config.yaml (YAML, top-level keys).
	conf string
	// tmJavaOpts is the line env.java.opts.taskmanager: written to
	// config.yaml, and given to each TaskManager's JVM as taskmanager.sh
	// does with it (these tests start the JVMs themselves).
	tmJavaOpts string
	// node, when set, is every TaskManager's CP_NODE (TaskManagers on one
	// host share its counter); else tm0, tm1, ...
	node string
}

func startCluster(t *testing.T, e flinkEnv, o clusterOpts) *cluster {
	dir := t.TempDir()
	jars, err := filepath.Glob(filepath.Join(e.lib, "*.jar"))
	if err != nil || len(jars) == 0 {
		t.Fatalf("%s: no jars (cd tests/cluster/flink && mvn package)", e.lib)
	}
	if !o.noBinding {
		jars = append(jars, e.binding)
	}
	c := &cluster{t: t, dir: dir, cp: strings.Join(jars, ":")}
	t.Cleanup(c.stop)
	rest, rpc := freePort(t), freePort(t)
	c.rest = fmt.Sprintf("http://127.0.0.1:%d", rest)
	conf := filepath.Join(dir, "conf")
	must(t, os.MkdirAll(conf, 0o755))
	must(t, os.WriteFile(filepath.Join(conf, "config.yaml"), []byte(fmt.Sprintf(`jobmanager:
  rpc: {address: 127.0.0.1, port: %d}
  bind-host: 127.0.0.1
  memory: {process: {size: 600m}}
taskmanager:
  bind-host: 127.0.0.1
  host: 127.0.0.1
  numberOfTaskSlots: %d
  memory: {process: {size: 1200m}}
rest: {address: 127.0.0.1, bind-address: 127.0.0.1, port: %d}
parallelism: {default: 2}
%s%s`, rpc, o.slots, rest, o.conf, tmOptsLine(o.tmJavaOpts))), 0o644))
	must(t, os.WriteFile(filepath.Join(conf, "log4j.properties"), []byte(`rootLogger.level = INFO
rootLogger.appenderRef.file.ref = Main
appender.main.name = Main
appender.main.type = File
appender.main.fileName = ${sys:log.file}
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = %d{HH:mm:ss,SSS} %-5p %c{1} - %m%n
`), 0o644))
	// Every JVM's logs, and its temporary files (blob stores, uploaded
	// jars, the binding's extracted library), in the test's directory:
	// nothing left in /tmp; no perf data file either.
	tmp := filepath.Join(dir, "tmp")
	must(t, os.MkdirAll(tmp, 0o755))
	log := func(name string) []string {
		return []string{"-Dlog.file=" + filepath.Join(dir, name+".log"), "-Dlog4j.configurationFile=file:" + filepath.Join(conf, "log4j.properties"),
			"-Djava.io.tmpdir=" + tmp, "-XX:-UsePerfData"}
	}
	c.java(nil, append(append(append(opens, "-Xmx400m"), log("jobmanager")...),
		"-cp", c.cp, "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint", "--configDir", conf)...)
	jvm, dyn := tmResources(t, c.cp, conf, log("bashjavautils"))
	for i := 0; i < o.taskManagers; i++ {
		args := append(append(append(append(append([]string{}, opens...), jvm...), strings.Fields(o.tmJavaOpts)...),
			log(fmt.Sprint("taskmanager-", i))...),
			"-cp", c.cp, "org.apache.flink.runtime.taskexecutor.TaskManagerRunner", "--configDir", conf)
		args = append(args, dyn...)
		node := o.node
		if node == "" {
			node = fmt.Sprint("tm", i)
		}
		c.java([]string{"CP_LOG_DIR=" + filepath.Join(dir, fmt.Sprint("logs-", i)), "CP_NODE=" + node}, args...)
	}
	// Up when every TaskManager registered.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var ov struct {
			TaskManagers int `json:"taskmanagers"`
		}
		if c.get("/overview", &ov) == nil && ov.TaskManagers == o.taskManagers {
			return c
		}
		if time.Now().After(deadline) {
			// The directory goes with the test: its logs' ends say why.
			t.Fatalf("%d of %d TaskManagers registered within 90 s; the end of every log in %s:\n%s", ov.TaskManagers, o.taskManagers, dir, tails(dir))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// tmOptsLine is config.yaml's line for the TaskManagers' JVM options ("" for none).
func tmOptsLine(opts string) string {
	if opts == "" {
		return ""
	}
	b, _ := json.Marshal(opts) // a JSON string is a YAML string
	return "env.java.opts.taskmanager: " + string(b) + "\n"
}

// tmResources is what taskmanager.sh computes before it starts a
// TaskManager (BashJavaUtils GET_TM_RESOURCE_PARAMS): the JVM's memory
// options, and the TaskManager's resources as dynamic options (-D k=v).
func tmResources(t *testing.T, cp, conf string, log []string) (jvm, dyn []string) {
	t.Helper()
	r := testrun.Run(time.Minute, nil, append(append([]string{"java"}, log...),
		"-cp", cp, "org.apache.flink.runtime.util.bash.BashJavaUtils", "GET_TM_RESOURCE_PARAMS", "--configDir", conf)...)
	var res []string
	for _, l := range strings.Split(r.Stdout, "\n") {
		if v, ok := strings.CutPrefix(l, "BASH_JAVA_UTILS_EXEC_RESULT:"); ok {
			res = append(res, v)
		}
	}
	if len(res) != 2 {
		t.Fatalf("BashJavaUtils GET_TM_RESOURCE_PARAMS: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	return strings.Fields(res[0]), strings.Fields(res[1])
}

func (c *cluster) java(env []string, args ...string) {
	cmd := exec.Command("java", args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = c.dir
	out, err := os.Create(filepath.Join(c.dir, fmt.Sprintf("proc-%d.out", len(c.procs))))
	must(c.t, err)
	cmd.Stdout, cmd.Stderr = out, out
	must(c.t, cmd.Start())
	c.procs = append(c.procs, cmd)
}

// stop ends every process: SIGTERM, then SIGKILL past 20 s.
func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	c.procs = nil
}

func (c *cluster) get(path string, v any) error {
	resp, err := http.Get(c.rest + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// submit uploads a job jar and runs its entry class; the job's id.
func (c *cluster) submit(jar, entry string, args ...string) string {
	job, answer := c.trySubmit(jar, entry, args...)
	if job == "" {
		c.t.Fatalf("/jars/run: %s", answer)
	}
	return job
}

// trySubmit uploads a job jar and runs its entry class: the job's id, or
// "" and the REST API's answer when no job was submitted.
func (c *cluster) trySubmit(jar, entry string, args ...string) (job, answer string) {
	t := c.t
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("jarfile", filepath.Base(jar))
	must(t, err)
	raw, err := os.ReadFile(jar)
	must(t, err)
	fw.Write(raw)
	must(t, mw.Close())
	resp, err := http.Post(c.rest+"/jars/upload", mw.FormDataContentType(), &body)
	must(t, err)
	var up struct {
		Filename, Status string
	}
	must(t, json.NewDecoder(resp.Body).Decode(&up))
	resp.Body.Close()
	if up.Status != "success" {
		t.Fatalf("/jars/upload: %+v", up)
	}
	id := filepath.Base(up.Filename)
	req, _ := json.Marshal(map[string]any{"entryClass": entry, "programArgsList": args})
	resp, err = http.Post(c.rest+"/jars/"+id+"/run", "application/json", bytes.NewReader(req))
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var run struct {
		JobID string `json:"jobid"`
	}
	json.Unmarshal(b, &run)
	return run.JobID, string(b)
}

// causes is the "Caused by" lines of a job's exception history, each once
// (else its start): what made the job fail, without the stack frames.
func causes(history string) string {
	var out []string
	for _, m := range regexp.MustCompile(`Caused by: [^\\]+`).FindAllString(history, -1) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return trimErr([]byte(history))
	}
	return strings.Join(out, "\n")
}

func trimErr(b []byte) string {
	s := string(b)
	if len(s) > 1500 {
		s = s[:1500] + "..."
	}
	return s
}

// wait polls a job until it is in one of the states (state), and fails
// the test if it FAILED instead.
func (c *cluster) wait(job string, limit time.Duration, states ...string) string {
	c.t.Helper()
	s := c.state(job, limit, append(states, "FAILED")...)
	if s == "FAILED" && !slices.Contains(states, "FAILED") {
		c.t.Fatalf("job %s FAILED (logs in %s): %s", job, c.dir, causes(c.exceptions(job)))
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFlinkStandalone: a JobManager and a TaskManager, each its own JVM
// from the assembled lib/; ProfiledJob as a job jar over REST, to its end;
// its channel files (the TaskManager's CP_LOG_DIR) all complete, every
// tuple at every stage.
func TestFlinkStandalone(t *testing.T) {
	e := needFlink(t)
	c := startCluster(t, e, clusterOpts{taskManagers: 1, slots: 2})
	const tuples = 20000
	job := c.submit(e.jobJar, "io.cloudprofiler.examples.flink.ProfiledJob", "--tuples", fmt.Sprint(tuples), "--parallelism", "2")
	c.wait(job, 2*time.Minute, "FINISHED")
	c.stop() // SIGTERM: the TaskManager's channels were closed by the job's end already
	out := filepath.Join(c.dir, "out")
	r := testrun.Run(time.Minute, nil, e.tool, "analyze", "--logs", filepath.Join(c.dir, "logs-0"), "--out", out, "--quiet", "--no-durations", "--strict")
	if r.Err != nil {
		t.Fatalf("analyze: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "all 26 files complete and undamaged") || !strings.Contains(r.Stdout, fmt.Sprintf("%d tuples", tuples)) {
		t.Fatalf("analyze:\n%s", r.Stdout)
	}
	t.Logf("%s", strings.SplitN(r.Stdout, "\n", 2)[0])
}
