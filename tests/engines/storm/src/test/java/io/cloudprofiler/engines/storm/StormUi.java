package io.cloudprofiler.engines.storm;

import java.util.Map;
import java.util.TreeMap;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.BoltStats;
import org.apache.storm.generated.ExecutorStats;
import org.apache.storm.generated.ExecutorSummary;
import org.apache.storm.generated.GlobalStreamId;
import org.apache.storm.generated.TopologyInfo;
import org.apache.storm.generated.TopologySummary;
import org.apache.storm.utils.Utils;

/**
 * Storm's own numbers, as its UI computes them: a bolt executor's capacity
 * is executed x execute latency (ms) / window (ms), from the executor stats
 * that {@code getTopologyInfo} returns. Here from the ":all-time"
 * snapshots at the start and at the end of the logged range, differenced:
 * the executed delta, and the delta of executed x execute_ms_avg summed over
 * the executor's input streams (its busy milliseconds by Storm's count).
 *
 * <p>Storm samples these stats ({@code topology.stats.sample.rate}, 0.05 by
 * default, left as a user has it): one tuple in 20 is timed, with {@code
 * System.currentTimeMillis()}, and counted 20 times. System streams (tick,
 * metrics, flush) are left out; a bolt's user tuples are what the UI's
 * capacity is about.
 *
 * <p>Storm writes an executor's stats with its heartbeat, not at each
 * call: {@link #take} returns the last one written, and {@link
 * Snapshot#uptime} (the worker's uptime at that heartbeat, seconds) tells
 * heartbeats apart.
 */
final class StormUi {
    static final String ALL_TIME = ":all-time";

    private StormUi() {}

    /** One bolt executor (here one task each): executed tuples and busy ms, all time. */
    record Exec(String component, int task, long executed, double busyMs) {
        String name() {
            return component + "#" + task;
        }
    }

    /** One read of getTopologyInfo: the bolts' executors; uptime -1 when no heartbeat carried stats yet. */
    record Snapshot(long takenNanos, int uptime, Map<String, Exec> executors) {
        Exec get(String task) {
            return executors.getOrDefault(task, new Exec("", 0, 0, 0));
        }

        /** Same counts as another snapshot (a heartbeat after the last tuple repeats the one before). */
        boolean sameCounts(Snapshot o) {
            return executors.equals(o.executors);
        }
    }

    static String topologyId(LocalCluster cluster, String name) throws Exception {
        for (TopologySummary s : cluster.getClusterInfo().get_topologies()) {
            if (s.get_name().equals(name)) return s.get_id();
        }
        throw new IllegalStateException("no topology " + name);
    }

    static Snapshot take(LocalCluster cluster, String id) throws Exception {
        TopologyInfo info = cluster.getTopologyInfo(id);
        long now = System.nanoTime();
        Map<String, Exec> execs = new TreeMap<>();
        int uptime = -1;
        for (ExecutorSummary e : info.get_executors()) {
            if (!DigestTopology.BOLTS.contains(e.get_component_id())) continue;
            long executed = 0;
            double busy = 0;
            ExecutorStats st = e.get_stats();
            if (st != null && st.get_specific() != null && st.get_specific().is_set_bolt()) {
                uptime = Math.max(uptime, e.get_uptime_secs());
                BoltStats b = st.get_specific().get_bolt();
                Map<GlobalStreamId, Long> ex = b.get_executed().getOrDefault(ALL_TIME, Map.of());
                Map<GlobalStreamId, Double> lat = b.get_execute_ms_avg().getOrDefault(ALL_TIME, Map.of());
                for (Map.Entry<GlobalStreamId, Long> s : ex.entrySet()) {
                    GlobalStreamId g = s.getKey();
                    if (Utils.isSystemId(g.get_componentId()) || Utils.isSystemId(g.get_streamId())) continue;
                    executed += s.getValue();
                    Double avg = lat.get(g);
                    if (avg != null) busy += s.getValue() * avg;
                }
            }
            Exec x = new Exec(e.get_component_id(), e.get_executor_info().get_task_start(), executed, busy);
            execs.put(x.name(), x);
        }
        return new Snapshot(now, uptime, execs);
    }

    /** Storm UI's numbers for one executor between two snapshots, over a window of windowS seconds. */
    record Ui(long executed, double busyMs, double windowS) {
        /** The UI's capacity: executed x latency / window, the share of the window it was executing. */
        double busyShare() {
            return busyMs / (windowS * 1e3);
        }

        /** Tuples a second while executing, by Storm's own latency. */
        double rate() {
            return busyMs > 0 ? executed / (busyMs / 1e3) : Double.NaN;
        }

        Ui plus(Ui o) {
            return new Ui(executed + o.executed, busyMs + o.busyMs, windowS);
        }
    }

    static Ui between(Snapshot start, Snapshot end, String task, double windowS) {
        Exec a = start.get(task), b = end.get(task);
        return new Ui(b.executed - a.executed, b.busyMs - a.busyMs, windowS);
    }
}
