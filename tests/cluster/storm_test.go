package cluster

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"cloudprofiler/internal/capacity"
	"cloudprofiler/internal/results"
	"cloudprofiler/tests/internal/netns"
)

// Storm as users run it (issue 16): ZooKeeper (the server from Maven
// Central), Nimbus, and two Supervisors, each on a node of its own (a
// network namespace, its own CP_NODE and counter), the Supervisors
// launching the worker JVMs the way a distribution does (storm.home with
// lib-worker/, conf/, log4j2/, extlib/). examples/storm's topologies are
// submitted with StormSubmitter, run until the spout has every tuple
// acked, and are killed through Nimbus: the Supervisors stop their workers
// with SIGTERM. Three runs: ProfiledTopology (its bolts wrapped with
// cloudprofiler-storm's Profiled.bolt, its spout marked by MarkingHook)
// from the shaded jar, which carries the module and the binding; the same
// from the thin jar, the module and the binding in each Supervisor's
// extlib/; and PlainTopology, which has nothing of Cloudprofiler in its
// code, from the thin jar with only the hook given at submission
// (topology.auto.task.hooks through storm.options, as `storm jar -c`
// passes it), extlib/ as before.

type stormEnv struct{ tool, lib, libWorker, zookeeper, topologyJar, thinJar, binding, module string }

func needStorm(t *testing.T) stormEnv {
	t.Helper()
	e := stormEnv{tool: os.Getenv("CP_TOOL"), lib: os.Getenv("CP_STORM_LIB"), libWorker: os.Getenv("CP_STORM_LIB_WORKER"),
		zookeeper: os.Getenv("CP_ZOOKEEPER_LIB"), topologyJar: os.Getenv("CP_STORM_TOPOLOGY_JAR"),
		thinJar: os.Getenv("CP_STORM_THIN_JAR"), binding: os.Getenv("CP_BINDING_JAR"), module: os.Getenv("CP_STORM_MODULE_JAR")}
	if e.tool == "" || e.lib == "" || e.libWorker == "" || e.zookeeper == "" || e.topologyJar == "" || e.thinJar == "" || e.binding == "" || e.module == "" {
		t.Skip("CP_TOOL, CP_STORM_LIB, CP_STORM_LIB_WORKER, CP_ZOOKEEPER_LIB, CP_STORM_TOPOLOGY_JAR, CP_STORM_THIN_JAR, CP_BINDING_JAR and CP_STORM_MODULE_JAR are not set: run `make test-cluster`")
	}
	return e
}

// stormFakes are the nodes' counters, rates and origins apart.
var stormFakes = map[string]string{"nimbus": "1:0", "sup0": "0.99971:50000000000", "sup1": "1.00043:-3000000000"}

// stormHome makes a node's storm.home: conf/storm.yaml, log4j2/ for the
// daemons and the workers, lib-worker/ (the workers' classpath, as a
// distribution has it), logs/ and the local state.
func stormHome(t *testing.T, dir, node, ip, nimbus string, e stormEnv) string {
	t.Helper()
	home := filepath.Join(dir, "storm-"+node)
	for _, d := range []string{"conf", "log4j2", "logs", "local", "extlib"} {
		must(t, os.MkdirAll(filepath.Join(home, d), 0o755))
	}
	must(t, os.Symlink(e.libWorker, filepath.Join(home, "lib-worker")))
	// The EvenScheduler spreads a topology's workers over the supervisors'
	// slots (one each here): the resource-aware default would pack every
	// executor into one worker on one machine.
	must(t, os.WriteFile(filepath.Join(home, "conf", "storm.yaml"), []byte(fmt.Sprintf(`storm.zookeeper.servers: ["%s"]
storm.zookeeper.port: 2181
nimbus.seeds: ["%s"]
nimbus.thrift.port: 6627
storm.local.dir: "%s"
storm.local.hostname: "%s"
storm.log.dir: "%s"
storm.scheduler: "org.apache.storm.scheduler.DefaultScheduler"
supervisor.slots.ports: [6700]
worker.heap.memory.mb: 256
worker.childopts: "-Xmx%%HEAP-MEM%%m -XX:-UsePerfData"
topology.worker.logwriter.childopts: "-Xmx64m -XX:-UsePerfData"
supervisor.childopts: "-Xmx256m"
nimbus.childopts: "-Xmx256m"
topology.worker.max.heap.size.mb: 256.0
`, nimbus, nimbus, filepath.Join(home, "local"), ip, filepath.Join(home, "logs"))), 0o644))
	xml := func(file string) string {
		return `<?xml version="1.0" encoding="UTF-8"?>
<Configuration monitorInterval="0">
  <Appenders>
    <File name="F" fileName="` + file + `">
      <PatternLayout pattern="%d{HH:mm:ss.SSS} %-5p %c{1} - %m%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="F"/></Root>
    <Logger name="STDERR" level="info"/>
    <Logger name="STDOUT" level="info"/>
  </Loggers>
</Configuration>
`
	}
	must(t, os.WriteFile(filepath.Join(home, "log4j2", "cluster.xml"), []byte(xml("${sys:storm.log.dir}/${sys:logfile.name}")), 0o644))
	must(t, os.WriteFile(filepath.Join(home, "log4j2", "worker.xml"),
		[]byte(xml("${sys:workers.artifacts}/${sys:storm.id}/${sys:worker.port}/${sys:logfile.name}")), 0o644))
	return home
}

// TestStormClusterInNamespaces: ZooKeeper and Nimbus on node "nimbus", a
// Supervisor with one slot on each of "sup0" and "sup1"; each topology with
// two workers (one per supervisor: tuples cross nodes), run until every
// tuple is acked, then killed; analyze --strict with the rounds: every file
// complete, every tuple id once at every mark (ProfiledTopology: the
// spout's out, each bolt's in and out; PlainTopology with the hook alone:
// every component's out, and analyze says why it names no bottleneck),
// every duration within its strict bound of the ground truth.
func TestStormClusterInNamespaces(t *testing.T) {
	e := needStorm(t)
	if why := netns.Available(); why != "" {
		t.Skip(why)
	}
	dir := t.TempDir()
	nodes := []string{"nimbus", "sup0", "sup1"}
	l := netns.New(t, "storm", nodes, dir)
	logs := filepath.Join(dir, "logs")
	env := func(node string) []string {
		return []string{"CP_NODE=" + node, "CP_FAKE_TSC=" + stormFakes[node], "CP_LOG_DIR=" + filepath.Join(logs, node), "CP_BLOCK_RECORDS=4096"}
	}
	nimbusIP := l.IP["nimbus"]

	// TSC server and clients; a round before.
	clk := startClocks(t, l, e.tool, dir, nodes, env)
	clk.round("before")

	homes := map[string]string{}
	for _, n := range nodes {
		homes[n] = stormHome(t, dir, n, l.IP[n], nimbusIP, e)
	}
	tmp := filepath.Join(dir, "tmp")
	must(t, os.MkdirAll(tmp, 0o755))
	daemon := func(node, name, class string, cp ...string) *netns.Proc {
		home := homes[node]
		args := []string{"java", "-Xmx256m", "-XX:-UsePerfData", "-Djava.io.tmpdir=" + tmp,
			"-Dstorm.home=" + home, "-Dstorm.log.dir=" + filepath.Join(home, "logs"), "-Dlogfile.name=" + name + ".log",
			"-Dlog4j.configurationFile=" + filepath.Join(home, "log4j2", "cluster.xml"),
			"-cp", strings.Join(append(cp, filepath.Join(home, "conf")), ":"), class}
		return l.Start(name+"-"+node, l.NS[node], append(env(node), "STORM_CONF_DIR="+filepath.Join(home, "conf")), args...)
	}
	zk := l.Start("zookeeper", l.NS["nimbus"], nil, "java", "-Xmx128m", "-XX:-UsePerfData", "-Djava.io.tmpdir="+tmp,
		"-Dzookeeper.admin.enableServer=false", "-cp", filepath.Join(e.zookeeper, "*"),
		"org.apache.zookeeper.server.ZooKeeperServerMain", "2181", filepath.Join(dir, "zookeeper"))
	zk.WaitOutput(t, "binding to port", 30*time.Second)
	nimbus := daemon("nimbus", "nimbus", "org.apache.storm.daemon.nimbus.Nimbus", filepath.Join(e.lib, "*"))
	sups := []*netns.Proc{
		daemon("sup0", "supervisor", "org.apache.storm.daemon.supervisor.Supervisor", filepath.Join(e.lib, "*")),
		daemon("sup1", "supervisor", "org.apache.storm.daemon.supervisor.Supervisor", filepath.Join(e.lib, "*")),
	}
	// Up when both supervisors are registered in ZooKeeper.
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := l.Run(30*time.Second, l.NS["nimbus"], nil, "java", "-Xmx64m", "-XX:-UsePerfData", "-cp", filepath.Join(e.zookeeper, "*"),
			"org.apache.zookeeper.ZooKeeperMain", "-server", nimbusIP+":2181", "ls", "/storm/supervisors")
		if n := supervisorsIn(out); n == 2 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d of 2 supervisors registered within 90 s (ZooKeeper: %q %v)\n%s", n, out, err, tails(dir))
		}
		time.Sleep(time.Second)
	}

	// A topology: 20,000 tuples over two workers, submitted with
	// StormSubmitter from the nimbus node (its storm.yaml names Nimbus) as
	// `storm jar` would (the client's classpath: storm-client, the jar;
	// for ProfiledTopology, which builds its topology with the module, the
	// module and the binding too), run until its spout has every tuple
	// acked, then killed: the supervisors stop the workers with SIGTERM.
	// Its files are then collected (moved out of the nodes' CP_LOG_DIR)
	// before the next run.
	const tuples = 20000
	type topology struct {
		class string   // the main class: io.cloudprofiler.examples.storm.<class>
		cp    []string // what the client needs besides storm-client and the jar
		opts  []string // the client's JVM options besides the usual
	}
	profiled := topology{class: "ProfiledTopology", cp: []string{e.binding, e.module}}
	// `storm jar -c topology.auto.task.hooks=[...]`: storm.py passes each -c
	// URL-encoded (quote_plus) in -Dstorm.options, which StormSubmitter
	// merges over the topology's own configuration (Utils.readCommandLineOpts).
	plain := topology{class: "PlainTopology", opts: []string{"-Dstorm.options=" +
		url.QueryEscape(`topology.auto.task.hooks=["io.cloudprofiler.storm.MarkingHook"]`)}}
	client := func(top topology, jar string, args ...string) string {
		argv := append([]string{"java", "-Xmx128m", "-XX:-UsePerfData", "-Djava.io.tmpdir=" + tmp, "-Dstorm.jar=" + jar,
			"-Dlog4j.configurationFile=" + filepath.Join(homes["nimbus"], "log4j2", "cluster.xml"), "-Dstorm.log.dir=" + filepath.Join(homes["nimbus"], "logs"), "-Dlogfile.name=client.log"},
			top.opts...)
		cp := append(append([]string{filepath.Join(e.libWorker, "*")}, top.cp...), jar, filepath.Join(homes["nimbus"], "conf"))
		argv = append(append(argv, "-cp", strings.Join(cp, ":"), "io.cloudprofiler.examples.storm."+top.class), args...)
		out, err := l.Run(2*time.Minute, l.NS["nimbus"], nil, argv...)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", top.class, strings.Join(args, " "), err, out)
		}
		return out
	}
	run := func(name string, top topology, jar string) string {
		start := time.Now()
		client(top, jar, name, fmt.Sprint(tuples), "2")
		deadline := time.Now().Add(3 * time.Minute)
		for !acked(homes, name, tuples) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the spout's worker did not log 'all %d tuples acked' within 3 minutes\n%s", name, tuples, tails(dir))
			}
			time.Sleep(500 * time.Millisecond)
		}
		acks := time.Since(start)
		t.Logf("%s", strings.TrimSpace(client(top, jar, "--kill", name, "1")))
		deadline = time.Now().Add(time.Minute)
		for workers(dir) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d workers still running a minute after the kill", name, workers(dir))
			}
			time.Sleep(300 * time.Millisecond)
		}
		t.Logf("%s: submitted to all acked %.1f s, then to the workers gone %.1f s", name, acks.Seconds(), (time.Since(start) - acks).Seconds())
		return collect(t, logs, name)
	}
	// Run 1: the shaded jar, which carries the module and the binding (the
	// supervisor puts its resources/Linux-amd64/ on the workers'
	// java.library.path).
	shaded := run("shaded", profiled, e.topologyJar)
	// Run 2: a thin topology jar, the module and the binding in each
	// supervisor's extlib/ (on every worker's classpath), as docs/storm.md
	// recommends.
	for _, n := range []string{"sup0", "sup1"} {
		for _, jar := range []string{e.binding, e.module} {
			must(t, os.Symlink(jar, filepath.Join(homes[n], "extlib", filepath.Base(jar))))
		}
	}
	thin := run("thin", profiled, e.thinJar)
	// Run 3: a topology that has nothing of Cloudprofiler in its code
	// (its client runs without the module or the binding), profiled by
	// the hook given at submission alone; extlib/ as in run 2.
	hooked := run("hooked", plain, e.thinJar)
	clk.round("after")
	for _, p := range append(sups, nimbus, zk) {
		p.Stop(20 * time.Second)
	}
	clk.stop()
	workerNodes := []string{"sup0", "sup1"}
	// 7 marks: spout out (the hook), transform, keyed and sink in and out
	// (Profiled.bolt; their count channels are counters, not marks).
	checkFinished(t, e.tool, clk.Rounds, shaded, filepath.Join(dir, "out-shaded"), "nimbus", workerNodes, 1<<36, tuples, 7, stormFakes)
	checkFinished(t, e.tool, clk.Rounds, thin, filepath.Join(dir, "out-thin"), "nimbus", workerNodes, 1<<36, tuples, 7, stormFakes)
	// 7 marks: the spout's out, each bolt's in and out (the hook's).
	checkFinished(t, e.tool, clk.Rounds, hooked, filepath.Join(dir, "out-hooked"), "nimbus", workerNodes, 1<<36, tuples, 7, stormFakes)
	checkHookOnly(t, filepath.Join(dir, "out-hooked"), "transform", "keyed", "sink")
}

// checkHookOnly holds a hook-only run's analysis to what the hook's marks
// give (a bolt's in at its first emit or when execute returned, its outs,
// and the library's notes of the executor's waits): each bolt a capacity
// and a busy share, one of them named the bottleneck, and the p99's
// largest part somewhere, not "other".
func checkHookOnly(t *testing.T, out string, bolts ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	must(t, err)
	text := string(b)
	if !strings.Contains(text, "Bottleneck: ") || strings.Contains(text, "Bottleneck: none found") || strings.Contains(text, "Bottleneck: not named") {
		t.Errorf("hook only: summary.txt names no bottleneck:\n%s", text)
	}
	if strings.Contains(text, "Where the p99 goes: other") {
		t.Errorf("hook only: the p99 goes to other:\n%s", text)
	}
	rows, err := results.ReadAll[capacity.Row](filepath.Join(out, "capacity.parquet"))
	must(t, err)
	named := ""
	for _, bolt := range bolts {
		found := false
		for _, r := range rows {
			if r.Level != "operator" || r.Window != -1 || r.Method != capacity.MethodInOut || r.Operator != bolt {
				continue
			}
			found = true
			if !(r.Capacity > 0) || !(r.BusyShare >= 0) {
				t.Errorf("hook only: %s has no capacity or busy share: %+v", bolt, r)
			}
			if r.Bottleneck {
				named = bolt
			}
			t.Logf("hook only: %s capacity %.0f/s, load %.2f, busy %.3f; %s", bolt, r.Capacity, r.Load, r.BusyShare, r.Note)
		}
		if !found {
			t.Errorf("hook only: no whole-run row of %s", bolt)
		}
	}
	if named == "" {
		t.Errorf("hook only: no bolt named the bottleneck in capacity.parquet")
	}
}

// supervisorsIn counts the ids ZooKeeperMain listed ("[id1, id2]").
func supervisorsIn(out string) int {
	i, j := strings.LastIndex(out, "["), strings.LastIndex(out, "]")
	if i < 0 || j < i+1 || strings.TrimSpace(out[i+1:j]) == "" {
		return 0
	}
	return len(strings.Split(out[i+1:j], ","))
}

// acked says whether a worker of topology name (its id is name-N-TIME)
// logged the spout's "all N tuples acked".
func acked(homes map[string]string, name string, n int) bool {
	for _, h := range homes {
		files, _ := filepath.Glob(filepath.Join(h, "logs", "workers-artifacts", name+"-*", "*", "worker.log"))
		for _, f := range files {
			if b, _ := os.ReadFile(f); strings.Contains(string(b), fmt.Sprintf("IdSpout: all %d tuples acked", n)) {
				return true
			}
		}
	}
	return false
}

// workers counts the worker JVMs of this test's Storm (their command line
// names the worker's main class and a storm.home under dir).
func workers(dir string) int {
	n := 0
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(b)
		if strings.Contains(s, "org.apache.storm.daemon.worker.Worker") && strings.Contains(s, dir) && !strings.Contains(s, "org.apache.storm.LogWriter") {
			n++
		}
	}
	return n
}

// tails is the end of every log and output file under dir: what a failed
// test shows (its directory is removed).
func tails(dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".log") || strings.HasSuffix(p, ".err") || strings.HasSuffix(p, ".out")) {
			fmt.Fprintf(&b, "== %s\n%s\n", p, netns.Tail(p))
		}
		return nil
	})
	return b.String()
}
