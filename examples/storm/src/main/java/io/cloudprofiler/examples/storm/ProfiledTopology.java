package io.cloudprofiler.examples.storm;

import io.cloudprofiler.Channel;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.storm.Config;
import org.apache.storm.StormSubmitter;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;
import org.apache.storm.utils.NimbusClient;
import org.apache.storm.utils.Utils;

/**
 * spout -(shuffle)-> transform x2 -(fieldsGrouping "key")-> keyed x2 -(shuffle)-> sink.
 *
 * <p>Each transform task sends to both keyed tasks (a key's tuples always go
 * to the same one), so tuples cross executors. Channels: every task's
 * {@code in} and {@code out} marks (the spout's too), and at the sink a
 * periodic counter.
 */
public final class ProfiledTopology {
    public static final int KEYS = 64;
    public static final int PARALLELISM = 2;
    /** The sink counter's period: 10 ms. */
    public static final long COUNTER_PERIOD_NS = 10_000_000L;

    private ProfiledTopology() {}

    /** Re-emits (id, key, payload): a little arithmetic on the id. */
    public static class TransformBolt extends ProfiledBolt {
        private static final long serialVersionUID = 1L;

        @Override
        protected Values process(Tuple input, long id) {
            long payload = id * 0x9E3779B97F4A7C15L;
            return new Values(id, input.getString(1), payload ^ (payload >>> 29));
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("id", "key", "payload"));
        }
    }

    /** Counts tuples per key (its tuples are partitioned by key): emits (id, key, count so far). */
    public static class KeyedBolt extends ProfiledBolt {
        private static final long serialVersionUID = 1L;
        private transient Map<String, Long> perKey;

        @Override
        protected void open(String instance) {
            perKey = new HashMap<>();
        }

        @Override
        protected Values process(Tuple input, long id) {
            String key = input.getString(1);
            return new Values(id, key, perKey.merge(key, 1L, Long::sum));
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("id", "key", "seen"));
        }
    }

    /**
     * The end: counts every tuple on a periodic counter channel
     * ({@code sink#<task> counter}, one record per 10 ms, the exact total at
     * close; its last word is no role, so it is not a mark) and in {@link
     * #SEEN} (per JVM: the LocalCluster test waits on it).
     */
    public static class SinkBolt extends ProfiledBolt {
        private static final long serialVersionUID = 1L;
        public static final AtomicLong SEEN = new AtomicLong();
        private transient Channel counter;

        @Override
        protected void open(String instance) {
            counter = Probes.openCounter(instance + " counter", COUNTER_PERIOD_NS);
        }

        @Override
        protected Values process(Tuple input, long id) {
            Probes.log(counter, id);
            SEEN.incrementAndGet();
            return null;
        }

        @Override
        protected void close() {
            Probes.close(counter);
            counter = null;
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {}
    }

    public static StormTopology build(long tuples) {
        TopologyBuilder b = new TopologyBuilder();
        b.setSpout("spout", new IdSpout(tuples, KEYS), 1);
        b.setBolt("transform", new TransformBolt(), PARALLELISM).shuffleGrouping("spout");
        b.setBolt("keyed", new KeyedBolt(), PARALLELISM).fieldsGrouping("transform", new Fields("key"));
        b.setBolt("sink", new SinkBolt(), 1).shuffleGrouping("keyed");
        return b.createTopology();
    }

    /** The topology's settings: reliable, a bounded number of tuples in flight, one worker. */
    public static Config config() {
        Config conf = new Config();
        conf.setNumWorkers(1);
        conf.setNumAckers(1);
        conf.setMaxSpoutPending(1_000);
        // A tuple not acked in time is failed and replayed (logged twice):
        // generous, so that a slow machine does not replay.
        conf.setMessageTimeoutSecs(120);
        return conf;
    }

    /**
     * Submits the topology to a real cluster: {@code storm jar
     * target/cloudprofiler-storm-example-0.1.0.jar
     * io.cloudprofiler.examples.storm.ProfiledTopology NAME [TUPLES [WORKERS]]}
     * (defaults: 1,000,000 tuples, 1 worker; with 2 workers on two
     * supervisors, tuples cross machines). When every tuple has been acked,
     * the spout's worker log says "IdSpout: all N tuples acked".
     * {@code ... ProfiledTopology --kill NAME [WAIT_SECS]} kills it (what
     * {@code storm kill} does: the spouts are deactivated, WAIT_SECS later,
     * default 1, the supervisors stop the workers with SIGTERM).
     * The library in each worker reads CP_LOG_DIR (and the other CP_*
     * variables) from the worker's environment, which it inherits from its
     * supervisor: set them there. If the submitting shell has CP_LOG_DIR,
     * it is passed on as topology.environment, for every worker. Each node
     * keeps its workers' logs in its own directory: collect them for
     * `analyze`.
     */
    public static void main(String[] args) throws Exception {
        if (args.length >= 2 && args.length <= 3 && args[0].equals("--kill")) {
            kill(args[1], args.length > 2 ? Integer.parseInt(args[2]) : 1);
            return;
        }
        if (args.length < 1 || args.length > 3 || args[0].startsWith("-")) {
            System.err.println("usage: storm jar JAR " + ProfiledTopology.class.getName() + " NAME [TUPLES [WORKERS]]\n"
                    + "       storm jar JAR " + ProfiledTopology.class.getName() + " --kill NAME [WAIT_SECS]");
            System.exit(2);
        }
        long tuples = args.length > 1 ? Long.parseLong(args[1]) : 1_000_000L;
        Config conf = config();
        if (args.length > 2) conf.setNumWorkers(Integer.parseInt(args[2]));
        String logDir = System.getenv("CP_LOG_DIR");
        if (logDir != null) {
            conf.put(Config.TOPOLOGY_ENVIRONMENT, Map.of("CP_LOG_DIR", logDir));
        }
        StormSubmitter.submitTopology(args[0], conf, build(tuples));
    }

    /** Kills a running topology through Nimbus (storm.yaml's nimbus.seeds), as {@code storm kill -w WAIT_SECS} does. */
    static void kill(String name, int waitSecs) throws Exception {
        KillOptions opts = new KillOptions();
        opts.set_wait_secs(waitSecs);
        try (NimbusClient nimbus = NimbusClient.getConfiguredClient(Utils.readStormConfig())) {
            nimbus.getClient().killTopologyWithOpts(name, opts);
        }
        System.out.println("killed " + name + " (workers stopped " + waitSecs + " s after the spouts)");
    }
}
