// Package docs holds README.md and the pages under docs/ to their code
// blocks: every block in a language (not an output sample, which is fenced
// as text or bare) says on the line before its fence what tests it:
//
//	<!-- run -->             a sh or python block, run as written
//	<!-- file: NAME -->      a block saved as NAME for the run blocks after it
//	<!-- tested: TEST -->    run by TEST, a test function of the repository
//	<!-- not run: WHY -->    not runnable here, and why (a cluster, a JVM job)
//
// TestMarkers checks the markers (go test ./... runs it). TestRun runs each
// page's file and run blocks in order, in a directory of its own that links
// the repository's sources and built tree, so a block's `build/cloudprofiler`,
// `-Icapi` and `make install` mean what they mean in the repository's root;
// it needs the built tree and runs under make test-docs (CP_DOCS_RUN=1).
package docs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

const repo = "../.."

// linked: what of the repository a page's blocks see in their directory.
var linked = []string{"Makefile", "go.mod", "go.sum", "build", "capi", "bindings", "examples", "cmd", "libcp",
	"internal", "handlers", "tsc", "minrtt", "confserver", "datagen", "tests", "docs"}

// block is one fenced code block of a page.
type block struct {
	page   string // relative to the repository
	line   int    // of the opening fence, from 1
	lang   string
	marker string // the comment on the line before the fence, "" if none
	code   string // without the fences, dedented to the fence's indent
}

var markerRe = regexp.MustCompile(`^<!-- (run|file: \S+|tested: \S+|not run: .+) -->$`)

// pages are README.md and docs/*.md.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("docs/*.md: %v (%d pages)", err, len(docs))
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, strings.TrimPrefix(d, repo+"/"))
	}
	return out
}

// blocks reads a page's fenced blocks.
func blocks(t *testing.T, page string) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, page))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	var indent, prev string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
			cur = &block{page: page, line: n, lang: strings.TrimPrefix(trimmed, "```"), marker: prev}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += strings.TrimPrefix(line, indent) + "\n"
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Errorf("%s:%d: a code block that never ends", page, cur.line)
	}
	return out
}

// isOutput: a block that shows what something printed, not code.
func isOutput(b block) bool { return b.lang == "" || b.lang == "text" }

// TestMarkers: every code block says what tests it; a run block is sh or
// python; a tested block names a test that exists.
func TestMarkers(t *testing.T) {
	tests := testNames(t)
	n, run := 0, 0
	for _, p := range pages(t) {
		for _, b := range blocks(t, p) {
			if isOutput(b) {
				continue
			}
			n++
			where := fmt.Sprintf("%s:%d (```%s)", b.page, b.line, b.lang)
			if !markerRe.MatchString(b.marker) {
				t.Errorf("%s: no marker on the line before the fence (<!-- run -->, <!-- file: NAME -->, <!-- tested: TEST --> or <!-- not run: WHY -->); the line is %q", where, b.marker)
				continue
			}
			switch m := strings.TrimSuffix(strings.TrimPrefix(b.marker, "<!-- "), " -->"); {
			case m == "run":
				run++
				if b.lang != "sh" && b.lang != "python" {
					t.Errorf("%s: a run block is sh or python", where)
				}
			case strings.HasPrefix(m, "file: "):
				run++
			case strings.HasPrefix(m, "tested: "):
				if name := strings.TrimPrefix(m, "tested: "); !tests[name] {
					t.Errorf("%s: tested by %s, which is no test function of the repository", where, name)
				}
			}
		}
	}
	t.Logf("%d code blocks, %d run here (run or file), the others by a named test or not run, each saying why", n, run)
}

// testNames are the names of the repository's test functions: Go's
// func TestX, Python's def test_x, Java's @Test methods.
func testNames(t *testing.T) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*(?:func (Test\w+)\(|def (test_\w+)\(|(?:public )?void (\w+)\(\))`)
	names := map[string]bool{}
	err := filepath.WalkDir(repo, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "build" || d.Name() == "target" || d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		base := d.Name()
		if !(strings.HasSuffix(base, "_test.go") || (strings.HasPrefix(base, "test_") && strings.HasSuffix(base, ".py")) || strings.HasSuffix(base, "Test.java")) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			for _, g := range m[1:] {
				if g != "" {
					names[g] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestRun runs each page's file and run blocks, in order, as a reader would.
func TestRun(t *testing.T) {
	if os.Getenv("CP_DOCS_RUN") != "1" {
		t.Skip("runs the pages' code on the built tree: make test-docs (CP_DOCS_RUN=1)")
	}
	root, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	python := filepath.Join(root, "build", "pyenv", "bin", "python")
	for _, p := range pages(t) {
		var todo []block
		for _, b := range blocks(t, p) {
			if b.marker == "<!-- run -->" || strings.HasPrefix(b.marker, "<!-- file: ") {
				todo = append(todo, b)
			}
		}
		if len(todo) == 0 {
			continue
		}
		t.Run(p, func(t *testing.T) {
			// A directory that looks like the repository's root (its
			// sources, Makefile and built tree linked) but keeps what the
			// blocks write; the reader's shell has the venv active.
			dir := t.TempDir()
			for _, l := range linked {
				if err := os.Symlink(filepath.Join(root, l), filepath.Join(dir, l)); err != nil {
					t.Fatal(err)
				}
			}
			// A JVM a block starts keeps its temporary files (the Java
			// binding's extracted library, cloudprofiler-USER/) in the
			// block's directory: Java reads java.io.tmpdir, not TMPDIR, and
			// make test leaves nothing in /tmp.
			jtmp := filepath.Join(dir, ".java-tmp")
			if err := os.Mkdir(jtmp, 0o700); err != nil {
				t.Fatal(err)
			}
			env := []string{"CLOUDPROFILER_LIB=" + filepath.Join(root, "build", "libcloudprofiler.so"),
				"PATH=" + filepath.Join(root, "build", "pyenv", "bin") + ":" + os.Getenv("PATH"),
				"JAVA_TOOL_OPTIONS=-Djava.io.tmpdir=" + jtmp}
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "CP_") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "JAVA_TOOL_OPTIONS=") {
					env = append(env, kv)
				}
			}
			for _, b := range todo {
				where := fmt.Sprintf("%s:%d", b.page, b.line)
				if name, ok := strings.CutPrefix(b.marker, "<!-- file: "); ok {
					name = strings.TrimSuffix(name, " -->")
					if err := os.WriteFile(filepath.Join(dir, name), []byte(b.code), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				var cmd *exec.Cmd
				if b.lang == "sh" {
					cmd = exec.CommandContext(ctx, "bash", "-eu", "-c", b.code) // as typed: a pipe into head is no failure
				} else {
					cmd = exec.CommandContext(ctx, python, "-c", b.code)
				}
				cmd.Dir, cmd.Env = dir, env
				// Its own process group: what a block left running (a
				// server it started before failing) is stopped with it.
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
				// A process the block left running in the background keeps
				// its output open: the block's end is its shell's exit,
				// and what it left behind fails it after 10 s, not at the
				// timeout.
				cmd.WaitDelay = 10 * time.Second
				start := time.Now()
				out, err := cmd.CombinedOutput()
				if cmd.Process != nil {
					syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
				cancel()
				if err != nil {
					t.Fatalf("%s: %v\n%s\n--- its output:\n%s", where, err, b.code, out)
				}
				t.Logf("%s: ran in %.1fs, %d lines of output", where, time.Since(start).Seconds(), strings.Count(string(out), "\n"))
			}
		})
	}
}

// TestLinks: every relative link of a page names a file that exists.
func TestLinks(t *testing.T) {
	re := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	n := 0
	for _, p := range pages(t) {
		src, err := os.ReadFile(filepath.Join(repo, p))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") {
				continue
			}
			n++
			if _, err := os.Stat(filepath.Join(repo, filepath.Dir(p), target)); err != nil {
				t.Errorf("%s: a link to %s, which is not there", p, m[1])
			}
		}
	}
	t.Logf("%d relative links, each to a file that exists", n)
}
