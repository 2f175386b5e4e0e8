package io.cloudprofiler.examples.flink;

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.Meter;
import org.apache.flink.metrics.Metric;
import org.apache.flink.metrics.MetricConfig;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.metrics.reporter.MetricReporter;
import org.apache.flink.metrics.reporter.MetricReporterFactory;

/**
 * Flink's own metrics of a task, read in the process that runs it: a
 * {@link MetricReporter} that keeps the metric objects Flink registers (no
 * polling, no REST: the values are read when asked for), so that the test
 * can put Flink's view of the slow operator next to ours.
 *
 * <p>Registered by {@link #register} as reporter {@code cp} ({@code
 * metrics.reporter.cp.factory.class}); Flink finds the factory through
 * {@code META-INF/services/org.apache.flink.metrics.reporter.MetricReporterFactory}.
 * The metrics are kept per JVM (on a MiniCluster, the whole job's) by job
 * name, task name and subtask index.
 *
 * <p>What it reads of a task (Flink 2.3, {@code TaskIOMetricGroup}):
 * <ul>
 * <li>{@code numRecordsIn}: records the task took from its inputs (a counter);
 * <li>{@code accumulateBusyTimeMs}: the task's wall time since it started,
 *     less the time it was idle (its mailbox waiting for input, measured
 *     with a millisecond clock per wait) and back-pressured (waiting for an
 *     output buffer): everything else is busy;
 * <li>{@code busyTimeMsPerSecond} and {@code numRecordsInPerSecond}: the same
 *     as rates over Flink's sliding windows (60 s, updated every 5 s; the
 *     records meter divides by the full 60 s even while the task is younger,
 *     so it reads low in the first minute).
 * </ul>
 * Records per busy second, {@code numRecordsIn / accumulateBusyTimeMs}, is
 * the "true processing rate" of DS2 and of Flink's autoscaler.
 */
public final class FlinkMetrics implements MetricReporter {
    private static final String NAME = "cp";
    /** "job|task|subtask|metric" -> the metric object. */
    private static final Map<String, Metric> METRICS = new ConcurrentHashMap<>();

    /** Adds this reporter to a configuration (before the MiniCluster, or the cluster, starts). */
    public static void register(Configuration conf) {
        conf.set(ConfigOptions.key("metrics.reporter." + NAME + ".factory.class").stringType().noDefaultValue(),
                Factory.class.getName());
    }

    /** Creates the reporter (Flink calls it by the configured class name, found through ServiceLoader). */
    public static final class Factory implements MetricReporterFactory {
        @Override
        public MetricReporter createMetricReporter(Properties properties) {
            return new FlinkMetrics();
        }
    }

    @Override
    public void open(MetricConfig config) {}

    @Override
    public void close() {}

    @Override
    public void notifyOfAddedMetric(Metric metric, String name, MetricGroup group) {
        String k = key(group, name);
        if (k != null) METRICS.put(k, metric);
    }

    @Override
    public void notifyOfRemovedMetric(Metric metric, String name, MetricGroup group) {
        String k = key(group, name);
        if (k != null) METRICS.remove(k, metric);
    }

    /** Task-scoped metrics only (operator metrics carry an operator name too). */
    private static String key(MetricGroup group, String name) {
        Map<String, String> v = group.getAllVariables();
        String job = v.get("<job_name>"), task = v.get("<task_name>"), subtask = v.get("<subtask_index>");
        if (job == null || task == null || subtask == null || v.containsKey("<operator_name>")) return null;
        return job + "|" + task + "|" + subtask + "|" + name;
    }

    /** Flink's metrics of one task at one instant. */
    public record Sample(long nanoTime, long recordsIn, double busyMs, double idleMs, double backPressuredMs,
                         double busyTimeMsPerSecond, double recordsInPerSecond) {
        /** Records per busy second between an earlier sample and this one: Flink's processing rate. */
        public double recordsPerBusySecondSince(Sample earlier) {
            return (recordsIn - earlier.recordsIn) / ((busyMs - earlier.busyMs) / 1e3);
        }

        /** Busy ms per wall second between an earlier sample and this one. */
        public double busyMsPerSecondSince(Sample earlier) {
            return (busyMs - earlier.busyMs) / ((nanoTime - earlier.nanoTime) / 1e9);
        }

        /** Records per wall second between an earlier sample and this one. */
        public double recordsPerSecondSince(Sample earlier) {
            return (recordsIn - earlier.recordsIn) / ((nanoTime - earlier.nanoTime) / 1e9);
        }

        @Override
        public String toString() {
            return String.format("numRecordsIn %d, accumulateBusyTimeMs %.0f (idle %.0f, back-pressured %.0f),"
                    + " busyTimeMsPerSecond %.0f, numRecordsInPerSecond %.0f", recordsIn, busyMs, idleMs,
                    backPressuredMs, busyTimeMsPerSecond, recordsInPerSecond);
        }
    }

    /** The metrics of subtask of task in job now, or null while Flink has not registered them (or has removed them). */
    public static Sample sample(String job, String task, int subtask) {
        String p = job + "|" + task + "|" + subtask + "|";
        long now = System.nanoTime();
        Metric in = METRICS.get(p + "numRecordsIn"), busy = METRICS.get(p + "accumulateBusyTimeMs"),
                idle = METRICS.get(p + "accumulateIdleTimeMs"), bp = METRICS.get(p + "accumulateBackPressuredTimeMs"),
                busyRate = METRICS.get(p + "busyTimeMsPerSecond"), inRate = METRICS.get(p + "numRecordsInPerSecond");
        if (!(in instanceof Counter c) || busy == null) return null;
        return new Sample(now, c.getCount(), value(busy), value(idle), value(bp), value(busyRate),
                inRate instanceof Meter m ? m.getRate() : Double.NaN);
    }

    /** The first job's task metrics found for task and subtask (main: one job). */
    static Sample sample(String task, int subtask) {
        for (String k : METRICS.keySet()) {
            String[] f = k.split("\\|", 4);
            if (f.length == 4 && f[1].equals(task) && f[2].equals(Integer.toString(subtask))) {
                return sample(f[0], task, subtask);
            }
        }
        return null;
    }

    private static double value(Metric m) {
        if (m instanceof Gauge<?> g && g.getValue() instanceof Number n) return n.doubleValue();
        return Double.NaN;
    }
}
