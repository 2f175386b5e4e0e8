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
 * through unmarked.
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
        at.out();
        inner.collect(record);
        at.sent();
    }

    @Override
    public <X> void collect(OutputTag<X> tag, StreamRecord<X> record) {
        at.out();
        inner.collect(tag, record);
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
