"""Reads a Perfetto protobuf trace with Perfetto's own definitions (the
perfetto package from PyPI: perfetto_trace_pb2, generated from
perfetto/trace/*.proto) and prints what it holds as JSON, for
tests/report/trace_test.go to compare with the JSON trace of the same run.

What it prints: every slice (its thread's name, pid and tid, its begin and
end in nanoseconds, its debug annotations by name, its flow ids), every
counter value (its track's name, its process's pid, nanoseconds, value),
and the packets' checks (timestamps in order; each end closes a begin on
its own track). Interned names are resolved as Perfetto resolves them:
from the sequence's interned data.
"""
import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

names, arg_names, cats, strs = {}, {}, {}, {}
tracks = {}  # uuid -> descriptor
slices, counters, open_slices = [], [], {}
last_ts = 0
out_of_order = 0
for p in trace.packet:
    if p.HasField("interned_data"):
        if p.sequence_flags & pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            names, arg_names, cats, strs = {}, {}, {}, {}
        for e in p.interned_data.event_names:
            names[e.iid] = e.name
        for e in p.interned_data.debug_annotation_names:
            arg_names[e.iid] = e.name
        for e in p.interned_data.event_categories:
            cats[e.iid] = e.name
        for e in p.interned_data.debug_annotation_string_values:
            strs[e.iid] = e.str.decode()
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        tracks[d.uuid] = d
    if not p.HasField("track_event"):
        continue
    if p.timestamp < last_ts:
        out_of_order += 1
    last_ts = p.timestamp
    e = p.track_event
    d = tracks[e.track_uuid]
    if e.type == pb.TrackEvent.TYPE_COUNTER:
        parent = tracks[d.parent_uuid]
        counters.append({"track": d.name, "pid": parent.process.pid, "ts_ns": p.timestamp, "value": e.double_counter_value})
    elif e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
        args = {}
        for a in e.debug_annotations:
            kind = a.WhichOneof("value")
            args[arg_names[a.name_iid]] = strs[a.string_value_iid] if kind == "string_value_iid" else getattr(a, kind)
        s = {"name": names[e.name_iid], "category": cats[e.category_iids[0]], "thread": d.thread.thread_name,
             "pid": d.thread.pid, "tid": d.thread.tid, "begin_ns": p.timestamp, "args": args,
             "flow_ids": list(e.flow_ids), "terminating_flow_ids": list(e.terminating_flow_ids)}
        open_slices.setdefault(e.track_uuid, []).append(s)
        slices.append(s)
    elif e.type == pb.TrackEvent.TYPE_SLICE_END:
        stack = open_slices.get(e.track_uuid)
        if not stack:
            sys.exit(f"an end on track {e.track_uuid} with no slice open")
        stack.pop()["end_ns"] = p.timestamp

unclosed = sum(len(s) for s in open_slices.values())
json.dump({"packets": len(trace.packet), "out_of_order": out_of_order, "unclosed": unclosed,
           "slices": slices, "counters": counters}, sys.stdout)
