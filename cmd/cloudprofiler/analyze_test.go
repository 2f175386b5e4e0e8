package main

import (
	"bytes"
	"os"
	"path/filepath"
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

// A damaged log: analyze writes its results, warns on stderr, exits 0; with
// --strict it exits 3.
func TestAnalyzeStrict(t *testing.T) {
	dir := t.TempDir()
	hdr := `{"version":2,"byte_order":"little","format":"ASCII_TSC","format_id":1,"handler":"IDENTITY","handler_id":0,"record_size":16,"node":"n","name":"c","tsc_hz":1e9}`
	body := "#CLOUDPROFILER-LOG v2\n#header " + hdr + "\n1,100\n2,2x0\n3,300\n#trailer {\"reason\":\"close\",\"positions\":3}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "n-1-c.cplog.txt"), []byte(body), 0o644))
	var out, errb bytes.Buffer
	require.NoError(t, runAnalyze(&out, &errb, []string{"--logs", dir, "--out", filepath.Join(dir, "o")}))
	require.Contains(t, errb.String(), "WARNING")
	require.Contains(t, errb.String(), "1 damaged lines skipped")
	require.Contains(t, out.String(), "DAMAGED OR INCOMPLETE")
	err := runAnalyze(&out, &errb, []string{"--strict", "--logs", dir, "--out", filepath.Join(dir, "o")})
	var ec *exitCode
	require.ErrorAs(t, err, &ec)
	require.Equal(t, exitDamaged, ec.code)
	_, statErr := os.Stat(filepath.Join(dir, "o", "summary.txt"))
	require.NoError(t, statErr, "the results are written all the same")
}
