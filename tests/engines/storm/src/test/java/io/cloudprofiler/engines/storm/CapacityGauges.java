package io.cloudprofiler.engines.storm;

import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.storm.Config;
import org.apache.storm.metrics2.MetricRegistryProvider;
import org.apache.storm.metrics2.StormMetricRegistry;
import org.apache.storm.metrics2.reporters.StormReporter;

/**
 * The wrapped bolts' live {@code cloudprofiler.capacity} gauge, read as a
 * user's metrics reporter reads it, while the run goes.
 *
 * <p>As a {@link StormReporter} (the LocalCluster's {@code
 * topology.metrics.reporters}, as a storm.yaml would list one: docs/storm.md,
 * section 5) it reports nothing: Storm prepares it with each worker's
 * metrics v2 registry, and it keeps that registry by topology id, so that
 * the test can read any task's gauges by name ({@link
 * StormMetricRegistry#getTaskGauges}) whenever it likes. The workers of a
 * LocalCluster run in the test's JVM: the static map is shared.
 *
 * <p>As a sampler ({@link #start}, {@link Sampler}): a thread that reads the gauge of each
 * given task every {@value #PERIOD_MS} ms. The gauge ({@code
 * io.cloudprofiler.Marks#capacity()}) measures between its own reads: each
 * read at least 250 ms after the last it kept is kept, and a value is the
 * capacity since the newest kept read at least 1 s old. Reading it
 * steadily is what a reporter does; reading it only at the end would give
 * NaN (no earlier read to measure from). With nothing else reading it
 * (no other reporter is configured), every read here is kept, so the span of
 * each value is known here too ({@link Read#spanFrom}).
 */
public final class CapacityGauges implements StormReporter {
    public static final String GAUGE = "cloudprofiler.capacity";
    /** A little over the 250 ms the gauge needs between the reads it keeps, so that it keeps each of these. */
    static final long PERIOD_MS = 260;
    /** The gauge's span: the newest kept read at least this old (Marks.CAPACITY_SPAN_NS). */
    static final long SPAN_NS = 1_000_000_000L;

    private static final Map<String, StormMetricRegistry> REGISTRIES = new ConcurrentHashMap<>();

    // ---- the reporter Storm makes in each worker

    @Override
    public void prepare(MetricRegistryProvider provider, Map<String, Object> topoConf, Map<String, Object> reporterConf) {
        if (provider instanceof StormMetricRegistry r) REGISTRIES.put((String) topoConf.get(Config.STORM_ID), r);
    }

    @Override
    @Deprecated
    public void prepare(MetricRegistry registry, Map<String, Object> topoConf, Map<String, Object> reporterConf) {
        // Storm 2.8 calls the provider's prepare above; a bare registry has no task ids.
    }

    @Override
    public void start() {}

    @Override
    public void stop() {}

    @Override
    public void close() {}

    /** The reporter's entry for the LocalCluster's configuration. */
    static Map<String, Object> reporterConf() {
        return Map.of("class", CapacityGauges.class.getName());
    }

    /** Forgets a killed topology's registry. */
    static void forget(String topologyId) {
        REGISTRIES.remove(topologyId);
    }

    // ---- the sampler

    /** One read of one task's gauge: when (System.nanoTime()), the value, and the time of the read its span starts at (0: none). */
    public record Read(long at, double value, long spanFrom) {}

    /**
     * Starts reading the gauges of the tasks (name -> Storm task id) of a
     * topology; null when Storm never prepared the reporter for it (then
     * the table says so). The first read is taken before this returns.
     */
    static Sampler start(String topologyId, Map<String, Integer> tasks) {
        StormMetricRegistry r = REGISTRIES.get(topologyId);
        if (r == null) return null;
        Sampler g = new Sampler(r, tasks);
        g.sweep();
        g.thread.start();
        return g;
    }

    /** The thread that reads the gauges, and its reads. */
    static final class Sampler {
        private final StormMetricRegistry registry;
        private final Map<String, Integer> tasks; // "2-digest#3" -> 3
        private final Map<String, List<Read>> reads = new LinkedHashMap<>();
        private final Thread thread;
        private volatile boolean stop;

        private Sampler(StormMetricRegistry registry, Map<String, Integer> tasks) {
            this.registry = registry;
            this.tasks = tasks;
            for (String t : tasks.keySet()) reads.put(t, new ArrayList<>());
            thread = new Thread(this::run, "capacity-gauges");
            thread.setDaemon(true);
        }

        /** Stops after one last read, taken after this was called; returns every read by task. */
        Map<String, List<Read>> finish() throws InterruptedException {
            stop = true;
            thread.interrupt();
            thread.join();
            sweep();
            return reads;
        }

        private void run() {
            while (!stop) {
                try {
                    Thread.sleep(PERIOD_MS);
                } catch (InterruptedException e) {
                    return;
                }
                if (!stop) sweep();
            }
        }

        private void sweep() {
            for (Map.Entry<String, Integer> e : tasks.entrySet()) {
                List<Read> l = reads.get(e.getKey());
                Gauge<?> g = registry.getTaskGauges(e.getValue()).get(GAUGE);
                long at = System.nanoTime();
                Object v = g == null ? null : g.getValue();
                double value = v instanceof Number n ? n.doubleValue() : Double.NaN;
                // The gauge's base, as it picks it: the newest kept read at least a span old.
                long from = 0;
                for (Read r : l) {
                    if (at - r.at >= SPAN_NS) from = r.at;
                }
                l.add(new Read(at, value, from));
            }
        }
    }
}
