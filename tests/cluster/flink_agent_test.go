package cluster

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloudprofiler/tests/internal/testrun"
)

// TestFlinkAgent is issue 45's test on the standalone cluster: a job with
// no Cloudprofiler code (tests/cluster/flink-job: map, filter, keyBy, a
// keyed process function doing real work, a SQL query, a sink), on a
// cluster with nothing of ours but the agent line in its configuration
// (env.java.opts.taskmanager: -javaagent:...), two TaskManagers of one slot
// each, so the keyBy crosses from one JVM to the other. The truth is in the
// user's functions (Flink accumulators, read over REST once the job
// ended), never in the marks:
//   - the job's results: tally's count and sum, against the job's logic
//     worked out here (what the job gives without the agent);
//   - every operator instance's channels, each with as many ins as its
//     function saw (work's per subtask, the others' from the logic);
//   - work's capacity per subtask: its departures over the time from its
//     first to its last (when collect returned; work is the job's slowest
//     and the source unthrottled, so it had a backlog throughout), where
//     its function was busy 0.95 of that time or more; else (it waited for
//     input: the source, held back by the other subtask's backpressure,
//     starved it at times; the rate is not its capacity) the records over
//     the time spent in processElement, which leaves Flink's per-record
//     cost out and so reads a few percent high. Ours (capacity.csv, the
//     agent's marks) within 10%;
//   - the bottleneck capacity.csv and summary.txt name: work.
//
// Twice, each on a cluster of its own: "marks", the agent as it comes;
// "ids", the agent's argument ids (-javaagent:...=ids): records carry
// their id between tasks, so analyze has the hops from one operator to
// the next too, across the two JVMs: each kept record's hop from
// not-threes to work, and each tallied record's journey from twice to the
// sink. What that costs on the wire is Flink's own count of the bytes the
// source's task wrote, a record, against the "marks" run's: 8 more.
func TestFlinkAgent(t *testing.T) {
	e := needFlink(t)
	agent, job := os.Getenv("CP_FLINK_AGENT_JAR"), os.Getenv("CP_FLINK_PLAIN_JOB_JAR")
	if agent == "" || job == "" {
		t.Skip("CP_FLINK_AGENT_JAR and CP_FLINK_PLAIN_JOB_JAR are not set: run `make test-cluster`")
	}
	var wire [2]float64 // bytes the source's task wrote a record: without ids, with them
	t.Run("marks", func(t *testing.T) { wire[0] = agentRun(t, e, agent, job, false) })
	t.Run("ids", func(t *testing.T) { wire[1] = agentRun(t, e, agent, job, true) })
	t.Logf("on the wire: %.2f bytes a record without ids, %.2f with them", wire[0], wire[1])
	if wire[0] > 0 && wire[1] > 0 && math.Abs(wire[1]-wire[0]-8) > 0.5 {
		t.Errorf("ids cost %.2f bytes a record on the wire (%.2f against %.2f), not 8", wire[1]-wire[0], wire[1], wire[0])
	}
}

// agentRun runs PlainJob on a cluster whose TaskManagers start with the
// agent (with its argument ids or not) and checks it (TestFlinkAgent);
// it gives the bytes the source's task wrote a record (Flink's count).
func agentRun(t *testing.T, e flinkEnv, agent, job string, ids bool) float64 {
	const records, p = 200_000, 2
	opts := "-javaagent:" + agent
	if ids {
		opts += "=ids"
	}
	c := startCluster(t, e, clusterOpts{taskManagers: p, slots: 1, noBinding: true, tmJavaOpts: opts, node: "host"})
	id := c.submit(job, "io.cloudprofiler.tests.cluster.PlainJob", "--records", fmt.Sprint(records), "--parallelism", fmt.Sprint(p))
	c.wait(id, 4*time.Minute, "FINISHED")
	var acc struct {
		User []struct{ Name, Value string } `json:"user-task-accumulators"`
	}
	must(t, c.get("/jobs/"+id+"/accumulators", &acc))
	var details struct {
		Vertices []struct {
			Name    string
			Metrics map[string]any
		}
	}
	must(t, c.get("/jobs/"+id, &details))
	wire := 0.0
	for _, v := range details.Vertices {
		b, _ := v.Metrics["write-bytes"].(float64)
		n, _ := v.Metrics["write-records"].(float64)
		if strings.HasPrefix(v.Name, "Source: numbers") && n > 0 {
			wire = b / n
		}
	}
	c.stop() // the job's end closed its channels; SIGTERM flushes whatever is left
	accum := map[string]int64{}
	for _, a := range acc.User {
		v, err := strconv.ParseInt(a.Value, 10, 64)
		if err != nil {
			t.Fatalf("accumulator %s: %q", a.Name, a.Value)
		}
		accum[a.Name] = v
	}

	// Each TaskManager said what the agent did (its stdout and stderr: proc-1.out, proc-2.out).
	said := "cloudprofiler agent: marking the operators of Flink 2.3.0 (every instance's in, out and sent; docs"
	if ids {
		said = "cloudprofiler agent: marking the operators of Flink 2.3.0 (every instance's in, out and sent; ids carried between tasks"
	}
	for i := 1; i <= p; i++ {
		b, _ := os.ReadFile(filepath.Join(c.dir, fmt.Sprintf("proc-%d.out", i)))
		if !strings.Contains(string(b), said) {
			t.Errorf("TaskManager %d's output has no word from the agent:\n%s", i-1, tail(string(b), 2000))
		}
	}

	// The job's results, from its logic: 2i, not a multiple of 3, then the query's WHERE.
	var kept, tallied, sum int64
	for i := int64(0); i < records; i++ {
		v := 2 * i
		if v%3 == 0 {
			continue
		}
		kept++
		if v%5 != 0 {
			tallied++
			sum += 3 * v
		}
	}
	if accum["tallied"] != tallied || accum["tallied w"] != sum {
		t.Errorf("the job's results with the agent: %d records, w summing to %d; its logic gives %d and %d", accum["tallied"], accum["tallied w"], tallied, sum)
	}
	var worked int64
	for i := 0; i < p; i++ {
		worked += accum[fmt.Sprintf("work#%d records", i)]
	}
	if worked != kept {
		t.Errorf("work's subtasks counted %d records, the logic keeps %d", worked, kept)
	}

	out := filepath.Join(c.dir, "out")
	args := []string{e.tool, "analyze", "--logs", filepath.Join(c.dir, "logs-0"), filepath.Join(c.dir, "logs-1"), "--out", out, "--quiet", "--strict"}
	if !ids {
		args = append(args, "--no-durations") // no hop has a common id
	}
	r := testrun.Run(2*time.Minute, nil, args...)
	if r.Err != nil {
		t.Fatalf("analyze: %v\n%s%s", r.Err, r.Stdout, r.Stderr)
	}
	rows := readRows(t, filepath.Join(out, "capacity.csv"), "level", "window", "operator", "instance", "tuples_in", "capacity", "bottleneck")

	// Every operator instance, chained or not, Flink's SQL operator among them, with its ins.
	ins := map[string]int64{} // OPERATOR#SUBTASK -> tuples in (whole run)
	opOf := map[string]string{}
	for _, row := range rows {
		if row["level"] == "instance" && row["window"] == "-1" {
			label := row["instance"]
			inst := row["operator"] + "#" + label[strings.LastIndex(label, "/")+1:]
			n, _ := strconv.ParseInt(row["tuples_in"], 10, 64)
			ins[inst] = n
			opOf[inst] = row["operator"]
		}
	}
	names := make([]string, 0, len(ins))
	for k := range ins {
		names = append(names, k)
	}
	sort.Strings(names)
	t.Logf("instances: %v", names)
	want := map[string]int64{`twice-\d+`: records, `not-threes-\d+`: records, `work-\d+`: kept, `Calc.*`: kept, `tally-\d+`: tallied, `sunk:_Writer-\d+`: tallied}
	for pat, n := range want {
		re := regexp.MustCompile("^" + pat + "#[0-9]+$")
		var got int64
		subtasks := 0
		for k, v := range ins {
			if re.MatchString(k) {
				got += v
				subtasks++
			}
		}
		if subtasks != p || got != n {
			t.Errorf("%s: %d instances with %d ins in all; want %d instances, %d ins (instances: %v)", pat, subtasks, got, p, n, names)
		}
	}

	// work's capacity against its function's own counters, per subtask.
	work := ""
	for k := range ins {
		if regexp.MustCompile(`^work-\d+#`).MatchString(k) {
			work = opOf[k]
		}
	}
	for i := 0; i < p; i++ {
		me := fmt.Sprintf("work#%d", i)
		n, first, last, busy := accum[me+" records"], accum[me+" first ns"], accum[me+" last ns"], accum[me+" busy ns"]
		span := float64(last - first)
		share := float64(busy) / span
		truth, which := float64(n-1)/(span/1e9), "departures over the run (busy "+fmt.Sprintf("%.2f", share)+")"
		if !(share >= 0.95) {
			truth, which = float64(n)/(float64(busy)/1e9), fmt.Sprintf("records over the time in processElement (busy only %.2f of the run: not backlogged throughout)", share)
		}
		var ours float64 = math.NaN()
		for _, row := range rows {
			if row["level"] == "instance" && row["window"] == "-1" && row["operator"] == work && strings.HasSuffix(row["instance"], fmt.Sprintf("/%d", i)) {
				ours, _ = strconv.ParseFloat(row["capacity"], 64)
			}
		}
		t.Logf("%s#%d: ours %.0f/s, the truth %.0f/s (%s): %+.1f%%", work, i, ours, truth, which, 100*(ours/truth-1))
		if !(math.Abs(ours/truth-1) <= 0.10) {
			t.Errorf("%s#%d's capacity %.0f/s is not within 10%% of its function's %.0f/s (%s)", work, i, ours, truth, which)
		}
	}
	bottleneck := ""
	for _, row := range rows {
		if row["level"] == "operator" && row["window"] == "-1" && row["bottleneck"] == "true" {
			bottleneck = row["operator"]
		}
	}
	summary, _ := os.ReadFile(filepath.Join(out, "summary.txt"))
	if bottleneck != work || !regexp.MustCompile(`Bottleneck: `+regexp.QuoteMeta(work)+` `).Match(summary) {
		t.Errorf("the bottleneck: capacity.csv names %q, want %q; summary.txt:\n%s", bottleneck, work, summary)
	}
	if ids {
		checkCarried(t, filepath.Join(out, "summary.csv"), kept, tallied)
	}
	if keep := os.Getenv("CP_KEEP"); keep != "" && t.Failed() {
		testrun.Run(time.Minute, nil, "cp", "-r", c.dir, keep) // the run's files, for a look after the test
		t.Logf("the run's files copied to %s", keep)
	}
	return wire
}

// checkCarried: with ids, analyze's hops (summary.csv) hold every kept
// record's hop from not-threes to work (over the network: a transfer from
// one JVM to the other, or within one), and every tallied record's
// journey from twice to the sink.
func checkCarried(t *testing.T, summary string, kept, tallied int64) {
	t.Helper()
	rows := readRows(t, summary, "kind", "from", "to", "count", "median_s", "p99_s")
	hop := regexp.MustCompile(`/not-threes-\d+#\d+ (out|sent)$`)
	work := regexp.MustCompile(`/work-\d+#\d+ in$`)
	first, last := regexp.MustCompile(`/twice-\d+#\d+ in$`), regexp.MustCompile(`/sunk:_Writer-\d+#\d+ out$`)
	var hops, journeys int64
	var lines []string
	for _, row := range rows {
		n, _ := strconv.ParseInt(row["count"], 10, 64)
		switch {
		case (row["kind"] == "compute" || row["kind"] == "transfer") && hop.MatchString(row["from"]) && work.MatchString(row["to"]):
			hops += n
			lines = append(lines, fmt.Sprintf("%s %s -> %s: %d, median %s s, p99 %s s", row["kind"], row["from"], row["to"], n, row["median_s"], row["p99_s"]))
		case row["kind"] == "end_to_end" && first.MatchString(row["from"]) && last.MatchString(row["to"]):
			journeys += n
		}
	}
	for _, l := range lines {
		t.Log(l)
	}
	if hops != kept {
		t.Errorf("summary.csv: %d hops from not-threes to work, the job kept %d records", hops, kept)
	}
	if journeys != tallied {
		t.Errorf("summary.csv: %d journeys from twice to the sink, the job tallied %d records", journeys, tallied)
	}
}

// readRows reads an analyze CSV (capacity.csv, summary.csv) whose first
// line names cols among its columns, or fails the test.
func readRows(t *testing.T, path string, cols ...string) []map[string]string {
	t.Helper()
	rows, err := testrun.ReadCSV(path, cols)
	must(t, err)
	return rows
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
