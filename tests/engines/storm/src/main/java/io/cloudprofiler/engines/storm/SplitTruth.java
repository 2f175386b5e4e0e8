package io.cloudprofiler.engines.storm;

import java.util.Arrays;

/**
 * The headline truth of a task, <b>TRUE CAPACITY (split)</b>: its
 * departure log ({@link TaskCounter}: System.nanoTime() as each execute
 * ends, kept by the bolt itself, never the marks) split by what the
 * sampler ({@link TruthSampler}) saw its executor thread do. The same
 * definition as the Flink harness's ({@code tests/engines/flink}, {@code
 * Truth.Probe#splitOver}), so that both engines are held to one truth.
 *
 * <p>The capacity wanted is what the task departs a second while it has a
 * backlog, as it would saturated: departure to departure, while busy with
 * queued tuples. A gap between two consecutive departures is service (one
 * tuple's execute and Storm's own work around it: taking it, acking,
 * handing the output on, a preemption while it has work) unless the thread
 * parked in it. Storm's executor parks or sleeps whenever it waits, in its
 * wait strategies (topology.bolt.wait.strategy for input,
 * topology.backpressure.wait.strategy for room downstream:
 * WaitStrategyProgressive by default, parkNanos(1) then sleep(1 ms)), so a
 * wait shows as a thread state other than RUNNABLE. Two pieces of evidence
 * that it parked in a gap:
 *
 * <ol>
 * <li>a sample strictly inside the gap saw the thread not RUNNABLE;
 * <li>the JVM's count of the thread's waits rose by m between two
 *     consecutive samples that both saw it RUNNABLE: it parked m times in
 *     between, unseen (a park shorter than the samples' spacing, or one
 *     while the sampler itself waited for a CPU: on a 2-vCPU machine whose
 *     other vCPU is busy the sampler is not always given one). Of the gaps
 *     overlapping those two samples' interval, the m longest parked: a park
 *     lengthens its gap. The Flink harness added it after its truth, with
 *     rule 1 alone, counted a 233 ms wait for input as service while the
 *     sampler went 240 ms without a sample.
 * </ol>
 *
 * Capacity = (gaps counted) / (their total time); busy share = their total
 * time over the range. A parked gap is left out whole, with the service of
 * the tuple that ended it (one tuple a wait, mixed with the wait). A gap
 * belongs to the range it ends in, as a tuple's work is counted when it is
 * done. Evidence, not a threshold: no gap is left out for its length.
 *
 * <p>A garbage collection stops every thread at a safepoint, where the JVM
 * still reports it RUNNABLE and counts no wait: the truth counts its pause
 * as service of the tuple it fell in. The tables print each run's GC time
 * and how much of it fell in each task's service gaps.
 */
public final class SplitTruth {
    public final String task;
    /** The task's whole departure log, in time order. */
    private final long[] d;
    /** Departures the log had no room for (the truth then covers the first ones only). */
    public final long overflow;
    /** parked[k]: the thread parked in the gap that ends at departure k; unseen[k]: only rule 2 says so. */
    private final boolean[] parked, unseen;

    /** Classifies the gaps of a task's whole log once (a gap's class is its own, not a range's). */
    public SplitTruth(String task, long[] departures, long overflow, TruthSampler.Series samples) {
        this.task = task;
        this.d = departures;
        this.overflow = overflow;
        int m = d.length;
        parked = new boolean[m];
        unseen = new boolean[m];
        if (m < 2 || samples == null) return;
        long first = d[0], last = d[m - 1];
        long[] t = samples.t, w = samples.waits;
        byte[] state = samples.state;
        int n = samples.n;
        // rule 1: a sample strictly inside a gap that saw the thread parked
        // (NONE, before the task's first execute, lies before its first departure)
        for (int j = 0; j < n; j++) {
            if (state[j] != TruthSampler.RUNNABLE && state[j] != TruthSampler.NONE && t[j] > first && t[j] < last) {
                int k = firstAtOrAfter(t[j]);
                if (d[k] > t[j]) parked[k] = true;
            }
        }
        // rule 2, after it (what it adds is what the samples did not see):
        // waits counted between samples j and j+1 that both saw the thread
        // RUNNABLE, so each began and ended in between (the count is read
        // before the state); only between two samples inside the log, or the
        // park may lie outside it
        for (int j = 0; j + 1 < n; j++) {
            if (w[j + 1] > w[j] && state[j] == TruthSampler.RUNNABLE && state[j + 1] == TruthSampler.RUNNABLE && t[j] >= first
                    && t[j + 1] <= last) {
                // the gaps overlapping (t[j], t[j+1]): ending after t[j], starting before t[j+1]
                int k0 = Math.max(1, firstAtOrAfter(t[j] + 1));
                int k1 = Math.min(m - 1, firstAtOrAfter(t[j + 1]));
                parkLongest(k0, k1, w[j + 1] - w[j]);
            }
        }
    }

    /** Marks the count longest gaps ending at departures k0..k1 parked (those not yet: as seen by rule 2 alone). */
    private void parkLongest(int k0, int k1, long count) {
        boolean[] taken = new boolean[Math.max(0, k1 - k0 + 1)];
        for (long round = 0; round < count && round < taken.length; round++) {
            int best = -1;
            for (int k = k0; k <= k1; k++) {
                if (!taken[k - k0] && (best < 0 || gapNs(k) > gapNs(best))) best = k;
            }
            taken[best - k0] = true;
            if (!parked[best]) {
                parked[best] = true;
                unseen[best] = true;
            }
        }
    }

    /** The gap that ends at departure k. */
    private long gapNs(int k) {
        return d[k] - d[k - 1];
    }

    /** The index of the first departure at or after x (the log's length if none). */
    private int firstAtOrAfter(long x) {
        int i = Arrays.binarySearch(d, x);
        if (i < 0) return -i - 1;
        while (i > 0 && d[i - 1] == x) i--; // equal times: the first of them
        return i;
    }

    /**
     * The task over (from, to] (System.nanoTime()): the gaps that end at a
     * departure in it; gcStarts/gcEnds the JVM's pauses (GcPauses), to say
     * how much of them the service gaps hold.
     */
    public Split over(long from, long to, long[] gcStarts, long[] gcEnds) {
        int m = d.length;
        int lo = firstAtOrAfter(from + 1), hi = firstAtOrAfter(to + 1);
        long serviceGaps = 0, serviceNs = 0, parkedGaps = 0, parkedNs = 0, unseenGaps = 0, gcNs = 0;
        for (int k = Math.max(1, lo); k < hi && k < m; k++) {
            if (parked[k]) {
                parkedGaps++;
                parkedNs += gapNs(k);
                if (unseen[k]) unseenGaps++;
            } else {
                serviceGaps++;
                serviceNs += gapNs(k);
                for (int g = 0; g < gcStarts.length; g++) {
                    long a = Math.max(d[k - 1], gcStarts[g]), b = Math.min(d[k], gcEnds[g]);
                    if (b > a) gcNs += b - a;
                }
            }
        }
        return new Split(Math.max(0, hi - lo), serviceGaps, serviceNs, parkedGaps, parkedNs, unseenGaps, gcNs, to - from, overflow);
    }

    /** Over (from, to], without the GC's share. */
    public Split over(long from, long to) {
        return over(from, to, new long[0], new long[0]);
    }

    /**
     * A task's split truth over a range.
     *
     * @param count       departures in the range
     * @param serviceGaps gaps the thread did not park in
     * @param serviceNs   their total time
     * @param parkedGaps  gaps it parked in, left out
     * @param parkedNs    their total time
     * @param unseenGaps  of them, those only the JVM's count of waits told (no sample saw the thread parked)
     * @param gcNs        the JVM's pauses inside the service gaps (counted as service: the thread stays RUNNABLE)
     * @param rangeNs     the range's length
     * @param overflow    departures the full log did not store (if not 0, the range's end is missing)
     */
    public record Split(long count, long serviceGaps, long serviceNs, long parkedGaps, long parkedNs, long unseenGaps, long gcNs,
                        long rangeNs, long overflow) {
        /** TRUE CAPACITY: departures a second over the gaps the thread did not park in. */
        public double capacity() {
            return serviceNs == 0 ? Double.NaN : serviceGaps / (serviceNs / 1e9);
        }

        /** The truth's busy share: the service gaps' time over the range. */
        public double busyShare() {
            return rangeNs == 0 ? Double.NaN : (double) serviceNs / rangeNs;
        }

        /**
         * A diagnostic, never checked against: the capacity with the JVM's
         * pauses taken out of the service gaps (the gaps still counted),
         * which is about what a measure that leaves a collection out sees.
         */
        public double capacityWithoutGc() {
            return serviceNs - gcNs <= 0 ? Double.NaN : serviceGaps / ((serviceNs - gcNs) / 1e9);
        }

        /** A diagnostic, never checked against: the busy share with the JVM's pauses taken out. */
        public double busyShareWithoutGc() {
            return rangeNs == 0 ? Double.NaN : (double) (serviceNs - gcNs) / rangeNs;
        }
    }
}
