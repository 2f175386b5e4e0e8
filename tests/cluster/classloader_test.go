package cluster

import (
	"archive/zip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Classloaders as users meet them (issue 16). Flink loads a job jar's
// classes in a classloader of the job's own, child-first: a class the job
// jar carries wins over lib/'s copy. A JVM loads a JNI library into one
// classloader only, and a second copy of the library (another file) would
// start a second Go runtime in the process. So each case below either works
// or fails with the binding's message that names the fix, and the
// TaskManager never has more than one copy of the library mapped.

// fatJar writes a job jar that carries the binding, as a build with the
// binding as a compile dependency and maven-assembly's jar-with-dependencies
// (or maven-shade) makes it: the job's entries, then the binding's (its
// classes and resources/Linux-amd64/libcloudprofiler.so), one manifest.
func fatJar(t *testing.T, thin, binding, out string) {
	t.Helper()
	f, err := os.Create(out)
	must(t, err)
	w := zip.NewWriter(f)
	seen := map[string]bool{}
	for _, in := range []string{thin, binding} {
		r, err := zip.OpenReader(in)
		must(t, err)
		for _, e := range r.File {
			// Directories are left out: a jar needs none, and shade's
			// (an empty deflate stream each) cannot be copied raw.
			if seen[e.Name] || strings.HasPrefix(e.Name, "META-INF/maven/") || strings.HasSuffix(e.Name, "/") {
				continue
			}
			seen[e.Name] = true
			must(t, w.Copy(e))
		}
		r.Close()
	}
	must(t, w.Close())
	must(t, f.Close())
	if !seen["io/cloudprofiler/Channel.class"] || !seen["resources/Linux-amd64/libcloudprofiler.so"] {
		t.Fatalf("%s: no binding classes or library in it", out)
	}
}

// state is a job's state, polled until it is one of want (or the limit
// passes: the test fails).
func (c *cluster) state(job string, limit time.Duration, want ...string) string {
	deadline := time.Now().Add(limit)
	for {
		var j struct{ State string }
		if err := c.get("/jobs/"+job, &j); err == nil && slices.Contains(want, j.State) {
			return j.State
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("job %s: %s, not %v within %s (logs in %s)", job, j.State, want, limit, c.dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// exceptions is the job's exception history as the REST API gives it.
func (c *cluster) exceptions(job string) string {
	resp, err := http.Get(c.rest + "/jobs/" + job + "/exceptions")
	must(c.t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func (c *cluster) cancel(job string) {
	req, _ := http.NewRequest(http.MethodPatch, c.rest+"/jobs/"+job+"?mode=cancel", nil)
	resp, err := http.DefaultClient.Do(req)
	must(c.t, err)
	resp.Body.Close()
	c.state(job, time.Minute, "CANCELED")
}

// logging waits until TaskManager 0's log directory holds n files more
// than before: the job's tasks opened their channels.
func (c *cluster) logging(before, n int) {
	deadline := time.Now().Add(time.Minute)
	for {
		files, _ := filepath.Glob(filepath.Join(c.dir, "logs-0", "*.cplog*"))
		if len(files) >= before+n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("TaskManager 0 has %d channel files after a minute, want %d", len(files), before+n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *cluster) files() int {
	files, _ := filepath.Glob(filepath.Join(c.dir, "logs-0", "*.cplog*"))
	return len(files)
}

// libraries lists the distinct files of the library mapped into
// TaskManager 0 (its /proc/PID/maps): never more than one.
func (c *cluster) libraries() []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", c.procs[1].Process.Pid))
	must(c.t, err)
	var libs []string
	for _, l := range strings.Split(string(b), "\n") {
		if i := strings.IndexByte(l, '/'); i >= 0 && strings.Contains(filepath.Base(l[i:]), "libcloudprofiler") && !slices.Contains(libs, l[i:]) {
			libs = append(libs, l[i:])
		}
	}
	return libs
}

func (c *cluster) oneLibrary() {
	c.t.Helper()
	if libs := c.libraries(); len(libs) != 1 {
		c.t.Errorf("TaskManager 0 has %d copies of the library mapped, want 1: %v", len(libs), libs)
	} else {
		c.t.Logf("TaskManager 0 maps one copy of the library: %s", libs[0])
	}
}

// failsNaming checks that a job failed and that its exceptions carry the
// binding's message with the fix.
func (c *cluster) failsNaming(job string, fix ...string) {
	c.t.Helper()
	c.state(job, 2*time.Minute, "FAILED")
	ex := c.exceptions(job)
	for _, f := range fix {
		if !strings.Contains(ex, f) {
			c.t.Errorf("job %s FAILED without naming %q:\n%s", job, f, trimErr([]byte(ex)))
		}
	}
	// The line of the exception that says it (JSON: lines are \n escapes).
	if i := strings.Index(ex, fix[0]); i >= 0 {
		from := max(0, i-200)
		if nl := strings.LastIndex(ex[:i], `\n`); nl >= 0 {
			from = nl + len(`\n`)
		}
		m := ex[from:]
		if j := strings.Index(m, `\n`); j > 0 {
			m = m[:j]
		}
		c.t.Logf("job %s failed: %s", job, m)
	}
}

// TestFlinkClassloaders: the binding in lib/ and in the job jar (a fat
// jar), in the job jar only, or nowhere; two jobs at once (two job
// classloaders alive) and a job restarted after a failure.
func TestFlinkClassloaders(t *testing.T) {
	e := needFlink(t)
	fat := filepath.Join(t.TempDir(), "job-with-binding.jar")
	fatJar(t, e.jobJar, e.binding, fat)
	// Long enough to still run when the second job comes.
	slow := []string{"--tuples", "1000000", "--rate", "10000", "--parallelism", "1"}
	quick := []string{"--tuples", "10000", "--rate", "20000", "--parallelism", "1"}
	const entry = "io.cloudprofiler.examples.flink.ProfiledJob"
	restarts := "restart-strategy: {type: fixed-delay, fixed-delay: {attempts: 1, delay: 1 s}}\n"
	const channels = 13 // ProfiledJob's channels at parallelism 1: in, out and count of 4 operators, 2-count's sent

	t.Run("lib-and-fat-jar", func(t *testing.T) {
		// Child-first (Flink's default): the first job loads the binding
		// from its own jar; a second job at the same time has a second
		// classloader, and the library is taken: it fails, saying to use
		// lib/'s copy (parent-first-patterns).
		c := startCluster(t, e, clusterOpts{taskManagers: 1, slots: 2, conf: restarts})
		first := c.submit(fat, entry, slow...)
		c.state(first, time.Minute, "RUNNING")
		c.logging(0, channels)
		second := c.submit(fat, entry, slow...)
		c.failsNaming(second, "another classloader", "classloader.parent-first-patterns.additional", "flink/lib/")
		c.oneLibrary()
		c.cancel(first)
	})

	t.Run("lib-and-fat-jar-parent-first", func(t *testing.T) {
		// The fix: io.cloudprofiler parent-first, so lib/'s copy is every
		// job's. Two jobs at once, both to their end.
		c := startCluster(t, e, clusterOpts{taskManagers: 1, slots: 2,
			conf: restarts + "classloader: {parent-first-patterns: {additional: [io.cloudprofiler]}}\n"})
		first := c.submit(fat, entry, quick...)
		second := c.submit(fat, entry, quick...)
		c.wait(first, 2*time.Minute, "FINISHED")
		c.wait(second, 2*time.Minute, "FINISHED")
		c.oneLibrary()
		if n := c.files(); n != 2*channels {
			t.Errorf("%d channel files, want %d (two jobs)", n, 2*channels)
		}
	})

	t.Run("fat-jar-only", func(t *testing.T) {
		// No binding in lib/: the job jar's copy. A job that fails once is
		// restarted in the same job classloader and runs to its end; the
		// next job, in a classloader of its own, too; a second job at the
		// same time as another fails, saying to put the jar in lib/. A thin
		// job jar fails to find the binding's classes.
		c := startCluster(t, e, clusterOpts{taskManagers: 1, slots: 2, noBinding: true, conf: restarts})
		job := c.submit(fat, entry, append(quick, "--fail-at", "5000")...)
		c.wait(job, 2*time.Minute, "FINISHED")
		if ex := c.exceptions(job); !strings.Contains(ex, "--fail-at 5000") {
			t.Errorf("job %s FINISHED without the failure it was asked for:\n%s", job, trimErr([]byte(ex)))
		}
		// Both attempts' channels were closed: 2 x 13 files, complete.
		if n := c.files(); n != 2*channels {
			t.Errorf("%d channel files, want %d (an attempt that failed, one that finished)", n, 2*channels)
		}
		c.oneLibrary()
		// A job after it: a classloader of its own, which takes the library
		// over once the finished job's classloader is collected.
		next := c.submit(fat, entry, quick...)
		c.wait(next, 2*time.Minute, "FINISHED")
		c.oneLibrary()
		before := c.files()
		first := c.submit(fat, entry, slow...)
		c.state(first, time.Minute, "RUNNING")
		c.logging(before, channels)
		second := c.submit(fat, entry, slow...)
		c.failsNaming(second, "another classloader", "flink/lib/")
		c.cancel(first)
		// The thin jar: main runs in the JobManager, whose classpath has
		// no binding either; the run is refused, or the job fails, naming
		// the missing class.
		if thin, answer := c.trySubmit(e.jobJar, entry, quick...); thin == "" {
			if !strings.Contains(answer, "io/cloudprofiler/") && !strings.Contains(answer, "io.cloudprofiler.") {
				t.Errorf("a thin job jar without the binding anywhere: /jars/run answered without naming the binding's classes:\n%s", trimErr([]byte(answer)))
			}
			t.Logf("a thin job jar without the binding anywhere: /jars/run refused it: %s", trimErr([]byte(answer)))
		} else {
			c.failsNaming(thin, "io/cloudprofiler/")
		}
		c.oneLibrary()
	})
}
