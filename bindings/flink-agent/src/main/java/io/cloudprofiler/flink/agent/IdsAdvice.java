package io.cloudprofiler.flink.agent;

import net.bytebuddy.asm.Advice;
import net.bytebuddy.implementation.bytecode.assign.Assigner;
import org.apache.flink.api.common.typeutils.TypeSerializer;

/**
 * With the agent's argument {@code ids}: the network path between tasks
 * carries each record's id ({@link CarryingSerializer}). Both ends are
 * changed, or neither: a TaskManager whose classes could not be changed
 * says so, and its job fails to read what the others send.
 */
public final class IdsAdvice {
    private IdsAdvice() {}

    /** Inlined at the end of RecordWriterOutput's constructor: its serializer writes the id after each record. */
    public static final class Writer {
        private Writer() {}

        @Advice.OnMethodExit
        static void exit(@Advice.Argument(1) TypeSerializer<?> records,
                         @Advice.FieldValue(value = "serializationDelegate", readOnly = false, typing = Assigner.Typing.DYNAMIC) Object delegate) {
            if (records != null) delegate = CarryingSerializer.writer(records);
        }
    }

    /** Inlined at the end of the network input's constructors: its deserializer reads the id after each record. */
    public static final class Reader {
        private Reader() {}

        @Advice.OnMethodExit
        static void exit(@Advice.FieldValue("inputSerializer") TypeSerializer<?> records,
                         @Advice.FieldValue(value = "deserializationDelegate", readOnly = false, typing = Assigner.Typing.DYNAMIC) Object delegate) {
            if (records != null) delegate = CarryingSerializer.reader(records);
        }
    }
}
