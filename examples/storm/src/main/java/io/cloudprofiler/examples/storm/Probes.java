package io.cloudprofiler.examples.storm;

import io.cloudprofiler.Channel;
import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.HandlerType;
import io.cloudprofiler.LogFormat;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The instrumentation's calls, made so that nothing it does can throw into
 * Storm: an exception out of a spout or bolt makes Storm end the worker
 * (Runtime.exit), which in a LocalCluster is the whole JVM. A channel that
 * could not be opened is null and logging on it does nothing; every failure
 * is kept here, and the test asserts there were none.
 *
 * <p>The counters are per JVM: in a LocalCluster (one JVM) the test reads
 * them; on a real cluster each worker has its own and nobody reads them.
 */
public final class Probes {
    /** What went wrong (open, parameterize, logTS, close, a bolt's own work): empty in a good run. */
    public static final Queue<String> ERRORS = new ConcurrentLinkedQueue<>();
    /** logTS calls that returned a negative code (the first few are also in ERRORS). */
    public static final AtomicLong LOG_FAILURES = new AtomicLong();
    /** Lifecycle: prepare()/open() and cleanup()/close() calls per component. */
    public static final Map<String, AtomicLong> STARTED = new ConcurrentHashMap<>();
    public static final Map<String, AtomicLong> STOPPED = new ConcurrentHashMap<>();

    private static final int MAX_ERRORS = 100;
    private static volatile boolean paused;

    private Probes() {}

    public static void reset() {
        paused = false;
        ERRORS.clear();
        LOG_FAILURES.set(0);
        STARTED.clear();
        STOPPED.clear();
    }

    static void error(String what) {
        if (ERRORS.size() < MAX_ERRORS) ERRORS.add(what);
    }

    static void started(String component) {
        STARTED.computeIfAbsent(component, k -> new AtomicLong()).incrementAndGet();
    }

    static void stopped(String component) {
        STOPPED.computeIfAbsent(component, k -> new AtomicLong()).incrementAndGet();
    }

    public static long total(Map<String, AtomicLong> m) {
        return m.values().stream().mapToLong(AtomicLong::get).sum();
    }

    /** A buffered channel: every event, compressed in the background (ZSTD_TSC: tuple id and TSC). */
    static Channel openBuffered(String name) {
        return open(name, LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
    }

    /**
     * A periodic counter: one record (period end TSC, count) per periodNanos
     * (at least 1e6), the exact total at close.
     */
    static Channel openCounter(String name, long periodNanos) {
        // Counters are not buffered handlers, which the compressed formats need.
        Channel ch = open(name, LogFormat.BINARY_TSC, HandlerType.PERIODICCOUNTER);
        if (ch != null) {
            try {
                ch.parameterize(CloudProfiler.ARG0, periodNanos);
            } catch (RuntimeException e) {
                error("parameterize " + name + ": " + e);
            }
        }
        return ch;
    }

    static Channel open(String name, LogFormat format, HandlerType handler) {
        try {
            return Channel.open(name, format, handler);
        } catch (RuntimeException e) {
            error("open " + name + ": " + e);
            return null;
        }
    }

    /**
     * While paused, {@link #log} logs nothing; the channels stay open. How a
     * test runs {@code gen maxrate} against a marked topology and then logs
     * one run of it: one topology, warm, its channels holding that run only.
     */
    public static void pause(boolean pause) {
        paused = pause;
    }

    /** The hot path: one call into the library (never throws, never allocates unless it failed). */
    static void log(Channel ch, long tupleId) {
        if (ch == null || paused) return;
        int rc = ch.logTS(tupleId);
        if (rc != 0) logFailed(ch, tupleId, rc);
    }

    private static void logFailed(Channel ch, long tupleId, int rc) {
        if (LOG_FAILURES.incrementAndGet() <= 10) {
            error("logTS " + ch.name() + " id " + tupleId + ": " + CloudProfiler.errorString(rc) + " (" + rc + ")");
        }
    }

    /** Flushes and closes (blocks until the file is complete); may run on another thread than the logging one. */
    static void close(Channel ch) {
        if (ch == null) return;
        try {
            ch.close();
        } catch (RuntimeException e) {
            error("close " + ch.name() + ": " + e);
        }
    }
}
