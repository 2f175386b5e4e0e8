package io.cloudprofiler.flink;

/**
 * The marks of one operator instance (one subtask), by the marking
 * convention (README, "Capacity"): channels {@code OPERATOR#SUBTASK in},
 * {@code ... out} and, where the function hands its records on with {@code
 * collect} itself, {@code ... sent}:
 *
 * <pre>{@code
 * marks.in(id);     // the function starts on the record
 * ...its own work...
 * marks.out(id);    // right before the hand-off
 * out.collect(r);   // serializes into Flink's output buffer; waits for one under backpressure
 * marks.sent(id);   // the hand-off returned
 * }</pre>
 *
 * A function that returns its result (a map, a filter) cannot mark {@code
 * sent}: Flink emits after it returned. With operator chaining, {@code
 * collect} runs the chained operators downstream, so out -&gt; sent holds
 * their work too. {@link Profiled} uses these for every function it wraps;
 * a hand-written function can use them directly.
 */
public final class Marks implements AutoCloseable {
    private final Probe in, out, sent;

    private Marks(Probe in, Probe out, Probe sent) {
        this.in = in;
        this.out = out;
        this.sent = sent;
    }

    /** The channel name for a mark: {@code OPERATOR#SUBTASK ROLE}. */
    public static String channelName(String operator, int subtask, String role) {
        return operator + "#" + subtask + " " + role;
    }

    /**
     * Opens the instance's channels ({@code sent} only when withSent); call
     * from the thread that logs (the task's: a function's open()).
     */
    public static Marks open(String operator, int subtask, boolean withSent) {
        checkOperator(operator);
        Probe i = null, o = null, s = null;
        try {
            i = Probe.events(channelName(operator, subtask, "in"));
            o = Probe.events(channelName(operator, subtask, "out"));
            if (withSent) s = Probe.events(channelName(operator, subtask, "sent"));
            return new Marks(i, o, s);
        } catch (RuntimeException e) {
            closeAll(e, i, o, s);
            throw e;
        }
    }

    /** Refuses a name the convention cannot parse back: empty, or with '#' or ' ' in it. */
    static void checkOperator(String operator) {
        if (operator == null || operator.isEmpty() || operator.contains("#") || operator.contains(" ")) {
            throw new IllegalArgumentException("cloudprofiler: an operator's name for its marks must be non-empty, without '#' or ' ': "
                    + (operator == null ? "null" : "\"" + operator + "\""));
        }
    }

    /** Marks nothing: a job run with marking off. */
    public static Marks off() {
        return new Marks(null, null, null);
    }

    public void in(long id) {
        if (in != null) in.log(id);
    }

    public void out(long id) {
        if (out != null) out.log(id);
    }

    public void sent(long id) {
        if (sent != null) sent.log(id);
    }

    /** Flushes and closes the channels; throws if a log call or a close failed. */
    @Override
    public void close() {
        RuntimeException first = closeAll(null, in, out, sent);
        if (first != null) throw first;
    }

    /** Closes each probe; failures join first (or become it). */
    private static RuntimeException closeAll(RuntimeException first, Probe... probes) {
        for (Probe p : probes) {
            if (p == null) continue;
            try {
                p.close();
            } catch (RuntimeException e) {
                if (first == null) first = e;
                else first.addSuppressed(e);
            }
        }
        return first;
    }
}
