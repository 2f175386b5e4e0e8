package io.cloudprofiler.examples.storm;

import io.cloudprofiler.Marks;
import io.cloudprofiler.datagen.Bucket;
import io.cloudprofiler.datagen.ObjectFactory;
import io.cloudprofiler.datagen.SharedFactory;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Values;

/**
 * A spout fed by the object factory ({@code io.cloudprofiler.datagen}):
 * {@code cloudprofiler gen send} sends serialized ad events to the factory,
 * whose threads (one per sender connection) deserialize them straight into
 * the tuples to emit ({@link AdEventValues}) and queue them in SPSC queues.
 * {@code nextTuple()} takes one bucket from this task's queues when it has
 * none left, then emits its tuples one per call; with nothing queued it
 * returns at once and Storm's spout wait strategy backs off.
 *
 * <p>One factory per worker JVM, shared by the spout tasks in it ({@link
 * SharedFactory}: the first to open starts it, with its host, port and
 * queue capacity, the last to close stops it); task {@code i} of {@code
 * n} (its index among the component's tasks) drains the queues of the
 * streams numbered {@code i} modulo {@code n}. Emits are unreliable (no
 * message id): a sender's stream cannot be replayed, and Storm's
 * backpressure (bounded executor queues) slows {@code nextTuple} instead,
 * which leaves buckets in the queues and holds the sender back through TCP.
 *
 * <p>{@link #plain()} is the baseline the paper measures the factory
 * against (section 4.4: its "StormIR", Figs. 3 and 4): the factory's
 * threads only receive and frame, handing each tuple's serialized bytes
 * over as they came (as a messaging library's receiving thread does), and
 * {@code nextTuple()} deserializes them on the spout's own thread, the
 * topology's critical path. {@code make bench-ingest} finds the highest
 * rate of each.
 *
 * <p>{@link #marked()} adds the marking convention's channels per task
 * (the binding's {@link Marks}), {@code <component>#<task> in} (the tuple
 * taken from the bucket: it arrived at the factory and waited in its queue)
 * and {@code ... out} (right before {@code emit}), with the tuple's id from
 * the sender's framing. Not cloudprofiler-storm's {@code Profiled.spout}:
 * that gives each tuple a new id of its own and marks {@code out} alone, as
 * where tuples start; here they start at the sender, and the spout is an
 * operator with arrivals. A receive buffer ({@link #receiveBuffer}) bounds
 * what waits in the kernel for the factory.
 */
public class FactorySpout extends BaseRichSpout {
    private static final long serialVersionUID = 1L;

    /** The worker's factory and its open spout tasks; the plain spouts' (serialized bytes) apart. */
    private static final SharedFactory<Values> SHARED = new SharedFactory<>();
    private static final SharedFactory<byte[]> SHARED_PLAIN = new SharedFactory<>();
    /** Plain spouts: tuples whose bytes did not parse, dropped (per JVM; the factory's reports count them received). */
    public static final LongAdder PLAIN_DROPPED = new LongAdder();
    /**
     * The marks' failures (an open or a close that threw; a close throws when
     * a mark was refused), per JVM: empty in a good run (the LocalCluster
     * tests assert it). Nothing throws into Storm, which would end the worker.
     */
    public static final Queue<String> ERRORS = new ConcurrentLinkedQueue<>();

    private final String host;
    private final int port;
    private final int queueCapacity;
    private boolean marked, plain;
    private int receiveBuffer;
    private transient ObjectFactory<Values> factory;
    private transient ObjectFactory<byte[]> plainFactory;
    private transient AdEventValues parser;
    private transient Marks marks;
    private transient SpoutOutputCollector collector;
    private transient int task, tasks;
    private transient Bucket<?> bucket;
    private transient int next;

    /** Listens on host:port (port 0: an ephemeral one, see {@link #awaitFactory}); queues of queueCapacity buckets. */
    public FactorySpout(String host, int port, int queueCapacity) {
        this.host = host;
        this.port = port;
        this.queueCapacity = queueCapacity;
    }

    /** Logs the marks (channels {@code <component>#<task> in|out}); returns this. */
    public FactorySpout marked() {
        this.marked = true;
        return this;
    }

    /** Deserializes on the spout's thread, not the factory's (the paper's baseline); returns this. */
    public FactorySpout plain() {
        this.plain = true;
        return this;
    }

    /** The factory's socket receive buffer, bytes (0: the system's); returns this. */
    public FactorySpout receiveBuffer(int bytes) {
        this.receiveBuffer = bytes;
        return this;
    }

    @Override
    public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
        this.collector = collector;
        this.task = context.getThisTaskIndex();
        this.tasks = context.getComponentTasks(context.getThisComponentId()).size();
        this.marks = Marks.off();
        if (marked) {
            try {
                marks = Marks.open(context.getThisComponentId(), String.valueOf(context.getThisTaskId()), false, false);
            } catch (RuntimeException e) {
                ERRORS.add(context.getThisComponentId() + "#" + context.getThisTaskId() + ": " + e);
            }
        }
        try {
            if (plain) {
                parser = new AdEventValues();
                plainFactory = SHARED_PLAIN.acquire(() -> start(ObjectFactory.builder(FactorySpout::bytes)));
                SHARED_PLAIN.consumerStarted();
            } else {
                factory = SHARED.acquire(() -> start(ObjectFactory.builder(new AdEventValues())));
                SHARED.consumerStarted(); // open: nextTuple may be called from now on
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private <T> ObjectFactory<T> start(ObjectFactory.Builder<T> b) throws IOException {
        b.host(host).port(port).queueCapacity(queueCapacity).threadName("storm-object-factory");
        if (receiveBuffer > 0) b.receiveBuffer(receiveBuffer);
        return b.start();
    }

    /** A plain spout's "deserializer": the payload's bytes as they came. */
    private static byte[] bytes(long tupleId, byte[] buf, int off, int len) {
        return Arrays.copyOfRange(buf, off, off + len);
    }

    @Override
    public void nextTuple() {
        if (bucket == null || next == bucket.size()) {
            if (factory != null) bucket = factory.poll(task, tasks);
            else if (plainFactory != null) bucket = plainFactory.poll(task, tasks);
            else return;
            next = 0;
            if (bucket == null) return; // nothing queued: Storm's wait strategy backs off
        }
        long id = bucket.id(next);
        marks.in(id);
        Object o = bucket.get(next++);
        Values v;
        if (plain) {
            byte[] b = (byte[]) o;
            try {
                v = parser.deserialize(id, b, 0, b.length); // here, on the spout's thread
            } catch (IllegalArgumentException e) {
                PLAIN_DROPPED.increment();
                return;
            }
        } else {
            v = (Values) o;
        }
        marks.out(id);
        collector.emit(v);
    }

    @Override
    public void close() {
        try {
            marks.close(); // before the factory: a test that sees the factory closed finds every file complete
        } catch (RuntimeException e) {
            ERRORS.add("close: " + e);
        }
        marks = Marks.off();
        if (factory != null) {
            SHARED.consumerStopped();
            SHARED.release(factory);
            factory = null;
        }
        if (plainFactory != null) {
            SHARED_PLAIN.consumerStopped();
            SHARED_PLAIN.release(plainFactory);
            plainFactory = null;
        }
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        declarer.declare(AdEventValues.FIELDS);
    }

    /**
     * This worker's factory once {@code spouts} spout tasks have opened it
     * (null at the timeout): how a LocalCluster test learns the ephemeral
     * port.
     */
    public static ObjectFactory<Values> awaitFactory(int spouts, long timeout, TimeUnit unit) throws InterruptedException {
        return SHARED.await(spouts, timeout, unit);
    }

    /** The spout tasks open in this JVM, plain or not (0: their factories are closed). */
    public static int openTasks() {
        return SHARED.users() + SHARED_PLAIN.users();
    }

    /** {@link #awaitFactory} for plain spouts. */
    public static ObjectFactory<byte[]> awaitPlainFactory(int spouts, long timeout, TimeUnit unit) throws InterruptedException {
        return SHARED_PLAIN.await(spouts, timeout, unit);
    }
}
