package io.cloudprofiler.examples.flink;

import io.cloudprofiler.datagen.Bucket;
import io.cloudprofiler.datagen.ObjectFactory;
import io.cloudprofiler.datagen.SharedFactory;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.streaming.api.functions.source.RichParallelSourceFunction;

/**
 * A Flink source fed by the object factory ({@code io.cloudprofiler.datagen}):
 * {@code cloudprofiler gen send} sends serialized ad events to the factory,
 * whose threads (one per sender connection) deserialize them into SPSC
 * queues; each subtask of this source drains its queues and emits the
 * objects, so deserialization is not on the job's critical path.
 *
 * <p>One factory per JVM (a TaskManager; the whole job on a MiniCluster),
 * shared by the subtasks in it ({@link SharedFactory}): the first to open
 * starts it, with its host, port and queue capacity, the last to close
 * stops it. Subtask {@code i} of {@code P} drains the queues of the
 * streams numbered {@code i} modulo {@code P} (with {@code gen send
 * --threads} a multiple of P, each subtask gets the same share).
 *
 * <p>Bounded when {@code runs > 0}: a subtask finishes once that many
 * {@code gen send} runs are complete (every stream of the run ended and was
 * drained) and its queues are empty; then the job ends. With {@code runs =
 * 0} it runs until cancelled.
 *
 * <p>A legacy {@link RichParallelSourceFunction} (deprecated in Flink 1.20,
 * removed in 2.0): its {@code run} loop has a thread of its own, which is
 * what draining a queue needs: take a bucket (parking briefly while there
 * is none), emit its tuples under the checkpoint lock. The FLIP-27 {@code
 * Source} would need a split enumerator, splits and their serializers and a
 * reader whose availability future the factory completes, for the same
 * effect. The source keeps no state: a restart does not replay (the sender
 * has moved on), as with any socket source.
 *
 * <p>{@link #marked} names the source in the marking convention ({@link
 * Marks}): each subtask then logs {@code OPERATOR#SUBTASK in} as it takes a
 * tuple from its bucket, {@code out} right before {@code collect} and
 * {@code sent} after it returned (collect waits for a free output buffer
 * when the job downstream is behind: out -&gt; sent is that wait).
 */
public class FactorySource extends RichParallelSourceFunction<AdEvent> {
    private static final long serialVersionUID = 1L;

    /** The JVM's factory, its subtasks and those in their run loop. */
    private static final SharedFactory<AdEvent> SHARED = new SharedFactory<>();

    private final String host;
    private final int port;
    private final long runs;
    private final int queueCapacity;
    private String marks;
    private int receiveBuffer;
    private transient ObjectFactory<AdEvent> factory;
    private volatile boolean running = true;

    /**
     * @param host  the address the factory listens on
     * @param port  its port (0: an ephemeral one, see {@link #awaitFactory})
     * @param runs  the source ends after this many complete runs of {@code gen send}; 0: never
     * @param queueCapacity buckets per stream queue
     */
    public FactorySource(String host, int port, long runs, int queueCapacity) {
        this.host = host;
        this.port = port;
        this.runs = runs;
        this.queueCapacity = queueCapacity;
    }

    /** Marks each tuple as operator {@code operator} (channels {@code operator#SUBTASK in|out|sent}); returns this. */
    public FactorySource marked(String operator) {
        this.marks = operator;
        return this;
    }

    /**
     * The factory's socket receive buffer, bytes (0: the system's; see
     * ObjectFactory.Builder#receiveBuffer): less in flight between the sender
     * and the queues, so that the sender feels backpressure sooner.
     */
    public FactorySource receiveBuffer(int bytes) {
        this.receiveBuffer = bytes;
        return this;
    }

    @Override
    public void open(OpenContext ctx) throws Exception {
        factory = SHARED.acquire(() -> {
            ObjectFactory.Builder<AdEvent> b = ObjectFactory.builder(new AdEventParser()).host(host).port(port)
                    .queueCapacity(queueCapacity).threadName("flink-object-factory");
            if (receiveBuffer > 0) b.receiveBuffer(receiveBuffer);
            return b.start();
        });
    }

    @Override
    public void run(SourceContext<AdEvent> ctx) {
        int me = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        int n = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
        // Opened here: run() has a thread of its own (not open()'s), the channels' one writer.
        Marks m = marks == null ? Marks.off() : Marks.open(marks, me, true);
        SHARED.consumerStarted();
        try {
            while (running) {
                Bucket<AdEvent> b = factory.take(me, n, 10, TimeUnit.MILLISECONDS);
                if (b != null) {
                    synchronized (ctx.getCheckpointLock()) {
                        for (int i = 0; i < b.size(); i++) {
                            AdEvent e = b.get(i);
                            m.in(e.id);
                            m.out(e.id);
                            ctx.collect(e);
                            m.sent(e.id);
                        }
                    }
                    continue;
                }
                // Our queues are empty now: done when the runs are complete (their every stream drained).
                if ((runs > 0 && factory.completedRuns() >= runs) || factory.isClosed()) break;
            }
        } finally {
            SHARED.consumerStopped();
            m.close();
        }
    }

    @Override
    public void cancel() {
        running = false;
    }

    @Override
    public void close() throws Exception {
        if (factory != null) {
            SHARED.release(factory);
            factory = null;
        }
    }

    /**
     * The factory of this JVM once a subtask has opened it (null before), and
     * {@code subtasks} source subtasks are in their run loop: how a test (or
     * main, on a MiniCluster) learns the ephemeral port to send to.
     */
    public static ObjectFactory<AdEvent> awaitFactory(int subtasks, long timeout, TimeUnit unit) throws InterruptedException {
        return SHARED.await(subtasks, timeout, unit);
    }
}
