package io.cloudprofiler.examples.flink;

import io.cloudprofiler.datagen.Bucket;
import io.cloudprofiler.datagen.ObjectFactory;
import io.cloudprofiler.datagen.SharedFactory;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A Flink source fed by the object factory ({@code io.cloudprofiler.datagen}):
 * {@code cloudprofiler gen send} sends serialized ad events to the factory,
 * whose threads (one per sender connection) deserialize them into SPSC
 * queues; each reader of this source drains its queues and emits the
 * objects, so deserialization is not on the job's critical path.
 *
 * <p>A Source of the FLIP-27 API (Flink 2 removed {@code SourceFunction}):
 * <ul>
 * <li>Splits: one per reader, {@code i} of {@code P} (the source's
 * parallelism); split {@code i} is the factory's streams numbered {@code i}
 * modulo {@code P} (with {@code gen send --threads} a multiple of P, each
 * reader gets the same share). The enumerator hands a reader its split when
 * it registers, then says there are no more.</li>
 * <li>The reader: a fetcher thread of its own parks in the factory's {@code
 * take} until a bucket of its streams is there and hands it over through a
 * queue of one bucket, completing the reader's availability future; the
 * task's thread emits the bucket's tuples in {@code pollNext}. While the
 * job downstream is behind, the task does not poll, the hand-over queue
 * stays full, the fetcher waits, the factory's queues fill and the sender
 * feels it: the same backpressure as before, and nothing spins.</li>
 * <li>Bounded when {@code runs > 0}: a reader ends its input once that many
 * {@code gen send} runs are complete (every stream of the run ended and was
 * drained) and its queues are empty; then the job ends. With {@code runs =
 * 0} it runs until cancelled.</li>
 * </ul>
 *
 * <p>One factory per JVM (a TaskManager; the whole job on a MiniCluster),
 * shared by the readers in it ({@link SharedFactory}): the first to start
 * starts it, with its host, port and queue capacity, the last to close
 * stops it. The source keeps no state: a restart does not replay (the
 * sender has moved on), as with any socket source.
 *
 * <p>{@link #plain()} is the baseline the paper measures the factory
 * against (section 4.4, Figs. 3 and 4): the factory's threads only receive
 * and frame, handing each tuple's serialized bytes over as they came (as a
 * messaging library's receiving thread does), and {@code pollNext}
 * deserializes them on the task's thread, the job's critical path. {@code
 * make bench-ingest} finds the highest rate of each.
 *
 * <p>{@link #marked} names the source in the marking convention ({@link
 * Marks}): each reader then logs {@code OPERATOR#SUBTASK in} as it takes a
 * tuple from its bucket, {@code out} right before it hands the tuple to
 * Flink's output and {@code sent} after that returned (the output waits for
 * a free buffer when one record fills the last: out -&gt; sent is that
 * wait). The marks are logged on the task's thread, their channels' one
 * writer.
 */
public class FactorySource implements Source<AdEvent, FactorySource.Split, Integer> {
    private static final long serialVersionUID = 2L;

    /** The JVM's factory, its readers and those fetching; the plain readers' (serialized bytes) apart. */
    private static final SharedFactory<AdEvent> SHARED = new SharedFactory<>();
    private static final SharedFactory<byte[]> SHARED_PLAIN = new SharedFactory<>();
    /** Plain readers: tuples whose bytes did not parse, dropped (per JVM; the factory's reports count them received). */
    public static final LongAdder PLAIN_DROPPED = new LongAdder();

    private final String host;
    private final int port;
    private final long runs;
    private final int queueCapacity;
    private String marks;
    private int receiveBuffer;
    private boolean plain;

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

    /** Deserializes on the task's thread, not the factory's (the paper's baseline); returns this. */
    public FactorySource plain() {
        this.plain = true;
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
    public Boundedness getBoundedness() {
        return runs > 0 ? Boundedness.BOUNDED : Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SourceReader<AdEvent, Split> createReader(SourceReaderContext ctx) {
        return new Reader(this, ctx.getIndexOfSubtask());
    }

    @Override
    public SplitEnumerator<Split, Integer> createEnumerator(SplitEnumeratorContext<Split> ctx) {
        return new Enumerator(ctx);
    }

    @Override
    public SplitEnumerator<Split, Integer> restoreEnumerator(SplitEnumeratorContext<Split> ctx, Integer checkpoint) {
        return new Enumerator(ctx);
    }

    @Override
    public SimpleVersionedSerializer<Split> getSplitSerializer() {
        return new SplitSerializer();
    }

    @Override
    public SimpleVersionedSerializer<Integer> getEnumeratorCheckpointSerializer() {
        return new IntSerializer();
    }

    /**
     * The factory of this JVM once a reader has started it (null before), and
     * {@code readers} readers are fetching: how a test (or main, on a
     * MiniCluster) learns the ephemeral port to send to.
     */
    public static ObjectFactory<AdEvent> awaitFactory(int readers, long timeout, TimeUnit unit) throws InterruptedException {
        return SHARED.await(readers, timeout, unit);
    }

    /** {@link #awaitFactory} for a plain source. */
    public static ObjectFactory<byte[]> awaitPlainFactory(int readers, long timeout, TimeUnit unit) throws InterruptedException {
        return SHARED_PLAIN.await(readers, timeout, unit);
    }

    /** The readers open in this JVM, plain or not (0: their factories are closed). */
    public static int openReaders() {
        return SHARED.users() + SHARED_PLAIN.users();
    }

    /** Split {@code index} of {@code of}: the factory's streams numbered index modulo of. */
    public static final class Split implements SourceSplit {
        final int index, of;

        Split(int index, int of) {
            this.index = index;
            this.of = of;
        }

        @Override
        public String splitId() {
            return index + "/" + of;
        }

        @Override
        public String toString() {
            return "factory streams " + index + " mod " + of;
        }
    }

    /** Hands each reader its split as it registers; then no more. */
    static final class Enumerator implements SplitEnumerator<Split, Integer> {
        private final SplitEnumeratorContext<Split> ctx;

        Enumerator(SplitEnumeratorContext<Split> ctx) {
            this.ctx = ctx;
        }

        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtask, String host) {}

        @Override
        public void addSplitsBack(List<Split> splits, int subtask) {
            // A reader failed: its split goes back to it when it registers again (addReader).
        }

        @Override
        public void addReader(int subtask) {
            ctx.assignSplit(new Split(subtask, ctx.currentParallelism()), subtask);
            ctx.signalNoMoreSplits(subtask);
        }

        @Override
        public Integer snapshotState(long checkpointId) {
            return 0;
        }

        @Override
        public void close() {}
    }

    /** One reader: a fetcher thread parked on the factory, the task's thread emitting. */
    static final class Reader implements SourceReader<AdEvent, Split> {
        private final FactorySource src;
        private final int subtask;
        private final BlockingQueue<Bucket<?>> handover = new ArrayBlockingQueue<>(1);
        private final Object lock = new Object();
        private CompletableFuture<Void> available = new CompletableFuture<>();
        private final SharedFactory<?> shared;
        private ObjectFactory<?> factory;
        private final AdEventParser parser = new AdEventParser();
        private Marks marks = Marks.off();
        private Split split;
        private Thread fetcher;
        private volatile boolean fetched, stop; // the fetcher is done (its runs complete); close asked it to stop
        private boolean noMoreSplits;

        Reader(FactorySource src, int subtask) {
            this.src = src;
            this.subtask = subtask;
            this.shared = src.plain ? SHARED_PLAIN : SHARED;
        }

        @Override
        public void start() {
            try {
                factory = src.plain ? SHARED_PLAIN.acquire(() -> start(ObjectFactory.builder(FactorySource::bytes)))
                        : SHARED.acquire(() -> start(ObjectFactory.builder(new AdEventParser())));
            } catch (IOException e) {
                throw new IllegalStateException("the object factory on " + src.host + ":" + src.port + " did not start: " + e.getMessage(), e);
            }
            // Opened here: start() and pollNext() run on the task's thread, the channels' one writer.
            if (src.marks != null) marks = Marks.open(src.marks, subtask, true);
        }

        private <T> ObjectFactory<T> start(ObjectFactory.Builder<T> b) throws IOException {
            b.host(src.host).port(src.port).queueCapacity(src.queueCapacity).threadName("flink-object-factory");
            if (src.receiveBuffer > 0) b.receiveBuffer(src.receiveBuffer);
            return b.start();
        }

        @Override
        public void addSplits(List<Split> splits) {
            for (Split s : splits) {
                if (split != null) throw new IllegalStateException("reader " + subtask + " got a second split " + s + " after " + split);
                split = s;
                fetcher = new Thread(this::fetch, "cloudprofiler-factory-fetcher-" + subtask);
                fetcher.setDaemon(true);
                shared.consumerStarted();
                fetcher.start();
            }
        }

        /** The fetcher: takes its streams' buckets, parking while there is none, and hands them over. */
        private void fetch() {
            try {
                while (!stop) {
                    Bucket<?> b = factory.take(split.index, split.of, 10, TimeUnit.MILLISECONDS);
                    if (b != null) {
                        handover.put(b); // waits while the task has not emitted the last one: backpressure
                        signal();
                        continue;
                    }
                    // Our queues are empty now: done when the runs are complete (their every stream drained).
                    if ((src.runs > 0 && factory.completedRuns() >= src.runs) || factory.isClosed()) break;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                fetched = true;
                shared.consumerStopped();
                signal();
            }
        }

        private void signal() {
            synchronized (lock) {
                available.complete(null);
            }
        }

        @Override
        public InputStatus pollNext(ReaderOutput<AdEvent> out) {
            Bucket<?> b = handover.poll();
            if (b != null) {
                for (int i = 0; i < b.size(); i++) {
                    long id = b.id(i);
                    marks.in(id);
                    AdEvent e;
                    if (src.plain) {
                        byte[] raw = (byte[]) b.get(i);
                        try {
                            e = parser.deserialize(id, raw, 0, raw.length); // here, on the task's thread
                        } catch (IllegalArgumentException x) {
                            PLAIN_DROPPED.increment();
                            continue;
                        }
                    } else {
                        e = (AdEvent) b.get(i);
                    }
                    marks.out(id);
                    out.collect(e);
                    marks.sent(id);
                }
                return InputStatus.MORE_AVAILABLE;
            }
            if ((fetched && handover.isEmpty()) || (split == null && noMoreSplits)) return InputStatus.END_OF_INPUT;
            return InputStatus.NOTHING_AVAILABLE;
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            synchronized (lock) {
                if (available.isDone() && handover.isEmpty() && !fetched) available = new CompletableFuture<>();
                return available;
            }
        }

        @Override
        public void notifyNoMoreSplits() {
            noMoreSplits = true;
            if (split == null) signal();
        }

        @Override
        public List<Split> snapshotState(long checkpointId) {
            List<Split> l = new ArrayList<>();
            if (split != null) l.add(split);
            return l;
        }

        @Override
        public void close() throws Exception {
            stop = true;
            if (fetcher != null) {
                fetcher.interrupt();
                fetcher.join(10_000);
            }
            try {
                marks.close();
            } finally {
                if (factory != null) {
                    release(shared, factory);
                    factory = null;
                }
            }
        }
    }

    /** Gives f back to its shared holder. */
    @SuppressWarnings("unchecked")
    private static <T> void release(SharedFactory<T> shared, ObjectFactory<?> f) {
        shared.release((ObjectFactory<T>) f);
    }

    /** A plain source's "deserializer": the payload's bytes as they came. */
    private static byte[] bytes(long tupleId, byte[] buf, int off, int len) {
        return Arrays.copyOfRange(buf, off, off + len);
    }

    /** A split: its index and count, two ints. */
    static final class SplitSerializer implements SimpleVersionedSerializer<Split> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Split s) throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream(8);
            try (DataOutputStream d = new DataOutputStream(b)) {
                d.writeInt(s.index);
                d.writeInt(s.of);
            }
            return b.toByteArray();
        }

        @Override
        public Split deserialize(int version, byte[] raw) throws IOException {
            if (version != 1) throw new IOException("factory split: version " + version + ", this reads 1");
            try (DataInputStream d = new DataInputStream(new ByteArrayInputStream(raw))) {
                return new Split(d.readInt(), d.readInt());
            }
        }
    }

    /** The enumerator's state: nothing but a placeholder int. */
    static final class IntSerializer implements SimpleVersionedSerializer<Integer> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Integer v) {
            return new byte[] {(byte) (v >>> 24), (byte) (v >>> 16), (byte) (v >>> 8), (byte) (int) v};
        }

        @Override
        public Integer deserialize(int version, byte[] raw) throws IOException {
            if (raw.length != 4) throw new IOException("factory enumerator state: " + raw.length + " bytes, want 4");
            return (raw[0] & 0xff) << 24 | (raw[1] & 0xff) << 16 | (raw[2] & 0xff) << 8 | (raw[3] & 0xff);
        }
    }
}
