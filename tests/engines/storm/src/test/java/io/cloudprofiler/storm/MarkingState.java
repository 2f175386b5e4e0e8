package io.cloudprofiler.storm;

/**
 * What cloudprofiler-storm keeps of its marking in this JVM (in the
 * module's package: its counters are package-private there), as
 * examples/storm reads it: the test waits for every channel to be closed
 * after a kill before it moves the files.
 */
public final class MarkingState {
    private MarkingState() {}

    /** Task instances with channels open: 0 once every cleanup after a kill has closed them. */
    public static int open() {
        return Marking.OPEN.get();
    }

    /** Failures the module logged instead of throwing into Storm: 0 in a good run. */
    public static long failures() {
        return Marking.FAILURES.get();
    }
}
