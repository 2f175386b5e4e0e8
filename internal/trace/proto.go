package trace

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"io"
	"math"
	"slices"
)

// WriteProto writes the same trace as Write in Perfetto's own format: a
// Trace protobuf of TracePackets (perfetto/trace/trace_packet.proto),
// tracks described by TrackDescriptors (a process track per node, a thread
// track per lane, a counter track per counter), and TrackEvents: each
// slice a begin and an end, its flow in flow_ids, its args as debug
// annotations; names interned on one sequence. The field numbers below are
// Perfetto's; tests/report reads the file with Perfetto's own definitions.
//
// Perfetto calls JSON traces legacy; this one is 2.3-2.5 times smaller
// (docs/report.md, "The trace").
func WriteProto(w io.Writer, l *Layout, tuples []Tuple, slow int) (Stats, error) {
	ld := lay(l, tuples, slow)
	bw := bufio.NewWriter(w)
	var pkt, tmp pb
	// emit writes a TracePacket (Trace.packet, field 1) on our sequence.
	emit := func(body pb) {
		body = body.uint(fTrustedSeqID, 1)
		var hdr [binary.MaxVarintLen64 + 1]byte
		h := pb(hdr[:0]).tag(1, wireLen).varint(uint64(len(body)))
		bw.Write(h)
		bw.Write(body)
	}
	procUUID := func(node int) uint64 { return uint64(node+1) << 32 }
	laneUUID := func(th, lane int) uint64 { return procUUID(l.Threads[th].Node) | uint64(ld.tid[th][lane]) }
	counterUUID := func(i int) uint64 { return 1<<62 | uint64(i) }

	// The first packet clears the sequence's state and interns the names.
	names := map[string]uint64{}
	intern := func(m map[string]uint64, s string) uint64 {
		if id, ok := m[s]; ok {
			return id
		}
		m[s] = uint64(len(m) + 1)
		return m[s]
	}
	for _, t := range l.Threads {
		intern(names, t.Name)
	}
	argNames := map[string]uint64{}
	for _, a := range []string{"tuple", "from", "to", "dur_us", "bound_us", "end_to_end_us", "slowest",
		"transfer_from", "transfer_from_channel", "transfer_us", "transfer_bound_us"} {
		intern(argNames, a)
	}
	// An interned entry (EventName, EventCategory, DebugAnnotationName,
	// InternedString): iid 1, name 2.
	entries := func(b pb, field int, m map[string]uint64) pb {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(x, y string) int { return cmp.Compare(m[x], m[y]) })
		for _, k := range keys {
			tmp = tmp[:0].uint(1, m[k]).str(2, k)
			b = b.bytes(field, tmp)
		}
		return b
	}
	// The args' strings (channels and threads) are few and repeat in every
	// slice: interned, they halve what a slice takes.
	strs := map[string]uint64{}
	for _, c := range l.Chans {
		intern(strs, c)
	}
	for _, t := range l.Threads {
		intern(strs, t.Name)
	}
	var in pb
	in = entries(in, fInternedCategories, map[string]uint64{"compute": 1})
	in = entries(in, fInternedEventNames, names)
	in = entries(in, fInternedAnnotationNames, argNames)
	in = entries(in, fInternedAnnotationStrings, strs)
	pkt = pkt[:0].uint(fSequenceFlags, seqIncrementalStateCleared).bytes(fInternedData, in).bool(fFirstPacketOnSequence, true)
	emit(pkt)

	// The tracks.
	track := func(desc pb) {
		pkt = pkt[:0].bytes(fTrackDescriptor, desc)
		emit(pkt)
	}
	for i, node := range l.Nodes {
		proc := pb(nil).int(1, int64(i+1)).str(6, "node "+node) // ProcessDescriptor: pid, process_name
		track(pb(nil).uint(1, procUUID(i)).bytes(3, proc))      // TrackDescriptor: uuid, process
	}
	for th, t := range l.Threads {
		for lane, tid := range ld.tid[th] {
			thr := pb(nil).int(1, int64(t.Node+1)).int(2, int64(tid)).str(5, laneName(t, lane)) // ThreadDescriptor: pid, tid, thread_name
			track(pb(nil).uint(1, laneUUID(th, lane)).uint(5, procUUID(t.Node)).bytes(4, thr))  // uuid, parent_uuid, thread
		}
	}
	for i, c := range l.Counters {
		// uuid, name, parent_uuid, counter (an empty CounterDescriptor)
		track(pb(nil).uint(1, counterUUID(i)).str(2, c.Name+" "+c.Arg).uint(5, procUUID(c.Node)).bytes(8, nil))
	}

	// The events in time order: a slice's begin and end, and the counters'
	// values. On one lane a slice ends before the next begins (lay put it
	// on a lane of its own otherwise), so at one nanosecond a lane's
	// events keep the order they were made in.
	type event struct {
		ns    int64
		track uint64
		seq   int
		slice int  // the slice's index; a counter's: -1 - its index
		end   bool // the slice's end
		value int  // the counter's value's index
	}
	ns := func(us float64) int64 { return int64(math.Round(us * 1e3)) }
	evs := make([]event, 0, 2*len(ld.ss))
	for i := range ld.ss {
		s := &ld.ss[i]
		u := laneUUID(s.thread, s.lane)
		evs = append(evs, event{ns: ns(s.ts), track: u, seq: 2 * i, slice: i},
			event{ns: ns(s.ts + s.dur), track: u, seq: 2*i + 1, slice: i, end: true})
	}
	for i, c := range l.Counters {
		for k := range c.TS {
			evs = append(evs, event{ns: ns(c.TS[k]), track: counterUUID(i), seq: k, slice: -1 - i, value: k})
		}
	}
	slices.SortFunc(evs, func(a, b event) int {
		return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.track, b.track), cmp.Compare(a.seq, b.seq))
	})
	var te, ann pb
	for _, e := range evs {
		te = te[:0].uint(fTrackUUID, e.track)
		switch {
		case e.slice < 0:
			c := &l.Counters[-1-e.slice]
			te = te.uint(fType, typeCounter).double(fDoubleCounterValue, c.V[e.value])
		case e.end:
			te = te.uint(fType, typeSliceEnd)
		default:
			s := &ld.ss[e.slice]
			te = te.uint(fType, typeSliceBegin).uint(fCategoryIIDs, 1).uint(fNameIID, names[l.Threads[s.thread].Name])
			arg := func(name string, value func(pb) pb) {
				ann = value(ann[:0].uint(annNameIID, argNames[name]))
				te = te.bytes(fDebugAnnotations, ann)
			}
			arg("tuple", func(b pb) pb { return b.int(annInt, s.tuple) })
			arg("from", func(b pb) pb { return b.uint(annStringIID, strs[s.from]) })
			arg("to", func(b pb) pb { return b.uint(annStringIID, strs[s.to]) })
			arg("dur_us", func(b pb) pb { return b.double(annDouble, s.durUS) })
			arg("bound_us", func(b pb) pb { return b.double(annDouble, s.bound) })
			arg("end_to_end_us", func(b pb) pb { return b.double(annDouble, s.e2e) })
			if s.slowest {
				arg("slowest", func(b pb) pb { return b.bool(annBool, true) })
			}
			if s.transfer {
				arg("transfer_from", func(b pb) pb { return b.uint(annStringIID, strs[s.transferFrom]) })
				arg("transfer_from_channel", func(b pb) pb { return b.uint(annStringIID, strs[s.transferCh]) })
				arg("transfer_us", func(b pb) pb { return b.double(annDouble, s.transferUS) })
				arg("transfer_bound_us", func(b pb) pb { return b.double(annDouble, s.transferErr) })
			}
			switch {
			case s.flowOut:
				te = te.fixed64(fFlowIDs, uint64(s.flow))
			case s.flowIn:
				te = te.fixed64(fTerminatingFlowIDs, uint64(s.flow))
			}
		}
		pkt = pkt[:0].uint(fTimestamp, uint64(max(e.ns, 0))).bytes(fTrackEvent, te).uint(fSequenceFlags, seqNeedsIncrementalState)
		emit(pkt)
	}
	return ld.st, bw.Flush()
}

// Perfetto's field numbers and values (perfetto/trace/trace_packet.proto,
// track_event/track_event.proto, debug_annotation.proto, interned_data.proto).
const (
	fTimestamp             = 8  // TracePacket.timestamp (ns)
	fTrustedSeqID          = 10 // TracePacket.trusted_packet_sequence_id
	fTrackEvent            = 11
	fInternedData          = 12
	fSequenceFlags         = 13
	fTrackDescriptor       = 60
	fFirstPacketOnSequence = 87

	seqIncrementalStateCleared = 1
	seqNeedsIncrementalState   = 2

	fInternedCategories        = 1 // InternedData.event_categories
	fInternedEventNames        = 2
	fInternedAnnotationNames   = 3
	fInternedAnnotationStrings = 29 // InternedData.debug_annotation_string_values

	fCategoryIIDs       = 3 // TrackEvent
	fDebugAnnotations   = 4
	fType               = 9
	fNameIID            = 10
	fTrackUUID          = 11
	fDoubleCounterValue = 44
	fFlowIDs            = 47
	fTerminatingFlowIDs = 48
	typeSliceBegin      = 1
	typeSliceEnd        = 2
	typeCounter         = 4

	annNameIID   = 1 // DebugAnnotation
	annBool      = 2
	annInt       = 4
	annDouble    = 5
	annStringIID = 17
)

// pb appends protobuf's wire format.
type pb []byte

const (
	wireVarint = 0
	wire64     = 1
	wireLen    = 2
)

func (b pb) varint(v uint64) pb { return binary.AppendUvarint(b, v) }
func (b pb) tag(field, wire int) pb {
	return b.varint(uint64(field)<<3 | uint64(wire))
}
func (b pb) uint(field int, v uint64) pb { return b.tag(field, wireVarint).varint(v) }
func (b pb) int(field int, v int64) pb   { return b.uint(field, uint64(v)) } // int32/int64: two's complement
func (b pb) bool(field int, v bool) pb {
	if v {
		return b.uint(field, 1)
	}
	return b.uint(field, 0)
}
func (b pb) fixed64(field int, v uint64) pb {
	return binary.LittleEndian.AppendUint64(b.tag(field, wire64), v)
}
func (b pb) double(field int, v float64) pb { return b.fixed64(field, math.Float64bits(v)) }
func (b pb) bytes(field int, v []byte) pb {
	return append(b.tag(field, wireLen).varint(uint64(len(v))), v...)
}
func (b pb) str(field int, s string) pb {
	return append(b.tag(field, wireLen).varint(uint64(len(s))), s...)
}
