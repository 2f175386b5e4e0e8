package io.cloudprofiler.examples.flink;

/**
 * The marks of one operator instance (one subtask), by the marking
 * convention: channels {@code OPERATOR#SUBTASK in}, {@code ... out} and,
 * for an operator that hands its tuples on with {@code collect} itself,
 * {@code ... sent}:
 *
 * <pre>{@code
 * marks.in(e.id);           // the operator starts on the tuple
 * ...its own work...
 * marks.out(e.id);          // done: right before the hand-off
 * out.collect(e);           // serializes into Flink's output buffer; waits for a free one under backpressure
 * marks.sent(e.id);         // the hand-off returned
 * }</pre>
 *
 * An operator that returns its result (a map) cannot mark {@code sent}:
 * Flink emits after the function returned. With operator chaining, {@code
 * collect} calls the chained operators downstream, so out -&gt; sent then
 * holds their work too. {@link #off()} marks nothing (a job run without
 * logging); {@link #pause} stops every instance's logging in this JVM for a
 * while, the channels staying open.
 */
final class Marks implements AutoCloseable {
    private final Probe in, out, sent;
    private static volatile boolean paused;

    private Marks(Probe in, Probe out, Probe sent) {
        this.in = in;
        this.out = out;
        this.sent = sent;
    }

    /** Opens the instance's channels ({@code sent} only when withSent); call from the thread that logs. */
    static Marks open(String operator, int subtask, boolean withSent) {
        Probe i = null, o = null, s = null;
        try {
            i = Probe.events(operator, subtask, "in");
            o = Probe.events(operator, subtask, "out");
            if (withSent) s = Probe.events(operator, subtask, "sent");
            return new Marks(i, o, s);
        } catch (RuntimeException e) {
            try {
                Probe.closeAll(i, o, s);
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
    }

    /** Marks nothing. */
    static Marks off() {
        return new Marks(null, null, null);
    }

    /**
     * While paused, the marks of this JVM log nothing; their channels stay
     * open. How a test runs {@code gen maxrate} against a marked job and then
     * logs one run of it: one job, warm, its channels holding that run only.
     */
    static void pause(boolean pause) {
        paused = pause;
    }

    void in(long id) {
        if (in != null && !paused) in.log(id);
    }

    void out(long id) {
        if (out != null && !paused) out.log(id);
    }

    void sent(long id) {
        if (sent != null && !paused) sent.log(id);
    }

    /** Closes the channels; throws if a log call or a close failed (see {@link Probe#close()}). */
    @Override
    public void close() {
        Probe.closeAll(in, out, sent);
    }
}
