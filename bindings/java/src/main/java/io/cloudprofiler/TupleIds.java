package io.cloudprofiler;

/**
 * Tuple ids for records that have none, unique across a job's instances and
 * attempts without any coordination: {@code attempt << 56 | instance << 40 |
 * sequence}. Each instance (a source subtask, a spout task) draws from its
 * own generator on its own thread; a restarted attempt draws ids no earlier
 * attempt drew, so a replayed record is a new tuple in the logs rather than
 * a second visit of an old one. Limits: attempt below 128, instance below
 * 65,536, 2^40 (about 10^12) ids per instance and attempt; next() throws
 * past them instead of wrapping into another instance's ids.
 */
public final class TupleIds {
    static final int SEQ_BITS = 40, INSTANCE_BITS = 16, ATTEMPT_BITS = 7;
    private final long base;
    private long seq;

    private TupleIds(long base) {
        this.base = base;
    }

    /** The ids of one instance's attempt. */
    public static TupleIds of(int instance, int attempt) {
        if (instance < 0 || instance >= 1 << INSTANCE_BITS) {
            throw new IllegalArgumentException("cloudprofiler: TupleIds: instance " + instance + " is outside 0.." + ((1 << INSTANCE_BITS) - 1));
        }
        if (attempt < 0 || attempt >= 1 << ATTEMPT_BITS) {
            throw new IllegalArgumentException("cloudprofiler: TupleIds: attempt " + attempt + " is outside 0.." + ((1 << ATTEMPT_BITS) - 1));
        }
        return new TupleIds((long) attempt << (SEQ_BITS + INSTANCE_BITS) | (long) instance << SEQ_BITS);
    }

    /** The next id; not thread-safe (one generator per instance's thread). */
    public long next() {
        if (seq == 1L << SEQ_BITS) throw new IllegalStateException("cloudprofiler: TupleIds: 2^40 ids drawn by one instance");
        return base | seq++;
    }
}
