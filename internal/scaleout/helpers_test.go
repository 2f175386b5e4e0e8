package scaleout

import (
	"testing"

	"cloudprofiler/internal/simlogs"
)

// reusedRecords is how many times writeTopology logs its reused id: past
// analyze's 4,096 records a tuple, so that the export and its partitions
// leave it out as analyze does.
const reusedRecords = 4097

// writeTopology writes simlogs.WriteTopology's 3-node run with n tuples.
func writeTopology(t testing.TB, dir string, n int, seed int64) {
	t.Helper()
	simlogs.WriteTopology(t, dir, n, seed, reusedRecords)
}
