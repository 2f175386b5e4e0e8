// Package testrun runs the programs the end-to-end tests start (tandem,
// cloudprofiler) and says how they ended: one place for the timeout, the
// environment and what a Go panic looks like, for tests/capacity and
// tests/critpath.
package testrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
