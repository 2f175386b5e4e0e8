package report

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cloudprofiler/tests/internal/testrun"
	"cloudprofiler/tests/internal/udppipe"
)

// The verdict against the same run: pipelines of processes over UDP
// (examples/pipeline/udpstage.c) with another process spinning, each
// analysed and its report opened at 1,400 x 1,000 px. The verdict names
// the bottleneck that capacity.csv names, on the first screen; its
// highest sustainable rate is summary.txt's; a loss line names where
// tuples were lost exactly when the records show a loss, with the
// records' count.
func TestVerdictAgainstTheRun(t *testing.T) {
	e := needEnv(t)
	udpstage := os.Getenv("CP_UDPSTAGE")
	if udpstage == "" {
		t.Skip("CP_UDPSTAGE is not set: run `make test-report`")
	}
	b := startBrowser(t)
	for _, c := range []struct {
		name string
		rate int
		drop string // fold's --drop: a share it loses after its out mark
		// wantLoss: the records must show at least this share of fold's
		// tuples lost before mix (0: whatever they show).
		wantLoss float64
	}{
		{"light", 3000, "0", 0},
		{"lossy", 3000, "0.1", 0.05},
		// Past mix's capacity: a full socket buffer drops datagrams.
		{"overloaded", 60000, "0", 0.01},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			logs := filepath.Join(dir, "logs")
			p := udppipe.Pipeline{Hog: true, Stages: []udppipe.Stage{
				{Kind: "source", Name: "gen", To: []string{"fold"}, Args: []string{"--rate", fmt.Sprint(c.rate), "--duration", "2", "--poisson", "3"}},
				{Kind: "op", Name: "fold", To: []string{"mix"}, Args: []string{"--work-us", "4", "--drop", c.drop}},
				{Kind: "op", Name: "mix", To: []string{"drain"}, Args: []string{"--work-us", "15"}},
				{Kind: "sink", Name: "drain"},
			}}
			_, err := p.Run(udpstage, logs, time.Minute)
			require.NoError(t, err)
			out := filepath.Join(dir, "out")
			r := testrun.Run(2*time.Minute, nil, e.tool, "analyze", "--quiet", "--logs", logs, "--out", out)
			require.NoError(t, r.Err, "%s\n%s", r.Stdout, r.Stderr)
			pg := open(t, b, e, filepath.Join(out, "report.html"), "report-"+c.name+".png")

			// The truth: tuples each stage handed on that the next never
			// took, from the records.
			recs, err := udppipe.Read(e.tool, logs)
			require.NoError(t, err)
			type hop struct{ from, to string }
			hops := []hop{{"gen", "fold"}, {"fold", "mix"}, {"mix", "drain"}}
			lost, sent := map[hop]int{}, map[hop]int{}
			anyLost := false
			for _, h := range hops {
				lost[h], sent[h] = recs.Lost([]string{h.from + " out"}, []string{h.to + " in"}), len(recs.Chan[h.from+" out"])
				anyLost = anyLost || lost[h] > 0
				t.Logf("%s: the records: %d of %d tuples %s handed on never reached %s", c.name, lost[h], sent[h], h.from, h.to)
			}
			fm := hop{"fold", "mix"}
			require.GreaterOrEqual(t, float64(lost[fm]), c.wantLoss*float64(sent[fm]), "the run lost what it was meant to")
			verdict := map[string][]string{}
			for _, v := range pg.Verdict {
				verdict[v.Topic] = append(verdict[v.Topic], v.Text)
				t.Logf("verdict: %s", v.Text)
			}
			// The bottleneck: capacity.csv's.
			bott := capacityBottleneck(t, out)
			require.Len(t, verdict["bottleneck"], 1)
			require.Contains(t, verdict["bottleneck"][0], "Bottleneck: "+bott+" (")
			// The highest sustainable rate: summary.txt's, word for word.
			txt, err := os.ReadFile(filepath.Join(out, "summary.txt"))
			require.NoError(t, err)
			rateLine := regexp.MustCompile(`Highest sustainable source rate: ([0-9,]+) tuples/s`)
			m := rateLine.FindStringSubmatch(string(txt))
			require.NotNil(t, m, "summary.txt states the highest sustainable rate:\n%s", txt)
			require.Len(t, verdict["rate"], 1)
			require.Equal(t, m[0], rateLine.FindString(verdict["rate"][0]), "one number for the rate, on the page and in summary.txt")
			// Loss: a line exactly when the records show one, with their
			// counts.
			if !anyLost {
				require.Empty(t, verdict["lost"], "no loss line when nothing was lost")
				return
			}
			require.Len(t, verdict["lost"], 1, "a loss line")
			for _, h := range hops {
				said := fmt.Sprintf("%s of the %s tuples %s handed on never reached %s", thousands(lost[h]), thousands(sent[h]), h.from, h.to)
				if lost[h] == 0 {
					require.NotContains(t, verdict["lost"][0], "tuples "+h.from+" handed on", "no loss the records do not show")
				} else {
					require.Contains(t, verdict["lost"][0], said)
				}
			}
		})
	}
}

// capacityBottleneck is the operator capacity.csv marks the bottleneck.
func capacityBottleneck(t *testing.T, out string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(out, "capacity.csv"))
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	var found []string
	for _, r := range rows[1:] {
		if r[col["level"]] == "operator" && r[col["window"]] == "-1" && r[col["bottleneck"]] == "true" {
			found = append(found, r[col["operator"]])
		}
	}
	require.Len(t, found, 1, "capacity.csv names one bottleneck")
	return found[0]
}

// thousands writes n with its thousands grouped, as the verdict does.
func thousands(n int) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
