package io.cloudprofiler.flink.agent;

import net.bytebuddy.asm.Advice;

/**
 * Inlined around an operator's onEventTime and onProcessingTime: a timer's
 * firing (a window's, a process function's onTimer) is a visit of its own,
 * with an id of its own (it has no input record), so what it emits has
 * its out and sent, and its work counts in the operator's cost.
 */
public final class TimerAdvice {
    private TimerAdvice() {}

    @Advice.OnMethodEnter(suppress = Throwable.class)
    static At enter(@Advice.This Object operator) {
        At at = At.of(operator);
        if (at != null) at.enterTimer();
        return at;
    }

    @Advice.OnMethodExit(onThrowable = Throwable.class, suppress = Throwable.class)
    static void exit(@Advice.Enter At at) {
        if (at != null) at.exit();
    }
}
