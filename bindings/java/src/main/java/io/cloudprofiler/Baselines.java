package io.cloudprofiler;

/**
 * Floors for the benchmarks (bindings/java/jmh): JNI calls with the same
 * shape as {@link CloudProfiler#logTS(long, long)} whose C bodies do nothing,
 * or read the TSC as LogTS does (rdtscp) and store 16 bytes into a ring. Not
 * part of the profiling API.
 */
public final class Baselines {
    static {
        if (!CloudProfiler.isAvailable()) throw CloudProfiler.loadError();
    }

    private Baselines() {}

    /** An empty static native with LogTS's arguments: returns 0. */
    public static native int emptyCall(long ch, long tupleId);

    /** rdtscp, then (tuple id, TSC) stored into a 64Ki-record ring in C memory. */
    public static native int tscStore(long ch, long tupleId);
}
