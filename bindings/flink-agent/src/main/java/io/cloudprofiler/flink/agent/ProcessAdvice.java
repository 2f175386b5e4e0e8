package io.cloudprofiler.flink.agent;

import net.bytebuddy.asm.Advice;

/** Inlined around an operator's processElement (1, 2): the visit's in, and its end. */
public final class ProcessAdvice {
    private ProcessAdvice() {}

    @Advice.OnMethodEnter(suppress = Throwable.class)
    static At enter(@Advice.This Object operator) {
        At at = At.of(operator);
        if (at != null) at.enter();
        return at;
    }

    @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
    static void exit(@Advice.Enter At at) {
        if (at != null) at.exit();
    }
}
