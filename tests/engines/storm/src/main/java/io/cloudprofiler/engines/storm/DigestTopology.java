package io.cloudprofiler.engines.storm;

import io.cloudprofiler.storm.MarkingHook;
import io.cloudprofiler.storm.Profiled;
import java.util.List;
import org.apache.storm.Config;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.tuple.Fields;

/**
 * The topology of issue 43, written as a Storm user would, in Storm's
 * default configuration:
 *
 * <pre>
 * 0-spout -(shuffle)-> 1-decode -(fields "key")-> 2-digest x2 -(shuffle)-> 3-store
 * </pre>
 *
 * {@code 0-spout} emits records (seq, key among {@value #KEYS}, a
 * {@value #PAYLOAD}-byte payload), reliably (the message id is the
 * sequence number); {@code 1-decode} turns them into (id, key, payload);
 * {@code 2-digest} hashes each payload for about 70 µs (SHA-256 rounds,
 * {@link DigestBolt}) and emits about half of them; {@code 3-store} counts.
 *
 * <p>Two ways to profile it, as docs/storm.md has them:
 * <ul>
 * <li>{@link Variant#WRAPPED} (section 2b): the spout through {@code
 * Profiled.spout}, which gives each tuple a {@code cp_id}, each bolt
 * through {@code Profiled.bolt}: {@code in} and {@code out} marks;</li>
 * <li>{@link Variant#HOOK} (section 2a): no wrapper, {@code MarkingHook} in
 * {@code topology.auto.task.hooks}: each bolt task's {@code in} (at the
 * first emit of an execute, else when execute returned) and {@code out},
 * the spout's {@code out}. The spout's
 * first field is then {@code id}, where the hook finds it.</li>
 * </ul>
 * The component ids are the operators' names, so the hook's channels and
 * the wrappers' are named alike.
 *
 * <p>Nothing is tuned: no batch size, wait strategy, max spout pending,
 * buffer size, number of ackers or workers is set. The only entries in the
 * configuration are the hook's (H).
 */
public final class DigestTopology {
    public static final String SPOUT = "0-spout", DECODE = "1-decode", DIGEST = "2-digest", STORE = "3-store";
    public static final List<String> BOLTS = List.of(DECODE, DIGEST, STORE);
    public static final int DIGEST_TASKS = 2;
    public static final int KEYS = 1000, PAYLOAD = 64;
    /**
     * Departures each 1-decode and 2-digest task logs ({@link TaskCounter}):
     * 16 MB a task, far above a run's (an unthrottled 6 s run takes about
     * 170,000 tuples through 1-decode); more are counted as overflow.
     */
    public static final int DEPARTURE_LOG = 2_000_000;

    /** How the topology is profiled. */
    public enum Variant {
        /** W: Profiled.spout and Profiled.bolt (docs/storm.md, 2b). */
        WRAPPED("W"),
        /** H: MarkingHook alone (docs/storm.md, 2a). */
        HOOK("H");

        public final String letter;

        Variant(String letter) {
            this.letter = letter;
        }
    }

    private DigestTopology() {}

    /**
     * The topology; rate: the spout's tuples a second once the run opens
     * its gate ({@link RunControl}), 0 for as fast as Storm takes them;
     * burstMs: at a rate, the spout emits rate x burstMs tuples at once
     * every burstMs ({@link RecordSpout}).
     */
    public static StormTopology build(Variant v, double rate, double burstMs) {
        boolean wrapped = v == Variant.WRAPPED;
        // W: the spout's own sequence number is a plain field (the wrapper's
        // cp_id is the tuple's id); H: the id the hook looks for, first.
        RecordSpout spout = new RecordSpout(rate, burstMs, wrapped ? "seq" : "id");
        TopologyBuilder b = new TopologyBuilder();
        if (wrapped) {
            b.setSpout(SPOUT, Profiled.spout(SPOUT, spout));
            b.setBolt(DECODE, Profiled.bolt(DECODE, new DecodeBolt())).shuffleGrouping(SPOUT);
            b.setBolt(DIGEST, Profiled.bolt(DIGEST, new DigestBolt()), DIGEST_TASKS).fieldsGrouping(DECODE, new Fields("key"));
            b.setBolt(STORE, Profiled.bolt(STORE, new StoreBolt())).shuffleGrouping(DIGEST);
        } else {
            b.setSpout(SPOUT, spout);
            b.setBolt(DECODE, new DecodeBolt()).shuffleGrouping(SPOUT);
            b.setBolt(DIGEST, new DigestBolt(), DIGEST_TASKS).fieldsGrouping(DECODE, new Fields("key"));
            b.setBolt(STORE, new StoreBolt()).shuffleGrouping(DIGEST);
        }
        return b.createTopology();
    }

    /** Storm's defaults; H adds the hook, the one line of docs/storm.md 2a. */
    public static Config config(Variant v) {
        Config conf = new Config();
        if (v == Variant.HOOK) conf.put(Config.TOPOLOGY_AUTO_TASK_HOOKS, List.of(MarkingHook.class.getName()));
        return conf;
    }
}
