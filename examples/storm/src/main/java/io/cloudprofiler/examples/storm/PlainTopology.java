package io.cloudprofiler.examples.storm;

import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiFunction;
import java.util.function.LongFunction;
import org.apache.storm.Config;
import org.apache.storm.StormSubmitter;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.topology.BasicBoltExecutor;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.IBasicBolt;
import org.apache.storm.topology.IRichBolt;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;
import org.apache.storm.utils.NimbusClient;
import org.apache.storm.utils.Utils;

/**
 * spout -(shuffle)-> transform x2 -(fieldsGrouping "key")-> keyed x2 -(shuffle)-> sink,
 * with nothing of Cloudprofiler in its code: a topology as its authors
 * wrote it. Profiled by configuration alone, given when it is submitted:
 *
 * <pre>
 * storm jar JAR io.cloudprofiler.examples.storm.PlainTopology NAME [TUPLES [WORKERS]] \
 *     -c 'topology.auto.task.hooks=["io.cloudprofiler.storm.MarkingHook"]'
 * </pre>
 *
 * with cloudprofiler-storm and cloudprofiler-java in every supervisor's
 * {@code extlib/} (docs/storm.md): every task then marks its {@code out}
 * ({@code spout#T out}, {@code transform#T out}, ...), the hops between
 * tasks. {@link ProfiledTopology} is the same topology with its bolts
 * wrapped ({@code Profiled.bolt}): their {@code in} too.
 *
 * <p>Each transform task sends to both keyed tasks (a key's tuples always go
 * to the same one), so tuples cross executors, and with two workers, nodes.
 * The bolts are basic bolts: Storm anchors their emits to the input and acks
 * it when execute returns.
 */
public final class PlainTopology {
    public static final int KEYS = 64;
    public static final int PARALLELISM = 2;

    /** How build adds a bolt: as it is (what setBolt does with a basic bolt); ProfiledTopology's: Profiled::bolt. */
    static final BiFunction<String, IBasicBolt, IRichBolt> AS_IS = (component, bolt) -> new BasicBoltExecutor(bolt);

    private PlainTopology() {}

    /** Re-emits (id, key, payload): a little arithmetic on the id. */
    public static class TransformBolt extends BaseBasicBolt {
        private static final long serialVersionUID = 1L;

        @Override
        public void execute(Tuple input, BasicOutputCollector out) {
            long id = input.getLongByField("id");
            long payload = id * 0x9E3779B97F4A7C15L;
            out.emit(new Values(id, input.getStringByField("key"), payload ^ (payload >>> 29)));
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("id", "key", "payload"));
        }
    }

    /** The end: counts every tuple in {@link #SEEN} (per JVM: the LocalCluster test waits on it). */
    public static class SinkBolt extends BaseBasicBolt {
        private static final long serialVersionUID = 1L;
        public static final AtomicLong SEEN = new AtomicLong();

        @Override
        public void execute(Tuple input, BasicOutputCollector out) {
            SEEN.incrementAndGet();
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {}
    }

    public static StormTopology build(long tuples) {
        return build(tuples, AS_IS);
    }

    /** The topology, each bolt given to Storm as bolt(component id, bolt) makes it (ProfiledTopology: wrapped). */
    static StormTopology build(long tuples, BiFunction<String, IBasicBolt, IRichBolt> bolt) {
        TopologyBuilder b = new TopologyBuilder();
        b.setSpout("spout", new IdSpout(tuples, KEYS), 1);
        b.setBolt("transform", bolt.apply("transform", new TransformBolt()), PARALLELISM).shuffleGrouping("spout");
        b.setBolt("keyed", bolt.apply("keyed", new CountBolt("key")), PARALLELISM).fieldsGrouping("transform", new Fields("key"));
        b.setBolt("sink", bolt.apply("sink", new SinkBolt()), 1).shuffleGrouping("keyed");
        return b.createTopology();
    }

    /** The topology's settings: reliable, a bounded number of tuples in flight, one worker. */
    public static Config config() {
        Config conf = new Config();
        conf.setNumWorkers(1);
        conf.setNumAckers(1);
        conf.setMaxSpoutPending(1_000);
        // A tuple not acked in time is failed and replayed (marked twice):
        // generous, so that a slow machine does not replay.
        conf.setMessageTimeoutSecs(120);
        return conf;
    }

    /**
     * {@code storm jar JAR io.cloudprofiler.examples.storm.PlainTopology NAME
     * [TUPLES [WORKERS]]} submits it (defaults: 1,000,000 tuples, 1 worker;
     * with 2 workers on two supervisors, tuples cross machines); the
     * configuration {@code storm jar -c} gives (StormSubmitter reads it from
     * the system property storm.options) goes with it. When every tuple has
     * been acked, the spout's worker log says "IdSpout: all N tuples acked".
     * {@code ... PlainTopology --kill NAME [WAIT_SECS]} kills it.
     */
    public static void main(String[] args) throws Exception {
        main(PlainTopology.class, args, config(), PlainTopology::build);
    }

    /**
     * The main of a topology of this shape (this one's, ProfiledTopology's):
     * NAME [TUPLES [WORKERS]] submits build(TUPLES) with conf; --kill NAME
     * [WAIT_SECS] kills a running one (what {@code storm kill -w} does: the
     * spouts are deactivated, WAIT_SECS later, default 1, the supervisors
     * stop the workers with SIGTERM).
     */
    static void main(Class<?> main, String[] args, Config conf, LongFunction<StormTopology> build) throws Exception {
        if (args.length >= 2 && args.length <= 3 && args[0].equals("--kill")) {
            kill(args[1], args.length > 2 ? Integer.parseInt(args[2]) : 1);
            return;
        }
        if (args.length < 1 || args.length > 3 || args[0].startsWith("-")) {
            System.err.println("usage: storm jar JAR " + main.getName() + " NAME [TUPLES [WORKERS]]\n"
                    + "       storm jar JAR " + main.getName() + " --kill NAME [WAIT_SECS]");
            System.exit(2);
        }
        long tuples = args.length > 1 ? Long.parseLong(args[1]) : 1_000_000L;
        if (args.length > 2) conf.setNumWorkers(Integer.parseInt(args[2]));
        StormSubmitter.submitTopology(args[0], conf, build.apply(tuples));
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
