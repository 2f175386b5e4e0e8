package io.cloudprofiler.flink.agent;

import org.apache.flink.streaming.api.operators.Output;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.LatencyMarker;
import org.apache.flink.streaming.runtime.streamrecord.RecordAttributes;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.streaming.runtime.watermarkstatus.WatermarkStatus;
import org.apache.flink.util.OutputTag;

/**
 * An operator's output, as the agent leaves it: out right before each
 * record it hands on during a visit, sent when the hand-off returned (a
 * chained operator's work happens inside it). Watermarks and the rest pass
 * through unmarked. With ids ({@link At#IDS}), the record handed on carries
 * the visit's id in the thread's {@link Carried} slot for the hand-off (to
 * the operators chained behind, or to the network), then the slot is as it
 * was (an output feeding two chained operators gives both the id).
 */
public final class MarkingOutput<T> implements Output<StreamRecord<T>> {
    private final Output<StreamRecord<T>> inner;
    private final At at;

    MarkingOutput(Output<StreamRecord<T>> inner, At at) {
        this.inner = inner;
        this.at = at;
    }

    @Override
    public void collect(StreamRecord<T> record) {
        carrying(null, record);
    }

    @Override
    public <X> void collect(OutputTag<X> tag, StreamRecord<X> record) {
        carrying(tag, record);
    }

    /** The hand-off, with the visit's id in the thread's slot for it when ids are carried. */
    private <X> void carrying(OutputTag<X> tag, StreamRecord<X> record) {
        if (!At.IDS) {
            handOn(tag, record);
            return;
        }
        long[] slot = at.slot();
        long was = slot[0];
        slot[0] = at.carries();
        try {
            handOn(tag, record);
        } finally {
            slot[0] = was;
        }
    }

    @SuppressWarnings("unchecked")
    private <X> void handOn(OutputTag<X> tag, StreamRecord<X> record) {
        at.out();
        if (tag == null) inner.collect((StreamRecord<T>) (StreamRecord<?>) record);
        else inner.collect(tag, record);
        at.sent();
    }

    @Override
    public void emitWatermark(Watermark mark) {
        inner.emitWatermark(mark);
    }

    @Override
    public void emitWatermarkStatus(WatermarkStatus status) {
        inner.emitWatermarkStatus(status);
    }

    @Override
    public void emitLatencyMarker(LatencyMarker marker) {
        inner.emitLatencyMarker(marker);
    }

    @Override
    public void emitRecordAttributes(RecordAttributes attributes) {
        inner.emitRecordAttributes(attributes);
    }

    @Override
    public void emitWatermark(org.apache.flink.runtime.event.WatermarkEvent event) {
        inner.emitWatermark(event);
    }

    @Override
    public void close() {
        inner.close();
    }
}
