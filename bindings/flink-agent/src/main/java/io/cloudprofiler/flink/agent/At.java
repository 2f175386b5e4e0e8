package io.cloudprofiler.flink.agent;

import io.cloudprofiler.Marks;
import io.cloudprofiler.flink.Profiled;

import org.apache.flink.streaming.api.graph.StreamConfig;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.Output;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * One operator instance's marks, by the marking convention ({@code
 * OPERATOR#SUBTASK in|out|sent}, io.cloudprofiler.Marks), kept in a field
 * the agent adds to AbstractStreamOperator. Every call comes on the task's
 * thread: the channels open at the instance's first record and close with
 * the operator.
 *
 * <p>The records carry no id of ours: a visit's id is the instance's own
 * sequence number with the instance's hash in its top bits, so its in, outs
 * and sents pair up, and no two instances share an id (a hop between
 * operators has no common id: no latencies across them). With the agent's
 * argument {@code ids}, a visit takes the id its record carries where it
 * carries one ({@link Carried}: from the operator chained before it, or
 * over the network from another task), so a record's marks share one id
 * from the first marked operator to the last.
 */
public final class At {
    /** The field the agent adds to AbstractStreamOperator. */
    public static final String FIELD = "cp$at";

    /** Whether visits take the ids records carry (the agent's argument ids), fixed before this class loads. */
    static final boolean IDS = Carried.on;
    static final int SEQ_BITS = 39;
    static final long SEQ_MASK = (1L << SEQ_BITS) - 1;

    final String operator, instance;
    /** No output of its own (a sink): its visit's end is its out. */
    final boolean sink;
    final long base;
    public final MarkingOutput<?> output;

    private Marks marks;
    private boolean off;
    private int depth;
    private long seq, id;
    private boolean emitted;
    /** The task thread's {@link Carried} slot (IDS), taken on the first call. */
    private long[] slot;

    private At(String operator, String instance, boolean sink, Output<StreamRecord<Object>> inner) {
        this.operator = operator;
        this.instance = instance;
        this.sink = sink;
        this.base = ((long) ((operator + "#" + instance).hashCode() & 0xFFFFFF)) << SEQ_BITS;
        this.output = new MarkingOutput<>(inner, this);
    }

    /** The operator's At, with its output wrapped; null (the operator left as it is) when it cannot be marked. */
    @SuppressWarnings("unchecked")
    public static At attach(Object operator, Object output) {
        try {
            AbstractStreamOperator<?> op = (AbstractStreamOperator<?>) operator;
            if (!Profiled.flag(op.getRuntimeContext().getGlobalJobParameters(), Profiled.ENABLED)) return null;
            StreamConfig cfg = op.getOperatorConfig();
            return new At(Names.operator(cfg.getOperatorName(), cfg.getVertexID()),
                    Profiled.instance(op.getRuntimeContext().getTaskInfo()), isSink(op, cfg),
                    (Output<StreamRecord<Object>>) output);
        } catch (Throwable e) {
            Log.say("an operator of class " + operator.getClass().getName() + " left unmarked: " + e);
            return null;
        }
    }

    private static boolean told;

    /** The operator's At (null: not marked). */
    public static At of(Object operator) {
        try {
            return operator instanceof Marked ? ((Marked) operator).cp$at() : null;
        } catch (Throwable e) {
            if (!told) {
                told = true;
                Log.say("an operator of class " + operator.getClass().getName() + " left unmarked: " + e);
            }
            return null;
        }
    }

    /** An operator with no output, chained or not: a sink. */
    static boolean isSink(AbstractStreamOperator<?> op, StreamConfig cfg) {
        ClassLoader cl = op.getUserCodeClassloader();
        return cfg.getChainedOutputs(cl).isEmpty() && cfg.getOperatorNonChainedOutputs(cl).isEmpty();
    }

    // enter, exit and close are public: the advice that calls them is
    // inlined into Flink's classes, in other packages.

    /** A record arrives (processElement begins): in, unless this is a visit's nested call. */
    public void enter() {
        begin(true);
    }

    /** A timer fires (onEventTime, onProcessingTime): a visit with an id of its own, never a carried one. */
    public void enterTimer() {
        begin(false);
    }

    /** A visit's in: the id its record carries where it may take one (IDS) and there is one, else its own. */
    private void begin(boolean mayCarry) {
        if (depth++ > 0 || off) return;
        if (marks == null && !open()) return;
        long carried = IDS && mayCarry ? slot()[0] : 0;
        id = carried != 0 ? carried : base | (++seq & SEQ_MASK);
        emitted = false;
        marks.in(id);
    }

    /** processElement returned (or threw): a sink's visit ends with its out. */
    public void exit() {
        if (--depth > 0 || marks == null) return;
        if (sink && !emitted) marks.out(id);
    }

    /** Right before the operator hands a record on while on a visit. */
    void out() {
        if (depth > 0 && marks != null) {
            emitted = true;
            marks.out(id);
        }
    }

    /** The task thread's slot of the id the record at hand carries. */
    long[] slot() {
        long[] s = slot;
        if (s == null) slot = s = Carried.slot();
        return s;
    }

    /** The id a record handed on now carries: the visit's, 0 outside one (a record a watermark emits). */
    long carries() {
        return depth > 0 && marks != null ? id : 0;
    }

    /** The hand-off returned (with any chained operators' work inside it). */
    void sent() {
        if (depth > 0 && marks != null) marks.sent(id);
    }

    private boolean open() {
        try {
            marks = Marks.open(operator, instance, !sink, false);
            return true;
        } catch (Throwable e) {
            off = true;
            Log.say(operator + "#" + instance + " left unmarked: " + e.getMessage());
            return false;
        }
    }

    public void close() {
        Marks m = marks;
        marks = null;
        off = true;
        if (m == null) return;
        try {
            m.close();
        } catch (Throwable e) {
            Log.say(operator + "#" + instance + ": " + e.getMessage());
        }
    }
}
