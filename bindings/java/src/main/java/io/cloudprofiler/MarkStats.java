package io.cloudprofiler;

/**
 * What a marked channel's operator instance did so far (the C
 * cp_mark_stats_t), from {@link Channel#markStats()} or {@link
 * CloudProfiler#markStats(long)}. Two of them an interval apart give its
 * capacity over the interval, {@link #capacitySince(MarkStats)}.
 *
 * @param visits its ins so far
 * @param busySeconds seconds its thread worked on its tuples: every in to
 *     out, and every out to sent and departure to next in that its thread
 *     did not wait in (the analysis's cost model: own work, send, take)
 */
public record MarkStats(long visits, double busySeconds) {
    /**
     * Tuples a second the instance took while it worked since {@code
     * earlier}: what it takes a second while it has a backlog, its capacity,
     * as {@code cloudprofiler analyze} measures it afterwards. NaN without
     * work in between.
     */
    public double capacitySince(MarkStats earlier) {
        double busy = busySeconds - earlier.busySeconds;
        return busy > 0 ? (visits - earlier.visits) / busy : Double.NaN;
    }
}
