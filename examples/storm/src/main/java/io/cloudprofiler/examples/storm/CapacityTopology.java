package io.cloudprofiler.examples.storm;

import io.cloudprofiler.storm.Profiled;
import java.util.Map;
import java.util.function.BiFunction;
import org.apache.storm.Config;
import org.apache.storm.StormSubmitter;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.IBasicBolt;
import org.apache.storm.topology.IRichBolt;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

/**
 * A topology with one bolt made slow on purpose, fed by {@code cloudprofiler
 * gen send} through the object factory, every task marked by the marking
 * convention ({@code <component>#<task> in|out}; the bolts' with
 * cloudprofiler-storm's {@code Profiled.bolt}, which adds each bolt task's
 * {@code count} channel): the capacity analysis
 * should name the slow bolt as the bottleneck and predict the highest rate
 * the topology sustains, which {@code gen maxrate} measures from outside.
 *
 * <pre>
 * spout x2 (FactorySpout) -(fieldsGrouping "ad_type")-> count x2 -(shuffle)-> score x1 -(shuffle)-> sink x1
 * </pre>
 *
 * The score bolt spins on {@link System#nanoTime()} until scoreNanos have
 * passed since its {@code in} (a known service time in wall time, like a
 * model that takes that long per event), then hands on a small tuple (id,
 * ad type, sequence number, score).
 *
 * <p>Little is in flight between the factory and the score bolt: executor
 * queues of {@link #QUEUE} tuples instead of Storm's 32768, and a small
 * socket receive buffer. What is in flight is what a run of {@code gen send}
 * can fill above the topology's capacity before the sender feels
 * backpressure; with Storm's default queues, two seconds of the score bolt's
 * work. The factory's queues hold {@link #FACTORY_QUEUE} buckets (32 ms of a
 * sender thread's tuples): a spout with nothing to emit sleeps 1 ms, longer
 * on a busy machine, and must not find them full meanwhile (with 8, the
 * spouts held the sender back while the score bolt had capacity to spare).
 */
public final class CapacityTopology {
    public static final int SPOUTS = 2, COUNTERS = 2;
    /** Executor receive queues, tuples (a power of 2). */
    public static final int QUEUE = 256;
    /** Factory queue, buckets per stream; socket receive buffer, bytes. */
    public static final int FACTORY_QUEUE = 32, RECEIVE_BUFFER = 64 << 10;
    public static final String SCORE = "score";

    private CapacityTopology() {}

    /** The slow bolt: spins scoreNanos per tuple; emits (id, ad_type, seq, score). */
    public static class ScoreBolt extends BaseBasicBolt {
        private static final long serialVersionUID = 1L;
        private final long scoreNanos;
        private transient long seq;

        public ScoreBolt(long scoreNanos) {
            this.scoreNanos = scoreNanos;
        }

        @Override
        public void execute(Tuple t, BasicOutputCollector out) {
            long score = spin(scoreNanos);
            out.emit(new Values(t.getLongByField("id"), t.getStringByField("ad_type"), ++seq, score));
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("id", "ad_type", "seq", "score"));
        }
    }

    /**
     * Spins until nanos have passed (wall time, {@link System#nanoTime()});
     * returns the loop's count, so that the loop has a result.
     */
    static long spin(long nanos) {
        long end = System.nanoTime() + nanos, n = 0;
        while (System.nanoTime() - end < 0) n++;
        return n;
    }

    /**
     * The factory listens on host:port (0: ephemeral); marks: whether the
     * tasks log their marks (the spout's own, {@link FactorySpout#marked};
     * the bolts wrapped with {@code Profiled.bolt}, the component id their
     * operator), or the same topology without them. The sink is
     * IngestTopology's.
     */
    public static StormTopology build(String host, int port, long scoreNanos, boolean marks) {
        FactorySpout spout = new FactorySpout(host, port, FACTORY_QUEUE).receiveBuffer(RECEIVE_BUFFER);
        if (marks) spout.marked();
        BiFunction<String, IBasicBolt, IRichBolt> bolt = marks ? Profiled::bolt : PlainTopology.AS_IS;
        TopologyBuilder b = new TopologyBuilder();
        b.setSpout("spout", spout, SPOUTS);
        b.setBolt("count", bolt.apply("count", new CountBolt("ad_type")), COUNTERS).fieldsGrouping("spout", new Fields("ad_type"));
        b.setBolt(SCORE, bolt.apply(SCORE, new ScoreBolt(scoreNanos)), 1).shuffleGrouping("count");
        b.setBolt("sink", bolt.apply("sink", new IngestTopology.SinkBolt(true)), 1).shuffleGrouping(SCORE);
        return b.createTopology();
    }

    /**
     * One worker, no ackers (the spout's emits are unreliable), small
     * executor queues, and idle executors that sleep: Storm's progressive
     * wait strategy has an idle (or back-pressured) executor call
     * parkNanos(1) a thousand times (a wake-up every ~60 µs for ~60 ms)
     * before it sleeps 1 ms at a time. On 2 vCPUs those wake-ups preempt the
     * spinning score bolt: its median service time was 65 µs for a 50 µs
     * spin. Here they go to sleep at once (1 ms at a time, so a hop may wait
     * up to 1 ms more).
     */
    public static Config config() {
        Config conf = new Config();
        conf.setNumWorkers(1);
        conf.setNumAckers(0);
        conf.put(Config.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE, QUEUE);
        conf.put(Config.TOPOLOGY_BOLT_WAIT_PROGRESSIVE_LEVEL2_COUNT, 0);
        conf.put(Config.TOPOLOGY_BACKPRESSURE_WAIT_PROGRESSIVE_LEVEL2_COUNT, 0);
        return conf;
    }

    /**
     * Submits it to a cluster: {@code storm jar JAR
     * io.cloudprofiler.examples.storm.CapacityTopology NAME [PORT [SCORE_US]]}
     * (default port 7400, on every interface of the worker's machine; score
     * 50 µs a tuple).
     */
    public static void main(String[] args) throws Exception {
        if (args.length < 1 || args.length > 3) {
            System.err.println("usage: storm jar JAR " + CapacityTopology.class.getName() + " NAME [PORT [SCORE_US]]");
            System.exit(2);
        }
        int port = args.length > 1 ? Integer.parseInt(args[1]) : 7400;
        long scoreNanos = args.length > 2 ? Math.round(Double.parseDouble(args[2]) * 1e3) : 50_000;
        Config conf = config();
        String logDir = System.getenv("CP_LOG_DIR");
        if (logDir != null) conf.put(Config.TOPOLOGY_ENVIRONMENT, Map.of("CP_LOG_DIR", logDir));
        StormSubmitter.submitTopology(args[0], conf, build("0.0.0.0", port, scoreNanos, true));
    }
}
