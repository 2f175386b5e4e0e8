package analyze

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// --no-report writes no report.html; --trace writes the sample asked for;
// series past their share of the budget are left out, and the report
// says so.
func TestReportTraceAndBudget(t *testing.T) {
	dir, logs := writeUnmarked(t)

	out := filepath.Join(dir, "no-report")
	res, err := Run(Config{Logs: []string{logs}, Out: out, NoReport: true})
	require.NoError(t, err)
	require.Nil(t, res.Trace)
	_, err = os.Stat(filepath.Join(out, "report.html"))
	require.ErrorIs(t, err, os.ErrNotExist)
	for _, f := range res.Files {
		require.NotEqual(t, "report.html", filepath.Base(f))
	}

	out = filepath.Join(dir, "trace")
	tr := filepath.Join(out, "sub", "t.json")
	res, err = Run(Config{Logs: []string{logs}, Out: out, Trace: tr, TraceSample: 40})
	require.NoError(t, err)
	require.NotNil(t, res.Trace)
	require.Equal(t, 40, res.Trace.Tuples)
	require.Equal(t, 4, res.Trace.Slowest)
	require.Contains(t, res.Files, tr)
	raw, err := os.ReadFile(tr)
	require.NoError(t, err)
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.NotEmpty(t, doc.TraceEvents)
	require.Empty(t, res.TraceNote)
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(page), `data-chart="over-time-1"`)

	// A sample past what a quarter of --mem-mb holds is capped, and said.
	out = filepath.Join(dir, "capped")
	res, err = Run(Config{Logs: []string{logs}, Out: out, Trace: filepath.Join(out, "t.json"), TraceSample: 1_000_000, MemBytes: 128 << 10})
	require.NoError(t, err)
	require.Equal(t, 16, TraceSampleCap(128<<10))
	require.Equal(t, 16, res.Trace.Tuples)
	require.Contains(t, res.TraceNote, "--trace-sample 1000000: capped at 16 tuples")
	require.Equal(t, 100_000, TraceSampleCap(1<<40))
	require.NotContains(t, string(page), "have no line over time")

	// 1 MiB: an eighth holds no series.
	out = filepath.Join(dir, "small")
	res, err = Run(Config{Logs: []string{logs}, Out: out, MemBytes: 1 << 20})
	require.NoError(t, err)
	page, err = os.ReadFile(filepath.Join(out, "report.html"))
	require.NoError(t, err)
	require.Contains(t, string(page), "have no line over time: their aggregates would pass an eighth of --mem-mb")
	require.False(t, strings.Contains(string(page), `data-chart="over-time-1"`))
	require.NotEmpty(t, res.Pairs)
}
