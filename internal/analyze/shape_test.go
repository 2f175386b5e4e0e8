package analyze

import (
	"path/filepath"
	"testing"

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
