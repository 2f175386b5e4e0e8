package analyze

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/logfile"
)

// libPath is the native library the lineage tests log with: $CP_LIB, else
// one built from ./libcp once per test binary (go's cache makes it quick).
var libOnce struct {
	sync.Once
	path, dir string
	err       error
}

func libPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CP_LIB"); p != "" {
		return p
	}
	libOnce.Do(func() {
		d, err := os.MkdirTemp("", "cplineage-lib")
		if err != nil {
			libOnce.err = err
			return
		}
		libOnce.dir, libOnce.path = d, filepath.Join(d, "libcloudprofiler.so")
		out, err := exec.Command("go", "build", "-buildmode=c-shared", "-o", libOnce.path, "cloudprofiler/libcp").CombinedOutput()
		if err != nil {
			libOnce.err = fmt.Errorf("building the library: %v\n%s", err, out)
		}
	})
	require.NoError(t, libOnce.err)
	return libOnce.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if libOnce.dir != "" {
		os.RemoveAll(libOnce.dir)
	}
	os.Exit(code)
}

// windowOp is a tiny window operator in C, logging with the real library:
// ids 0..n-1 through "src out" and "win in"; every 4 inputs make output
// 1_000_000 + k, its inputs logged in arrival order on "win lineage", then
// some work (spun on the TSC), "win out" and "sink in" with the output id.
const windowOp = `
#include <stdio.h>
#include <stdlib.h>
#include <x86intrin.h>
#include "cloudprofiler.h"

static void spin(unsigned long long cycles) {
  unsigned long long t0 = __rdtsc();
  while (__rdtsc() - t0 < cycles) {}
}

int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  int64_t src = OpenChannel("src out", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  int64_t in = OpenChannel("win in", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  int64_t lin = OpenChannel("win lineage", CP_ZSTD_TSC, CP_LINEAGE);
  int64_t out = OpenChannel("win out", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  int64_t sink = OpenChannel("sink in", CP_BINARY_TSC, CP_BUFFER_IDENTITY);
  if (src < 0 || in < 0 || lin < 0 || out < 0 || sink < 0) { fprintf(stderr, "open failed\n"); return 1; }
  if (LogTS(lin, 1) != CP_ERR_BAD_HANDLER || CP_LogLineage(in, 1, 2) != CP_ERR_BAD_HANDLER) {
    fprintf(stderr, "LogTS on LINEAGE or CP_LogLineage on another handler accepted\n");
    return 1;
  }
  for (int64_t i = 0; i < n; i++) {
    int rc = LogTS(src, i);
    spin(2000);
    rc |= LogTS(in, i);
    if (i % 4 == 3) {
      int64_t o = 1000000 + i / 4;
      for (int64_t j = i - 3; j <= i; j++) rc |= CP_LogLineage(lin, o, j);
      spin(20000);
      rc |= LogTS(out, o);
      spin(3000);
      rc |= LogTS(sink, o);
    }
    if (rc) { fprintf(stderr, "log failed at %lld\n", (long long)i); return 1; }
  }
  return CloseAllChannels() == 0 ? 0 : 1;
}
`

// runWindowOp compiles windowOp against the library and runs it with n
// inputs, logging into dir.
func runWindowOp(t *testing.T, dir string, n int) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc to build the C program")
	}
	lib := libPath(t)
	work := t.TempDir()
	src := filepath.Join(work, "window.c")
	require.NoError(t, os.WriteFile(src, []byte(windowOp), 0o644))
	capi, err := filepath.Abs("../../capi")
	require.NoError(t, err)
	bin := filepath.Join(work, "window")
	out, err := exec.Command("gcc", "-O2", "-Wall", "-Werror", "-I"+capi, src, "-o", bin, lib,
		"-Wl,-rpath,"+filepath.Dir(lib), "-lpthread").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(bin, strconv.Itoa(n))
	cmd.Env = append(os.Environ(), "CP_LOG_DIR="+dir, "CP_NODE=n1", "CP_CONF_SERVER=", "CP_FAKE_TSC=")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// tscsOf reads a channel file's records: id -> TSC (the last one).
func tscsOf(t *testing.T, dir, glob string) map[int64]uint64 {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, glob))
	require.NoError(t, err)
	require.Len(t, m, 1, glob)
	lf, err := logfile.Open(m[0])
	require.NoError(t, err)
	defer lf.Close()
	got := map[int64]uint64{}
	require.NoError(t, lf.Records(func(r logfile.Record) error { got[r.TupleID] = r.TSC; return nil }))
	return got
}

// The window's outputs are joined to the last input of their window: the
// tuple of input 4k+3 runs src out -> win in -> win out -> sink in, with the
// library's own TSCs at each end; the other inputs end at win in.
func TestLineageJoinsOutputsToTheirLastInput(t *testing.T) {
	const n = 4000
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	runWindowOp(t, logs, n)

	srcOut, winIn := tscsOf(t, logs, "*-src_out.cplog"), tscsOf(t, logs, "*-win_in.cplog")
	winOut, sinkIn := tscsOf(t, logs, "*-win_out.cplog"), tscsOf(t, logs, "*-sink_in.cplog")
	require.Len(t, winOut, n/4)

	out := filepath.Join(dir, "out")
	res, err := Run(Config{Logs: []string{logs}, Out: out, DurationsCSV: true, Workers: 2})
	require.NoError(t, err)
	require.Equal(t, 1, res.LineageChannels)
	require.Equal(t, uint64(n), res.LineagePairs)
	require.Equal(t, uint64(n/4), res.LineageOutputs)
	require.Equal(t, []string{"n1/src out", "n1/win in", "n1/win out", "n1/sink in"}, res.Order,
		"the lineage channel is not a tuple channel")
	require.Equal(t, uint64(2*n+2*n/4), res.Records, "tuple records only: the lineage pairs are not among them")
	require.Equal(t, uint64(n), res.Tuples, "every output joined to an input: no tuple of an output id alone")
	var lin *Channel
	for _, c := range res.Channels {
		if c.Name == "win lineage" {
			lin = c
		}
	}
	require.NotNil(t, lin)
	require.Equal(t, RoleLineage, lin.Role)
	require.Equal(t, "LINEAGE", lin.Handler)

	type hop struct{ from, to string }
	type span struct{ start, end uint64 }
	got := map[int64]map[hop]span{}
	f, err := os.Open(filepath.Join(out, "durations.csv"))
	require.NoError(t, err)
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	require.NoError(t, err)
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for {
		row, err := r.Read()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		if row[col["kind"]] == KindEndToEnd {
			continue
		}
		id, err := strconv.ParseInt(row[col["tuple_id"]], 10, 64)
		require.NoError(t, err)
		require.Less(t, id, int64(n), "an output id was left under its own id")
		s, _ := strconv.ParseUint(row[col["start_tsc"]], 10, 64)
		e, _ := strconv.ParseUint(row[col["end_tsc"]], 10, 64)
		if got[id] == nil {
			got[id] = map[hop]span{}
		}
		got[id][hop{row[col["from_channel"]], row[col["to_channel"]]}] = span{s, e}
	}
	require.Len(t, got, n)
	for i := int64(0); i < n; i++ {
		hops := got[i]
		require.Equal(t, span{srcOut[i], winIn[i]}, hops[hop{"src out", "win in"}], "input %d", i)
		if i%4 != 3 {
			require.Len(t, hops, 1, "input %d is absorbed: its way ends at win in", i)
			continue
		}
		o := 1_000_000 + i/4
		require.Len(t, hops, 3, "input %d: the chain through its window's output %d", i, o)
		w := hops[hop{"win in", "win out"}]
		require.Equal(t, span{winIn[i], winOut[o]}, w, "input %d", i)
		require.GreaterOrEqual(t, w.end-w.start, uint64(20000), "the window's work is inside win in -> win out")
		require.Equal(t, span{winOut[o], sinkIn[o]}, hops[hop{"win out", "sink in"}], "output %d", o)
	}
	var compute *PairStats
	for _, p := range res.Pairs {
		if res.Channels[p.Key.From].Name == "win in" && res.Channels[p.Key.To].Name == "win out" {
			compute = p
		}
	}
	require.NotNil(t, compute)
	require.Equal(t, KindCompute, compute.Key.Kind)
	require.Equal(t, uint64(n/4), compute.Dur.N)

	text, err := os.ReadFile(filepath.Join(out, "summary.txt"))
	require.NoError(t, err)
	require.Contains(t, string(text), fmt.Sprintf("lineage: 1 channels, %d records: %d output ids joined to the last input logged for each", n, n/4))
}

// lineageHeader is a LINEAGE channel's header for writeASCII.
func lineageHeader(name string, ch int) logfile.Header {
	return logfile.Header{Node: "n", Host: "h", PID: 1, Channel: ch, Name: name, Handler: logfile.LineageHandler, TSCHz: 2e9}
}

func pairLines(pairs ...[2]int64) []string {
	var ls []string
	for _, p := range pairs {
		ls = append(ls, fmt.Sprintf("%d,%d", p[0], logfile.LineageTSC(p[1])))
	}
	return ls
}

// Chains resolve to their root; per output the last record read wins (in
// a file, and across files in path order); no lineage channel, no map.
func TestLineageMapResolvesChains(t *testing.T) {
	dir := t.TempDir()
	writeASCII(t, dir, lineageHeader("a lineage", 1), pairLines(
		[2]int64{100, 1}, [2]int64{100, 2}, // 100 <- 2 (the last)
		[2]int64{200, 100}, // 200 <- 100 <- 2
		[2]int64{300, 200}, [2]int64{400, 0}, [2]int64{500, 7}))
	writeASCII(t, dir, lineageHeader("b lineage", 2), pairLines(
		[2]int64{500, 8}, // a later file: 500 <- 8
		[2]int64{600, 300}))
	writeASCII(t, dir, logfile.Header{Node: "n", Host: "h", PID: 1, Channel: 3, Name: "x", Handler: "IDENTITY", TSCHz: 2e9},
		[]string{"1,10"})
	a, err := prepare(Config{Logs: []string{dir}, MemBytes: 64 << 20})
	require.NoError(t, err)
	m, err := a.readLineage()
	require.NoError(t, err)
	require.Equal(t, lineageMap{100: 2, 200: 2, 300: 2, 400: 0, 500: 8, 600: 2}, m)
	require.Equal(t, 2, a.res.LineageChannels)
	require.Equal(t, uint64(8), a.res.LineagePairs)
	require.Equal(t, uint64(6), a.res.LineageOutputs)

	plain := t.TempDir()
	writeASCII(t, plain, logfile.Header{Node: "n", Host: "h", PID: 1, Channel: 3, Name: "x", Handler: "IDENTITY", TSCHz: 2e9},
		[]string{"1,10"})
	a, err = prepare(Config{Logs: []string{plain}})
	require.NoError(t, err)
	m, err = a.readLineage()
	require.NoError(t, err)
	require.Nil(t, m)
	require.Zero(t, a.res.LineageChannels)
}

func TestLineageCycleIsAnError(t *testing.T) {
	for _, pairs := range [][][2]int64{
		{{5, 5}},
		{{1, 2}, {2, 3}, {3, 1}},
		{{10, 11}, {11, 12}, {12, 11}}, // a tail into a cycle
	} {
		dir := t.TempDir()
		writeASCII(t, dir, lineageHeader("w lineage", 1), pairLines(pairs...))
		writeASCII(t, dir, logfile.Header{Node: "n", Host: "h", PID: 1, Channel: 3, Name: "x", Handler: "IDENTITY", TSCHz: 2e9},
			[]string{"1,10"})
		_, err := Run(Config{Logs: []string{dir}, Out: filepath.Join(dir, "out")})
		require.Error(t, err, "%v", pairs)
		require.Contains(t, err.Error(), "lineage: a cycle of output ids")
		require.Contains(t, err.Error(), "an output id must differ from every input id")
	}
}

// A map past an eighth of --mem-mb fails, naming the figure and the
// --mem-mb that would hold it.
func TestLineageMapMemoryIsBounded(t *testing.T) {
	dir := t.TempDir()
	var pairs [][2]int64
	for k := int64(0); k < 3000; k++ {
		pairs = append(pairs, [2]int64{1_000_000 + k, k})
	}
	writeASCII(t, dir, lineageHeader("w lineage", 1), pairLines(pairs...))
	writeASCII(t, dir, logfile.Header{Node: "n", Host: "h", PID: 1, Channel: 3, Name: "x", Handler: "IDENTITY", TSCHz: 2e9},
		[]string{"1,10"})
	mem := int64(1 << 20) // an eighth: 128 KiB, 2730 ids of 48 bytes
	a, err := prepare(Config{Logs: []string{dir}, MemBytes: mem})
	require.NoError(t, err)
	_, err = a.readLineage()
	require.Error(t, err)
	for _, s := range []string{"more than 2730 distinct output ids", "48 bytes each", "more than an eighth of --mem-mb 1", "give --mem-mb 2 or more", "w_lineage"} {
		require.Contains(t, err.Error(), s)
	}
	a, err = prepare(Config{Logs: []string{dir}, MemBytes: 2 << 20})
	require.NoError(t, err)
	m, err := a.readLineage()
	require.NoError(t, err)
	require.Len(t, m, 3000)
	require.True(t, strings.HasPrefix(a.res.Channels[0].Path, dir))
}
