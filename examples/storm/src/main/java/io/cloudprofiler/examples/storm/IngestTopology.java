package io.cloudprofiler.examples.storm;

import java.util.BitSet;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import org.apache.storm.Config;
import org.apache.storm.StormSubmitter;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;

/**
 * A topology fed by {@code cloudprofiler gen send} through the object
 * factory (paper section 4.4, Fig. 8):
 *
 * <pre>
 * factory-spout x2 -(fieldsGrouping "ad_type")-> count x2 -(shuffle)-> sink
 * </pre>
 *
 * The spout emits the ad events the factory's threads deserialized; count
 * numbers each ad type's events; the sink counts them ({@link SinkBolt}, per
 * worker JVM: on a LocalCluster, the topology's).
 */
public final class IngestTopology {
    public static final int SPOUTS = 2, COUNTERS = 2;

    private IngestTopology() {}

    /** Counts every tuple, and which ids it saw (per JVM; not with trackIds off). */
    public static class SinkBolt extends BaseBasicBolt {
        private static final long serialVersionUID = 2L;
        private final boolean trackIds;

        public SinkBolt(boolean trackIds) {
            this.trackIds = trackIds;
        }

        public static final LongAdder SEEN = new LongAdder();
        public static final LongAdder DUPLICATES = new LongAdder();
        /** sender thread (id >>> 40) -> the ids seen (id & (2^40 - 1)). */
        public static final Map<Integer, BitSet> IDS = new ConcurrentHashMap<>();

        public static void reset() {
            SEEN.reset();
            DUPLICATES.reset();
            IDS.clear();
        }

        @Override
        public void execute(Tuple t, BasicOutputCollector out) {
            SEEN.increment();
            if (!trackIds) return;
            long id = t.getLong(0);
            BitSet s = IDS.computeIfAbsent((int) (id >>> 40), k -> new BitSet());
            int i = (int) (id & ((1L << 40) - 1));
            synchronized (s) {
                if (s.get(i)) DUPLICATES.increment();
                s.set(i);
            }
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {}
    }

    /** The factory listens on host:port (0: ephemeral); queues of queueCapacity buckets. */
    public static StormTopology build(String host, int port, int queueCapacity) {
        return build(host, port, queueCapacity, false, true);
    }

    /**
     * As {@link #build(String, int, int)}; plain: the spouts deserialize
     * ({@link FactorySpout#plain()}, the paper's baseline); trackIds: the
     * sink records every id (a bit each; off for runs of millions).
     */
    public static StormTopology build(String host, int port, int queueCapacity, boolean plain, boolean trackIds) {
        TopologyBuilder b = new TopologyBuilder();
        FactorySpout spout = new FactorySpout(host, port, queueCapacity);
        b.setSpout("factory-spout", plain ? spout.plain() : spout, SPOUTS);
        b.setBolt("count", new CountBolt("ad_type"), COUNTERS).fieldsGrouping("factory-spout", new Fields("ad_type"));
        b.setBolt("sink", new SinkBolt(trackIds), 1).shuffleGrouping("count");
        return b.createTopology();
    }

    /**
     * The paper's system under test for ingestion (section 4.4: "it receives
     * tuples in the Spout and drains them in the subsequent actor"): the
     * spouts and the sink alone, shuffled; plain as in {@link #build(String,
     * int, int, boolean, boolean)}; the sink tracks no ids.
     */
    public static StormTopology buildSpoutSink(String host, int port, int queueCapacity, boolean plain) {
        TopologyBuilder b = new TopologyBuilder();
        FactorySpout spout = new FactorySpout(host, port, queueCapacity);
        b.setSpout("factory-spout", plain ? spout.plain() : spout, SPOUTS);
        b.setBolt("sink", new SinkBolt(false), 1).shuffleGrouping("factory-spout");
        return b.createTopology();
    }

    /** One worker, no ackers (the spout's emits are unreliable). */
    public static Config config() {
        Config conf = new Config();
        conf.setNumWorkers(1);
        conf.setNumAckers(0);
        return conf;
    }

    /**
     * Submits it to a cluster: {@code storm jar JAR
     * io.cloudprofiler.examples.storm.IngestTopology NAME [PORT [plain]]}
     * (default port 7400, on every interface of the worker's machine; send
     * to each worker that runs spouts; plain: the spouts deserialize).
     */
    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 3 || (args.length == 3 && !args[2].equals("plain"))) {
            System.err.println("usage: storm jar JAR " + IngestTopology.class.getName() + " NAME [PORT [plain]]");
            System.exit(2);
        }
        int port = args.length > 1 ? Integer.parseInt(args[1]) : 7400;
        StormSubmitter.submitTopology(args[0], config(), build("0.0.0.0", port, 64, args.length == 3, false));
    }
}
