package io.cloudprofiler;

/**
 * One open channel, for try-with-resources:
 *
 * <pre>{@code
 * try (Channel ch = Channel.open("map entry", LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY)) {
 *     ch.logTS(tupleId);
 * }
 * }</pre>
 *
 * Thread-safe like the C calls it wraps. {@link #logTS(long)} costs what
 * {@link CloudProfiler#logTS(long, long)} costs: it never allocates and never
 * throws. The buffered handlers are fastest with one logging thread per
 * channel (open one per task or executor).
 */
public final class Channel implements AutoCloseable {
    private final long handle;
    private final String name;

    private Channel(long handle, String name) {
        this.handle = handle;
        this.name = name;
    }

    /** Opens a channel; throws {@link CloudProfilerException} naming the cause. */
    public static Channel open(String name, LogFormat format, HandlerType handler) {
        return new Channel(CloudProfiler.openChannel(name, format, handler), name);
    }

    /** Logs one event. @return 0 or a negative CloudProfiler.ERR_* code. */
    public int logTS(long tupleId) {
        return CloudProfiler.logTS(handle, tupleId);
    }

    /** Logs ids[0..n-1]; the result is read with CloudProfiler.batchAccepted/batchError. */
    public long logTS(long[] ids, int n) {
        return CloudProfiler.logTS(handle, ids, 0, n);
    }

    /** Logs ids[off..off+n-1]; the result is read with CloudProfiler.batchAccepted/batchError. */
    public long logTS(long[] ids, int off, int n) {
        return CloudProfiler.logTS(handle, ids, off, n);
    }

    /**
     * SERVICERATE channels: marks the operator's input empty or output full
     * (CloudProfiler.BLOCKED_INPUT, BLOCKED_OUTPUT, or both ORed) in the
     * current sampling period. Never allocates, never throws.
     *
     * @return 0 or a negative CloudProfiler.ERR_* code
     */
    public int markBlocked(int which) {
        return CloudProfiler.markBlocked(handle, which);
    }

    /**
     * LINEAGE channels: output outId was made from input inId; for one
     * output, log every input in the order they arrived (the analysis
     * follows the last). Never allocates, never throws.
     *
     * @return 0 or a negative CloudProfiler.ERR_* code (ERR_BAD_HANDLER on
     *     another handler)
     */
    public int logLineage(long outId, long inId) {
        return CloudProfiler.logLineage(handle, outId, inId);
    }

    /**
     * SERVICERATE channels: the service rate estimate now; throws
     * {@link CloudProfilerException} (its code: ERR_CLOSED, ERR_BAD_HANDLER)
     * otherwise.
     */
    public ServiceRate serviceRate() {
        return CloudProfiler.serviceRateOrThrow(handle, "serviceRate(\"" + name + "\")");
    }

    /**
     * A marked channel ({@code OPERATOR#INSTANCE in}, {@code out} or {@code
     * sent}, buffered): what its operator instance did so far; throws
     * {@link CloudProfilerException} (its code: ERR_CLOSED, ERR_BAD_HANDLER)
     * otherwise.
     */
    public MarkStats markStats() {
        return CloudProfiler.markStatsOrThrow(handle, "markStats(\"" + name + "\")");
    }

    /** Sets a handler argument; throws {@link CloudProfilerException} with the library's reason. */
    public Channel parameterize(int arg, long value) {
        CloudProfiler.parameterizeOrThrow(handle, name, arg, value);
        return this;
    }

    /** The C handle, for the static calls. */
    public long handle() {
        return handle;
    }

    public String name() {
        return name;
    }

    /**
     * Flushes and closes (blocks until the file is complete). A second close
     * does nothing; a close that could not write every record throws.
     */
    @Override
    public void close() {
        CloudProfiler.closeOrThrow(handle, name);
    }

    @Override
    public String toString() {
        return "Channel[" + name + ", handle " + handle + "]";
    }
}
