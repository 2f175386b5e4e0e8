package analyze

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The section "Where the latency goes" of summary.txt and report.html, for
// the marked pipeline of capTopology (three nodes: the bounds of cross-node
// transfers are not 0).
func TestCritPathSummaryAndReport(t *testing.T) {
	ct := writeCapTopology(t, 3000)
	cfg := ct.config("out")
	res, err := Run(cfg)
	require.NoError(t, err)
	require.NotNil(t, res.CritPath)
	cp := res.CritPath

	b, err := os.ReadFile(filepath.Join(cfg.Out, "summary.txt"))
	require.NoError(t, err)
	txt := string(b)
	t.Logf("\n%s", txt)
	at := strings.Index(txt, "Where the latency goes")
	require.GreaterOrEqual(t, at, 0)
	require.Greater(t, at, strings.Index(txt, "bottleneck: parse"), "after the capacity section")
	sec := txt[at:]
	require.Contains(t, sec, fmt.Sprintf("critical path of the run (%d slice", cp.Slices))
	// Every run-level category, largest share first.
	rows := cp.RunRows()
	require.NotEmpty(t, rows)
	last := 0
	for _, r := range rows {
		re := regexp.MustCompile(`\n *` + regexp.QuoteMeta(r.Kind) + ` +` + regexp.QuoteMeta(r.Name) + ` +[<0-9.]+% +[<0-9.]+%\n`)
		loc := re.FindStringIndex(sec[last:])
		require.NotNil(t, loc, "%s %s in order", r.Kind, r.Name)
		last += loc[0] + 1
	}
	for i := 1; i < len(rows); i++ {
		require.GreaterOrEqual(t, rows[i-1].Share, rows[i].Share)
	}
	// The breakdown: p99 then median, with the cross-node bounds.
	require.Regexp(t, `\n +p99 +\d+ +end-to-end +[0-9.]+ +100\.0% +[0-9.]+\n`, sec)
	require.Regexp(t, `\n +median +\d+ +end-to-end +[0-9.]+ +100\.0% +[0-9.]+\n`, sec)
	require.Less(t, strings.Index(sec, " p99 "), strings.Index(sec, " median "))
	require.Contains(t, sec, "± us")
	require.Regexp(t, `\n +compute +parse +[0-9.]+ +[0-9.]+%\n`, sec, "compute within a process: no bound")
	require.True(t, cp.AddUp)
	require.Contains(t, sec, "parts add up exactly")
	require.Contains(t, sec, fmt.Sprintf("tuples %d, journeys %d (cut short 0), absorbed by lineage 0, visits %d (walked in pass 2: %d), spilled 0 bytes", cp.Tuples, cp.Journeys, cp.Visits, cp.Walked))
	require.EqualValues(t, 3000, cp.Tuples)

	b, err = os.ReadFile(filepath.Join(cfg.Out, "report.html"))
	require.NoError(t, err)
	page := string(b)
	at = strings.Index(page, `<section id="critical-path"><h2>Where the latency goes</h2>`)
	require.GreaterOrEqual(t, at, 0)
	require.Greater(t, at, strings.Index(page, `<section id="capacity">`))
	sec = page[at:strings.Index(page, `<section id="mace">`)]
	require.Contains(t, sec, "<svg")
	require.Contains(t, sec, "share of each slice's critical path")
	require.Contains(t, sec, "<th>p99 (")
	require.Contains(t, sec, "<th>median (")
	require.Contains(t, sec, `<td class="l">compute</td><td class="l">parse</td>`)
	require.Contains(t, sec, " ± ", "the bound of a cross-node transfer")
	require.NotRegexp(t, `(src|href)=|<script|@import|url\(`, sec, "self-contained")
	for _, r := range rows {
		require.Contains(t, sec, fmt.Sprintf(`<td class="l">%s</td><td class="l">%s</td>`, r.Kind, strings.ReplaceAll(r.Name, ">", "&gt;")))
	}
	require.Less(t, len(sec), 40000, "aggregates only")
}

// No operator marks: the note instead of the section, in summary.txt and
// report.html; --no-critical-path says so.
func TestCritPathNoteWithoutMarks(t *testing.T) {
	dir, logs := writeUnmarked(t)
	check := func(res *Result, outDir, want string) {
		t.Helper()
		require.Nil(t, res.CritPath)
		require.Contains(t, res.CritPathNote, want)
		b, err := os.ReadFile(filepath.Join(outDir, "summary.txt"))
		require.NoError(t, err)
		require.Contains(t, string(b), res.CritPathNote+"\n")
		require.NotContains(t, string(b), "Where the latency goes")
		b, err = os.ReadFile(filepath.Join(outDir, "report.html"))
		require.NoError(t, err)
		require.Contains(t, string(b), `<section id="critical-path"><h2>Where the latency goes</h2><p class="note">critical path: `)
		require.NotContains(t, string(b), "share of each slice's critical path")
	}
	outDir := filepath.Join(dir, "out")
	res, err := Run(Config{Logs: []string{logs}, Out: outDir})
	require.NoError(t, err)
	check(res, outDir, "critical path: ")

	outDir = filepath.Join(dir, "skipped")
	ct := writeCapTopology(t, 200)
	cfg := ct.config("skipped")
	cfg.NoCriticalPath = true
	res, err = Run(cfg)
	require.NoError(t, err)
	check(res, cfg.Out, "--no-critical-path")
}
