package io.cloudprofiler.flink.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.core.memory.DataOutputSerializer;
import org.apache.flink.streaming.api.watermark.Watermark;
import org.apache.flink.streaming.runtime.streamrecord.StreamElement;
import org.apache.flink.streaming.runtime.streamrecord.StreamElementSerializer;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.junit.jupiter.api.Test;

/**
 * The wire format with ids: each record as Flink writes it, then its id
 * (8 bytes); a watermark as Flink writes it, nothing after. Read back, the
 * elements are Flink's and the thread's slot holds each record's id.
 */
class CarryingSerializerTest {
    @Test
    void recordsCarryTheirIdsAndNothingElseChanges() throws Exception {
        CarryingSerializer s = new CarryingSerializer(new StreamElementSerializer<>(LongSerializer.INSTANCE));
        StreamElementSerializer<Long> flink = new StreamElementSerializer<>(LongSerializer.INSTANCE);
        long[] slot = Carried.slot();
        DataOutputSerializer out = new DataOutputSerializer(64), plain = new DataOutputSerializer(64);
        StreamElement[] elements = {new StreamRecord<>(7L), new Watermark(5), new StreamRecord<>(8L, 123)};
        long[] ids = {0x1234_5678_9ABCL, 0, 42};
        for (int i = 0; i < elements.length; i++) {
            slot[0] = ids[i];
            s.serialize(elements[i], out);
            flink.serialize(elements[i], plain);
        }
        assertEquals(plain.length() + 16, out.length(), "8 bytes after each of the two records, none after the watermark");

        DataInputDeserializer in = new DataInputDeserializer(out.getCopyOfBuffer());
        for (int i = 0; i < elements.length; i++) {
            slot[0] = -1;
            StreamElement e = s.deserialize(in);
            assertEquals(elements[i], e);
            assertEquals(elements[i].isRecord() ? ids[i] : -1, slot[0], "the slot after element " + i);
        }
        assertEquals(0, in.available());

        // copy (Flink's spilling paths): the same bytes, ids included
        DataOutputSerializer copied = new DataOutputSerializer(64);
        DataInputDeserializer again = new DataInputDeserializer(out.getCopyOfBuffer());
        for (int i = 0; i < elements.length; i++) s.copy(again, copied);
        assertEquals(java.util.Arrays.toString(out.getCopyOfBuffer()), java.util.Arrays.toString(copied.getCopyOfBuffer()));
    }
}
