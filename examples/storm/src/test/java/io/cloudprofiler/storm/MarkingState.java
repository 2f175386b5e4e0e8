package io.cloudprofiler.storm;

/**
 * What cloudprofiler-storm keeps of its marking in this JVM, for the
 * example's LocalCluster tests (in the module's package: its counters are
 * package-private there, read by its own tests the same way).
 */
public final class MarkingState {
    private MarkingState() {}

    /** Task instances (wrapped bolts and spouts, hooked tasks) with channels open: 0 once every cleanup after a kill has closed them. */
    public static int open() {
        return Marking.OPEN.get();
    }

    /** Failures the module logged instead of throwing into Storm (a channel not opened, refused marks, a gauge): 0 in a good run. */
    public static long failures() {
        return Marking.FAILURES.get();
    }
}
