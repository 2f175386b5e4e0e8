package analyze

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloudprofiler/internal/fuzzin"
	"cloudprofiler/internal/logfile"
	"cloudprofiler/minrtt"
)

// FuzzReport: the report (report.html, and summary.txt and the trace beside
// it) of odd topologies, through the same Run that `analyze` calls: the
// renderer is a method of the analysis (its model, timeline and channel
// plan), so each input is a small set of logs (a few dozen tuples) and, with
// several nodes, the rounds. The input chooses the nodes (1 to 4), the stages
// (1 to 20; marked "OP in"/"OP out" they make up to 40 channels), instances,
// a periodic counter, a SERVICERATE count channel and a FIRSTLAST channel;
// the names of nodes and stages (HTML specials, unicode, a thousand runes,
// one rune, empty, bytes as they come, '#' and '/' and the mark words); the
// TSC frequency (0 and 1 Hz included); and per hop its delay (zero,
// negative, huge, a TSC at 2^62 or at the top of its range, or no record).
//
// It asserts: Run does not panic or hang (an error is an answer); the page
// is well formed (every tag known and closed in order, every '&' an entity,
// no raw '<' or '>' in text or attributes: a name that leaked would show);
// every channel label of the summary and every node with a box appears
// escaped; no number in it is NaN or infinite, and no format verb failed;
// summary.txt and the CSV files likewise; the trace is JSON.
func FuzzReport(f *testing.F) {
	for _, s := range reportFuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tp := decodeFuzzTopology(in)
		dir := t.TempDir()
		cfg, err := tp.write(dir)
		if err != nil {
			t.Fatalf("writing the logs: %v", err) // the harness's own failure
		}
		type outcome struct {
			res      *Result
			err      error
			panicked bool
		}
		done := make(chan outcome, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- outcome{err: fmt.Errorf("panic: %v\n%s", r, debug.Stack()), panicked: true}
				}
			}()
			res, err := Run(cfg)
			done <- outcome{res: res, err: err}
		}()
		var o outcome
		select {
		case o = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("analyze hangs on this topology: %s", tp)
		}
		if o.panicked {
			t.Fatalf("analyze panics on this topology: %s\n%v", tp, o.err)
		}
		if o.err != nil {
			t.Logf("refused: %v", o.err)
			return
		}
		checkReportOutputs(t, tp, cfg, o.res)
	})
}

// reportFuzzSeeds: the 11-stage pipeline that made the topology's boxes
// narrower than a character (it panicked), wide, multi-node, odd names,
// odd clocks and odd durations. The byte layout is decodeFuzzTopology's.
var reportFuzzSeeds = [][]byte{
	// The 11-stage pipeline of marked operators on 2 nodes, plain names,
	// 40 tuples, normal delays.
	{1, 10, 0x01, 39, 7, 0, 0},
	// 20 marked stages (40 channels), 1 node, instances, a counter, FIRSTLAST.
	{0, 19, 0x0f, 20, 3, 0, 0},
	// Names with HTML specials and unicode, 3 nodes, a counter.
	{2, 5, 0x05, 10, 9, 0, 0, 1, 3, 5, 6, 7, 1, 2, 2, 2, 1, 0, 1, 5, 0, 1, 2, 3, 4, 5, 2, 5, 0, 1, 2, 3, 4, 5, 1, 2, 6, 13, 1, 1, 1, 11, 2, 1, 6, 0, 1},
	// Very long names and one-rune names, plain channels, 2 nodes.
	{1, 7, 0x00, 8, 1, 0, 0, 3, 250, 4, 3, 200, 4, 3, 3, 4, 4, 3, 0},
	// Empty and mark-word names, raw bytes, control characters, numbers.
	{0, 6, 0x01, 5, 2, 0, 0, 0, 6, 1, 8, 8, 5, 6, '<', 'a', '&', 0xc3, 0x28, '"', 7, 0, 9, 3, 9, 5},
	// A 1 Hz clock; zero, negative, huge and missing delays.
	{0, 3, 0x01, 12, 4, 2, 0, 0, 0, 0, 0, 0, 1, 2, 3, 6, 1, 2},
	// A 0 Hz clock, with and without the analyses that refuse it.
	{0, 2, 0x01, 6, 4, 3, 0},
	{0, 2, 0x01, 6, 4, 3, 7},
	// A 1e-300 Hz clock, and one of 1e18 Hz, without the analyses.
	{0, 2, 0x01, 6, 4, 5, 7},
	{0, 2, 0x05, 6, 4, 4, 7},
	// TSCs at the top of their range and at 2^62.
	{0, 3, 0x01, 6, 8, 0, 0, 0, 0, 0, 0, 0, 4, 4, 0, 0, 5, 5, 4, 4},
	// A counter's counts of 2^64-1 and 2^63, its period 2^63-1 ns.
	{0, 3, 0x05, 6, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 4, 0, 3, 0, 4, 7, 5},
	// One stage, one tuple: no durations.
	{0, 0, 0x00, 0, 0, 0, 0},
	// 4 nodes, one process, each channel on a node of its own, a count channel.
	{3, 5, 0x71, 30, 5, 0, 0},
	// 2 nodes whose rounds say 0 Hz.
	{1, 2, 0x01, 6, 4, 3, 0},
}

// fuzzName makes a name of the kind the input's next byte says. Names never
// hold "NaN", "+Inf", "-Inf" or "%!" (what fmt writes for a number that is
// not finite, or a verb that failed): the checks look for those.
func fuzzName(fb *fuzzin.Bytes, i int) string {
	kind := fb.Next()
	var s string
	switch kind % 10 {
	case 0:
		s = fmt.Sprintf("s%d", i)
	case 1: // HTML specials, some of them tags a leak would make
		frags := []string{"<", ">", "&", `"`, "'", "<q-leak>", "</td>", "<b>", "&amp;", "&#0;", "<!--", "]]>", "<script>x</script>", "&lt", "a"}
		for k := 0; k < 1+int(fb.Next()%6); k++ {
			s += frags[int(fb.Next())%len(frags)]
		}
	case 2: // unicode: accents, CJK, emoji, zero width, right-to-left, combining
		frags := []string{"é", "日本語", "🚀", "\u200b", "\u202e", "e\u0301", "Ω", "\u00a0", "\ufeff", "𝕏", "ß"}
		for k := 0; k < 1+int(fb.Next()%6); k++ {
			s += frags[int(fb.Next())%len(frags)]
		}
	case 3: // very long
		n := 20 * (1 + int(fb.Next()))
		s = strings.Repeat("long-"+strconv.Itoa(i)+"-", n/6+1)[:n]
	case 4: // one rune
		s = string(rune('a' + i%26))
	case 5: // bytes as they come (JSON turns invalid UTF-8 into U+FFFD)
		s = string(fb.Take(int(fb.Next() % 40)))
	case 6: // empty, or blank
		s = []string{"", " ", "  ", "\t"}[fb.Next()%4]
	case 7: // control characters, quotes of CSV
		s = []string{"a\nb", "a,b", "\"q\"", "a\rb", "x\x01y", "\x7f"}[fb.Next()%6]
	case 8: // the mark words, '#' and '/': names that the naming rule reads
		s = []string{"in", "out", "sent", "count", "a#b#c", "#", "/", "a/b", "x in in", "op#", " # in", "lineage"}[fb.Next()%12]
	case 9: // numbers as names
		s = []string{"1e308", "-0", "0x10", "NaN", "+Inf", "%d", "%!s", "%%", "100%"}[fb.Next()%9]
	}
	for _, bad := range []string{"NaN", "+Inf", "-Inf", "%!"} {
		s = strings.ReplaceAll(s, bad, bad[:1]+"_"+bad[1:])
	}
	return s
}

// Hop delays (fuzzTopology.delay).
const (
	delayNormal = iota
	delayZero
	delayNegative
	delayHuge
	delayTop // a TSC at the top of its range
	delayFar // a TSC at 2^62: half way there
	delayMissing
	numDelays
)

type fuzzTopology struct {
	nodes      []simNode
	stages     []string
	marked     bool
	instances  bool
	counter    bool
	count      bool // a SERVICERATE "OP count" channel for the first stage
	firstLast  bool
	hz         float64 // what the headers and rounds say, if oddHz
	oddHz      bool    // the counters tick at 1 kHz, not at hz
	oneProcess bool    // every channel in one process (every hop a compute hop)
	// nodePerChannel: channel k on node k (an operator's in and out on two)
	nodePerChannel bool
	// The analyses skipped (their checks refuse some clocks and spans the
	// rest of the report takes).
	noCapacity, noCritPath, noMace bool
	// openedAtZero: the counter and FIRSTLAST channels' headers say they
	// opened at TSC 0 (long before the tuples), not with the others.
	openedAtZero bool
	tuples       int
	seed         int64
	delays       []int    // per channel, its delay from the one before
	counts       []uint64 // the counter's counts
	period       int64    // the counter's period, ns
}

func (tp *fuzzTopology) String() string {
	return fmt.Sprintf("%d nodes %q at %g Hz, one process %v, node per channel %v, %d stages %q (marked %v, instances %v), counter %v, count %v, firstlast %v, opened at 0 %v, skipped: capacity %v critical path %v Mace %v, %d tuples, delays %v, counts %v, period %d",
		len(tp.nodes), tp.nodeNames(), tp.hz, tp.oneProcess, tp.nodePerChannel, len(tp.stages), tp.stages, tp.marked, tp.instances, tp.counter, tp.count, tp.firstLast,
		tp.openedAtZero, tp.noCapacity, tp.noCritPath, tp.noMace, tp.tuples, tp.delays, tp.counts, tp.period)
}

func (tp *fuzzTopology) nodeNames() []string {
	var n []string
	for _, x := range tp.nodes {
		n = append(n, x.name)
	}
	return n
}

// decodeFuzzTopology reads: nodes-1 (mod 4), stages-1 (mod 20), flags
// (bit 0 marked, 1 instances, 2 counter, 3 FIRSTLAST, 4 one process, 5 a
// node per channel, 6 a SERVICERATE count channel, 7 the counter and
// FIRSTLAST opened at TSC 0), tuples-1 (mod 48), a seed, the frequency
// (mod 8), the analyses skipped (bit 0 capacity, 1 critical path, 2 Mace);
// then each node's name, each stage's name (fuzzName), each channel's
// delay, the counter's period and its counts.
func decodeFuzzTopology(in []byte) *fuzzTopology {
	fb := fuzzin.New(in)
	tp := &fuzzTopology{}
	nn := 1 + int(fb.Next()%4)
	ns := 1 + int(fb.Next()%20)
	flags := fb.Next()
	tp.marked, tp.instances, tp.counter, tp.firstLast = flags&1 != 0, flags&2 != 0, flags&4 != 0, flags&8 != 0
	tp.oneProcess, tp.nodePerChannel = flags&0x10 != 0, flags&0x20 != 0
	tp.count = flags&0x40 != 0
	tp.openedAtZero = flags&0x80 != 0
	tp.tuples = 1 + int(fb.Next()%48)
	tp.seed = int64(fb.Next())
	// The frequency the headers (and the rounds) say; the counters tick at
	// it, or at 1 kHz where it is none (the rounds need counters that tick
	// between probes).
	tp.hz = []float64{2.4e9, 1e9, 1, 0, 1e18, 1e-300, -1, 3.3e3}[fb.Next()%8]
	skip := fb.Next()
	tp.noCapacity, tp.noCritPath, tp.noMace = skip&1 != 0, skip&2 != 0, skip&4 != 0
	tick := tp.hz
	if !(tick >= 1) || nn > 1 && tick < 1e3 {
		tick, tp.oddHz = 1e3, true
	}
	for i := 0; i < nn; i++ {
		name := fuzzName(fb, i)
		tp.nodes = append(tp.nodes, simNode{name, tick * (1 + 1e-4*float64(i)), float64(1e9 * (i + 1))})
	}
	for i := 0; i < ns; i++ {
		tp.stages = append(tp.stages, fuzzName(fb, i))
	}
	for range tp.channels() {
		tp.delays = append(tp.delays, int(fb.Next()%numDelays))
	}
	tp.period = []int64{1e9, 0, 1, math.MaxInt64}[fb.Next()%4]
	for i := 0; i < 4; i++ {
		tp.counts = append(tp.counts, []uint64{0, 1, 1000, 1 << 63, math.MaxUint64, uint64(fb.Next()) << 56}[fb.Next()%6])
	}
	return tp
}

// fuzzChannel is one tuple channel of the topology.
type fuzzChannel struct {
	name         string
	index, stage int
	pid          int
}

// channels are the tuple channels, first to last.
func (tp *fuzzTopology) channels() []fuzzChannel {
	var cs []fuzzChannel
	add := func(name string, s int) {
		pid := 10 + s
		if tp.oneProcess {
			pid = 10
		}
		cs = append(cs, fuzzChannel{name, len(cs), s, pid})
	}
	for s, n := range tp.stages {
		if !tp.marked {
			add(n, s)
			continue
		}
		if tp.instances {
			n += "#" + strconv.Itoa(s%3)
		}
		add(n+" in", s)
		add(n+" out", s)
	}
	return cs
}

// write writes the logs (and the rounds) under dir and returns the
// analysis's configuration.
func (tp *fuzzTopology) write(dir string) (Config, error) {
	r := rand.New(rand.NewSource(tp.seed))
	// 16 MiB: the windows and slices of a run that spans hours are refused
	// fast (each input stays fast), not laid out.
	cfg := Config{Logs: []string{filepath.Join(dir, "logs")}, Out: filepath.Join(dir, "out"), Workers: 1, MemBytes: 16 << 20,
		NoDurations: true, Trace: filepath.Join(dir, "out", "trace.json"),
		NoCapacity: tp.noCapacity, NoCriticalPath: tp.noCritPath, NoMace: tp.noMace}
	if err := os.MkdirAll(cfg.Logs[0], 0o755); err != nil {
		return cfg, err
	}
	if len(tp.nodes) > 1 {
		cfg.Rounds = filepath.Join(dir, "rounds")
		for i, rd := range []*minrtt.Round{simRound(r, 1, "before", 0, tp.nodes), simRound(r, 2, "after", 60, tp.nodes)} {
			for k := range rd.Nodes {
				if tp.oddHz {
					rd.Nodes[k].TSCHz = tp.hz
				}
			}
			if _, err := minrtt.WriteRound(cfg.Rounds, rd); err != nil {
				return cfg, fmt.Errorf("round %d: %w", i, err)
			}
		}
	}
	nodeOf := func(c fuzzChannel) simNode {
		if tp.nodePerChannel {
			return tp.nodes[c.index%len(tp.nodes)]
		}
		return tp.nodes[c.stage%len(tp.nodes)]
	}
	hzOf := func(node simNode) float64 {
		if tp.oddHz {
			return tp.hz
		}
		return node.hz
	}
	chans := tp.channels()
	// Each channel's records in the order they were logged: by TSC (a
	// tuple delayed past later ones is logged after them).
	type rec struct {
		tsc uint64
		id  int
	}
	recs := make([][]rec, len(chans))
	var first, last float64
	for i := 0; i < tp.tuples; i++ {
		at := 1 + float64(i)*200e-6
		if i == 0 {
			first = at
		}
		for k, c := range chans {
			node := nodeOf(c)
			var tsc uint64
			switch tp.delays[k] {
			case delayNormal:
				at += 2e-6 + r.Float64()*50e-6
			case delayZero:
			case delayNegative:
				at -= 30e-6
			case delayHuge:
				at += 100 * (1 + r.Float64())
			case delayTop:
				tsc = math.MaxUint64 - uint64(r.Intn(1000))
			case delayFar:
				tsc = 1<<62 + uint64(r.Intn(1000))
			case delayMissing:
				continue
			}
			if tsc == 0 {
				v := node.off + node.hz*at
				switch {
				case !(v >= 1):
					tsc = 1 // 0 is a hole, never written
				case v >= math.MaxUint64:
					tsc = math.MaxUint64
				default:
					tsc = uint64(v)
				}
			}
			recs[k] = append(recs[k], rec{tsc, i})
			last = max(last, at)
		}
	}
	lines := make([][]string, len(chans))
	for k := range recs {
		sort.SliceStable(recs[k], func(i, j int) bool { return recs[k][i].tsc < recs[k][j].tsc })
		for _, x := range recs[k] {
			lines[k] = append(lines[k], fmt.Sprintf("%d,%d", x.id, x.tsc))
		}
	}
	n := 0
	put := func(h logfile.Header, body []string) error {
		n++
		h.Channel, h.Host = n, "host"
		if h.Handler == "IDENTITY" || !tp.openedAtZero {
			h.OpenSync.TSC = 1e9 // every node's counter starts at 1e9 or later (simNode.off)
		}
		return writeFuzzASCII(cfg.Logs[0], n, h, body)
	}
	for k, c := range chans {
		node := nodeOf(c)
		h := logfile.Header{Node: node.name, PID: c.pid, Name: c.name, Handler: "IDENTITY", TSCHz: hzOf(node)}
		if err := put(h, lines[k]); err != nil {
			return cfg, err
		}
	}
	if tp.counter || tp.count {
		var body []string
		node := tp.nodes[0]
		for i, cnt := range tp.counts {
			at := first + float64(i)*(last-first+1e-3)/float64(len(tp.counts))
			body = append(body, fmt.Sprintf("%d,%d,%d", uint64(max(node.off+node.hz*at, 1)), cnt, i%2))
		}
		if tp.counter {
			h := logfile.Header{Node: node.name, PID: 10, Name: tp.stages[0] + " throughput", Handler: "PERIODICCOUNTER", TSCHz: hzOf(node),
				CounterPeriod: tp.period}
			if err := put(h, body); err != nil {
				return cfg, err
			}
		}
		if tp.count {
			h := logfile.Header{Node: node.name, PID: 10, Name: tp.stages[0] + " count", Handler: "SERVICERATE", TSCHz: hzOf(node),
				CounterPeriod: tp.period}
			if err := put(h, body); err != nil {
				return cfg, err
			}
		}
	}
	if tp.firstLast && len(lines[0]) > 0 {
		node := nodeOf(chans[0])
		body := []string{lines[0][0], lines[0][len(lines[0])-1]}
		h := logfile.Header{Node: node.name, PID: 10, Name: tp.stages[0] + " run", Handler: "FIRSTLAST", TSCHz: hzOf(node)}
		if err := put(h, body); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// writeFuzzASCII writes a channel file as writeASCII does, under a file name
// of its own (names may hold '/' or be empty).
func writeFuzzASCII(dir string, n int, h logfile.Header, lines []string) error {
	h.Version, h.ByteOrder, h.Format, h.FormatID = logfile.Version, "little", "ASCII_TSC", int32(logfile.ASCIITSC)
	h.RecordSize, h.Columns = 16, []string{"tuple_id", "tsc"}
	if h.Counter() {
		h.Columns = []string{"period_end_tsc", "count", "skipped_periods"}
	}
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	trailer := fmt.Sprintf(`#trailer {"reason":"close","positions":%d}`, len(lines))
	body := logfile.ASCIIMagic + "\n#header " + string(js) + "\n" + strings.Join(append(lines, trailer), "\n") + "\n"
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("c%03d.cplog.txt", n)), []byte(body), 0o644)
}

// notFinite finds what fmt and strconv write for a number that is not
// finite, and what fmt writes for a verb that failed.
var notFinite = regexp.MustCompile(`NaN|[+-]Inf|%!`)

func checkReportOutputs(t *testing.T, tp *fuzzTopology, cfg Config, res *Result) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cfg.Out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if err := checkPage(page); err != nil {
		t.Fatalf("report.html is not well formed: %v\ntopology: %s", err, tp)
	}
	if m := notFinite.FindStringIndex(page); m != nil {
		t.Fatalf("report.html: %q at byte %d: …%s…\ntopology: %s", page[m[0]:m[1]], m[0], page[max(m[0]-200, 0):min(m[1]+100, len(page))], tp)
	}
	for _, x := range res.Rows() {
		for _, l := range []string{x.From, x.To} {
			if !strings.Contains(page, html.EscapeString(l)) {
				t.Fatalf("report.html: channel %q does not appear escaped\ntopology: %s", l, tp)
			}
		}
	}
	if len(res.Order) > 0 && !strings.Contains(page, html.EscapeString(strings.Join(res.Order, " → "))) {
		t.Fatalf("report.html: the channel order does not appear escaped: %q", res.Order)
	}
	if strings.Contains(page, `<svg class="topology"`) {
		for _, n := range tp.nodeNames() {
			if want := `<g class="node" data-name="` + html.EscapeString(n) + `"`; res.Records > 0 && !strings.Contains(page, want) &&
				nodeHasBox(res, n) {
				t.Fatalf("report.html: node %q has no escaped lane", n)
			}
		}
	}
	// The text and the CSV files: a number that is not one is an empty
	// field or a dash there, never NaN.
	files, _ := filepath.Glob(filepath.Join(cfg.Out, "*.csv"))
	for _, f := range append(files, filepath.Join(cfg.Out, "summary.txt")) {
		b, err = os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := notFinite.FindIndex(b); m != nil {
			t.Fatalf("%s: %q at byte %d: …%s…\ntopology: %s", filepath.Base(f), b[m[0]:m[1]], m[0], b[max(m[0]-200, 0):min(m[1]+100, len(b))], tp)
		}
	}
	if b, err = os.ReadFile(cfg.Trace); err == nil && !json.Valid(b) {
		t.Fatalf("trace.json is not JSON\ntopology: %s", tp)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// nodeHasBox says whether a node holds a tuple channel with records (the
// topology draws a lane for it then).
func nodeHasBox(res *Result, node string) bool {
	for _, c := range res.Channels {
		if c.Node == node && c.Role == RoleTuples && c.maxRecords > 0 {
			return true
		}
	}
	return false
}

// pageTags are the elements the report writes (HTML, and SVG inline).
var pageTags = map[string]bool{
	"html": true, "head": true, "meta": true, "title": true, "style": true, "body": true, "h1": true, "h2": true, "h3": true,
	"section": true, "p": true, "b": true, "ul": true, "li": true, "nav": true, "a": true, "table": true, "tr": true, "th": true,
	"td": true, "div": true, "br": true, "svg": true, "defs": true, "linearGradient": true, "stop": true, "marker": true,
	"path": true, "g": true, "rect": true, "text": true, "tspan": true, "line": true, "circle": true, "polyline": true,
}

var voidTags = map[string]bool{"meta": true, "br": true}

// numericAttrs hold numbers only (a path's and a polyline's, a viewBox's).
var numericAttrs = map[string]bool{
	"x": true, "y": true, "x1": true, "y1": true, "x2": true, "y2": true, "cx": true, "cy": true, "r": true, "rx": true,
	"width": true, "height": true, "stroke-width": true, "data-share": true, "data-marks": true, "data-ops": true,
	"data-hops": true, "data-series": true, "data-nodes": true, "data-links": true, "viewBox": true, "points": true,
	"d": true, "offset": true, "refX": true, "refY": true, "markerWidth": true, "markerHeight": true, "dy": true,
}

var (
	entityRe = regexp.MustCompile(`^&(#[0-9]+|#x[0-9a-fA-F]+|[a-zA-Z]+);`)
	attrRe   = regexp.MustCompile(`^\s+([a-zA-Z][a-zA-Z0-9:-]*)(="([^"]*)")?`)
	numRe    = regexp.MustCompile(`[-+]?[0-9]*\.?[0-9]+(e[-+]?[0-9]+)?(em)?|[MCLz,\s]+`)
)

// checkPage checks the page as strictly as the report writes it: a
// doctype, then known elements closed in order (meta and br void, SVG's
// may close themselves), attribute values in double quotes, text and
// attribute values without a raw '<' or '>', every '&' an entity, and
// the numeric attributes numbers.
func checkPage(page string) error {
	const doctype = "<!doctype html>"
	if !strings.HasPrefix(page, doctype) {
		return errors.New("no doctype")
	}
	text := func(s string, at int) error {
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '>':
				return fmt.Errorf("byte %d: a raw '>' in text or a value: …%s…", at+i, s[max(i-80, 0):min(i+40, len(s))])
			case '&':
				if !entityRe.MatchString(s[i:]) {
					return fmt.Errorf("byte %d: an '&' that starts no entity: …%s…", at+i, s[max(i-80, 0):min(i+40, len(s))])
				}
			}
		}
		return nil
	}
	var stack []string
	i := len(doctype)
	for i < len(page) {
		lt := strings.IndexByte(page[i:], '<')
		if lt < 0 {
			if err := text(page[i:], i); err != nil {
				return err
			}
			break
		}
		if err := text(page[i:i+lt], i); err != nil {
			return err
		}
		i += lt
		if strings.HasPrefix(page[i:], "</") {
			end := strings.IndexByte(page[i:], '>')
			if end < 0 {
				return fmt.Errorf("byte %d: a closing tag without its '>'", i)
			}
			name := page[i+2 : i+end]
			if len(stack) == 0 || stack[len(stack)-1] != name {
				return fmt.Errorf("byte %d: </%s> closes %v", i, name, stack[max(len(stack)-3, 0):])
			}
			stack = stack[:len(stack)-1]
			i += end + 1
			continue
		}
		j := i + 1
		for j < len(page) && (page[j] >= 'a' && page[j] <= 'z' || page[j] >= 'A' && page[j] <= 'Z' || page[j] >= '0' && page[j] <= '9') {
			j++
		}
		name := page[i+1 : j]
		if !pageTags[name] {
			return fmt.Errorf("byte %d: element %q (a raw '<' from a name?): …%s…", i, name, page[max(i-80, 0):min(i+60, len(page))])
		}
		for {
			m := attrRe.FindStringSubmatchIndex(page[j:])
			if m == nil {
				break
			}
			attr := page[j+m[2] : j+m[3]]
			if m[6] >= 0 {
				val := page[j+m[6] : j+m[7]]
				if strings.ContainsRune(val, '<') {
					return fmt.Errorf("byte %d: a raw '<' in %s=%q", j, attr, val)
				}
				if err := text(val, j+m[6]); err != nil {
					return err
				}
				if numericAttrs[attr] && strings.TrimSpace(numRe.ReplaceAllString(val, "")) != "" {
					return fmt.Errorf("byte %d: %s=%q is not numbers", j, attr, val)
				}
			}
			j += m[1]
		}
		for j < len(page) && page[j] == ' ' {
			j++
		}
		switch {
		case strings.HasPrefix(page[j:], "/>"):
			i = j + 2
		case strings.HasPrefix(page[j:], ">"):
			i = j + 1
			switch {
			case voidTags[name]:
			case name == "style":
				end := strings.Index(page[i:], "</style>")
				if end < 0 {
					return errors.New("<style> not closed")
				}
				i += end + len("</style>")
			default:
				stack = append(stack, name)
			}
		default:
			return fmt.Errorf("byte %d: <%s …> does not end where its attributes do: …%s…", j, name, page[max(j-80, 0):min(j+40, len(page))])
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("not closed at the end: %v", stack)
	}
	return nil
}

// The critical path's slices start at the run's first tuple record, as
// the capacity windows do, also when a counter channel opened long before
// it (its first period moved the reports' time zero back: every second
// between became a slice; at 1 Hz, or from a counter opened at TSC 0,
// billions of them).
func TestCritPathSlicesFromFirstTupleRecord(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	const hz = 2.4e9
	at := func(s float64) uint64 { return uint64(1e9 + hz*s) }
	names := []string{"a in", "a out", "b in", "b out"}
	for k, name := range names {
		var lines []string
		for i := 0; i < 50; i++ {
			lines = append(lines, fmt.Sprintf("%d,%d", i, at(100+float64(i)*1e-3+float64(k)*1e-4)))
		}
		h := logfile.Header{Node: "n", Host: "h", PID: 10 + k/2, Channel: k + 1, Name: name, Handler: "IDENTITY", TSCHz: hz}
		h.OpenSync.TSC = at(99.9)
		if err := writeFuzzASCII(logs, k+1, h, lines); err != nil {
			t.Fatal(err)
		}
	}
	// A counter opened 100 s before the first tuple record.
	h := logfile.Header{Node: "n", Host: "h", PID: 10, Channel: 9, Name: "a throughput", Handler: "PERIODICCOUNTER", TSCHz: hz, CounterPeriod: 1e9}
	h.OpenSync.TSC = at(0)
	if err := writeFuzzASCII(logs, 9, h, []string{fmt.Sprintf("%d,50,0", at(100.1))}); err != nil {
		t.Fatal(err)
	}
	res, err := Run(Config{Logs: []string{logs}, Out: filepath.Join(dir, "out"), Workers: 1, NoDurations: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.CritPath == nil || res.CritPath.Slices != 1 {
		t.Fatalf("critical path: %+v; want 1 slice (the tuples span 50 ms)", res.CritPath)
	}
	for _, r := range res.CritPath.Path {
		if r.Level == "slice" && r.StartS != 0 {
			t.Fatalf("slice %d starts at %g s, not at the first tuple record", r.Slice, r.StartS)
		}
	}
}
