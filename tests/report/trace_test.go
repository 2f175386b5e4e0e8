package report

import (
	"cmp"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"

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
func checkTrace(t *testing.T, tracePath, durationsCSV string, sample int) {
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
	for i, e := range tr.TraceEvents {
		ph := str(t, e.Ph, "ph")
		name := str(t, e.Name, "name")
		pid, tid := num(t, e.Pid, "pid"), num(t, e.Tid, "tid")
		switch ph {
		case "M":
			require.Contains(t, []string{"process_name", "process_sort_index", "thread_name", "thread_sort_index"}, name)
			switch name {
			case "process_name":
				str(t, e.Args["name"], "process_name's name")
				procNamed[pid] = true
			case "thread_name":
				str(t, e.Args["name"], "thread_name's name")
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
			if e.BindID != nil {
				id := str(t, e.BindID, "bind_id")
				in, _ := e.FlowIn.(bool)
				out, _ := e.FlowOut.(bool)
				require.True(t, in || out, "a bound slice says its direction")
				flows[id] = append(flows[id], step{ts, in, out, tuple})
			}
		default:
			t.Fatalf("event %d: phase %q: the trace has metadata (M) and complete slices (X) only", i, ph)
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
			if d, ok := computes[key{id, from, to}]; ok {
				require.InDelta(t, us, d, 0.0011, "tuple %d %s -> %s: the slice lasts the duration analyze wrote", id, from, to)
				matched++
			}
		}
		if d, ok := transfers[key{id, from, to}]; ok {
			require.InDelta(t, us, d, 1e-5, "tuple %d %s -> %s: the transfer into the slice", id, from, to)
			matched++
		}
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
	t.Logf("trace: %d slices of %d tuples, %d flows; %d compute steps and %d transfers match durations.csv; the %d slowest in it",
		xs, len(tuples), len(flows), len(computes), len(transfers), slowest)
}
