package io.cloudprofiler.examples.storm;

import io.cloudprofiler.storm.MarkingHook;
import io.cloudprofiler.storm.Profiled;
import java.util.List;
import java.util.Map;
import org.apache.storm.Config;
import org.apache.storm.generated.StormTopology;

/**
 * {@link PlainTopology} profiled with cloudprofiler-storm: each bolt wrapped
 * with {@code Profiled.bolt} (the component id its operator), which marks
 * its {@code in} and {@code out} ({@code transform#T in|out}, ...) and
 * counts what it takes on a {@code count} channel (the live service rate
 * behind its metrics), and {@link MarkingHook} for the plain spout's {@code
 * out} (its field {@code id}; the hook leaves the wrapped bolts alone). The
 * spout keeps its own ids (2^36 ..): {@code Profiled.spout} would add a
 * {@code cp_id} of its own, which the bolts would then mark instead.
 */
public final class ProfiledTopology {
    private ProfiledTopology() {}

    public static StormTopology build(long tuples) {
        return PlainTopology.build(tuples, Profiled::bolt);
    }

    /** PlainTopology's settings and the hook. */
    public static Config config() {
        Config conf = PlainTopology.config();
        conf.put(Config.TOPOLOGY_AUTO_TASK_HOOKS, List.of(MarkingHook.class.getName()));
        return conf;
    }

    /**
     * Submits the topology to a real cluster: {@code storm jar
     * target/cloudprofiler-storm-example-0.1.0.jar
     * io.cloudprofiler.examples.storm.ProfiledTopology NAME [TUPLES [WORKERS]]},
     * or kills it: {@code ... ProfiledTopology --kill NAME [WAIT_SECS]} (see
     * {@link PlainTopology#main}). The library in each worker reads
     * CP_LOG_DIR (and the other CP_* variables) from the worker's
     * environment, which it inherits from its supervisor: set them there. If
     * the submitting shell has CP_LOG_DIR, it is passed on as
     * topology.environment, for every worker. Each node keeps its workers'
     * logs in its own directory: collect them for `analyze`.
     */
    public static void main(String[] args) throws Exception {
        Config conf = config();
        String logDir = System.getenv("CP_LOG_DIR");
        if (logDir != null) conf.put(Config.TOPOLOGY_ENVIRONMENT, Map.of("CP_LOG_DIR", logDir));
        PlainTopology.main(ProfiledTopology.class, args, conf, ProfiledTopology::build);
    }
}
