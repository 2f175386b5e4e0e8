package io.cloudprofiler.examples.flink;

import io.cloudprofiler.Channel;
import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.HandlerType;
import io.cloudprofiler.LogFormat;

/**
 * One Cloudprofiler channel of one operator instance (one subtask): opened in
 * the operator's open(), logged from its task thread only, closed in its
 * close(). {@link #log(long)} never throws (Channel.logTS returns a code):
 * failures are counted and {@link #close()} reports them, so a run with a
 * refused record fails instead of analysing a log with a gap.
 *
 * <p>Names follow the marking convention (top-level README, "Capacity"):
 * {@code OPERATOR#SUBTASK ROLE}, e.g. {@code 1-enrich#0 in}. ROLE is
 * {@code in} (the operator starts on the tuple), {@code out} (its work is
 * done: right before it returns or collects the tuple) or {@code sent} (the
 * collect returned: out -&gt; sent is time blocked on a full output); the
 * subtask index keeps one file (one writer) per operator instance, and the
 * stage number in OPERATOR lists the operators in pipeline order where a
 * table sorts by name. A channel whose last word is none of these (the
 * sink's {@code counter}) is not a mark: {@code analyze} times it but leaves
 * it out of the capacity analysis.
 */
final class Probe implements AutoCloseable {
    private final Channel channel;
    private long failures;
    private int firstError;

    private Probe(Channel channel) {
        this.channel = channel;
    }

    /** {@code OPERATOR#SUBTASK ROLE}. */
    static String name(String operator, int subtask, String role) {
        return operator + "#" + subtask + " " + role;
    }

    /** A buffered channel that keeps every (TSC, tuple id) record. */
    static Probe events(String operator, int subtask, String role) {
        return new Probe(Channel.open(name(operator, subtask, role), LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY));
    }

    /**
     * A periodic counter: one record per period (count of events in it); the
     * total is in the file's trailer. FASTPERIODICCOUNTER: one writer (the
     * subtask's thread), a plain increment.
     */
    static Probe counter(String operator, int subtask, String what, long periodNanos) {
        Channel ch = Channel.open(name(operator, subtask, what), LogFormat.ZSTD_TSC, HandlerType.FASTPERIODICCOUNTER);
        try {
            ch.parameterize(CloudProfiler.ARG0, periodNanos);
        } catch (RuntimeException e) {
            ch.close();
            throw e;
        }
        return new Probe(ch);
    }

    /** Logs the tuple id with the current TSC. */
    void log(long tupleId) {
        int rc = channel.logTS(tupleId);
        if (rc != CloudProfiler.OK && failures++ == 0) firstError = rc;
    }

    /** Flushes and closes the file; throws if any log call or the close failed. */
    @Override
    public void close() {
        channel.close();
        if (failures > 0) {
            throw new IllegalStateException("channel " + channel.name() + ": " + failures
                    + " logTS calls failed, the first with " + CloudProfiler.errorString(firstError)
                    + " (" + firstError + ")");
        }
    }

    /**
     * Closes each non-null probe or {@link Marks} (whose close throws
     * nothing checked); the first failure is thrown after all were closed.
     */
    static void closeAll(AutoCloseable... probes) {
        RuntimeException first = null;
        for (AutoCloseable p : probes) {
            if (p == null) continue;
            try {
                p.close();
            } catch (Exception e) {
                RuntimeException r = e instanceof RuntimeException re ? re : new IllegalStateException(e);
                if (first == null) first = r;
                else first.addSuppressed(r);
            }
        }
        if (first != null) throw first;
    }
}
