package trace

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

func recs(id int64) []Rec {
	return []Rec{{Ch: 0, Est: float64(id) * 100}, {Ch: 1, Est: float64(id)*100 + 10, Dur: 10}, {Ch: 2, Est: float64(id)*100 + 30, Dur: 20, Err: 2}}
}

// The sample is the same however the tuples were split among workers and
// in whatever order they came; the slowest are in it.
func TestSampleIndependentOfWorkers(t *testing.T) {
	const n, total = 50, 20000
	e2e := func(id int64) float64 { return float64((id * 7919) % 10007) }
	one := NewSampler(n)
	for id := int64(0); id < total; id++ {
		if one.Wants(id, e2e(id)) {
			one.Add(id, e2e(id), recs(id))
		}
	}
	parts := []*Sampler{NewSampler(n), NewSampler(n), NewSampler(n)}
	for _, id := range rand.New(rand.NewSource(3)).Perm(total) {
		s := parts[id%3]
		if s.Wants(int64(id), e2e(int64(id))) {
			s.Add(int64(id), e2e(int64(id)), recs(int64(id)))
		}
	}
	parts[0].Merge(parts[1])
	parts[0].Merge(parts[2])
	a, slowA := one.Sample()
	b, slowB := parts[0].Sample()
	require.Equal(t, slowA, slowB)
	require.Equal(t, Slowest(n), slowA)
	require.Len(t, a, n)
	ids := func(ts []Tuple) []int64 {
		var out []int64
		for _, x := range ts {
			out = append(out, x.ID)
		}
		return out
	}
	require.Equal(t, ids(a), ids(b))
	// The slowest five are the five largest e2e.
	var all []float64
	for id := int64(0); id < total; id++ {
		all = append(all, e2e(id))
	}
	slices.Sort(all)
	for k := 0; k < slowA; k++ {
		require.Equal(t, all[total-1-k], a[k].E2E)
	}
	require.Equal(t, recs(a[0].ID), a[0].Recs, "records are kept")
	seen := map[int64]bool{}
	for _, x := range b {
		require.False(t, seen[x.ID], "tuple %d twice in a merged sample", x.ID)
		seen[x.ID] = true
	}
}

func TestSampleSmallerThanAsked(t *testing.T) {
	s := NewSampler(1000)
	s.Add(7, 3, recs(7))
	ts, slow := s.Sample()
	require.Len(t, ts, 1)
	require.Equal(t, 1, slow)
}

// The trace is valid JSON in the Trace Event Format: slices on the threads
// the layout names, one flow a tuple from its first slice to its last.
func TestWriteSlicesAndFlows(t *testing.T) {
	l := &Layout{Ref: "a", Hz: 1e6, T0: 0, Nodes: []string{"a", "b"},
		Threads: []Thread{{0, "src"}, {1, "op"}}, ThreadOf: []int{0, 1, 1}, Chans: []string{"a/src out", "b/op in", "b/op out"}}
	// Tuple 2 enters op before tuple 1 leaves it: a lane of its own.
	t1 := Tuple{ID: 1, E2E: 50, Recs: []Rec{{Ch: 0, Est: 0}, {Ch: 1, Est: 10, Dur: 10, Err: 1}, {Ch: 2, Est: 50, Dur: 40}}}
	t2 := Tuple{ID: 2, E2E: 20, Recs: []Rec{{Ch: 0, Est: 5}, {Ch: 1, Est: 20, Dur: 15, Err: 1}, {Ch: 2, Est: 25, Dur: 5}}}
	var buf bytes.Buffer
	st, err := Write(&buf, l, []Tuple{t1, t2}, 1)
	require.NoError(t, err)
	require.Equal(t, Stats{Tuples: 2, Slowest: 1, Slices: 4, Flows: 2, Overlapping: 1}, st)
	var tr struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tr))
	var xs []map[string]any
	names := map[float64]string{}
	for _, e := range tr.TraceEvents {
		switch e["ph"] {
		case "X":
			xs = append(xs, e)
		case "M":
			if e["name"] == "thread_name" {
				names[e["tid"].(float64)] = e["args"].(map[string]any)["name"].(string)
			}
		}
	}
	require.Len(t, xs, 4)
	require.Equal(t, map[float64]string{1: "src", 2: "op", 3: "op (2)"}, names)
	// Tuple 1's op slice: 10 to 50 us, 40 us long; the transfer into it in its args.
	var op1 map[string]any
	for _, x := range xs {
		a := x["args"].(map[string]any)
		if a["tuple"].(float64) == 1 && x["name"] == "op" {
			op1 = x
		}
	}
	require.NotNil(t, op1)
	require.Equal(t, 10.0, op1["ts"])
	require.Equal(t, 40.0, op1["dur"])
	require.Equal(t, 10.0, op1["args"].(map[string]any)["transfer_us"])
	require.Equal(t, 1.0, op1["args"].(map[string]any)["transfer_bound_us"])
	require.Equal(t, true, op1["flow_in"])
	require.Nil(t, op1["flow_out"])
}

// Counters are "C" events on their node's process, one value each, in
// time order; a name ending in .pftrace asks for Perfetto's protobuf.
func TestWriteCounters(t *testing.T) {
	l := &Layout{Ref: "a", Hz: 1e6, Nodes: []string{"a", "b"}, Threads: []Thread{{1, "op"}}, ThreadOf: []int{0}, Chans: []string{"b/op in"},
		Counters: []Counter{{Node: 1, Name: "op busy", Arg: "share", TS: []float64{0, 1e6, 2e6}, V: []float64{0.5, 0.25, 0}}}}
	var buf bytes.Buffer
	st, err := Write(&buf, l, []Tuple{{ID: 1, Recs: []Rec{{Ch: 0, Est: 3}}}}, 1)
	require.NoError(t, err)
	require.Equal(t, 1, st.Counters)
	var tr struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &tr))
	var cs []map[string]any
	for _, e := range tr.TraceEvents {
		if e["ph"] == "C" {
			cs = append(cs, e)
		}
	}
	require.Len(t, cs, 3)
	for i, want := range []float64{0.5, 0.25, 0} {
		require.Equal(t, "op busy", cs[i]["name"])
		require.Equal(t, 2.0, cs[i]["pid"], "node b's process")
		require.Equal(t, float64(i)*1e6, cs[i]["ts"])
		require.Equal(t, map[string]any{"share": want}, cs[i]["args"])
	}
	require.True(t, IsProto("x/t.pftrace"))
	require.True(t, IsProto("t.perfetto-trace"))
	require.False(t, IsProto("t.json"))
	require.False(t, IsProto("pftrace"))
}

// BenchmarkSamplerWants: what the trace's sample costs a tuple once the
// sample is full (most tuples are turned away by two comparisons).
func BenchmarkSamplerWants(b *testing.B) {
	s := NewSampler(1000)
	rng := rand.New(rand.NewSource(1))
	for id := int64(0); id < 100000; id++ {
		e := rng.ExpFloat64()
		if s.Wants(id, e) {
			s.Add(id, e, recs(id))
		}
	}
	b.ResetTimer()
	kept := 0
	for i := 0; i < b.N; i++ {
		id := int64(100000 + i)
		if s.Wants(id, float64(i&1023)*1e-3) {
			kept++
		}
	}
	_ = kept
}

// The protobuf trace's slices never nest on a lane, even where slices of
// no length share a nanosecond (a source's, every tuple): each begin is
// followed on its track by its own end before the next begin, and the
// packets come in time order. (tests/report reads a real run's with
// Perfetto's own definitions.)
func TestWriteProtoLanes(t *testing.T) {
	l := &Layout{Ref: "a", Hz: 1e6, Nodes: []string{"a"}, Threads: []Thread{{0, "src"}, {0, "op"}},
		ThreadOf: []int{0, 1, 1}, Chans: []string{"a/src out", "a/op in", "a/op out"}}
	var tuples []Tuple
	for i := range 6 {
		at := float64(i / 3) // three tuples a microsecond, all at once
		tuples = append(tuples, Tuple{ID: int64(i), Recs: []Rec{{Ch: 0, Est: at}, {Ch: 1, Est: at, Dur: 0}, {Ch: 2, Est: at + 0.5, Dur: 0.5}}})
	}
	var buf bytes.Buffer
	st, err := WriteProto(&buf, l, tuples, 1)
	require.NoError(t, err)
	require.Equal(t, 12, st.Slices)
	depth := map[uint64]int{}
	var last uint64
	begins, ends := 0, 0
	// fields calls f with each field of a message: its number and the
	// value's bytes (a varint's, or a length-delimited field's contents).
	fields := func(msg []byte, f func(protowire.Number, []byte)) {
		for len(msg) > 0 {
			num, typ, n := protowire.ConsumeTag(msg)
			require.Positive(t, n)
			m := protowire.ConsumeFieldValue(num, typ, msg[n:])
			require.Positive(t, m)
			v := msg[n : n+m]
			if typ == protowire.BytesType {
				v, _ = protowire.ConsumeBytes(v)
			}
			f(num, v)
			msg = msg[n+m:]
		}
	}
	varint := func(v []byte) uint64 { x, _ := protowire.ConsumeVarint(v); return x }
	fields(buf.Bytes(), func(num protowire.Number, pkt []byte) {
		require.Equal(t, protowire.Number(1), num, "a Trace holds packets")
		var ts uint64
		var ev []byte
		fields(pkt, func(num protowire.Number, v []byte) {
			switch num {
			case fTimestamp:
				ts = varint(v)
			case fTrackEvent:
				ev = v
			}
		})
		if ev == nil {
			return
		}
		require.GreaterOrEqual(t, ts, last, "packets in time order")
		last = ts
		var kind, track uint64
		fields(ev, func(num protowire.Number, v []byte) {
			switch num {
			case fType:
				kind = varint(v)
			case fTrackUUID:
				track = varint(v)
			}
		})
		switch kind {
		case typeSliceBegin:
			depth[track]++
			begins++
			require.Equal(t, 1, depth[track], "a slice begins on track %x with none open", track)
		case typeSliceEnd:
			depth[track]--
			ends++
			require.Equal(t, 0, depth[track], "an end closes the one slice open on track %x", track)
		}
	})
	require.Equal(t, 12, begins)
	require.Equal(t, 12, ends)
}
