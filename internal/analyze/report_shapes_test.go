package analyze

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
)

// Topologies wider than the report's boxes were made for (an 11-stage
// pipeline of marked operators, 16 of them, 12 plain channels, and names of
// one character or of two hundred) make a report, not a panic: a box
// narrower than a character once sliced its label out of range.
func TestReportOfWideTopologies(t *testing.T) {
	long := strings.Repeat("operator-with-a-very-long-name-", 7)
	for _, c := range []struct {
		name   string
		stages int
		marked bool
		prefix string
	}{
		{"11 marked", 11, true, "s"},
		{"16 marked", 16, true, "op"},
		{"12 plain", 12, false, "ch"},
		{"30 marked", 30, true, "x"},
		{"long names", 11, true, long},
		{"one-letter names", 11, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			nodes := []simNode{{"a", 2.4e9, 1e9}, {"b", 2.4e9 * 1.0002, 5e9}}
			r := rand.New(rand.NewSource(3))
			for i, rd := range []*minrtt.Round{simRound(r, 1, "before", 0, nodes), simRound(r, 2, "after", 60, nodes)} {
				_, err := minrtt.WriteRound(filepath.Join(dir, "rounds"), rd)
				require.NoError(t, err, "round %d", i)
			}
			logs := filepath.Join(dir, "logs")
			require.NoError(t, os.MkdirAll(logs, 0o755))
			var names []string
			for s := 0; s < c.stages; s++ {
				base := fmt.Sprintf("%s%d", c.prefix, s)
				if c.prefix == "" {
					base = string(rune('a' + s))
				}
				if c.marked {
					names = append(names, base+" in", base+" out")
				} else {
					names = append(names, base)
				}
			}
			lines := make([][]string, len(names))
			for i := 0; i < 300; i++ {
				tt := 1 + float64(i)*100e-6
				for k := range names {
					tt += 5e-6 + r.Float64()*5e-6
					lines[k] = append(lines[k], fmt.Sprintf("%d,%d", i, nodes[k%2].at(tt)))
				}
			}
			for k, n := range names {
				node := nodes[k%2]
				writeASCII(t, logs, logfile.Header{Node: node.name, Host: "h", PID: 10 + k%2, Channel: k + 1, Name: n,
					Handler: "IDENTITY", TSCHz: node.hz}, lines[k])
			}
			out := filepath.Join(dir, "out")
			_, err := Run(Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{logs}, Out: out, Ref: "a", Workers: 1})
			require.NoError(t, err)
			page, err := os.ReadFile(filepath.Join(out, "report.html"))
			require.NoError(t, err)
			require.Contains(t, string(page), "</html>")
			require.Contains(t, string(page), `<section id="topology"`)
		})
	}
}

// A FIFO under a log's name in the logs' directory: analyze does not wait
// for a writer that never comes (it hung), it skips the FIFO and says so;
// named itself, it is refused.
func TestFIFOInLogsDirectory(t *testing.T) {
	dir := t.TempDir()
	writeTopology(t, dir, 2000, 4)
	fifo := filepath.Join(dir, "logs", "stuck.cplog")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	done := make(chan struct{})
	var res *Result
	var err error
	go func() {
		defer close(done)
		res, err = Run(Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{filepath.Join(dir, "logs")},
			Out: filepath.Join(dir, "out"), Ref: "a", Workers: 1, NoReport: true})
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("analyze hangs on a FIFO in the logs' directory")
	}
	require.NoError(t, err)
	require.Len(t, res.SkippedFiles, 1)
	require.Contains(t, res.SkippedFiles[0], "stuck.cplog: skipped: not a regular file (a FIFO)")
	var b strings.Builder
	require.NoError(t, res.WriteText(&b))
	require.Contains(t, b.String(), "not read: "+fifo)

	_, err = Run(Config{Rounds: filepath.Join(dir, "rounds"), Logs: []string{fifo}, Out: filepath.Join(dir, "out2"), Ref: "a"})
	require.ErrorIs(t, err, logfile.ErrNotRegular)
}
