package io.cloudprofiler.engines.storm;

import java.util.Arrays;

/**
 * A secondary truth, the last round's headline, from the same departure log
 * as {@link SplitTruth} ({@link TaskCounter}: the times a task's execute
 * ended, kept by the user's bolt; never the marks).
 *
 * <p><b>Capacity (G)</b> of a task over a range = the number of consecutive
 * departure pairs whose gap is below G, over the sum of those gaps,
 * whatever the thread did in them: a gap below G is taken for one tuple's
 * cost, one of G or more for a wait. G = {@value #HEADLINE_MS} ms, with
 * {@value #LOW_MS} and {@value #HIGH_MS} ms beside it to show how much the
 * answer leans on the choice.
 *
 * <p>What it cannot tell apart: a gap below G in which the task waited for
 * its next tuple (it reads low below saturation), and a garbage
 * collection of G or more while it had work (left out, where the split
 * truth counts it). A task fed evenly at a light load waits before nearly
 * every tuple, and its "capacity" is then its arrival rate, which is why
 * the spout emits in bursts at a light load ({@link RecordSpout}). The
 * split truth replaced it because it takes waits from evidence (the
 * thread's state), not from a gap's length.
 */
public final class Departures {
    public static final int LOW_MS = 5, HEADLINE_MS = 20, HIGH_MS = 50;
    public static final long MS = 1_000_000L;

    public final String task;
    /** The departures in the range, ns (System.nanoTime()), in order. */
    private final long[] t;
    /** Departures the log had no room for: the truth is then of the first ones only. */
    public final long overflow;
    /** The range, ns. */
    public final long from, to;

    /** Departures over [from, to] of a task's log (times outside it are left out). */
    public Departures(String task, long[] log, long overflow, long from, long to) {
        this.task = task;
        this.overflow = overflow;
        this.from = from;
        this.to = to;
        t = Arrays.stream(log).filter(x -> x >= from && x <= to).toArray();
    }

    /** Consecutive departure pairs, split by a gap threshold G. */
    public record Gaps(long below, long belowNs, long above, long aboveNs) {
        /** Departures a second over the gaps below G: the true capacity. */
        public double capacity() {
            return belowNs > 0 ? below / (belowNs * 1e-9) : Double.NaN;
        }
    }

    /** The gaps of the whole range. */
    public Gaps gaps(long gNs) {
        return gaps(gNs, from, to);
    }

    /** The gaps of the pairs whose both departures fall in [a, b]. */
    public Gaps gaps(long gNs, long a, long b) {
        long below = 0, belowNs = 0, above = 0, aboveNs = 0;
        for (int i = 1; i < t.length; i++) {
            if (t[i - 1] < a || t[i] > b) continue;
            long g = t[i] - t[i - 1];
            if (g < gNs) {
                below++;
                belowNs += g;
            } else {
                above++;
                aboveNs += g;
            }
        }
        return new Gaps(below, belowNs, above, aboveNs);
    }

    /**
     * Of the gaps of G or more, those that hold some of the intervals
     * [starts[k], ends[k]] (the JVM's pauses): how many, and their total
     * time, ns.
     */
    public long[] aboveOverlapping(long gNs, long[] starts, long[] ends) {
        long n = 0, ns = 0;
        for (int i = 1; i < t.length; i++) {
            long a = t[i - 1], b = t[i];
            if (b - a < gNs) continue;
            for (int k = 0; k < starts.length; k++) {
                if (starts[k] < b && ends[k] > a) {
                    n++;
                    ns += b - a;
                    break;
                }
            }
        }
        return new long[] {n, ns};
    }

    /** The true capacity (departures), G in ms. */
    public double capacity(int gMs) {
        return gaps(gMs * MS).capacity();
    }

    /** Share of the range in gaps below G: the departures' busy share. */
    public double busyShare(int gMs) {
        return gaps(gMs * MS).belowNs / (double) (to - from);
    }

    /**
     * Of the time in gaps below G (the truth's busy time), the share in gaps
     * below thresholdNs (twice the median gap at saturation): how much of
     * the truth rests on departures that came back to back. Weighted by
     * time, unlike {@link #shareBelow}: a task paced by its input (1-decode
     * unthrottled: 2 µs tuples, most of them close together, but most of
     * its time in waits of 5 µs to 20 ms) scores near 0 here while nearly
     * all its departures come within 1 ms of the previous one.
     */
    public double timeShareBelow(long gNs, long thresholdNs) {
        long busy = 0, b2b = 0;
        for (int i = 1; i < t.length; i++) {
            long g = t[i] - t[i - 1];
            if (g >= gNs) continue;
            busy += g;
            if (g < thresholdNs) b2b += g;
        }
        return busy > 0 && thresholdNs > 0 ? b2b / (double) busy : Double.NaN;
    }

    /** The departure times, ns since t0, one line each ("task,t_ns"), for the run's directory. */
    public void write(java.io.PrintWriter w, long t0) {
        for (long x : t) w.printf("%s,%d%n", task, x - t0);
    }

    public int departures() {
        return t.length;
    }

    public double rangeS() {
        return (to - from) * 1e-9;
    }

    public double throughput() {
        return t.length / rangeS();
    }

    /** The median gap between consecutive departures, ns; -1 with fewer than two. */
    public long medianGapNs() {
        if (t.length < 2) return -1;
        long[] g = new long[t.length - 1];
        for (int i = 1; i < t.length; i++) g[i - 1] = t[i] - t[i - 1];
        Arrays.sort(g);
        return g[g.length / 2];
    }

    /**
     * Share of the departures whose gap to the previous one is below
     * thresholdNs: how much of the run went back to back (the first
     * departure has no previous one and counts as not).
     */
    public double shareBelow(long thresholdNs) {
        if (t.length == 0 || thresholdNs <= 0) return Double.NaN;
        long n = 0;
        for (int i = 1; i < t.length; i++) {
            if (t[i] - t[i - 1] < thresholdNs) n++;
        }
        return n / (double) t.length;
    }
}
