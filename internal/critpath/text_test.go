package critpath

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// textResult is a small result: two slices of 1 s (the first inconsistent),
// and the p99 and median groups with a cross-node transfer (bound > 0).
func textResult() *Result {
	sl := func(i int64, kind, name string, share, part float64, ok bool, note string) PathRow {
		return PathRow{Level: "slice", Slice: i, StartS: float64(i), EndS: float64(i + 1), Kind: kind, Name: name,
			Share: share, Participation: part, Consistent: ok, Note: note}
	}
	run := func(kind, name string, share, part float64) PathRow {
		return PathRow{Level: "run", Slice: -1, EndS: 2, Kind: kind, Name: name, Share: share, Participation: part,
			Note: "1 of 2 slices inconsistent"}
	}
	bd := func(g string, n int64, e2e, e2eB float64, part, where string, mean, share, bound float64, cyc int64) BreakdownRow {
		return BreakdownRow{Group: g, Tuples: n, E2EMeanUS: e2e, E2EBoundUS: e2eB, Part: part, Where: where,
			MeanUS: mean, Share: share, BoundUS: bound, TotalCycles: cyc}
	}
	return &Result{
		Path: []PathRow{
			sl(0, "operator", "B", 0.5, 0.45, false, "2 wait(s) whose hand-off could not be followed (property 3.9): unattributed"),
			sl(0, "input", "", 0.3, 0.35, false, "2 wait(s) whose hand-off could not be followed (property 3.9): unattributed"),
			sl(0, "unattributed", "", 0.2, 0.2, false, "2 wait(s) whose hand-off could not be followed (property 3.9): unattributed"),
			sl(1, "operator", "B", 0.9, 0.9, true, ""),
			sl(1, "link", "A -> B", 0.1, 0.1, true, ""),
			run("operator", "B", 0.7, 0.675),
			run("input", "", 0.15, 0.175),
			run("unattributed", "", 0.1, 0.1),
			run("link", "A -> B", 0.05, 0.05),
			run("operator", "A", 0.00001, 0),
		},
		Breakdown: []BreakdownRow{
			bd("p99", 2, 900, 4, "end-to-end", "", 900, 1, 4, 1800),
			bd("p99", 2, 900, 4, "compute", "B", 100, 1.0/9, 0, 200),
			bd("p99", 2, 900, 4, "queue", "B", 700, 7.0/9, 0, 1400),
			bd("p99", 2, 900, 4, "transfer", "A -> B", 100, 1.0/9, 4, 200),
			bd("median", 4, 200, 4, "end-to-end", "", 200, 1, 4, 800),
			bd("median", 4, 200, 4, "compute", "B", 100, 0.5, 0, 400),
			bd("median", 4, 200, 4, "transfer", "A -> B", 90, 0.45, 4, 360),
			bd("median", 4, 200, 4, "queue", "B", 10, 0.05, 0, 40),
			bd("all", 200, 210, 4, "end-to-end", "", 210, 1, 4, 42000),
		},
		Tuples: 210, Journeys: 200, Absorbed: 10, Visits: 400, Walked: 400, Slices: 2, Inconsistent: 1, SpilledBytes: 3 << 20, AddUp: true,
	}
}

func TestWriteText(t *testing.T) {
	res := textResult()
	var b bytes.Buffer
	require.NoError(t, res.WriteText(&b))
	txt := b.String()
	t.Logf("\n%s", txt)
	lines := strings.Split(txt, "\n")
	require.True(t, strings.HasPrefix(lines[0], "Where the latency goes"))
	require.Contains(t, txt, "2 slices of 1 s from t0; 1 inconsistent, the first: 2 wait(s) whose hand-off could not be followed")

	// The run's shares, largest first, with participation beside; the
	// breakdown's p99 then median, parts largest first, bounds where > 0.
	line := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(strings.Join(strings.Fields(l), " "), prefix) {
				return i
			}
		}
		t.Fatalf("no line starting %q", prefix)
		return -1
	}
	fields := func(prefix string) []string { return strings.Fields(lines[line(prefix)]) }
	require.Equal(t, []string{"operator", "B", "70.0%", "67.5%"}, fields("operator B"))
	require.Equal(t, []string{"input", "15.0%", "17.5%"}, fields("input"))
	require.Equal(t, []string{"link", "A", "->", "B", "5.0%", "5.0%"}, fields("link A -> B"))
	require.Equal(t, []string{"operator", "A", "<0.1%", "0.0%"}, fields("operator A"))
	order := func(prefixes ...string) {
		t.Helper()
		for i := 1; i < len(prefixes); i++ {
			require.Less(t, line(prefixes[i-1]), line(prefixes[i]), "%q before %q", prefixes[i-1], prefixes[i])
		}
	}
	order("kind name share participation", "operator B", "input", "unattributed", "link A -> B", "operator A",
		"group journeys part where mean us share ± us", "p99 2 end-to-end 900.000 100.0% 4.000",
		"queue B 700.000 77.8%", "compute B 100.000 11.1%", "transfer A -> B 100.000 11.1% 4.000",
		"median 4 end-to-end 200.000 100.0% 4.000",
		"compute B 100.000 50.0%", "transfer A -> B 90.000 45.0% 4.000", "queue B 10.000 5.0%", "parts add up exactly")
	require.Equal(t, []string{"queue", "B", "700.000", "77.8%"}, fields("queue B 700"))
	require.NotContains(t, txt, "all ", "the group of all journeys is breakdown.csv's only")
	for _, l := range lines {
		require.Equal(t, strings.TrimRight(l, " "), l, "no trailing blanks")
	}

	require.Contains(t, txt, "parts add up exactly")
	require.Contains(t, txt, "tuples 210, journeys 200 (cut short 0), absorbed by lineage 10, visits 400 (walked in pass 2: 400), spilled 3.0 MiB (3145728 bytes)\n")
	require.NotContains(t, txt, "looked up in pass 1")
	res.Walked = 12
	b.Reset()
	require.NoError(t, res.WriteText(&b))
	txt = b.String()
	require.Contains(t, txt, "visits 400 (walked in pass 2: 12)")
	require.Contains(t, txt, "each in's previous departure was looked up in pass 1")

	// Not adding up, a note, no bounds, nothing negative: said so.
	res.AddUp = false
	res.Note = "critical path: something"
	res.Negative = 3
	for i := range res.Breakdown {
		res.Breakdown[i].BoundUS, res.Breakdown[i].E2EBoundUS = 0, 0
	}
	b.Reset()
	require.NoError(t, res.WriteText(&b))
	txt = b.String()
	require.Contains(t, txt, "parts DO NOT add up")
	require.Contains(t, txt, "\n  critical path: something\n")
	require.Contains(t, txt, "3 hop(s) whose later record has the smaller estimate")
	require.NotContains(t, txt, "± us")
	require.Contains(t, txt, "every strict bound is 0")
	for _, l := range strings.Split(txt, "\n") {
		require.Equal(t, strings.TrimRight(l, " "), l, "no trailing blanks")
	}
}

// A result without slices or journeys (nothing to walk) still writes its
// section, with the note saying why.
func TestWriteTextEmpty(t *testing.T) {
	res := &Result{AddUp: true, Tuples: 5, Note: "critical path: no operator's activity spans any time (no marked in with an out after it)"}
	var b bytes.Buffer
	require.NoError(t, res.WriteText(&b))
	txt := b.String()
	require.Contains(t, txt, "no operator's activity spans any time")
	require.Contains(t, txt, "critical path: none (no slice)")
	require.Contains(t, txt, "latency breakdown: no journeys")
	require.Contains(t, txt, "tuples 5, journeys 0")
}
