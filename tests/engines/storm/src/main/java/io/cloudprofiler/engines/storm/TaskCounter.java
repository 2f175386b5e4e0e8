package io.cloudprofiler.engines.storm;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The truth's raw material, kept by the user's own code and never by the
 * marks: one counter per task, {@code done}, raised as the task's execute
 * (a spout's emit) ends, and the task's executor thread, the thread of its
 * first execute. {@link TruthSampler} reads both in time.
 *
 * <p>The departure log, for the tasks that ask for it ({@link #of(String,
 * int, int)}: 1-decode and 2-digest): the time each execute ended
 * (System.nanoTime()), into an array allocated once in prepare, so that a
 * tuple costs a store and no allocation. Tuples beyond its length are
 * counted ({@link #overflow()}), not logged. {@link SplitTruth} makes the
 * headline truth of it, with the sampler's thread states; {@link
 * Departures} the secondary one at a gap threshold.
 *
 * <p>Beside the truth, a diagnostic: the time spent inside the user's
 * code (begin to end, System.nanoTime()), so that a table can show the rate
 * of the user's work alone next to the sampled truth (which also holds
 * Storm's own work per tuple: taking it, acking, handing it on).
 *
 * <p>The registry holds the tasks of the topology that runs now; the test
 * clears it between topologies.
 */
public final class TaskCounter {
    private static final VarHandle DONE, USER_NANOS;

    static {
        try {
            DONE = MethodHandles.lookup().findVarHandle(TaskCounter.class, "done", long.class);
            USER_NANOS = MethodHandles.lookup().findVarHandle(TaskCounter.class, "userNanos", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private static final Map<String, TaskCounter> TASKS = new ConcurrentHashMap<>();

    public final String component;
    public final int task;
    private volatile Thread thread;
    // One writer, the executor thread; the sampler reads it. A release store
    // (a plain store on x86) is enough: no read-modify-write across threads.
    @SuppressWarnings("unused")
    private long done, userNanos;
    private long begun; // the executor thread's alone
    // The departure log: written by the executor thread alone, and read by
    // the test only after it saw (done(), an acquire) every tuple done: the
    // release store of done in end() publishes the entries before it.
    private final long[] departures;
    private int logged;

    private TaskCounter(String component, int task, int logLength) {
        this.component = component;
        this.task = task;
        // Allocated (and zeroed, so its pages are touched) here in prepare,
        // never while tuples flow.
        departures = new long[logLength];
    }

    /** The counter of a task, made in prepare (open) so that the test sees the task is up; no departure log. */
    public static TaskCounter of(String component, int task) {
        return of(component, task, 0);
    }

    /** The counter of a task that also logs when each execute ends, up to logLength of them. */
    public static TaskCounter of(String component, int task, int logLength) {
        return TASKS.computeIfAbsent(component + "#" + task, k -> new TaskCounter(component, task, logLength));
    }

    /** The tasks registered since the last {@link #reset()}, by component and task. */
    public static List<TaskCounter> all() {
        List<TaskCounter> l = new ArrayList<>(TASKS.values());
        l.sort(Comparator.comparing((TaskCounter c) -> c.component).thenComparingInt(c -> c.task));
        return l;
    }

    public static void reset() {
        TASKS.clear();
    }

    /** At the start of execute: the first one names the executor thread. */
    public void begin() {
        if (thread == null) thread = Thread.currentThread();
        begun = System.nanoTime();
    }

    /** At the end of execute: one more tuple done, and (a logging task) when. */
    public void end() {
        long now = System.nanoTime();
        if (logged < departures.length) departures[logged++] = now;
        USER_NANOS.setRelease(this, (long) USER_NANOS.get(this) + (now - begun));
        DONE.setRelease(this, (long) DONE.get(this) + 1);
    }

    /** Whether this task logs its departures. */
    public boolean logsDepartures() {
        return departures.length > 0;
    }

    /**
     * The departure times logged so far (a copy), in order. Read it once
     * the task is drained (every tuple seen done()), or entries may be
     * missing.
     */
    public long[] departures() {
        long d = done(); // the acquire that makes the entries before it visible
        return Arrays.copyOf(departures, (int) Math.min(d, departures.length));
    }

    /** Tuples done that the log had no room for. */
    public long overflow() {
        return Math.max(0, done() - departures.length);
    }

    public long done() {
        return (long) DONE.getAcquire(this);
    }

    /** Nanoseconds spent in the user's code of the tuples done (a spout: in the nextTuple calls that emitted). */
    public long userNanos() {
        return (long) USER_NANOS.getAcquire(this);
    }

    /** The executor thread, null before the first execute. */
    public Thread thread() {
        return thread;
    }

    public String name() {
        return component + "#" + task;
    }
}
