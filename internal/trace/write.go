package trace

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Layout says where records go: the nodes (a process each), the threads
// (an operator instance each, or a channel outside any operator), the
// counters beside them, and the clock.
type Layout struct {
	Ref      string   // the reference node
	Hz       float64  // reference cycles per second
	T0       float64  // time zero, reference cycles: the run's first tuple record
	Nodes    []string // pid = index + 1
	Threads  []Thread // tid = index + 1
	ThreadOf []int    // channel -> its thread
	Chans    []string // channel -> its label
	Counters []Counter
}

// Thread is an operator instance (or a channel) on a node.
type Thread struct {
	Node int
	Name string
}

// Counter is a value over time on a node's process (an instance's busy
// share window by window, say): a step function, each value holding until
// the next. Its track is named Name and Arg ("mix#0 busy" "share": the
// Trace Event Format's counter event and its argument; one name,
// "mix#0 busy share", in Perfetto).
type Counter struct {
	Node      int
	Name, Arg string
	TS, V     []float64 // microseconds from T0, ascending; values
}

// Stats says what a written trace holds.
type Stats struct {
	Tuples, Slowest, Slices, Flows, Overlapping, Counters int
}

// slice is one compute step of one tuple: its thread and lane, its span
// (microseconds from T0), its flow, and what it says about itself.
type slice struct {
	thread, lane int
	ts, dur      float64 // dur: at least 0, as viewers need (durUS: the estimate)
	flow         int     // the tuple's flow (its index + 1)
	flowIn       bool
	flowOut      bool
	tuple        int64
	from, to     string // its first and last channel
	durUS        float64
	bound, e2e   float64
	slowest      bool
	// The transfer into it (the first slice of a tuple has none).
	transfer                 bool
	transferFrom, transferCh string // the thread and channel it came from
	transferUS, transferErr  float64
}

// laid is a trace laid out: the slices in time order, on their lanes, and
// each thread's lanes' tids.
type laid struct {
	ss  []slice
	tid [][]int // thread -> lane -> tid
	st  Stats
}

// lay makes the slices of tuples (the first slow of them the slowest).
// Slices that would overlap on their thread without nesting (an instance
// that took a tuple before handing on the previous one) go on a lane of
// their own ("NAME (2)"), which trace viewers need.
func lay(l *Layout, tuples []Tuple, slow int) *laid {
	st := Stats{Tuples: len(tuples), Slowest: slow, Counters: len(l.Counters)}
	us := func(cycles float64) float64 { return cycles / l.Hz * 1e6 }
	var ss []slice
	for k, t := range tuples {
		first := len(ss)
		for i := 0; i < len(t.Recs); {
			r := &t.Recs[i]
			th := l.ThreadOf[r.Ch]
			j := i + 1
			dur, bound := 0.0, 0.0
			for j < len(t.Recs) && l.ThreadOf[t.Recs[j].Ch] == th {
				dur += t.Recs[j].Dur
				bound += t.Recs[j].Err
				j++
			}
			s := slice{thread: th, ts: us(r.Est - l.T0), dur: max(us(dur), 0), flow: k + 1, durUS: us(dur),
				tuple: t.ID, from: l.Chans[r.Ch], to: l.Chans[t.Recs[j-1].Ch],
				bound: us(bound), e2e: us(t.E2E), slowest: k < slow}
			if i > 0 {
				p := t.Recs[i-1].Ch
				s.transfer, s.transferFrom, s.transferCh = true, l.Threads[l.ThreadOf[p]].Name, l.Chans[p]
				s.transferUS, s.transferErr = us(r.Dur), us(r.Err)
			}
			ss = append(ss, s)
			i = j
		}
		if n := len(ss) - first; n > 1 {
			for x := first; x < len(ss); x++ {
				ss[x].flowIn, ss[x].flowOut = x > first, x < len(ss)-1
			}
			st.Flows++
		}
	}
	slices.SortStableFunc(ss, func(a, b slice) int { return cmp.Compare(a.ts, b.ts) })
	// Lanes: per thread, the end of each lane's last slice.
	lanes := make([][]float64, len(l.Threads))
	for i := range ss {
		s := &ss[i]
		ends := lanes[s.thread]
		lane := -1
		for k, e := range ends {
			if e <= s.ts {
				lane = k
				break
			}
		}
		if lane < 0 {
			lane = len(ends)
			lanes[s.thread] = append(ends, 0)
		}
		lanes[s.thread][lane] = s.ts + s.dur
		s.lane = lane
		if lane > 0 {
			st.Overlapping++
		}
	}
	st.Slices = len(ss)
	// A lane's tid: the thread's own for lane 0, then numbers past them.
	tid := make([][]int, len(l.Threads))
	next := len(l.Threads) + 1
	for th := range l.Threads {
		tid[th] = []int{th + 1}
		for k := 1; k < len(lanes[th]); k++ {
			tid[th] = append(tid[th], next)
			next++
		}
	}
	return &laid{ss: ss, tid: tid, st: st}
}

// laneName is what a thread's lane is called: the thread's name, then
// "NAME (2)" and on.
func laneName(t Thread, lane int) string {
	if lane == 0 {
		return t.Name
	}
	return fmt.Sprintf("%s (%d)", t.Name, lane+1)
}

// About says what the trace's times and slices are, in both formats.
const About = "timestamps: microseconds in the reference clock from the run's first tuple record; a slice is a compute step " +
	"(a tuple's consecutive records on one operator instance), its args hold its strict bound and the transfer into it; a flow follows each tuple; " +
	"counters: each instance's busy share (own work and blocked handing on) and the share of its tuples taken while backlogged, window by window"

// Write writes the trace of tuples (the first slow of them the slowest)
// in the Trace Event Format's JSON.
func Write(w io.Writer, l *Layout, tuples []Tuple, slow int) (Stats, error) {
	ld := lay(l, tuples, slow)
	bw := bufio.NewWriter(w)
	enc := func(v any) {
		b, _ := json.Marshal(v)
		bw.Write(b)
	}
	// Quoted as JSON quotes it: strconv.Quote writes a control character
	// of a channel's name as \x01 or \a, which no JSON reader takes (the
	// trace did not load).
	quote := func(s string) {
		b, _ := json.Marshal(s)
		bw.Write(b)
	}
	bw.WriteString(`{"displayTimeUnit":"ns","otherData":`)
	enc(map[string]any{"tool": "cloudprofiler analyze --trace", "reference_node": l.Ref, "reference_hz": l.Hz,
		"time_zero_cycles": l.T0, "tuples": ld.st.Tuples, "slowest": ld.st.Slowest, "about": About})
	bw.WriteString(`,"traceEvents":[`)
	n := 0
	sep := func() {
		if n > 0 {
			bw.WriteString(",\n")
		}
		n++
	}
	meta := func(name string, pid, tid int, args map[string]any) {
		sep()
		enc(map[string]any{"name": name, "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": args})
	}
	for i, node := range l.Nodes {
		meta("process_name", i+1, 0, map[string]any{"name": "node " + node})
		meta("process_sort_index", i+1, 0, map[string]any{"sort_index": i})
	}
	for th, t := range l.Threads {
		for k, id := range ld.tid[th] {
			meta("thread_name", t.Node+1, id, map[string]any{"name": laneName(t, k)})
			meta("thread_sort_index", t.Node+1, id, map[string]any{"sort_index": id})
		}
	}
	for i := range ld.ss {
		s := &ld.ss[i]
		t := l.Threads[s.thread]
		sep()
		bw.WriteString(`{"name":`)
		quote(t.Name)
		fmt.Fprintf(bw, `,"cat":"compute","ph":"X","pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{"tuple":%d,"from":`,
			t.Node+1, ld.tid[s.thread][s.lane], num(s.ts), num(s.dur), s.tuple)
		quote(s.from)
		bw.WriteString(`,"to":`)
		quote(s.to)
		fmt.Fprintf(bw, `,"dur_us":%s,"bound_us":%s,"end_to_end_us":%s`, round(s.durUS), round(s.bound), round(s.e2e))
		if s.slowest {
			bw.WriteString(`,"slowest":true`)
		}
		if s.transfer {
			bw.WriteString(`,"transfer_from":`)
			quote(s.transferFrom)
			bw.WriteString(`,"transfer_from_channel":`)
			quote(s.transferCh)
			fmt.Fprintf(bw, `,"transfer_us":%s,"transfer_bound_us":%s`, round(s.transferUS), round(s.transferErr))
		}
		bw.WriteString("}")
		if s.flowIn || s.flowOut {
			fmt.Fprintf(bw, `,"bind_id":"0x%x"`, s.flow)
			if s.flowIn {
				bw.WriteString(`,"flow_in":true`)
			}
			if s.flowOut {
				bw.WriteString(`,"flow_out":true`)
			}
		}
		bw.WriteString("}")
	}
	for _, c := range l.Counters {
		for i := range c.TS {
			sep()
			bw.WriteString(`{"name":`)
			quote(c.Name)
			fmt.Fprintf(bw, `,"cat":"capacity","ph":"C","pid":%d,"ts":%s,"args":{`, c.Node+1, num(c.TS[i]))
			quote(c.Arg)
			fmt.Fprintf(bw, `:%s}}`, round(c.V[i]))
		}
	}
	bw.WriteString("]}\n")
	return ld.st, bw.Flush()
}

// num prints microseconds to the nanosecond.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// round keeps microseconds to the picosecond in args.
func round(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }

// IsProto says whether a trace at path is written in Perfetto's protobuf
// format (WriteProto): a name ending in .pftrace or .perfetto-trace, as
// Perfetto names its own; any other name gets the JSON (Write).
func IsProto(path string) bool {
	return strings.HasSuffix(path, ".pftrace") || strings.HasSuffix(path, ".perfetto-trace")
}
