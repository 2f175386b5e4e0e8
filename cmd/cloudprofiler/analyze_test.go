package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	// The capacity analysis's flags.
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--window", "0s"), "--window must be a positive duration")
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--window", "-1s"), "--window must be a positive duration")
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--window", "1"), "invalid value")
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--min-tuples", "0"), "--min-tuples must be at least 1")
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--target-rate", "fast"), "not a rate")
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--target-rate", "-5k"), "--target-rate must be a rate")
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--target-rate", "inf"), "--target-rate must be a rate")
	// The trace's flags.
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--trace-sample", "0"), "--trace-sample must be at least 1 tuple")
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--trace", t.TempDir()), "names a file to write")
	// Good values get as far as the logs.
	require.ErrorContains(t, run("--logs", "nowhere", "--out", "o", "--target-rate", "1.5M", "--window", "250ms", "--min-tuples", "5", "--no-capacity"), "nowhere")
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

// Channels marking an operator: the capacity section on stdout and
// capacity.csv; --no-capacity leaves it out.
func TestAnalyzeCapacity(t *testing.T) {
	dir := t.TempDir()
	hdr := `{"version":2,"byte_order":"little","format":"ASCII_TSC","format_id":1,"handler":"IDENTITY","handler_id":0,"record_size":16,"node":"n","pid":4,"name":"%s","tsc_hz":1e9}`
	for k, name := range []string{"op in", "op out"} {
		var b strings.Builder
		fmt.Fprintf(&b, "#CLOUDPROFILER-LOG v2\n#header "+hdr+"\n", name)
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&b, "%d,%d\n", i, 1000+i*10000+k*2000) // 2 us each: 500000 tuples/s
		}
		fmt.Fprintf(&b, "#trailer {\"reason\":\"close\",\"positions\":100}\n")
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("n-%d-op.cplog.txt", k)), []byte(b.String()), 0o644))
	}
	var out, errb bytes.Buffer
	o := filepath.Join(dir, "o")
	require.NoError(t, runAnalyze(&out, &errb, []string{"--logs", dir, "--out", o, "--target-rate", "1.5M", "--window", "500us"}))
	require.Contains(t, out.String(), "bottleneck: op (*)")
	require.Contains(t, out.String(), "parallelism for a source rate of 1500000 tuples/s")
	require.Contains(t, out.String(), "op 3")
	require.Contains(t, out.String(), "wrote "+filepath.Join(o, "capacity.csv"))
	b, err := os.ReadFile(filepath.Join(o, "capacity.csv"))
	require.NoError(t, err)
	require.Contains(t, string(b), "operator,-1,0,")
	require.NoError(t, runAnalyze(&out, &errb, []string{"--logs", dir, "--out", o, "--no-capacity"}))
	require.Contains(t, out.String(), "capacity: not analysed (--no-capacity)")
	_, err = os.Stat(filepath.Join(o, "capacity.csv"))
	require.True(t, os.IsNotExist(err))
}

// export's flags: the format, and a range only for a cut.
func TestExportFlags(t *testing.T) {
	var out, errb bytes.Buffer
	run := func(args ...string) error { out.Reset(); errb.Reset(); return runExport(&out, &errb, args) }
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--format", "csv"), `--format "csv": parquet or logs`)
	require.ErrorContains(t, run("--logs", "l", "--out", "o", "--from", "10"), "--from and --to cut logs (--format logs)")
	require.ErrorContains(t, run("--logs", "nowhere", "--out", "o", "--format", "logs", "--from", "10"), "nowhere")
	// A one-node run (the demo's, no rounds): its first second.
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	var lines []string
	for i := 0; i < 100; i++ {
		lines = append(lines, fmt.Sprintf("%d,%d", i, 1000000000+i*20000000)) // 50 a second, at 1 GHz
	}
	h := fmt.Sprintf(`{"version":2,"byte_order":"little","format":"ASCII_TSC","format_id":1,"handler":"IDENTITY","columns":["tuple_id","tsc"],"record_size":16,"name":"in","node":"n","tsc_hz":1e9,"open_sync":{"tsc":1000000000,"realtime_ns":%d}}`, int64(1_795_000_000_000_000_000))
	body := "#CLOUDPROFILER-LOG v2\n#header " + h + "\n" + strings.Join(lines, "\n") + "\n#trailer {\"reason\":\"close\",\"positions\":100}\n"
	require.NoError(t, os.WriteFile(filepath.Join(logs, "n-1-in.cplog.txt"), []byte(body), 0o644))
	require.NoError(t, run("--logs", logs, "--out", filepath.Join(dir, "cut"), "--format", "logs", "--to", "1"))
	require.Contains(t, out.String(), "cut 50 of 100 records (nodes [n]) to [the start, 2026-11-18T")
	require.Contains(t, out.String(), "(then: analyze --logs "+filepath.Join(dir, "cut", "logs")+")\n")
}
