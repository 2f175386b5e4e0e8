// Package spark tests the analysis on a Spark standalone cluster: a
// master and two workers started as separate processes, each in a network
// namespace of its own (tests/internal/netns, as tests/cluster does for
// Flink), the job submitted to the master with spark-submit as a user
// would (docs/spark.md). The local-mode tests beside it (test_spark.py)
// compare every result with analyze's; this one checks that the same job
// on a cluster gives the same summary, with tasks run by both workers.
package spark

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"cloudprofiler/tests/internal/netns"
)

func TestSparkStandaloneInNamespaces(t *testing.T) {
	tool, build, py := os.Getenv("CP_TOOL"), os.Getenv("CP_BUILD"), os.Getenv("CP_PYTHON")
	if tool == "" || build == "" || py == "" {
		t.Skip("CP_TOOL, CP_BUILD and CP_PYTHON are not set (make test-spark sets them)")
	}
	if why := netns.Available(); why != "" {
		t.Skip(why)
	}
	home := pythonOut(t, py, "import pyspark, os; print(os.path.dirname(pyspark.__file__))")
	job := pythonOut(t, py, "import cloudprofiler.spark as s; print(s.__file__)")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	run(t, "bash", filepath.Join("..", "analyze-data.sh"), build, data, "250000")
	ref, ex := filepath.Join(dir, "analyze"), filepath.Join(dir, "export")
	run(t, tool, "analyze", "--logs", filepath.Join(data, "logs"), "--rounds", filepath.Join(data, "rounds"), "--out", ref,
		"--no-capacity", "--no-critical-path", "--no-mace", "--no-report", "--quiet")
	run(t, tool, "export", "--logs", filepath.Join(data, "logs"), "--rounds", filepath.Join(data, "rounds"), "--out", ex, "--partitions", "8")

	l := netns.New(t, "spark", []string{"master", "w0", "w1"}, dir)
	tmp := filepath.Join(dir, "tmp")
	must(t, os.MkdirAll(tmp, 0o755))
	env := func(node string) []string {
		return []string{"SPARK_HOME=" + home, "SPARK_LOCAL_IP=" + l.IP[node], "SPARK_LOG_DIR=" + filepath.Join(dir, "spark-logs"),
			"SPARK_DAEMON_JAVA_OPTS=-Djava.io.tmpdir=" + tmp, "PYSPARK_PYTHON=" + py, "TMPDIR=" + tmp}
	}
	master := "spark://" + l.IP["master"] + ":7077"
	m := l.Start("master", l.NS["master"], env("master"), filepath.Join(home, "bin", "spark-class"),
		"org.apache.spark.deploy.master.Master", "--host", l.IP["master"], "--port", "7077", "--webui-port", "8080")
	m.WaitOutput(t, "I have been elected leader", 90*time.Second)
	for _, w := range []string{"w0", "w1"} {
		p := l.Start(w, l.NS[w], env(w), filepath.Join(home, "bin", "spark-class"), "org.apache.spark.deploy.worker.Worker",
			master, "--host", l.IP[w], "--cores", "1", "--memory", "1g", "--work-dir", filepath.Join(dir, "work-"+w))
		p.WaitOutput(t, "Successfully registered with master", 90*time.Second)
	}
	out := filepath.Join(dir, "spark")
	stdout, err := l.Run(8*time.Minute, l.NS["master"], env("master"), filepath.Join(home, "bin", "spark-submit"),
		"--master", master, "--files", tool,
		"--conf", "spark.pyspark.python="+py, "--conf", "spark.pyspark.driver.python="+py,
		"--conf", "spark.driver.host="+l.IP["master"], "--conf", "spark.local.dir="+tmp,
		"--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
		"--conf", "spark.driver.extraJavaOptions=-Djava.io.tmpdir="+tmp,
		"--conf", "spark.executor.extraJavaOptions=-Djava.io.tmpdir="+tmp,
		job, "--export", ex, "--out", out, "--binary", filepath.Base(tool))
	if err != nil {
		t.Fatalf("spark-submit: %v\nstdout: %s", err, stdout)
	}
	if !strings.Contains(stdout, "analysed 1000000 records, 250000 tuples, 1000000 durations") {
		t.Fatalf("spark-submit said: %s", stdout)
	}
	want, err := os.ReadFile(filepath.Join(ref, "summary.csv"))
	must(t, err)
	got, err := os.ReadFile(filepath.Join(out, "summary.csv"))
	must(t, err)
	if string(want) != string(got) {
		t.Fatalf("summary.csv differs from analyze's:\nanalyze:\n%s\nspark:\n%s", want, got)
	}
	if n := parquetRows(t, filepath.Join(out, "durations.parquet")); n != 1000000 {
		t.Fatalf("durations.parquet/ holds %d rows, analyze wrote 1000000", n)
	}
	// Both workers ran tasks of the job (their executors' logs say so).
	for _, w := range []string{"w0", "w1"} {
		logs, _ := filepath.Glob(filepath.Join(dir, "work-"+w, "app-*", "*", "stderr"))
		ran := false
		for _, f := range logs {
			b, _ := os.ReadFile(f)
			ran = ran || strings.Contains(string(b), "Finished task")
		}
		if !ran {
			t.Errorf("worker %s ran no task of the job (executor logs: %v)", w, logs)
		}
	}
}

func pythonOut(t *testing.T, py, code string) string {
	t.Helper()
	b, err := exec.Command(py, "-c", code).Output()
	if err != nil {
		t.Fatalf("%s -c %q: %v", py, code, err)
	}
	return strings.TrimSpace(string(b))
}

func run(t *testing.T, argv ...string) {
	t.Helper()
	b, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// parquetRows counts the rows of the Parquet files in a directory Spark wrote.
func parquetRows(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	must(t, err)
	var n int64
	for _, p := range files {
		f, err := os.Open(p)
		must(t, err)
		st, err := f.Stat()
		must(t, err)
		pf, err := parquet.OpenFile(f, st.Size())
		must(t, err)
		n += pf.NumRows()
		f.Close()
	}
	return n
}
