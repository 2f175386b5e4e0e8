// Package simlogs writes the logs and rounds of synthetic runs for tests:
// nodes whose counters run at known rates from known offsets, so that a
// test knows every record's true time. It is shared by analyze's tests and
// the scale-out path's (internal/scaleout), which compare their results on
// the same runs.
package simlogs

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
)

// Node is a node of the synthetic cluster: its counter reads Off + Hz*t
// for true time t in seconds, floored to an integer as a real TSC read is.
type Node struct {
	Name string
	Hz   float64
	Off  float64
}

// At is n's counter reading at true time t.
func (n Node) At(t float64) uint64 { return uint64(math.Floor(n.Off + n.Hz*t)) }

// WriteASCII writes a channel file in the ASCII_TSC format, as the library
// does for IDENTITY channels: the magic, the header, one line per record,
// and a trailer with the positions accepted, as the library closes a
// channel (a test of damage adds lines after it, or cuts it off).
func WriteASCII(t testing.TB, dir string, h logfile.Header, lines []string) {
	t.Helper()
	h.Version, h.ByteOrder, h.Format, h.FormatID = logfile.Version, "little", "ASCII_TSC", int32(logfile.ASCIITSC)
	h.RecordSize, h.Columns = 16, []string{"tuple_id", "tsc"}
	if h.Handler == "PERIODICCOUNTER" {
		h.Columns, h.CounterPeriod = []string{"period_end_tsc", "count", "skipped_periods"}, 1e9
	}
	js, err := json.Marshal(h)
	require.NoError(t, err)
	trailer := fmt.Sprintf(`#trailer {"reason":"close","positions":%d}`, len(lines))
	body := logfile.ASCIIMagic + "\n#header " + string(js) + "\n" + strings.Join(append(lines, trailer), "\n") + "\n"
	name := fmt.Sprintf("%s-%d-%s.cplog.txt", h.Node, h.Channel, strings.ReplaceAll(h.Name, " ", "_"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
}

// Round measures every pair of nodes both ways from true time t0, with
// one-way delays of 5-40 us (asymmetric), and a 1 % chance of a 300 us
// spike.
func Round(r *rand.Rand, id int, label string, t0 float64, nodes []Node) *minrtt.Round {
	rd := &minrtt.Round{Round: id, Label: label, PerDir: 50}
	for _, n := range nodes {
		rd.Nodes = append(rd.Nodes, minrtt.Node{Name: n.Name, TSCHz: n.Hz, TSCHzSource: "sim"})
	}
	delay := func() float64 {
		d := 5e-6 + r.Float64()*35e-6
		if r.Float64() < 0.01 {
			d += 300e-6
		}
		return d
	}
	t := t0
	for _, o := range nodes {
		for _, p := range nodes {
			if o.Name == p.Name {
				continue
			}
			d := minrtt.Direction{Origin: o.Name, Responder: p.Name, Sent: 50}
			for k := 0; k < 50; k++ {
				send := t
				resp := send + delay()
				recv := resp + delay()
				d.Probes = append(d.Probes, minrtt.Probe{Send: o.At(send), Resp: p.At(resp), Recv: o.At(recv)})
				t = recv + 100e-6
			}
			rd.Dirs = append(rd.Dirs, d)
		}
	}
	return rd
}

// TopologyNodes are WriteTopology's nodes.
var TopologyNodes = []Node{{"a", 2.4e9, 1e9}, {"b", 2.4e9 * 0.9996, 7e10}, {"c", 2.4e9 * 1.00037, 3e9}}

// WriteTopology writes rounds and logs of a 3-node pipeline with n tuples:
// source (FOX_START, with its return log) on a, relay in and out on b, sink
// on c; ids are negative and positive, logged out of order at the relay,
// some ids twice at the sink, and one id logged reused times on a channel
// of its own (past analyze's limit of records a tuple, to be left out).
func WriteTopology(t testing.TB, dir string, n int, seed int64, reused int) {
	t.Helper()
	nodes := TopologyNodes
	a, b, c := nodes[0], nodes[1], nodes[2]
	r := rand.New(rand.NewSource(seed))
	for i, rd := range []*minrtt.Round{Round(r, 1, "before", 0, nodes), Round(r, 2, "after", 60, nodes)} {
		_, err := minrtt.WriteRound(filepath.Join(dir, "rounds"), rd)
		require.NoError(t, err, "round %d", i)
	}
	type line struct {
		t float64
		s string
	}
	var src, rets, bin, bout, sink []line
	for i := 0; i < n; i++ {
		id := int64(i*7919%n) - int64(n/3)
		t0 := 1 + float64(i)*40e-6
		t1 := t0 + 30e-6 + r.Float64()*50e-6
		t2 := t1 + 2e-6 + r.ExpFloat64()*20e-6 // a queue: the relay reorders
		t3 := t2 + 30e-6 + r.Float64()*500e-6
		src = append(src, line{t0, fmt.Sprintf("%d,%d", id, a.At(t0))})
		rets = append(rets, line{t3 + 100e-6, fmt.Sprintf("%d,%d", id, a.At(t3+100e-6))})
		bin = append(bin, line{t1, fmt.Sprintf("%d,%d", id, b.At(t1))})
		bout = append(bout, line{t2, fmt.Sprintf("%d,%d", id, b.At(t2))})
		sink = append(sink, line{t3, fmt.Sprintf("%d,%d", id, c.At(t3))})
		if i%97 == 0 { // delivered twice
			sink = append(sink, line{t3 + 1e-3, fmt.Sprintf("%d,%d", id, c.At(t3+1e-3))})
		}
	}
	text := func(ls []line) []string {
		sort.SliceStable(ls, func(i, j int) bool { return ls[i].t < ls[j].t })
		out := make([]string, len(ls))
		for i, l := range ls {
			out[i] = l.s
		}
		return out
	}
	logs := filepath.Join(dir, "logs")
	require.NoError(t, os.MkdirAll(logs, 0o755))
	hdr := func(node Node, pid, ch int, name, handler string) logfile.Header {
		return logfile.Header{Node: node.Name, Host: "h", PID: pid, Channel: ch, Name: name, Handler: handler, TSCHz: node.Hz}
	}
	WriteASCII(t, logs, hdr(a, 10, 1, "source out", "FOX_START"), text(src))
	ret := hdr(a, 10, 1, "source out", "FOX_START")
	ret.Fox = &logfile.Fox{Role: "return"}
	ret.Channel = 99
	WriteASCII(t, logs, ret, text(rets))
	WriteASCII(t, logs, hdr(b, 20, 1, "relay in", "IDENTITY"), text(bin))
	WriteASCII(t, logs, hdr(b, 20, 2, "relay out", "IDENTITY"), text(bout))
	WriteASCII(t, logs, hdr(c, 30, 1, "sink in", "IDENTITY"), text(sink))
	var same []string
	for i := 0; i < reused; i++ {
		same = append(same, fmt.Sprintf("99999999,%d", b.At(1+float64(i)*1e-4)))
	}
	WriteASCII(t, logs, hdr(b, 20, 3, "constant", "IDENTITY"), same)
}
