package trace

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Layout says where records go: the nodes (a process each), the threads
// (an operator instance each, or a channel outside any operator), and the
// clock.
type Layout struct {
	Ref      string   // the reference node
	Hz       float64  // reference cycles per second
	T0       float64  // time zero, reference cycles: the run's first tuple record
	Nodes    []string // pid = index + 1
	Threads  []Thread // tid = index + 1
	ThreadOf []int    // channel -> its thread
	Chans    []string // channel -> its label
}

// Thread is an operator instance (or a channel) on a node.
type Thread struct {
	Node int
	Name string
}

// Stats says what a written trace holds.
type Stats struct {
	Tuples, Slowest, Slices, Flows, Overlapping int
}

// slice is one compute step of one tuple, before it is written.
type slice struct {
	thread, lane int
	ts, dur      float64 // microseconds
	args         map[string]any
	flowIn       bool
	flowOut      bool
	flow         int
}

// Write writes the trace of tuples (the first slow of them the slowest).
// Slices that would overlap on their thread without nesting (an instance
// that took a tuple before handing on the previous one) go on a lane of
// their own ("NAME (2)"), which trace viewers need.
func Write(w io.Writer, l *Layout, tuples []Tuple, slow int) (Stats, error) {
	st := Stats{Tuples: len(tuples), Slowest: slow}
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
			last := &t.Recs[j-1]
			args := map[string]any{"tuple": t.ID, "from": l.Chans[r.Ch], "to": l.Chans[last.Ch],
				"dur_us": round(us(dur)), "bound_us": round(us(bound)), "end_to_end_us": round(us(t.E2E))}
			if k < slow {
				args["slowest"] = true
			}
			if i > 0 {
				args["transfer_from"] = l.Threads[l.ThreadOf[t.Recs[i-1].Ch]].Name
				args["transfer_from_channel"] = l.Chans[t.Recs[i-1].Ch]
				args["transfer_us"] = round(us(r.Dur))
				args["transfer_bound_us"] = round(us(r.Err))
			}
			ss = append(ss, slice{thread: th, ts: us(r.Est - l.T0), dur: max(us(dur), 0), args: args, flow: k + 1})
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

	bw := bufio.NewWriter(w)
	enc := func(v any) {
		b, _ := json.Marshal(v)
		bw.Write(b)
	}
	bw.WriteString(`{"displayTimeUnit":"ns","otherData":`)
	enc(map[string]any{"tool": "cloudprofiler analyze --trace", "reference_node": l.Ref, "reference_hz": l.Hz,
		"time_zero_cycles": l.T0, "tuples": st.Tuples, "slowest": st.Slowest,
		"about": "timestamps: microseconds in the reference clock from the run's first tuple record; a slice is a compute step " +
			"(a tuple's consecutive records on one operator instance), its args hold its strict bound and the transfer into it; a flow follows each tuple"})
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
		for k, id := range tid[th] {
			name := t.Name
			if k > 0 {
				name = fmt.Sprintf("%s (%d)", t.Name, k+1)
			}
			meta("thread_name", t.Node+1, id, map[string]any{"name": name})
			meta("thread_sort_index", t.Node+1, id, map[string]any{"sort_index": id})
		}
	}
	for i := range ss {
		s := &ss[i]
		t := l.Threads[s.thread]
		sep()
		// Quoted as JSON quotes it: strconv.Quote writes a control
		// character of a channel's name as \x01 or \a, which no JSON
		// reader takes (the trace did not load).
		name, _ := json.Marshal(t.Name)
		fmt.Fprintf(bw, `{"name":%s,"cat":"compute","ph":"X","pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":`,
			name, t.Node+1, tid[s.thread][s.lane], num(s.ts), num(s.dur))
		enc(s.args)
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
	bw.WriteString("]}\n")
	return st, bw.Flush()
}

// num prints microseconds to the nanosecond.
func num(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// round keeps microseconds to the picosecond in args.
func round(v float64) json.Number { return json.Number(strconv.FormatFloat(v, 'f', 6, 64)) }
