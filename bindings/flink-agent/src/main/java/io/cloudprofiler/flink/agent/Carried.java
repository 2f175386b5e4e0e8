package io.cloudprofiler.flink.agent;

/**
 * The id the record at hand carries, per thread (a task's): set by the
 * network input as it reads a record ({@link CarryingSerializer}), and by
 * an operator's {@link MarkingOutput} around each hand-off (its visit's id,
 * for the operators chained behind it and for the network output); 0 for
 * none. An operator's visit takes it as its id where it is set (the agent's
 * argument {@code ids}), so that one record's marks share an id across
 * operators, tasks and TaskManagers, as the wrappers' tuple ids do.
 */
public final class Carried {
    private Carried() {}

    private static final ThreadLocal<long[]> SLOT = ThreadLocal.withInitial(() -> new long[1]);

    /** Whether records carry ids between tasks (the agent's argument {@code ids}); set once, at premain. */
    static volatile boolean on;

    /** This thread's slot: [0] is the id of the record at hand. */
    public static long[] slot() {
        return SLOT.get();
    }
}
