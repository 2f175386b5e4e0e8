package report

import (
	"cmp"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"cloudprofiler/tests/internal/testrun"
)

// traceEvent is one event of a Trace Event Format file, as this test
// reads it: the fields the format requires, typed loosely so that a wrong
// type fails the checks below rather than the decoding.
type traceEvent struct {
	Name    any            `json:"name"`
	Ph      any            `json:"ph"`
	Pid     any            `json:"pid"`
	Tid     any            `json:"tid"`
	Ts      any            `json:"ts"`
	Dur     any            `json:"dur"`
	Cat     any            `json:"cat"`
	Args    map[string]any `json:"args"`
	BindID  any            `json:"bind_id"`
	FlowIn  any            `json:"flow_in"`
	FlowOut any            `json:"flow_out"`
}

func num(t *testing.T, v any, what string) float64 {
	t.Helper()
	f, ok := v.(float64)
	require.True(t, ok, "%s: a number, not %T %v", what, v, v)
	require.False(t, math.IsNaN(f) || math.IsInf(f, 0), what)
	return f
}

func str(t *testing.T, v any, what string) string {
	t.Helper()
	s, ok := v.(string)
	require.True(t, ok, "%s: a string, not %T %v", what, v, v)
	return s
}

// checkTrace checks a --trace file against the Trace Event Format (the
// JSON object form: required fields and types, phases, metadata naming
// every process and thread used, flows from a start through steps to an
// end, timestamps ordered within each thread) and against durations.csv:
// every compute step's duration and every transfer into a slice are the
// durations analyze wrote for the same tuple, and the slowest tuples end
// to end are in the sample.
func checkTrace(t *testing.T, tracePath, durationsCSV string, sample int) jsonTrace {
	raw, err := os.ReadFile(tracePath)
	require.NoError(t, err)
	var tr struct {
		TraceEvents     []traceEvent   `json:"traceEvents"`
		DisplayTimeUnit string         `json:"displayTimeUnit"`
		OtherData       map[string]any `json:"otherData"`
	}
	require.NoError(t, json.Unmarshal(raw, &tr), "valid JSON")
	require.NotEmpty(t, tr.TraceEvents)
	require.Contains(t, []string{"ms", "ns"}, tr.DisplayTimeUnit)
	slowest := int(num(t, tr.OtherData["slowest"], "otherData.slowest"))

	type thread struct{ pid, tid float64 }
	procNamed, threadNamed := map[float64]bool{}, map[thread]bool{}
	lastTs := map[thread]float64{}
	type step struct {
		ts      float64
		in, out bool
		tuple   float64
	}
	flows := map[string][]step{}
	type key struct {
		tuple    int64
		from, to string
	}
	computes, transfers := map[key]float64{}, map[key]float64{}
	tuples := map[int64]bool{}
	xs := 0
	var jt jsonTrace
	threadName := map[thread]string{}
	for i, e := range tr.TraceEvents {
		ph := str(t, e.Ph, "ph")
		name := str(t, e.Name, "name")
		pid, tid := num(t, e.Pid, "pid"), 0.0
		if ph != "C" { // a counter belongs to its process
			tid = num(t, e.Tid, "tid")
		}
		switch ph {
		case "M":
			require.Contains(t, []string{"process_name", "process_sort_index", "thread_name", "thread_sort_index"}, name)
			switch name {
			case "process_name":
				str(t, e.Args["name"], "process_name's name")
				procNamed[pid] = true
			case "thread_name":
				threadName[thread{pid, tid}] = str(t, e.Args["name"], "thread_name's name")
				threadNamed[thread{pid, tid}] = true
			}
		case "X":
			xs++
			th := thread{pid, tid}
			require.True(t, procNamed[pid], "event %d: process %v named before its slices", i, pid)
			require.True(t, threadNamed[th], "event %d: thread %v named before its slices", i, th)
			ts, dur := num(t, e.Ts, "ts"), num(t, e.Dur, "dur")
			require.GreaterOrEqual(t, dur, 0.0)
			require.GreaterOrEqual(t, ts, 0.0, "time zero is the run's first record")
			require.GreaterOrEqual(t, ts, lastTs[th], "event %d: timestamps ordered within thread %v", i, th)
			lastTs[th] = ts
			str(t, e.Cat, "cat")
			tuple := num(t, e.Args["tuple"], "args.tuple")
			tuples[int64(tuple)] = true
			num(t, e.Args["bound_us"], "args.bound_us")
			from, to := str(t, e.Args["from"], "args.from"), str(t, e.Args["to"], "args.to")
			if from != to {
				computes[key{int64(tuple), from, to}] = dur
			}
			if tf, ok := e.Args["transfer_from_channel"]; ok {
				transfers[key{int64(tuple), str(t, tf, "transfer_from_channel"), from}] = num(t, e.Args["transfer_us"], "transfer_us")
				num(t, e.Args["transfer_bound_us"], "transfer_bound_us")
			}
			js := traceSlice{name: name, thread: threadName[th], pid: int(pid), tid: int(tid), ts: ts, dur: dur,
				tuple: int64(tuple), from: from, to: to, durUS: num(t, e.Args["dur_us"], "args.dur_us"), boundUS: num(t, e.Args["bound_us"], "args.bound_us")}
			if e.BindID != nil {
				id := str(t, e.BindID, "bind_id")
				in, _ := e.FlowIn.(bool)
				out, _ := e.FlowOut.(bool)
				require.True(t, in || out, "a bound slice says its direction")
				flows[id] = append(flows[id], step{ts, in, out, tuple})
				js.flow = map[[2]bool]string{{false, true}: "start", {true, true}: "step", {true, false}: "end"}[[2]bool{in, out}]
			}
			jt.slices = append(jt.slices, js)
		case "C":
			// A counter: one value a track, on a named process, in time order.
			require.True(t, procNamed[pid], "event %d: process %v named before its counters", i, pid)
			require.Len(t, e.Args, 1, "event %d: a counter event holds one value", i)
			for arg, v := range e.Args {
				c := traceCounter{track: name + " " + arg, pid: int(pid), ts: num(t, e.Ts, "ts"), value: num(t, v, "counter value")}
				if n := len(jt.counters); n > 0 && jt.counters[n-1].track == c.track && jt.counters[n-1].pid == c.pid {
					require.Greater(t, c.ts, jt.counters[n-1].ts, "event %d: a counter's values in time order", i)
				}
				jt.counters = append(jt.counters, c)
			}
		default:
			t.Fatalf("event %d: phase %q: the trace has metadata (M), complete slices (X) and counters (C) only", i, ph)
		}
	}
	require.Equal(t, sample, len(tuples), "the sample asked for")
	require.NotEmpty(t, flows)
	for id, ss := range flows {
		slices.SortStableFunc(ss, func(a, b step) int { return cmp.Compare(a.ts, b.ts) })
		require.GreaterOrEqual(t, len(ss), 2, "flow %s: from a start to an end", id)
		require.True(t, ss[0].out && !ss[0].in, "flow %s starts with flow_out only", id)
		require.True(t, ss[len(ss)-1].in && !ss[len(ss)-1].out, "flow %s ends with flow_in only", id)
		for _, s := range ss[1 : len(ss)-1] {
			require.True(t, s.in && s.out, "flow %s: its middle slices are steps", id)
		}
		for _, s := range ss {
			require.Equal(t, ss[0].tuple, s.tuple, "flow %s: one tuple", id)
		}
	}

	// Against durations.csv for the same tuples.
	type e2e struct {
		tuple int64
		us    float64
	}
	var ends []e2e
	matched := 0
	type hop struct {
		tuple int64
		from  string
	}
	type step2 struct {
		to string
		us float64
	}
	next := map[hop]step2{} // each tuple's compute durations, from channel to channel
	rows, err := testrun.ReadCSV(durationsCSV, []string{"tuple_id", "kind", "from_node", "from_channel", "to_node", "to_channel", "seconds"})
	require.NoError(t, err)
	for _, r := range rows {
		id, err := strconv.ParseInt(r["tuple_id"], 10, 64)
		require.NoError(t, err)
		sec, err := strconv.ParseFloat(r["seconds"], 64)
		require.NoError(t, err)
		us := sec * 1e6
		from, to := r["from_node"]+"/"+r["from_channel"], r["to_node"]+"/"+r["to_channel"]
		switch r["kind"] {
		case "end_to_end":
			ends = append(ends, e2e{id, us})
		case "compute":
			next[hop{id, from}] = step2{to, us}
		}
		if d, ok := transfers[key{id, from, to}]; ok {
			require.InDelta(t, us, d, 1e-5, "tuple %d %s -> %s: the transfer into the slice", id, from, to)
			matched++
		}
	}
	// A slice spans its tuple's records on one instance (in, out, and
	// sent where marked): the durations from its first to its last.
	for k, d := range computes {
		us, at := 0.0, k.from
		for n := 0; at != k.to; n++ {
			s, ok := next[hop{k.tuple, at}]
			require.True(t, ok && n < 64, "tuple %d: durations.csv goes from %s on to %s", k.tuple, k.from, k.to)
			us, at = us+s.us, s.to
		}
		require.InDelta(t, us, d, 0.0011*3, "tuple %d %s -> %s: the slice lasts the durations analyze wrote", k.tuple, k.from, k.to)
		matched++
	}
	require.Equal(t, len(computes)+len(transfers), matched, "every compute step and transfer of the trace is in durations.csv")
	slices.SortFunc(ends, func(a, b e2e) int { return cmp.Compare(b.us, a.us) })
	require.Equal(t, max(1, sample/10), slowest)
	for _, x := range ends[:slowest] {
		if len(ends) > slowest && x.us == ends[slowest].us {
			continue // a tie at the cut: either may be in
		}
		require.True(t, tuples[x.tuple], "tuple %d, among the %d slowest end to end (%.3f us), is in the trace", x.tuple, slowest, x.us)
	}
	t.Logf("trace: %d slices of %d tuples, %d flows, %d counter values; %d compute steps and %d transfers match durations.csv; the %d slowest in it",
		xs, len(tuples), len(flows), len(jt.counters), len(computes), len(transfers), slowest)
	return jt
}

// jsonTrace is what checkTrace read of a JSON trace: its slices and its
// counters' values.
type jsonTrace struct {
	slices   []traceSlice
	counters []traceCounter
}

// traceSlice is one slice: its name, thread, span (microseconds), tuple,
// first and last channel, args, and its place in its tuple's flow
// ("start", "step", "end", or "" outside any).
type traceSlice struct {
	name, thread   string
	pid, tid       int
	ts, dur        float64
	tuple          int64
	from, to       string
	durUS, boundUS float64
	flow           string
}

// traceCounter is one counter value: its track ("NAME ARG", as Perfetto
// names a JSON counter's track), process, time (microseconds) and value.
type traceCounter struct {
	track string
	pid   int
	ts    float64
	value float64
}

// checkCounters checks the trace's counters against capacity.csv of the
// same run: each instance's window, from its start, holds its busy share
// (own work and blocked handing on) and the share of its tuples taken
// while backlogged; and returns how many windows it checked.
func checkCounters(t *testing.T, jt jsonTrace, capacityCSV string) int {
	rows, err := testrun.ReadCSV(capacityCSV, []string{"level", "window", "start_s", "operator", "instance", "method", "tuples_in", "busy_share", "blocked_share", "backlogged"})
	require.NoError(t, err)
	type at struct {
		track string
		us    float64
	}
	values := map[at]float64{}
	for _, c := range jt.counters {
		values[at{c.track, math.Round(c.ts)}] = c.value
	}
	f := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err)
		return v
	}
	checked := 0
	for _, r := range rows {
		if r["level"] != "instance" || r["window"] == "-1" || r["method"] != "in/out" || r["busy_share"] == "" || math.IsNaN(f(r["busy_share"])) {
			continue
		}
		name := r["operator"]
		if inst := r["instance"][strings.LastIndex(r["instance"], "/")+1:]; inst != "" {
			name += "#" + inst
		}
		busy := f(r["busy_share"])
		if b := r["blocked_share"]; b != "" && !math.IsNaN(f(b)) {
			busy += f(b)
		}
		backlog := 0.0
		if in := f(r["tuples_in"]); in > 0 {
			backlog = f(r["backlogged"]) / in
		}
		us := math.Round(f(r["start_s"]) * 1e6)
		v, ok := values[at{name + " busy share", us}]
		require.True(t, ok, "a busy-share value for %s at %.0f us (capacity.csv's window %s)", name, us, r["window"])
		require.InDelta(t, busy, v, 1e-5, "%s window %s: busy share", name, r["window"])
		v, ok = values[at{name + " backlogged share", us}]
		require.True(t, ok, "a backlogged-share value for %s at %.0f us", name, us)
		require.InDelta(t, backlog, v, 1e-5, "%s window %s: backlogged share", name, r["window"])
		checked++
	}
	return checked
}

// checkProtoTrace reads a --trace FILE.pftrace with Perfetto's own
// definitions (perfetto_read.py, in a Python with the perfetto package)
// and checks that it holds the same slices, flows and counters as the
// JSON trace of the same run.
func checkProtoTrace(t *testing.T, python, path string, jt jsonTrace) {
	r := testrun.Run(2*time.Minute, nil, python, "perfetto_read.py", path)
	require.NoError(t, r.Err, "%s", r.Stderr)
	var pt struct {
		Packets    int
		OutOfOrder int `json:"out_of_order"`
		Unclosed   int
		Slices     []struct {
			Name, Category, Thread string
			Pid, Tid               int
			BeginNS                int64 `json:"begin_ns"`
			EndNS                  int64 `json:"end_ns"`
			Args                   map[string]any
			FlowIDs                []uint64 `json:"flow_ids"`
			TerminatingFlowIDs     []uint64 `json:"terminating_flow_ids"`
		}
		Counters []struct {
			Track string
			Pid   int
			TsNS  int64 `json:"ts_ns"`
			Value float64
		}
	}
	dec := json.NewDecoder(strings.NewReader(r.Stdout))
	dec.UseNumber() // tuple ids are 64-bit
	require.NoError(t, dec.Decode(&pt))
	require.Zero(t, pt.OutOfOrder, "the events in time order")
	require.Zero(t, pt.Unclosed, "every slice ends")

	// Slices, by tuple and first channel.
	type key struct {
		tuple int64
		from  string
	}
	want := map[key]traceSlice{}
	for _, s := range jt.slices {
		want[key{s.tuple, s.from}] = s
	}
	require.Len(t, pt.Slices, len(jt.slices), "as many slices as the JSON")
	byFlow := map[uint64][]int{}
	for i, s := range pt.Slices {
		id, err := s.Args["tuple"].(json.Number).Int64()
		require.NoError(t, err)
		from, _ := s.Args["from"].(string)
		w, ok := want[key{id, from}]
		require.True(t, ok, "tuple %d's slice from %s is in the JSON", id, from)
		require.Equal(t, w.name, s.Name)
		require.Equal(t, "compute", s.Category)
		require.Equal(t, [3]any{w.thread, w.pid, w.tid}, [3]any{s.Thread, s.Pid, s.Tid}, "tuple %d from %s: the same thread", id, from)
		require.InDelta(t, w.ts*1e3, float64(s.BeginNS), 1, "tuple %d from %s: begins when the JSON's does (ns)", id, from)
		require.InDelta(t, (w.ts+w.dur)*1e3, float64(s.EndNS), 2, "tuple %d from %s: ends when the JSON's does (ns)", id, from)
		require.Equal(t, w.to, s.Args["to"])
		for arg, v := range map[string]float64{"dur_us": w.durUS, "bound_us": w.boundUS} {
			f, err := s.Args[arg].(json.Number).Float64()
			require.NoError(t, err)
			require.InDelta(t, v, f, 1e-6, "tuple %d from %s: %s", id, from, arg)
		}
		for _, f := range append(append([]uint64{}, s.FlowIDs...), s.TerminatingFlowIDs...) {
			byFlow[f] = append(byFlow[f], i)
		}
	}
	// Flows: the same places in each tuple's flow as the JSON's.
	flows := 0
	for _, ix := range byFlow {
		slices.SortFunc(ix, func(a, b int) int { return cmp.Compare(pt.Slices[a].BeginNS, pt.Slices[b].BeginNS) })
		for k, i := range ix {
			s := pt.Slices[i]
			place := "step"
			switch {
			case k == 0:
				place = "start"
				require.NotEmpty(t, s.FlowIDs, "a flow starts with flow_ids")
			case k == len(ix)-1:
				place = "end"
				require.NotEmpty(t, s.TerminatingFlowIDs, "a flow ends with terminating_flow_ids")
			}
			id, _ := s.Args["tuple"].(json.Number).Int64()
			from, _ := s.Args["from"].(string)
			require.Equal(t, want[key{id, from}].flow, place, "tuple %d from %s: its place in its flow", id, from)
		}
		flows++
	}
	// Counters: the same values at the same times.
	require.Len(t, pt.Counters, len(jt.counters), "as many counter values as the JSON")
	type cv struct {
		track string
		pid   int
		ns    int64
	}
	got := map[cv]float64{}
	for _, c := range pt.Counters {
		got[cv{c.Track, c.Pid, c.TsNS}] = c.Value
	}
	for _, c := range jt.counters {
		v, ok := got[cv{c.track, c.pid, int64(math.Round(c.ts * 1e3))}]
		require.True(t, ok, "counter %s at %.3f us in the protobuf", c.track, c.ts)
		require.InDelta(t, c.value, v, 1e-6)
	}
	t.Logf("protobuf trace, read with Perfetto's definitions: %d packets, %d slices, %d flows, %d counter values, as the JSON", pt.Packets, len(pt.Slices), flows, len(pt.Counters))
}
