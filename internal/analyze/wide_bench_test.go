package analyze

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/logfile"
)

// BenchmarkAnalyzeWide runs the whole analysis (join, order, capacity,
// critical path, Mace, report) on 10,000 channels: 5 operators of 1,000
// instances, each instance marked in and out, and 20,000 tuples that take
// one instance of each operator, with the command's default memory budget
// (256 MiB: Mace, which would need more, says so and is skipped). It
// prints how long one analysis took; the goal is under a minute (issue 26:
// the channel order once grew with the cube of the channel count, and
// 5,000 operator instances took 30-42 s and 12 GiB).
//
//	go test -run '^$' -bench AnalyzeWide -benchtime 1x ./internal/analyze
func BenchmarkAnalyzeWide(b *testing.B) {
	const stages, instances, tuples = 5, 1000, 20000
	const hz = 2e9
	dir := b.TempDir()
	logs := filepath.Join(dir, "logs")
	require.NoError(b, os.MkdirAll(logs, 0o755))
	r := rand.New(rand.NewSource(1))
	lines := make([][2][]string, stages*instances) // per instance: in, out
	for i := 0; i < tuples; i++ {
		t := 1 + float64(i)*50e-6
		for s := 0; s < stages; s++ {
			k := s*instances + r.Intn(instances)
			t += 5e-6 + r.Float64()*20e-6
			lines[k][0] = append(lines[k][0], fmt.Sprintf("%d,%d", i, uint64(t*hz)))
			t += 2e-6 + r.Float64()*8e-6
			lines[k][1] = append(lines[k][1], fmt.Sprintf("%d,%d", i, uint64(t*hz)))
		}
	}
	for k, ls := range lines {
		for role, recs := range ls {
			name := fmt.Sprintf("op%d#%d %s", k/instances, k%instances, [2]string{"in", "out"}[role])
			writeASCII(b, logs, logfile.Header{Node: "n", Host: "h", PID: 1 + k, Channel: 1 + role, Name: name,
				Handler: "BUFFER_IDENTITY", TSCHz: hz}, recs)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		// As the command does with its default --mem-mb 256.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(256 << 20))
		res, err := Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "out")})
		require.NoError(b, err)
		b.ReportMetric(time.Since(start).Seconds(), "s/analysis")
		b.Logf("%d channels, %d records: analyze took %.1f s; %s", len(res.Channels), res.Records, time.Since(start).Seconds(), res.MaceNote)
	}
}
