package io.cloudprofiler;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * The marks of one operator instance by the marking convention (docs/capacity.md,
 * "Marking an operator"): channels {@code OPERATOR#INSTANCE in}, {@code ...
 * out} and, where the instance hands its records on itself and can see the
 * hand-off return, {@code ... sent}:
 *
 * <pre>{@code
 * marks.in(id);     // the instance starts on the record
 * ...its own work...
 * marks.out(id);    // right before the hand-off
 * out.collect(r);   // may wait for room downstream
 * marks.sent(id);   // the hand-off returned
 * }</pre>
 *
 * {@link #capacity()} is what the instance takes a second while it has a
 * backlog, from its marks as they are made (the library notes at each mark
 * whether the thread waited since the previous one): what the engine
 * modules (cloudprofiler-flink, cloudprofiler-storm) show in the engine's
 * own metrics, beside {@link #tuplesIn()} and {@link #tuplesOut()}, and the
 * same quantity as {@code analyze}'s capacity afterwards. With {@code
 * withRate}, a {@code OPERATOR#INSTANCE count} channel (CP_SERVICERATE)
 * counts every record taken too (throughput), and {@link #serviceRate()}
 * reads the library's Beard &amp; Chamberlain estimate of it (the engine
 * modules show {@link #capacity()} instead: B&amp;C falls to the offered rate
 * below saturation).
 *
 * <p>Open, mark and close on one thread (the task's or executor's): the
 * buffered channels are written by one thread. The counts and the rate may
 * be read from any thread. A mark never throws: a refused record is
 * counted, and {@link #close()} throws if there was one, so a run whose
 * records were refused fails instead of leaving a log with a gap.
 */
public final class Marks implements AutoCloseable {
    private static final VarHandle IN, OUT;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            IN = l.findVarHandle(Marks.class, "tuplesIn", long.class);
            OUT = l.findVarHandle(Marks.class, "tuplesOut", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private final Probe in, out, sent, rate;
    // Written by the marking thread only, read by metric reporters: opaque
    // stores (plain moves on x86) so a reader sees them without a fence.
    @SuppressWarnings("unused")
    private long tuplesIn, tuplesOut;

    private Marks(Probe in, Probe out, Probe sent, Probe rate) {
        this.in = in;
        this.out = out;
        this.sent = sent;
        this.rate = rate;
    }

    /** The channel name of a mark: {@code OPERATOR#INSTANCE ROLE}. */
    public static String channelName(String operator, String instance, String role) {
        return operator + "#" + instance + " " + role;
    }

    /** Refuses an operator's name the convention cannot parse back: empty, or with '#' or whitespace in it. */
    public static void checkOperator(String operator) {
        if (operator == null || operator.isEmpty() || operator.contains("#") || operator.chars().anyMatch(Character::isWhitespace)) {
            throw new IllegalArgumentException("cloudprofiler: an operator's name for its marks must be non-empty, without '#' or"
                    + " whitespace: " + (operator == null ? "null" : "\"" + operator + "\""));
        }
    }

    /**
     * Opens the instance's channels ({@code sent} only with withSent, {@code
     * count} only with withRate) on the thread that will mark; throws
     * {@link CloudProfilerException} naming the cause, with none left open.
     */
    public static Marks open(String operator, String instance, boolean withSent, boolean withRate) {
        checkOperator(operator);
        Probe i = null, o = null, s = null, r = null;
        try {
            i = Probe.events(channelName(operator, instance, "in"));
            o = Probe.events(channelName(operator, instance, "out"));
            if (withSent) s = Probe.events(channelName(operator, instance, "sent"));
            if (withRate) r = Probe.counter(channelName(operator, instance, "count"));
            return new Marks(i, o, s, r);
        } catch (RuntimeException e) {
            closeAll(e, i, o, s, r);
            throw e;
        }
    }

    /**
     * Opens the {@code out} channel alone, for a point that has no {@code in}
     * to mark: where tuples start (a source, a spout) or where only their
     * departures can be seen (a spout's emits, seen by a Storm task hook). An {@code in} channel left
     * empty would not be harmless: {@code analyze} would take the operator
     * for one with arrivals and cut every tuple's way short there.
     */
    public static Marks openOut(String operator, String instance) {
        checkOperator(operator);
        return new Marks(null, Probe.events(channelName(operator, instance, "out")), null, null);
    }

    /** Marks nothing and counts nothing: a run with marking off. */
    public static Marks off() {
        return new Marks(null, null, null, null);
    }

    /** True unless this is {@link #off()}. */
    public boolean on() {
        return out != null;
    }

    public void in(long id) {
        if (in == null) return;
        in.log(id);
        if (rate != null) rate.log(id);
        IN.setOpaque(this, (long) IN.getOpaque(this) + 1);
    }

    public void out(long id) {
        if (out == null) return;
        out.log(id);
        OUT.setOpaque(this, (long) OUT.getOpaque(this) + 1);
    }

    public void sent(long id) {
        if (sent != null) sent.log(id);
    }

    /** Records marked in so far (0 when off). */
    public long tuplesIn() {
        return (long) IN.getOpaque(this);
    }

    /** Records marked out so far (0 when off). */
    public long tuplesOut() {
        return (long) OUT.getOpaque(this);
    }

    /**
     * What the instance did so far ({@link Channel#markStats()} of its in or
     * out channel); null when off, without notes (CP_WAITS=off), or closed.
     */
    public MarkStats markStats() {
        Probe p = in != null ? in : out;
        if (p == null) return null;
        try {
            return p.channel.markStats();
        } catch (RuntimeException e) {
            return null;
        }
    }

    /** How far back {@link #capacity()} looks, at least and at most (ns). */
    static final long CAPACITY_SPAN_NS = 1_000_000_000L, CAPACITY_KEEP_NS = 5_000_000_000L;
    /** Fewer tuples than this in the span: no capacity (NaN). */
    static final long CAPACITY_MIN_TUPLES = 10;

    private record Snap(long atNs, MarkStats stats) {}

    private final java.util.ArrayDeque<Snap> snaps = new java.util.ArrayDeque<>();

    /**
     * Tuples a second the instance takes while it has a backlog, over the
     * last second or so (up to {@value #CAPACITY_KEEP_NS} ns back, from the
     * reads of this method: the first read only starts the span): the
     * library's notes of the instance's marks ({@link MarkStats}), the same
     * quantity as {@code analyze}'s capacity. A span without a wait is its
     * departures per second; one with waits leaves them out. NaN when off,
     * without notes (CP_WAITS=off), before a span of {@value
     * #CAPACITY_SPAN_NS} ns was seen, or with fewer than {@value
     * #CAPACITY_MIN_TUPLES} tuples in it. Any thread; never throws.
     */
    public synchronized double capacity() {
        MarkStats now = markStats();
        if (now == null) return Double.NaN;
        long t = System.nanoTime();
        while (snaps.size() > 1 && t - snaps.peekFirst().atNs > CAPACITY_KEEP_NS) snaps.pollFirst();
        double c = Double.NaN;
        // The newest read at least a span old.
        Snap base = null;
        for (Snap x : snaps) {
            if (t - x.atNs >= CAPACITY_SPAN_NS) base = x;
        }
        if (base != null && now.visits() - base.stats.visits() >= CAPACITY_MIN_TUPLES) c = now.capacitySince(base.stats);
        if (snaps.isEmpty() || t - snaps.peekLast().atNs >= CAPACITY_SPAN_NS / 4) snaps.addLast(new Snap(t, now));
        return c;
    }

    /**
     * The run-time service rate estimate of the count channel; null without
     * one (opened without withRate, or off) or once it is closed. Never
     * throws.
     */
    public ServiceRate serviceRate() {
        if (rate == null) return null;
        try {
            return rate.channel.serviceRate();
        } catch (RuntimeException e) {
            return null;
        }
    }

    /** Flushes and closes the channels; throws if a mark was refused or a close failed. */
    @Override
    public void close() {
        RuntimeException first = closeAll(null, in, out, sent, rate);
        if (first != null) throw first;
    }

    /** Closes each probe; failures join first (or become it). */
    private static RuntimeException closeAll(RuntimeException first, Probe... probes) {
        for (Probe p : probes) {
            if (p == null) continue;
            try {
                p.close();
            } catch (RuntimeException e) {
                if (first == null) first = e;
                else first.addSuppressed(e);
            }
        }
        return first;
    }

    /** One channel: log never throws; failures are counted and close reports them. */
    private static final class Probe {
        final Channel channel;
        private long failures;
        private int firstError;

        private Probe(Channel channel) {
            this.channel = channel;
        }

        /** Every (TSC, tuple id) record kept: BUFFER_IDENTITY, ZSTD_TSC. */
        static Probe events(String name) {
            return new Probe(Channel.open(name, LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY));
        }

        /** Counts records for the service rate estimator: SERVICERATE (not buffered, so BINARY_TSC). */
        static Probe counter(String name) {
            return new Probe(Channel.open(name, LogFormat.BINARY_TSC, HandlerType.SERVICERATE));
        }

        void log(long tupleId) {
            int rc = channel.logTS(tupleId);
            if (rc != CloudProfiler.OK && failures++ == 0) firstError = rc;
        }

        void close() {
            channel.close();
            if (failures > 0) {
                throw new IllegalStateException("channel " + channel.name() + ": " + failures
                        + " logTS calls failed, the first with " + CloudProfiler.errorString(firstError)
                        + " (" + firstError + ")");
            }
        }
    }
}
