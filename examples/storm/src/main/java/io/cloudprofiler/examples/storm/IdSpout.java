package io.cloudprofiler.examples.storm;

import java.util.ArrayDeque;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Values;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Emits exactly {@code count} tuples (id, key), ids {@link #FIRST_ID} ..
 * FIRST_ID + count - 1 (beyond 32 bits: the profiler's tuple ids are 64-bit),
 * key "k" + id % keys; then nothing. Reliable emits: the tuple id is the
 * message id, so Storm acks each tuple tree back here. A failed tuple is
 * emitted again (a replay, which the marks would log twice); the tests
 * assert there were none.
 *
 * <p>A plain spout: nothing of Cloudprofiler in it. Its id is the field
 * {@code id}, first, which is where {@code MarkingHook} (its {@code out}) and
 * {@code Profiled.bolt} (the bolts' {@code in} and {@code out}) find it.
 */
public class IdSpout extends BaseRichSpout {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(IdSpout.class);

    /** The first tuple id: 2^36. */
    public static final long FIRST_ID = 1L << 36;

    // Per JVM: on a LocalCluster the test reads them; on a cluster each worker has its own.
    public static final AtomicLong EMITTED = new AtomicLong();
    public static final AtomicLong ACKED = new AtomicLong();
    public static final AtomicLong FAILED = new AtomicLong();

    private final long count;
    private final int keys;
    private transient SpoutOutputCollector collector;
    private transient long next;
    private transient ArrayDeque<Long> replay;

    public IdSpout(long count, int keys) {
        this.count = count;
        this.keys = keys;
    }

    public static void reset() {
        EMITTED.set(0);
        ACKED.set(0);
        FAILED.set(0);
    }

    public static String key(long id, int keys) {
        return "k" + Math.floorMod(id, keys);
    }

    @Override
    public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
        this.collector = collector;
        this.next = 0;
        this.replay = new ArrayDeque<>();
    }

    @Override
    public void nextTuple() {
        Long again = replay.poll();
        long id;
        if (again != null) {
            id = again;
        } else if (next < count) {
            id = FIRST_ID + next++;
            EMITTED.incrementAndGet();
        } else {
            return; // done: Storm's spout wait strategy backs off
        }
        collector.emit(new Values(id, key(id, keys)), id);
    }

    @Override
    public void ack(Object msgId) {
        if (ACKED.incrementAndGet() == count) {
            // On a cluster, the worker's log says when the run is complete
            // (tests/cluster waits for this line before killing the topology).
            LOG.info("IdSpout: all {} tuples acked", count);
        }
    }

    @Override
    public void fail(Object msgId) {
        FAILED.incrementAndGet();
        replay.add((Long) msgId);
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        declarer.declare(new Fields("id", "key"));
    }
}
