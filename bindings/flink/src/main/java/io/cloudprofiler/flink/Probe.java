package io.cloudprofiler.flink;

import io.cloudprofiler.Channel;
import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.HandlerType;
import io.cloudprofiler.LogFormat;

/**
 * One channel of one operator instance: opened in the function's open(),
 * logged from its task thread only, closed in its close(). {@link #log}
 * never throws (Channel.logTS returns a code): failures are counted and
 * {@link #close()} reports them, so a job whose records were refused fails
 * instead of leaving a log with a gap.
 */
final class Probe implements AutoCloseable {
    private final Channel channel;
    private long failures;
    private int firstError;

    private Probe(Channel channel) {
        this.channel = channel;
    }

    /** A buffered channel that keeps every (TSC, tuple id) record: BUFFER_IDENTITY, ZSTD_TSC. */
    static Probe events(String name) {
        return new Probe(Channel.open(name, LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY));
    }

    void log(long tupleId) {
        int rc = channel.logTS(tupleId);
        if (rc != CloudProfiler.OK && failures++ == 0) firstError = rc;
    }

    @Override
    public void close() {
        channel.close();
        if (failures > 0) {
            throw new IllegalStateException("channel " + channel.name() + ": " + failures
                    + " logTS calls failed, the first with " + CloudProfiler.errorString(firstError)
                    + " (" + firstError + ")");
        }
    }
}
