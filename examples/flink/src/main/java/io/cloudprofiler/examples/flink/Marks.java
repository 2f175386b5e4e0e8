package io.cloudprofiler.examples.flink;

/**
 * The binding's {@link io.cloudprofiler.Marks} (an operator instance's
 * {@code OPERATOR#SUBTASK in|out|sent} channels) with one thing a test
 * needs and a job does not: {@link #pause}, which stops every instance's
 * marks in this JVM for a while, the channels staying open. CapacityJob
 * marks by hand with it (its tests run a warm-up unlogged, then one logged
 * run of the same warm job); ProfiledJob shows how a job is marked, with
 * cloudprofiler-flink's wrappers.
 */
final class Marks implements AutoCloseable {
    private static volatile boolean paused;
    private final io.cloudprofiler.Marks marks;

    private Marks(io.cloudprofiler.Marks marks) {
        this.marks = marks;
    }

    /** Opens the instance's channels ({@code sent} only when withSent); call from the thread that marks. */
    static Marks open(String operator, int subtask, boolean withSent) {
        return new Marks(io.cloudprofiler.Marks.open(operator, String.valueOf(subtask), withSent, false));
    }

    /** Marks nothing. */
    static Marks off() {
        return new Marks(io.cloudprofiler.Marks.off());
    }

    /**
     * While paused, the marks of this JVM log nothing; their channels stay
     * open. How a test runs {@code gen maxrate} against a marked job and then
     * logs one run of it: one job, warm, its channels holding that run only.
     */
    static void pause(boolean pause) {
        paused = pause;
    }

    void in(long id) {
        if (!paused) marks.in(id);
    }

    void out(long id) {
        if (!paused) marks.out(id);
    }

    void sent(long id) {
        if (!paused) marks.sent(id);
    }

    /** Closes the channels; throws if a mark was refused or a close failed. */
    @Override
    public void close() {
        marks.close();
    }
}
