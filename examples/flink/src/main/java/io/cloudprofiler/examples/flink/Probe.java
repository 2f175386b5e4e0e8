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
 * <p>Names: {@code <stage>-<operator>-<point>-<subtask>}, e.g.
 * {@code 1-enrich-entry-0}. The stage number puts the analysis's tables, which
 * sort by channel name, in pipeline order; the subtask index keeps one file
 * (one writer) per operator instance.
 */
final class Probe implements AutoCloseable {
    private final Channel channel;
    private long failures;
    private int firstError;

    private Probe(Channel channel) {
        this.channel = channel;
    }

    static String name(int stage, String operator, String point, int subtask) {
        return stage + "-" + operator + "-" + point + "-" + subtask;
    }

    /** A buffered channel that keeps every (TSC, tuple id) record. */
    static Probe events(int stage, String operator, String point, int subtask) {
        return new Probe(Channel.open(name(stage, operator, point, subtask), LogFormat.ZSTD_TSC,
                HandlerType.BUFFER_IDENTITY));
    }

    /**
     * A periodic counter: one record per period (count of events in it); the
     * total is in the file's trailer. FASTPERIODICCOUNTER: one writer (the
     * subtask's thread), a plain increment.
     */
    static Probe counter(int stage, String operator, String point, int subtask, long periodNanos) {
        Channel ch = Channel.open(name(stage, operator, point, subtask), LogFormat.ZSTD_TSC,
                HandlerType.FASTPERIODICCOUNTER);
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

    /** Closes each non-null probe; the first failure is thrown after all were closed. */
    static void closeAll(Probe... probes) {
        RuntimeException first = null;
        for (Probe p : probes) {
            if (p == null) continue;
            try {
                p.close();
            } catch (RuntimeException e) {
                if (first == null) first = e;
                else first.addSuppressed(e);
            }
        }
        if (first != null) throw first;
    }
}
