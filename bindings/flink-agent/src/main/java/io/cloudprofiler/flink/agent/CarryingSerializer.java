package io.cloudprofiler.flink.agent;

import java.io.IOException;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.api.common.typeutils.TypeSerializerSnapshot;
import org.apache.flink.core.memory.DataInputView;
import org.apache.flink.core.memory.DataOutputView;
import org.apache.flink.runtime.plugable.NonReusingDeserializationDelegate;
import org.apache.flink.runtime.plugable.SerializationDelegate;
import org.apache.flink.streaming.runtime.streamrecord.StreamElement;
import org.apache.flink.streaming.runtime.streamrecord.StreamElementSerializer;

/**
 * Flink's serializer of what goes over the network between tasks
 * (StreamElementSerializer), with 8 bytes after each record: the id it
 * carries ({@link Carried}; 0 for none). Installed only on the network
 * path (RecordWriterOutput's and the network input's delegates), never on
 * state: a checkpoint's or savepoint's state is Flink's own format. Both
 * ends must have it, so every TaskManager of a job runs the agent with
 * {@code ids}, or none does (docs/flink-agent.md).
 */
public final class CarryingSerializer extends TypeSerializer<StreamElement> {
    private static final long serialVersionUID = 1L;

    private final TypeSerializer<StreamElement> inner;

    CarryingSerializer(TypeSerializer<StreamElement> inner) {
        this.inner = inner;
    }

    /** RecordWriterOutput's delegate, carrying ids, for records of the given serializer. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static SerializationDelegate<StreamElement> writer(TypeSerializer<?> records) {
        return new SerializationDelegate<>(new CarryingSerializer(new StreamElementSerializer(records)));
    }

    /** The network input's delegate, carrying ids. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    public static NonReusingDeserializationDelegate<StreamElement> reader(TypeSerializer<?> records) {
        return new NonReusingDeserializationDelegate<>(new CarryingSerializer(new StreamElementSerializer(records)));
    }

    @Override
    public void serialize(StreamElement e, DataOutputView out) throws IOException {
        inner.serialize(e, out);
        if (e.isRecord()) out.writeLong(Carried.slot()[0]);
    }

    @Override
    public StreamElement deserialize(DataInputView in) throws IOException {
        StreamElement e = inner.deserialize(in);
        if (e.isRecord()) Carried.slot()[0] = in.readLong();
        return e;
    }

    @Override
    public StreamElement deserialize(StreamElement reuse, DataInputView in) throws IOException {
        StreamElement e = inner.deserialize(reuse, in);
        if (e.isRecord()) Carried.slot()[0] = in.readLong();
        return e;
    }

    @Override
    public void copy(DataInputView in, DataOutputView out) throws IOException {
        StreamElement e = inner.deserialize(in);
        inner.serialize(e, out);
        if (e.isRecord()) out.writeLong(in.readLong());
    }

    @Override
    public boolean isImmutableType() {
        return inner.isImmutableType();
    }

    @Override
    public TypeSerializer<StreamElement> duplicate() {
        TypeSerializer<StreamElement> d = inner.duplicate();
        return d == inner ? this : new CarryingSerializer(d);
    }

    @Override
    public StreamElement createInstance() {
        return inner.createInstance();
    }

    @Override
    public StreamElement copy(StreamElement from) {
        return inner.copy(from);
    }

    @Override
    public StreamElement copy(StreamElement from, StreamElement reuse) {
        return inner.copy(from, reuse);
    }

    @Override
    public int getLength() {
        return -1;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof CarryingSerializer && ((CarryingSerializer) o).inner.equals(inner);
    }

    @Override
    public int hashCode() {
        return inner.hashCode() * 31 + 7;
    }

    @Override
    public TypeSerializerSnapshot<StreamElement> snapshotConfiguration() {
        return inner.snapshotConfiguration();
    }
}
