// Package testrun runs the programs the end-to-end tests start (tandem,
// cloudprofiler) and says how they ended: one place for the timeout, the
// environment and what a Go panic looks like, for tests/capacity and
// tests/critpath.
package testrun

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Result is how a command ended.
type Result struct {
	Stdout, Stderr string
	Code           int   // exit status; -1: it did not exit (killed, not started)
	Err            error // nil when it exited 0
	Took           time.Duration
}

// Run runs argv to its end, killed after limit, with env added to this
// process's environment.
func Run(limit time.Duration, env []string, argv ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = append(os.Environ(), env...)
	c.WaitDelay = 5 * time.Second
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	t0 := time.Now()
	err := c.Run()
	res := Result{Stdout: o.String(), Stderr: e.String(), Code: -1, Err: err, Took: time.Since(t0)}
	var ee *exec.ExitError
	switch {
	case err == nil:
		res.Code = 0
	case errors.As(err, &ee) && ee.Exited():
		res.Code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		res.Err = fmt.Errorf("%s: killed after %s: %w", filepath.Base(argv[0]), limit, err)
	}
	return res
}

// Panicked says whether s holds a Go panic's trace (or a runtime error).
func Panicked(s string) bool {
	return strings.Contains(s, "panic:") || strings.Contains(s, "runtime error") ||
		strings.Contains(s, "goroutine ") && strings.Contains(s, "[running]")
}

// ReadCSV reads a CSV file whose first line names its columns into rows,
// a map from column to field each; the file must have every column in cols.
func ReadCSV(path string, cols []string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%s is empty", path)
	}
	head := recs[0]
	for _, c := range cols {
		if !slices.Contains(head, c) {
			return nil, fmt.Errorf("%s has no column %q (it has %v)", path, c, head)
		}
	}
	rows := make([]map[string]string, 0, len(recs)-1)
	for _, rec := range recs[1:] {
		r := make(map[string]string, len(head))
		for i, h := range head {
			if i < len(rec) {
				r[h] = rec[i]
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// Retry runs attempt up to n times, until one finds nothing wrong, and
// fails t with the last attempt's problems; the earlier attempts' stay in
// the log. For tests that compare an analysis with a truth the machine
// realises: a stall of the machine (the other vCPU busy, the kernel's
// throttling of real-time threads) disturbs one run now and then, never
// the analysis of it. After a failed attempt it pauses (10 s, 20 s, ...:
// RetryPause times the attempt's number) before the next: on this VM
// disturbances come in spells of a few minutes (once, three critpath
// measurements in a row and then four Mace attempts failed, and the next
// dozen passed), which attempts back to back would all fall into.
func Retry(t testing.TB, n int, attempt func(try int) []string) {
	t.Helper()
	for try := 1; ; try++ {
		ps := attempt(try)
		if len(ps) == 0 {
			return
		}
		if try == n {
			for _, p := range ps {
				t.Error(p)
			}
			return
		}
		pause := time.Duration(try) * RetryPause
		t.Logf("try %d of %d: %d problem(s), run again in %v (the machine may have disturbed a run):\n  %s", try, n, len(ps), pause, strings.Join(ps, "\n  "))
		time.Sleep(pause)
	}
}

// RetryPause is Retry's pause after a first failed attempt.
var RetryPause = 10 * time.Second
