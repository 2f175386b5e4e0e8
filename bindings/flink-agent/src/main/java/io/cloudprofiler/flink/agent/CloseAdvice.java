package io.cloudprofiler.flink.agent;

import net.bytebuddy.asm.Advice;

/** Inlined at the end of AbstractStreamOperator.close: the instance's marks flushed and closed. */
public final class CloseAdvice {
    private CloseAdvice() {}

    @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
    static void exit(@Advice.FieldValue(At.FIELD) At at) {
        if (at != null) at.close();
    }
}
