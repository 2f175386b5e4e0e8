package analyze

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cloudprofiler/internal/capacity"

	"github.com/stretchr/testify/require"
)

// The columnar core takes every tuple of the common shape, and the
// per-tuple path only the others: of writeTopologyNoReturn's tuples, those
// delivered twice at the sink (a channel twice: every 97th) and the reused
// id (thousands of records, left out before either path).
func TestColumnsTakeTheCommonShape(t *testing.T) {
	dir := t.TempDir()
	const n = 30000
	logs := writeTopologyNoReturn(t, dir, n, 7)
	a, ps := reviewPlan(t, Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{logs}, Ref: "b", Out: filepath.Join(dir, "out"), MemBytes: 64 << 20, Workers: 1})
	w := a.newWorker(nil, nil)
	perTuple := 0
	for k := 0; k < ps.n; k++ {
		require.NoError(t, ps.read(k, &w.part))
		require.NoError(t, w.join(&w.part, true, func(evs []event) error {
			require.Len(t, evs, 5, "a tuple on the per-tuple path is one delivered twice")
			perTuple++
			return nil
		}))
	}
	twice := (n + 96) / 97
	require.Equal(t, twice, perTuple)
	require.Equal(t, uint64(n-twice), w.columnTuples, "every other tuple in columns")
}

// The columnar core gives what the per-tuple path gives, field for field,
// on any mix of tuples: fuzzed records (ids, channels, counters about a
// reading of each channel's) over writeTopologyNoReturn's channels, with a
// fuzzed channel order (ties included), joined once with the columns and
// once without. Compared: every pair's statistics and series, the votes,
// the counts, the earliest estimate, the report's record counts and what
// the operator analyses would be handed (the opBatch, unflushed).
func FuzzColumns(f *testing.F) {
	dir := f.TempDir()
	logs := writeTopologyNoReturn(f, dir, 300, 13)
	a, ps := reviewPlan(f, Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{logs}, Ref: "b", Out: filepath.Join(dir, "out"), MemBytes: 64 << 20, Workers: 1})
	a.planTimeline()
	nch := len(a.chans)
	base := make([]uint64, nch) // a reading of each channel's, from its records
	var d partData
	for k := 0; k < ps.n; k++ {
		require.NoError(f, ps.read(k, &d))
		for i, ch := range d.ch {
			if base[ch] == 0 {
				base[ch] = d.tsc[i]
			}
		}
	}
	for ch, b := range base {
		require.NotZero(f, b, "channel %d has records", ch)
	}
	f.Add([]byte{0xe4, 1, 0, 0, 1, 1, 10, 1, 2, 20, 1, 3, 30, 2, 0, 0, 2, 1, 10, 2, 2, 20, 2, 3, 30})
	f.Add([]byte{0x1b, 1, 3, 0, 1, 2, 0, 1, 1, 0, 1, 0, 0, 2, 0, 9, 2, 0, 9, 3, 1, 4})
	f.Add([]byte{0x00, 5, 0, 1, 5, 1, 200, 6, 1, 2, 6, 0, 250})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 || len(data) > 1+3*400 {
			t.Skip()
		}
		rank := make([]int, nch)
		for ch := range rank {
			rank[ch] = int(data[0]>>(2*(ch%4))) & 3
		}
		var in partData
		for r := data[1:]; len(r) >= 3; r = r[3:] {
			ch := uint32(r[1]) % uint32(nch)
			in.id = append(in.id, int64(r[0]%24)-8)
			in.ch = append(in.ch, ch)
			in.tsc = append(in.tsc, base[ch]+uint64(r[2])*40000)
		}
		got := [2]string{}
		for k, columns := range []bool{true, false} {
			// Each join as the first of a run: its own series budget and
			// counts of exact values (the analysis's, shared by workers).
			a.resetSeriesBudget()
			a.kept = nil
			w := a.newWorker(rank, nil)
			w.cap = new(capacity.Acc) // not nil: the tuples go to the opBatch (24 ids: never flushed)
			d := partData{id: slices.Clone(in.id), tsc: slices.Clone(in.tsc), ch: slices.Clone(in.ch)}
			require.NoError(t, w.join(&d, columns, w.perTuple))
			got[k] = describeWorker(w)
		}
		require.Equal(t, got[1], got[0], "columns (left: per tuple)")
	})
}

// describeWorker prints what a worker accumulated, pointers followed.
func describeWorker(w *worker) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tuples %d durations %d skipped %d/%d t0 %v\n", w.tuples, w.durations, w.skippedTuples, w.skippedRecords, w.t0)
	for _, k := range slices.SortedFunc(maps.Keys(w.pairs), func(x, y PairKey) int {
		return cmp.Or(strings.Compare(x.Kind, y.Kind), x.From-y.From, x.To-y.To)
	}) {
		p := w.pairs[k]
		fmt.Fprintf(&b, "%v: dur %+v err %+v paper %+v base %+v scen %v", k, *p.Dur, *p.Err, *p.Paper, *p.Baseline, p.Scenarios)
		if p.RetErr != nil {
			fmt.Fprintf(&b, " ret %+v ours %+v", *p.RetErr, *p.OursErr)
		}
		if p.series != nil {
			fmt.Fprintf(&b, " series %+v", *p.series)
		}
		b.WriteString("\n")
	}
	for _, k := range slices.SortedFunc(maps.Keys(w.votes), func(x, y [2]uint32) int {
		return cmp.Or(int(x[0])-int(y[0]), int(x[1])-int(y[1]))
	}) {
		fmt.Fprintf(&b, "votes %v: %+v\n", k, *w.votes[k])
	}
	if w.tlRecs != nil {
		fmt.Fprintf(&b, "records over time %+v\n", *w.tlRecs)
	}
	fmt.Fprintf(&b, "ops %+v %+v\n", w.ops.evs, w.ops.tuples)
	return b.String()
}
