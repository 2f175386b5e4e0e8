package io.cloudprofiler.flink.agent;

import net.bytebuddy.asm.Advice;
import net.bytebuddy.implementation.bytecode.assign.Assigner;

/** Inlined at the end of AbstractStreamOperator.setup: the operator gets its {@link At} and a marking output. */
public final class SetupAdvice {
    private SetupAdvice() {}

    @Advice.OnMethodExit(suppress = Throwable.class)
    static void exit(@Advice.This Object operator,
                     @Advice.FieldValue(value = "output", readOnly = false, typing = Assigner.Typing.DYNAMIC) Object output,
                     @Advice.FieldValue(value = At.FIELD, readOnly = false) At at) {
        At a = At.attach(operator, output);
        if (a != null) {
            at = a;
            output = a.output;
        }
    }
}
