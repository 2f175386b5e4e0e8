package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAnalyzeFlags(t *testing.T) {
	var out, errb bytes.Buffer
	run := func(args ...string) error { out.Reset(); errb.Reset(); return runAnalyze(&out, &errb, args) }
	require.ErrorContains(t, run(), "--logs and --out are required")
	require.ErrorContains(t, run("--rounds", "r", "--logs", "l", "--out", "o", "--method", "fast"), "--method must be")
	require.ErrorContains(t, run("--rounds", "r", "--logs", "l", "--out", "o", "--mem-mb", "1"), "--mem-mb")
	require.ErrorContains(t, run("stray"), `unexpected argument "stray"`)
	// Several paths after one --logs, then more flags: all are log paths.
	dir := t.TempDir()
	err := run("--logs", dir+"/x", dir+"/y", "--rounds", dir, "--out", dir+"/o")
	require.ErrorContains(t, err, dir+"/x")
}
