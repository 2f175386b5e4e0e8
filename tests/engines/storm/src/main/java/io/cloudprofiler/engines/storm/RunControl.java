package io.cloudprofiler.engines.storm;

import java.util.concurrent.atomic.LongAdder;

/**
 * What the test and the topology's tasks share in one JVM (a LocalCluster
 * runs the workers in the test's JVM, so statics are seen by both): the
 * spout's gate and the run's counts.
 *
 * <p>The gate lets the test take Storm's stats and start the truth sampler
 * with the topology up and nothing yet emitted, and stop the source at a
 * time of its choosing: the logged range is then everything the topology
 * did, for the marks, the truth and Storm's stats alike.
 *
 * <p>Each topology gets its own {@link Counts}, which its tasks take when
 * they start: an executor thread of a killed topology can outlive the kill
 * (Storm waits 100 ms for it, then goes on) and would otherwise count into,
 * or open the gate of, the next one.
 */
public final class RunControl {
    private RunControl() {}

    /** One topology's gate and counts. */
    public static final class Counts {
        /** System.nanoTime() when the gate opened; 0 while it is closed. */
        volatile long openedAt;
        public final LongAdder emitted = new LongAdder(), acked = new LongAdder(), failed = new LongAdder();
        /** Tuples 2-digest handed on (its filter keeps about half). */
        public final LongAdder kept = new LongAdder();

        /** Opens the gate; the time the spout's schedule starts from. */
        public long open() {
            long t = System.nanoTime();
            openedAt = t == 0 ? 1 : t;
            return openedAt;
        }

        /** Closes the gate: the spout emits nothing more (it still takes acks). */
        public long close() {
            openedAt = 0;
            return System.nanoTime();
        }
    }

    private static volatile Counts current = new Counts();

    /** The counts of the topology submitted last: a task takes them in open or prepare. */
    static Counts current() {
        return current;
    }

    /** New counts, gate closed, for the topology about to be submitted. */
    public static Counts next() {
        current = new Counts();
        return current;
    }
}
