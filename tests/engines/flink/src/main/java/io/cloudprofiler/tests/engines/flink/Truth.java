package io.cloudprofiler.tests.engines.flink;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The truth of a run, apart from the marks: counters inside the user
 * functions, sampled in time.
 *
 * <p>Each subtask of 1-parse and 2-hash registers a {@link Probe} in its
 * open(), on its task thread, and counts every record it finished. One
 * sampler thread per JVM (a daemon, sleeping about 1 ms between rounds,
 * never spinning) reads, for every probe of the current {@link Recording}:
 * the time, the count, the task thread's state, and the JVM's count of the
 * times that thread waited or blocked (ThreadInfo). A task thread that has
 * work is RUNNABLE (on a CPU, or waiting for one: on a shared machine that
 * is part of what a record costs); one parked for input, or for an output
 * buffer under backpressure, is WAITING or TIMED_WAITING.
 *
 * <p>Three truths come from this, the first the one the test holds us to:
 *
 * <ol>
 * <li><b>TRUE CAPACITY (split)</b>, from the probe's departure log (2-hash
 *     only, {@link Probe#departed}: the user function stores
 *     System.nanoTime() as each record's processing ends) split by the
 *     sampler's thread states ({@link Probe#splitOver}). The capacity wanted
 *     is what the operator sustains while it has a backlog, as it would
 *     saturated: departures per second, departure to departure, while busy
 *     with queued records. A gap between two consecutive departures is
 *     service unless the sampler saw the task thread not RUNNABLE at a
 *     sample strictly inside it: then the thread parked in it (for input,
 *     or for an output buffer), and the gap holds a wait, not a record's
 *     cost. Capacity = (gaps counted) / (their total time). Evidence, not a
 *     threshold: a preemption or a GC pause while the thread has work
 *     leaves it RUNNABLE and stays in, as it should on a shared machine.
 *     Where the samples cannot see a park (one shorter than their spacing,
 *     or one while the sampler itself waited for a CPU), the JVM's own
 *     count of the thread's waits, read at each sample, tells that there
 *     was one between two samples, and the longest gap there is taken as
 *     parked (Probe#classify). Each burst's first record is left out
 *     with its gap (its service is mixed with the wait), one record a
 *     burst. A gap belongs to the range it ends in. See {@link Split}.
 * <li><b>G = 20 ms</b> (secondary, the last round's headline): the same
 *     gaps, those below a threshold G counted, whatever the thread did in
 *     them ({@link Probe#departuresOver}). A light load's waits between
 *     Flink's 100 ms flushes are left out, but a wait shorter than G (a
 *     buffer that came a few ms after the last was done) counts as
 *     service, so it reads low below saturation.
 * <li><b>The thread-state truth</b> (secondary, the first definition): the
 *     records finished during the sample intervals in which the thread was
 *     RUNNABLE at both ends, over the length of those intervals. The
 *     intervals straddling a wait are left out whole. It reads low at a
 *     light load: a thread woken for a burst is RUNNABLE while it waits for
 *     a CPU on a loaded machine, and RUNNABLE in whatever it does between
 *     bursts, which counts as time without departures.
 * </ol>
 *
 * <p>The jobs run in this JVM (a MiniCluster), so the registry is static:
 * {@link #begin} before a job is submitted, {@link #end} after it ended.
 */
public final class Truth {
    /** Between sampling rounds (Thread.sleep: about 1.06 ms here). */
    static final long SLEEP_MS = 1;
    /**
     * Entries of a departure log, one log per 2-hash subtask and job (16 MB):
     * sized once, in open(), far above a run's records (a logged job makes
     * about 6 s of lines, some 10^5 here), so that the task thread never
     * allocates or grows it while it works; departures past the end are
     * counted, not stored ({@link Probe#overflow}).
     */
    public static final int DEPARTURE_SLOTS = 2_000_000;

    private static final Object LOCK = new Object();
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    /** The recording the sampler fills; null between jobs (the sampler then waits, without a CPU). Guarded by LOCK. */
    private static Recording current;
    private static Thread sampler;

    private Truth() {}

    /** One subtask's counter and its samples. */
    public static final class Probe {
        public final String operator;
        public final int subtask;
        /** The task thread, as seen in open(): every record of the subtask is processed on it. */
        public final Thread thread;
        /** Written by the task thread only (an opaque store: a plain move on x86), read by the sampler. */
        private final AtomicLong done = new AtomicLong();
        /**
         * The departure log: the task thread's System.nanoTime() as each
         * record's processing ended (null: the operator keeps none). Written
         * by the task thread only; read after the job ended, up to what
         * {@link #departed} published.
         */
        private final long[] departures;
        /** Departures so far, stored or not: a release store after the entry, so a reader that sees n sees n entries. */
        private final AtomicInteger departed = new AtomicInteger();

        // Samples: written by the sampler under LOCK, read after end() (which took LOCK).
        private long[] t = new long[8192], d = new long[8192], w = new long[8192];
        private byte[] state = new byte[8192];
        private int n;

        Probe(String operator, int subtask, Thread thread, int departureSlots) {
            this.operator = operator;
            this.subtask = subtask;
            this.thread = thread;
            this.departures = departureSlots > 0 ? new long[departureSlots] : null;
        }

        /** One record finished: call on the task thread, once a record. */
        public void done() {
            done.setOpaque(done.getPlain() + 1);
        }

        /**
         * One record's processing ended at nanos (System.nanoTime(), taken by
         * the caller right then): call on the task thread, once a record, on
         * a probe registered with a departure log. No allocation, no lock.
         */
        public void departed(long nanos) {
            int i = departed.getPlain();
            if (i < departures.length) departures[i] = nanos;
            departed.setRelease(i + 1);
        }

        /** Departures stored in the log (0 without one). */
        public int departures() {
            return departures == null ? 0 : Math.min(departed.getAcquire(), departures.length);
        }

        /** The i-th departure's time (System.nanoTime()). */
        public long departure(int i) {
            return departures[i];
        }

        /** Departures that came after the log was full, not stored (the truth then covers only the first ones). */
        public long overflow() {
            return departures == null ? 0 : Math.max(0, departed.getAcquire() - departures.length);
        }

        /**
         * The departure log over [from, to] (System.nanoTime()): the gaps
         * between consecutive departures both in the range, split at gNs.
         */
        public Departures departuresOver(long from, long to, long gNs) {
            int n = departures();
            long count = 0, busyGaps = 0, busyNs = 0, longGaps = 0, longNs = 0;
            long previous = Long.MIN_VALUE;
            for (int i = 0; i < n; i++) {
                long t = departures[i];
                if (t < from || t > to) continue;
                count++;
                if (previous != Long.MIN_VALUE) {
                    long gap = t - previous;
                    if (gap < gNs) {
                        busyGaps++;
                        busyNs += gap;
                    } else {
                        longGaps++;
                        longNs += gap;
                    }
                }
                previous = t;
            }
            return new Departures(gNs, count, busyGaps, busyNs, longGaps, longNs, overflow());
        }

        /**
         * Which gaps of the departure log the thread parked in (waited for
         * input or for an output buffer): parked[k] for the gap that ends at
         * departure k (k &ge; 1). Either of two pieces of evidence:
         *
         * <ol>
         * <li>a sample strictly inside the gap saw the task thread not
         *     RUNNABLE;
         * <li>the JVM's count of the thread's waits ({@link #waits(int)})
         *     rose by m between two consecutive samples that both saw it
         *     RUNNABLE: it parked m times in between, unseen (a park
         *     shorter than the samples' spacing, or one while the sampler
         *     itself was kept from the CPU: seen, 240 ms without a sample on
         *     a machine at load 12, in which one subtask waited 233 ms for
         *     input and the first rule alone counted it as service, 5% of
         *     its run). Of the gaps overlapping those two samples' interval,
         *     the m longest parked: a park lengthens its gap. Normally this
         *     adds a gap or two a run.
         * </ol>
         *
         * A gap's class is its own, not a range's: computed once, over the
         * whole log, after {@link Truth#end} (the samples are then final).
         */
        private synchronized void classify() {
            if (parked != null) return;
            int m = departures();
            parked = new boolean[m];
            unseen = new boolean[m];
            if (m < 2) return;
            long first = departures[0], last = departures[m - 1];
            // rule 1: a sample strictly inside a gap that saw the thread parked
            for (int j = 0; j < n; j++) {
                if (state[j] != RUNNABLE && t[j] > first && t[j] < last) {
                    int k = firstAtOrAfter(departures, m, t[j]);
                    if (departures[k] > t[j]) parked[k] = true;
                }
            }
            // rule 2, after it (what it adds is what the samples did not see): waits the JVM
            // counted between samples j and j+1 that both saw the thread RUNNABLE, so each
            // began and ended in between (the count is read before the state); only between
            // two samples inside the log, or the park may lie outside it
            for (int j = 0; j + 1 < n; j++) {
                if (w[j + 1] > w[j] && state[j] == RUNNABLE && state[j + 1] == RUNNABLE && t[j] >= first && t[j + 1] <= last) {
                    // the gaps overlapping (t[j], t[j+1]): ending after t[j], starting before t[j+1]
                    int k0 = Math.max(1, firstAtOrAfter(departures, m, t[j] + 1));
                    int k1 = Math.min(m - 1, firstAtOrAfter(departures, m, t[j + 1]));
                    parkLongest(k0, k1, w[j + 1] - w[j]);
                }
            }
        }

        private boolean[] parked, unseen;

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
            return departures[k] - departures[k - 1];
        }

        /**
         * The split truth over (from, to] (System.nanoTime()): the gaps that
         * end at a departure in the range (a gap belongs where it ends, as a
         * record's work is counted when it is done), each service unless the
         * thread parked in it ({@link #classify}).
         */
        public Split splitOver(long from, long to) {
            classify();
            int m = departures();
            int lo = firstAtOrAfter(departures, m, from + 1), hi = firstAtOrAfter(departures, m, to + 1);
            long serviceGaps = 0, serviceNs = 0, parkedGaps = 0, parkedNs = 0, unseenGaps = 0;
            for (int k = Math.max(1, lo); k < hi; k++) {
                if (parked[k]) {
                    parkedGaps++;
                    parkedNs += gapNs(k);
                    if (unseen[k]) unseenGaps++;
                } else {
                    serviceGaps++;
                    serviceNs += gapNs(k);
                }
            }
            return new Split(hi - lo, serviceGaps, serviceNs, parkedGaps, parkedNs, unseenGaps, overflow());
        }

        /** The index of the first of a[0..len) at or after x (len if none): a is in time order. */
        private static int firstAtOrAfter(long[] a, int len, long x) {
            int l = 0, h = len;
            while (l < h) {
                int mid = (l + h) >>> 1;
                if (a[mid] < x) l = mid + 1;
                else h = mid;
            }
            return l;
        }

        private void sample(long now) {
            if (n == t.length) {
                t = Arrays.copyOf(t, 2 * n);
                d = Arrays.copyOf(d, 2 * n);
                state = Arrays.copyOf(state, 2 * n);
                w = Arrays.copyOf(w, 2 * n);
            }
            // the count before the state: a record counted was finished while
            // the thread was in the state read just after, or in the one before
            d[n] = done.getOpaque();
            w[n] = waits();
            state[n] = (byte) thread.getState().ordinal();
            t[n] = now;
            n++;
        }

        /**
         * The JVM's count of the times the thread waited (parked, slept,
         * waited on a monitor) or blocked on one, so far: it rises by one at
         * each, however short, whenever the sampler looks. The previous
         * sample's once the thread is gone.
         */
        private long waits() {
            ThreadInfo ti = THREADS.getThreadInfo(thread.getId());
            if (ti == null) return n == 0 ? 0 : w[n - 1];
            return ti.getWaitedCount() + ti.getBlockedCount();
        }

        /** The thread's JVM count of waits at sample i. */
        public long waits(int i) {
            return w[i];
        }

        public int samples() {
            return n;
        }

        public long time(int i) {
            return t[i];
        }

        public long count(int i) {
            return d[i];
        }

        public Thread.State state(int i) {
            return Thread.State.values()[state[i]];
        }

        /** The count at the last sample at or before time (0 before the first). */
        public long countAt(long time) {
            int i = lastAtOrBefore(time);
            return i < 0 ? 0 : d[i];
        }

        /** Index of the last sample at or before time, -1 if none. */
        int lastAtOrBefore(long time) {
            int lo = 0, hi = n - 1, r = -1;
            while (lo <= hi) {
                int m = (lo + hi) >>> 1;
                if (t[m] <= time) {
                    r = m;
                    lo = m + 1;
                } else {
                    hi = m - 1;
                }
            }
            return r;
        }

        /** The subtask over [from, to] (System.nanoTime()), by the definition in the class comment. */
        public Stats over(long from, long to) {
            long runnableNs = 0, runnableDone = 0, pairs = 0, runnablePairs = 0;
            int first = -1, last = -1;
            for (int i = 1; i < n; i++) {
                if (t[i - 1] < from || t[i] > to) continue;
                if (first < 0) first = i - 1;
                last = i;
                pairs++;
                if (state[i - 1] == RUNNABLE && state[i] == RUNNABLE) {
                    runnablePairs++;
                    runnableNs += t[i] - t[i - 1];
                    runnableDone += d[i] - d[i - 1];
                }
            }
            if (first < 0) return new Stats(0, 0, 0, 0, 0, 0);
            return new Stats(runnableDone, runnableNs, d[last] - d[first], t[last] - t[first], pairs, runnablePairs);
        }
    }

    private static final byte RUNNABLE = (byte) Thread.State.RUNNABLE.ordinal();

    /**
     * A subtask over a range: what its counter and its thread's state say.
     *
     * @param runnableDone  records finished in the intervals RUNNABLE at both ends
     * @param runnableNs    the length of those intervals
     * @param done          records finished in the range
     * @param rangeNs       the range, from its first sample to its last
     * @param pairs         sample intervals in the range
     * @param runnablePairs of them RUNNABLE at both ends
     */
    public record Stats(long runnableDone, long runnableNs, long done, long rangeNs, long pairs, long runnablePairs) {
        /** The true capacity: records a second while the thread had work. */
        public double capacity() {
            return runnableNs == 0 ? Double.NaN : runnableDone / (runnableNs / 1e9);
        }

        /** Share of the range the thread had work (by time: the intervals are not all alike). */
        public double busyShare() {
            return rangeNs == 0 ? Double.NaN : (double) runnableNs / rangeNs;
        }

        /** Records a second over the whole range. */
        public double throughput() {
            return rangeNs == 0 ? Double.NaN : done / (rangeNs / 1e9);
        }
    }

    /**
     * A subtask's departure log over a range, its gaps split at a threshold.
     *
     * @param gNs      the threshold G: a gap below it is service, one of G or more a wait (or a long stall)
     * @param count    departures in the range
     * @param busyGaps gaps between consecutive departures below G
     * @param busyNs   their sum
     * @param longGaps gaps of G or more, left out
     * @param longNs   their sum
     * @param overflow departures the full log did not store (if not 0, the range's end is missing)
     */
    public record Departures(long gNs, long count, long busyGaps, long busyNs, long longGaps, long longNs, long overflow) {
        /** TRUE CAPACITY: departures a second while busy with queued records. */
        public double capacity() {
            return busyNs == 0 ? Double.NaN : busyGaps / (busyNs / 1e9);
        }

        /** Share of rangeNs spent in gaps below G: the time the subtask was busy by this definition. */
        public double busyShare(long rangeNs) {
            return rangeNs == 0 ? Double.NaN : (double) busyNs / rangeNs;
        }
    }

    /**
     * A subtask's departure log over a range, its gaps (those that end in
     * it) split by whether the thread parked in them: the headline truth.
     *
     * @param count       departures in the range
     * @param serviceGaps gaps between consecutive departures the thread did not park in
     * @param serviceNs   their sum
     * @param parkedGaps  gaps the thread parked in (Probe#classify), left out
     * @param parkedNs    their sum
     * @param unseenGaps  of them, those only the JVM's count of waits told (no sample saw the thread parked)
     * @param overflow    departures the full log did not store (if not 0, the range's end is missing)
     */
    public record Split(long count, long serviceGaps, long serviceNs, long parkedGaps, long parkedNs, long unseenGaps,
                        long overflow) {
        /** TRUE CAPACITY: departures a second over the gaps the thread did not park in. */
        public double capacity() {
            return serviceNs == 0 ? Double.NaN : serviceGaps / (serviceNs / 1e9);
        }

        /** Share of rangeNs in service gaps: the time the subtask was busy by this definition. */
        public double busyShare(long rangeNs) {
            return rangeNs == 0 ? Double.NaN : (double) serviceNs / rangeNs;
        }
    }

    /** The probes of one job and their samples. */
    public static final class Recording {
        public final long startNanos = System.nanoTime();
        private final List<Probe> probes = new ArrayList<>();

        /** The probes (after end(): no more are added). */
        public List<Probe> probes() {
            return probes;
        }

        /** The probes of an operator, by subtask. */
        public List<Probe> of(String operator) {
            List<Probe> r = new ArrayList<>();
            for (Probe p : probes) {
                if (p.operator.equals(operator)) r.add(p);
            }
            r.sort((a, b) -> Integer.compare(a.subtask, b.subtask));
            return r;
        }

        /** Records the operator's subtasks finished, together, at time. */
        public long countAt(String operator, long time) {
            long c = 0;
            for (Probe p : of(operator)) c += p.countAt(time);
            return c;
        }

        /**
         * The sampler's intervals between rounds, ns: the median, the 99th
         * percentile and the longest (how far "about 1 ms" held).
         */
        public long[] intervals() {
            if (probes.isEmpty() || probes.get(0).n < 2) return new long[] {0, 0, 0};
            Probe p = probes.get(0);
            long[] gaps = new long[p.n - 1];
            for (int i = 1; i < p.n; i++) gaps[i - 1] = p.t[i] - p.t[i - 1];
            Arrays.sort(gaps);
            return new long[] {gaps[gaps.length / 2], gaps[(int) (gaps.length * 0.99)], gaps[gaps.length - 1]};
        }

        /** Every logged departure as CSV: operator, subtask, ns since the recording began. */
        public void writeDeparturesCsv(Path file) throws IOException {
            try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(file))) {
                w.println("operator,subtask,t_ns");
                for (Probe p : probes) {
                    for (int i = 0; i < p.departures(); i++) w.println(p.operator + "," + p.subtask + "," + (p.departures[i] - startNanos));
                }
            }
        }

        /** Every sample as CSV: operator, subtask, ns since the recording began, count, thread state. */
        public void writeCsv(Path file) throws IOException {
            try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(file))) {
                w.println("operator,subtask,t_ns,done,state,waits");
                for (Probe p : probes) {
                    for (int i = 0; i < p.n; i++) {
                        w.println(p.operator + "," + p.subtask + "," + (p.t[i] - startNanos) + "," + p.d[i] + "," + p.state(i) + ","
                                + p.w[i]);
                    }
                }
            }
        }
    }

    /**
     * A probe for the calling task thread; sampled while a recording runs
     * (the functions of a job submitted after {@link #begin}).
     */
    public static Probe register(String operator, int subtask) {
        return register(operator, subtask, 0);
    }

    /**
     * Likewise, with a departure log of departureSlots entries (0: none),
     * allocated here, in open(), before the first record.
     */
    public static Probe register(String operator, int subtask, int departureSlots) {
        Probe p = new Probe(operator, subtask, Thread.currentThread(), departureSlots);
        synchronized (LOCK) {
            if (current != null) current.probes.add(p);
        }
        return p;
    }

    /** Starts a recording (and the sampler, the first time): call before the job is submitted. */
    public static void begin() {
        synchronized (LOCK) {
            if (current != null) throw new IllegalStateException("a recording runs already");
            current = new Recording();
            if (sampler == null) {
                sampler = new Thread(Truth::sample, "truth-sampler");
                sampler.setDaemon(true);
                sampler.start();
            }
            LOCK.notifyAll();
        }
    }

    /** Records the operator's subtasks of the running recording have finished so far, together (0 without a recording). */
    public static long finishedNow(String operator) {
        synchronized (LOCK) {
            long n = 0;
            if (current != null) {
                for (Probe p : current.probes) {
                    if (p.operator.equals(operator)) n += p.done.getOpaque();
                }
            }
            return n;
        }
    }

    /** Ends the recording and returns it: call after the job ended. */
    public static Recording end() {
        synchronized (LOCK) {
            Recording r = current;
            current = null;
            return r;
        }
    }

    private static void sample() {
        try {
            while (true) {
                synchronized (LOCK) {
                    while (current == null) LOCK.wait();
                    long now = System.nanoTime();
                    for (Probe p : current.probes) p.sample(now);
                }
                Thread.sleep(SLEEP_MS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
