package io.cloudprofiler.engines.storm;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * The truth, sampled in time: one daemon thread that, about every
 * millisecond (it sleeps in between, it never spins: a spinning sampler
 * would take a core the topology needs), records for each task
 * (System.nanoTime(), its {@code done} counter, its executor thread's
 * state, and the JVM's count of the times that thread waited or blocked).
 * Nothing here reads the marks. The states and the counts of waits are
 * what {@link SplitTruth}, the headline truth, splits the departure log
 * with.
 *
 * <p>A secondary truth of its own. A task's <b>true capacity (thread
 * states)</b> over the samples = the tuples it finished
 * in consecutive sample pairs where its thread was RUNNABLE at both samples,
 * over those pairs' time: its departures per second while it was busy with
 * a backlog. An executor waiting for input or held by backpressure parks or
 * sleeps in Storm's wait strategies (TIMED_WAITING or WAITING), so those
 * pairs are left out. A thread the OS preempted stays RUNNABLE: preemption
 * is counted as busy, as it is in the rate the task can sustain on this
 * machine. So is a thread stopped by a garbage collection (it stays
 * RUNNABLE), which the departure truth at G = 20 ms leaves out.
 * It reads low at a light load: a thread woken for a burst is RUNNABLE
 * while it waits for a CPU, and in whatever it does between bursts.
 */
public final class TruthSampler {
    /** Thread.State's ordinal, or NONE before the task's first execute. */
    public static final byte NONE = -1;
    static final byte RUNNABLE = (byte) Thread.State.RUNNABLE.ordinal();
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private final List<TaskCounter> tasks;
    private final Series[] series;
    private final Thread thread;
    private volatile boolean stop;

    /** One task's samples, in time order. */
    public static final class Series {
        public final String task;
        long[] t = new long[16_384], done = new long[16_384], user = new long[16_384], waits = new long[16_384];
        byte[] state = new byte[16_384];
        int n;

        Series(String task) {
            this.task = task;
        }

        void add(long time, long d, long u, long w, byte s) {
            if (n == t.length) {
                t = Arrays.copyOf(t, 2 * n);
                done = Arrays.copyOf(done, 2 * n);
                user = Arrays.copyOf(user, 2 * n);
                waits = Arrays.copyOf(waits, 2 * n);
                state = Arrays.copyOf(state, 2 * n);
            }
            t[n] = time;
            done[n] = d;
            user[n] = u;
            waits[n] = w;
            state[n] = s;
            n++;
        }

        /** The JVM's count of the thread's waits and blocks at the latest sample (0 before any). */
        long lastWaits() {
            return n == 0 ? 0 : waits[n - 1];
        }
    }

    public TruthSampler(List<TaskCounter> tasks) {
        this.tasks = List.copyOf(tasks);
        series = new Series[this.tasks.size()];
        for (int i = 0; i < series.length; i++) series[i] = new Series(this.tasks.get(i).name());
        thread = new Thread(this::run, "truth-sampler");
        thread.setDaemon(true);
    }

    /** Starts sampling; the first sweep is taken before this returns, so it precedes whatever the caller does next. */
    public TruthSampler start() {
        sweep();
        thread.start();
        return this;
    }

    /** Stops sampling after one last sweep, taken after this was called; returns the series. */
    public Series[] stop() throws InterruptedException {
        stop = true;
        thread.interrupt();
        thread.join();
        sweep();
        return series;
    }

    private void run() {
        while (!stop) {
            try {
                Thread.sleep(1);
            } catch (InterruptedException e) {
                return;
            }
            if (!stop) sweep();
        }
    }

    private void sweep() {
        for (int i = 0; i < series.length; i++) {
            TaskCounter c = tasks.get(i);
            Thread th = c.thread();
            // done, then the count of waits, then the state, all right
            // after the time: a tuple counted was finished in the state read
            // just after or the one before, and a wait counted began before
            // the state was read (SplitTruth's second rule leans on that)
            long time = System.nanoTime(), d = c.done();
            long w = waits(th, series[i]);
            series[i].add(time, d, c.userNanos(), w, th == null ? NONE : (byte) th.getState().ordinal());
        }
    }

    /**
     * The JVM's count of the times the thread waited (parked, slept, waited
     * on a monitor) or blocked on one, so far: it rises by one at each,
     * however short, whether or not a sample saw it. Without a stack
     * (ThreadMXBean.getThreadInfo(id), depth 0) the JVM reads it without
     * stopping the threads. The series' last count once the thread is gone.
     */
    private static long waits(Thread th, Series s) {
        if (th == null) return s.lastWaits();
        ThreadInfo ti = THREADS.getThreadInfo(th.getId());
        return ti == null ? s.lastWaits() : ti.getWaitedCount() + ti.getBlockedCount();
    }

    /** What the samples say of one task. */
    public record Truth(String task, double rangeS, long departures, double busyS, int busyPairs, long busyDepartures,
                        long departuresWhileNotBusy, double runnableNoProgressS, double userS, int samples, int[] stateSamples) {
        /** Departures a second while busy. */
        public double capacity() {
            return busyS > 0 ? busyDepartures / busyS : Double.NaN;
        }

        /** Share of the range the thread was busy (RUNNABLE at both ends of a pair). */
        public double busyShare() {
            return busyS / rangeS;
        }

        /** Departures a second over the whole range. */
        public double throughput() {
            return departures / rangeS;
        }

        /** Departures a second of the user's code alone (a diagnostic, not the truth: Storm's work per tuple is left out). */
        public double userRate() {
            return userS > 0 ? departures / userS : Double.NaN;
        }

        /** Share of the samples that found the thread in a state. */
        public double stateShare(Thread.State s) {
            return samples == 0 ? Double.NaN : stateSamples[s.ordinal()] / (double) samples;
        }
    }

    /**
     * The truth of a series over its whole length (the sampler runs over
     * the logged range only). Also, to show what the state tells apart: the
     * departures that fell in pairs not taken as busy, and the busy time in
     * which nothing departed.
     */
    public static Truth truth(Series s) {
        int[] states = new int[Thread.State.values().length];
        long busyNs = 0, busyDep = 0, lostDep = 0, idleRunnableNs = 0;
        int samples = 0, busyPairs = 0;
        for (int i = 0; i < s.n; i++) {
            if (s.state[i] != NONE) {
                states[s.state[i]]++;
                samples++;
            }
            if (i == 0) continue;
            long dt = s.t[i] - s.t[i - 1], dd = s.done[i] - s.done[i - 1];
            if (s.state[i] == RUNNABLE && s.state[i - 1] == RUNNABLE) {
                busyNs += dt;
                busyDep += dd;
                busyPairs++;
                if (dd == 0) idleRunnableNs += dt;
            } else {
                lostDep += dd;
            }
        }
        double range = s.n < 2 ? Double.NaN : (s.t[s.n - 1] - s.t[0]) * 1e-9;
        long departures = s.n < 2 ? 0 : s.done[s.n - 1] - s.done[0];
        double user = s.n < 2 ? 0 : (s.user[s.n - 1] - s.user[0]) * 1e-9;
        return new Truth(s.task, range, departures, busyNs * 1e-9, busyPairs, busyDep, lostDep, idleRunnableNs * 1e-9, user, samples, states);
    }

    /** The raw samples, one line each: task, ns since start, done, state, the JVM's count of the thread's waits. */
    public static void write(Series[] all, long t0, Path file) throws IOException {
        Thread.State[] names = Thread.State.values();
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(file))) {
            w.println("task,t_ns,done,state,waits");
            for (Series s : all) {
                for (int i = 0; i < s.n; i++) {
                    w.printf("%s,%d,%d,%s,%d%n", s.task, s.t[i] - t0, s.done[i], s.state[i] == NONE ? "" : names[s.state[i]].name(), s.waits[i]);
                }
            }
        }
    }

    /**
     * The sampler's intervals between sweeps, ns: the median, the 99th
     * percentile and the longest (how far "about 1 ms" held: on a loaded
     * machine the sampler waits for a CPU too, and a park shorter than its
     * gaps is then seen only by the count of waits).
     */
    public static long[] intervals(Series s) {
        if (s.n < 2) return new long[] {0, 0, 0};
        long[] g = new long[s.n - 1];
        for (int i = 1; i < s.n; i++) g[i - 1] = s.t[i] - s.t[i - 1];
        Arrays.sort(g);
        return new long[] {g[g.length / 2], g[(int) (g.length * 0.99)], g[g.length - 1]};
    }
}
