package io.cloudprofiler.datagen;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * The object factory (paper section 4.4, Fig. 8): receives what {@code
 * cloudprofiler gen send} sends (datagen/FRAMING.md), deserializes it on its
 * own threads and hands the objects to a stream processing engine's sources
 * through single-producer single-consumer queues, so that deserialization is
 * off the engine's critical path.
 *
 * <ul>
 * <li>It listens on a TCP address ({@link Builder#host host}: loopback,
 * 127.0.0.1, unless told otherwise; {@link Builder#port port 0}: an
 * ephemeral port, {@link #port()} says which) and accepts sender
 * connections, each one sending thread's stream: HELLO, BUCKETs, END.
 * <li>One factory thread per connection reads its buckets, deserializes every
 * tuple ({@link Deserializer}) and puts the bucket (ids and objects) into the
 * connection's own bounded {@link SpscQueue}. When the queue is full the
 * thread waits, stops reading, and TCP's flow control holds the sender back:
 * the sender then reports the rate as not reached. Nothing is ever dropped.
 * <li>Memory is bounded in bytes, across all connections: a bucket is
 * charged its frame's bytes to the factory's budget ({@link
 * Builder#maxQueuedBytes maxQueuedBytes}, by default an eighth of the heap,
 * at most 256 MiB) from the moment its header says how long it is, before
 * its body is read, until a consumer takes it ({@link #queuedBytes()}). A
 * thread whose next bucket does not fit waits, reading nothing, like one
 * whose queue is full; a BUCKET larger than the whole budget is refused
 * (its connection closes, the stream's report says why).
 * <li>Consumers (a source's subtasks, a spout's tasks) call {@link
 * #poll(int, int) poll(consumer, consumers)}: consumer {@code c} of {@code
 * n} drains the queues of the streams whose {@link StreamInfo#queue() queue
 * number} is {@code c} modulo {@code n}, so each queue has one consumer.
 * <li>Each stream is accounted for as FRAMING.md's "Accounting" says, as the
 * Go receiver does: received, exact loss (gaps, and the tail never
 * received), out of order, duplicates, out of range. Only the tuples it
 * counts as received reach the consumers (a duplicate or an id outside the
 * stream's range is counted and discarded, never deserialized). The
 * factory answers END with a REPORT frame only after the consumer has taken
 * every bucket of the stream, so what {@code gen send} prints is what the
 * engine ingested.
 * <li>A run (the {@code threads} connections of one {@code gen send}) is
 * complete when all its streams ended (END, or an error) and were drained:
 * {@link #completedRuns()}, {@link #awaitCompletedRuns}: a bounded job stops
 * there.
 * <li>A malformed frame closes its connection (counted: {@link
 * #malformedConnections()}); the buckets before it stay deliverable. Nothing
 * a sender sends can throw into the host or block it.
 * <li>Bounds (FRAMING.md): each frame type's length limit is checked before
 * its body is read, and a BUCKET's buffer is allocated only once the
 * byte budget has room for it (and dropped after its frame); at
 * most {@link Builder#maxConnections 1024} connections at a time (more are
 * closed at once: {@link #refusedConnections()}); a connection has 10 s in
 * all to send its HELLO, and is closed after 5 minutes without a byte once
 * it has.
 * <li>{@link #close()} stops accepting, closes every connection, and joins
 * the factory's (daemon) threads, at most a few seconds.
 * </ul>
 *
 * <pre>{@code
 * try (ObjectFactory<Event> f = ObjectFactory.builder(Event::parse).port(0).start()) {
 *     // gen send --to 127.0.0.1:<f.port()> ...
 *     Bucket<Event> b = f.take(consumer, consumers, 1, TimeUnit.MILLISECONDS);
 *     if (b != null) for (int i = 0; i < b.size(); i++) emit(b.id(i), b.get(i));
 * }
 * }</pre>
 */
public final class ObjectFactory<T> implements AutoCloseable {
    // Frame types and limits (FRAMING.md; wire.go).
    static final int HELLO = 1, BUCKET = 2, END = 3, REPORT = 4;
    static final int WIRE_VERSION = 1;
    static final int MAX_FRAME = 64 << 20;
    static final int MAX_BUCKET = 1 << 20;
    static final int MAX_PAYLOAD = 16 << 20;
    static final int MAX_NAME = 256;
    static final int RECORD_HEADER = 12;
    static final int MAX_GAPS = 100;
    static final int DEFAULT_MAX_CONNECTIONS = 1024;

    /** Configures and starts a factory. */
    public static final class Builder<T> {
        private final Deserializer<T> deserializer;
        private String host = "127.0.0.1";
        private int port = 0;
        private int queueCapacity = 64;
        private long maxQueuedBytes = defaultMaxQueuedBytes();
        private long helloTimeoutMillis = 10_000;
        private long idleTimeoutMillis = 300_000;
        private int maxConnections = DEFAULT_MAX_CONNECTIONS;
        private ThreadFactory threadFactory;
        private long joinMillis = 5_000;
        private Consumer<StreamReport> onReport;
        private String name = "cloudprofiler-factory";
        private int receiveBuffer;

        Builder(Deserializer<T> deserializer) {
            if (deserializer == null) throw new NullPointerException("deserializer");
            this.deserializer = deserializer;
        }

        /**
         * The address to listen on (default 127.0.0.1: loopback only, so that
         * a sender on this machine only can reach it). To take senders from
         * other machines, name an interface's address, or {@code 0.0.0.0}
         * for every interface: anyone who can reach the port can then make
         * the factory's threads work (within the bounds below).
         */
        public Builder<T> host(String host) {
            if (host == null) throw new NullPointerException("host");
            this.host = host;
            return this;
        }

        /** The port (default 0: an ephemeral one, see {@link ObjectFactory#port()}). */
        public Builder<T> port(int port) {
            if (port < 0 || port > 65535) throw new IllegalArgumentException("port " + port);
            this.port = port;
            return this;
        }

        /**
         * Buckets each connection's queue holds (default 64, rounded up to a
         * power of two). A bucket is what the sender sends per
         * {@code --bucket} interval (1 ms by default): the queue is that many
         * intervals of tuples. When it is full the connection's thread waits.
         */
        public Builder<T> queueCapacity(int buckets) {
            if (buckets < 1) throw new IllegalArgumentException("queue capacity " + buckets);
            this.queueCapacity = buckets;
            return this;
        }

        /**
         * The bytes the factory holds for buckets, across all its connections,
         * at most: each BUCKET counts its body's length from the moment its
         * header is read, before the body is; once parsed, the bytes of the
         * tuples it delivers (12 per tuple and its payload; the bytes of
         * duplicates and dropped tuples go back), until a consumer takes it. A connection whose next
         * bucket would take the total past this waits and stops reading (TCP
         * holds its sender back), as when its queue is full; room is given
         * in the order the connections asked for it. A BUCKET larger than
         * the whole budget is refused: its connection is closed, its
         * stream's report says why (FRAMING.md allows up to 64 MiB).
         *
         * <p>Default: an eighth of the heap ({@link Runtime#maxMemory()}), at
         * most 256 MiB, at least 1 MiB. The budget counts the bytes on the
         * wire, while the heap holds the objects made of them (what the
         * deserializer keeps, with object headers, often one to four times
         * the payload), and while a bucket is deserialized its frame's bytes
         * are held as well: an eighth leaves the host most of its heap even
         * so. More than 256 MiB would not make ingestion faster, only the
         * queues longer. A heap of 512 MiB or more takes any frame FRAMING.md
         * allows (64 MiB); a smaller one refuses the largest. The consumers
         * share the budget: one that stops taking holds the others' streams
         * back too once its queues fill it (each queue holds at most {@link
         * #queueCapacity} buckets).
         */
        public Builder<T> maxQueuedBytes(long bytes) {
            if (bytes < 1) throw new IllegalArgumentException("max queued bytes " + bytes);
            this.maxQueuedBytes = bytes;
            return this;
        }

        /** How long a new connection has, in all, to send its whole HELLO frame (default 10 s). */
        public Builder<T> helloTimeoutMillis(long ms) {
            if (ms < 1) throw new IllegalArgumentException("HELLO timeout " + ms + " ms");
            this.helloTimeoutMillis = ms;
            return this;
        }

        /**
         * After its HELLO, a connection that sends nothing for this long is
         * closed, its stream ending with an error (default 5 minutes). A
         * connection held back by a full queue is not idle: the time counts
         * only while the factory waits for its bytes.
         */
        public Builder<T> idleTimeoutMillis(long ms) {
            if (ms < 1) throw new IllegalArgumentException("idle timeout " + ms + " ms");
            this.idleTimeoutMillis = ms;
            return this;
        }

        /**
         * Connections open at a time, at most (default 1024; each one has a
         * thread). One more is closed as soon as it is accepted, and counted
         * ({@link ObjectFactory#refusedConnections()}).
         */
        public Builder<T> maxConnections(int n) {
            if (n < 1) throw new IllegalArgumentException("max connections " + n);
            this.maxConnections = n;
            return this;
        }

        /** The connections' threads' factory (tests: one that fails). Default: new daemon threads. */
        Builder<T> threadFactory(ThreadFactory f) {
            this.threadFactory = f;
            return this;
        }

        /** How long {@link ObjectFactory#close()} waits for its threads in all (default 5 s). */
        public Builder<T> joinMillis(long ms) {
            this.joinMillis = ms;
            return this;
        }

        /** Called once per stream as it ends, on its factory thread (after its REPORT frame). */
        public Builder<T> onReport(Consumer<StreamReport> onReport) {
            this.onReport = onReport;
            return this;
        }

        /**
         * The connections' TCP receive buffer in bytes (default: the system's,
         * auto-tuned up to several MiB). A small one makes backpressure reach
         * the sender sooner: less is in flight between it and the queues.
         */
        public Builder<T> receiveBuffer(int bytes) {
            if (bytes < 1) throw new IllegalArgumentException("receive buffer " + bytes);
            this.receiveBuffer = bytes;
            return this;
        }

        /** Prefix of the factory's thread names (default {@code cloudprofiler-factory}). */
        public Builder<T> threadName(String name) {
            this.name = name;
            return this;
        }

        /** Binds the port and starts accepting. */
        public ObjectFactory<T> start() throws IOException {
            return new ObjectFactory<>(this);
        }
    }

    /** The default of {@link Builder#maxQueuedBytes}: an eighth of this JVM's heap, from 1 MiB to 256 MiB. */
    static long defaultMaxQueuedBytes() {
        return Math.max(1L << 20, Math.min(256L << 20, Runtime.getRuntime().maxMemory() / 8));
    }

    /** A factory builder for objects made by {@code deserializer}. */
    public static <T> Builder<T> builder(Deserializer<T> deserializer) {
        return new Builder<>(deserializer);
    }

    private final Deserializer<T> deserializer;
    private final int queueCapacity;
    private final ByteBudget budget;
    private final long helloTimeoutMillis;
    private final int idleTimeoutMillis;
    private final int maxConnections;
    private final ThreadFactory threadFactory;
    private final long joinMillis;
    private final Consumer<StreamReport> onReport;
    private final String name;
    private final ServerSocket server;
    private final Thread acceptor;

    private final Object lock = new Object();
    private volatile boolean closed;
    /** Every open connection (under lock). */
    private final Set<Connection> connections = new LinkedHashSet<>();
    /** The streams whose queues consumers drain: copy on write (under lock), read without it. */
    private volatile Object[] streams = new Object[0];
    private int nextQueue; // under lock
    private int nextConnection; // the accept thread only
    private final Map<RunKey, int[]> runs = new HashMap<>(); // under lock: {threads, finished}
    private volatile long completedRuns;
    private final List<StreamReport> reports = new ArrayList<>(); // under lock
    private final AtomicLong malformed = new AtomicLong();
    private final AtomicLong refused = new AtomicLong();
    private volatile int consumers; // fixed by the first poll
    private volatile int[] cursors;

    private record RunKey(String sender, long runId) {}

    private ObjectFactory(Builder<T> b) throws IOException {
        deserializer = b.deserializer;
        queueCapacity = b.queueCapacity;
        budget = new ByteBudget(b.maxQueuedBytes);
        helloTimeoutMillis = Math.min(b.helloTimeoutMillis, TimeUnit.DAYS.toMillis(365)); // a deadline that fits in nanoTime
        idleTimeoutMillis = (int) Math.min(Integer.MAX_VALUE, b.idleTimeoutMillis);
        maxConnections = b.maxConnections;
        threadFactory = b.threadFactory;
        joinMillis = b.joinMillis;
        onReport = b.onReport;
        name = b.name;
        server = new ServerSocket();
        try {
            server.setReuseAddress(true);
            if (b.receiveBuffer > 0) server.setReceiveBufferSize(b.receiveBuffer); // before bind: inherited by accepted sockets
            server.bind(new InetSocketAddress(InetAddress.getByName(b.host), b.port), 128);
        } catch (IOException e) {
            server.close();
            throw new IOException("object factory: cannot listen on " + b.host + ":" + b.port + ": " + e.getMessage(), e);
        }
        acceptor = new Thread(this::acceptLoop, name + "-accept-" + server.getLocalPort());
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /** The port it listens on. */
    public int port() {
        return server.getLocalPort();
    }

    /** The address it listens on. */
    public InetSocketAddress address() {
        return (InetSocketAddress) server.getLocalSocketAddress();
    }

    /** The bounds in force (FRAMING.md): connections at once, ms for the HELLO in all, ms idle after it. */
    int maxConnections() {
        return maxConnections;
    }

    long helloTimeoutMillis() {
        return helloTimeoutMillis;
    }

    long idleTimeoutMillis() {
        return idleTimeoutMillis;
    }

    // ---- consumers

    /**
     * Consumer {@code consumer} of {@code consumers} (0 &lt;= consumer &lt;
     * consumers): the next bucket of one of its queues (the streams whose
     * queue number is consumer modulo consumers, taken in turn), or null at
     * once if they are all empty. Each consumer index must be used by one
     * thread at a time, and every caller must pass the same {@code
     * consumers} (checked: the first call fixes it).
     */
    public Bucket<T> poll(int consumer, int consumers) {
        int[] cur = checkConsumer(consumer, consumers);
        Object[] s = streams;
        int n = s.length;
        if (n == 0) return null;
        int start = cur[consumer];
        if (start >= n) start = 0; // streams ended since: the snapshot is shorter
        for (int k = 0; k < n; k++) {
            int i = start + k;
            if (i >= n) i -= n;
            Connection c = conn(s[i]);
            if (c.queueNumber % consumers != consumer) continue;
            Bucket<T> b = c.queue.poll();
            if (b != null) {
                budget.release(b.charge); // it is the consumer's now: room for the next frame
                cur[consumer] = i + 1 < n ? i + 1 : 0;
                return b;
            }
        }
        return null;
    }

    /**
     * Like {@link #poll(int, int)}, but waits up to the timeout for a bucket,
     * parking (back-off from 20 µs to 1 ms) while there is none: it never
     * spins. Null at the timeout, or when the factory is closed.
     */
    public Bucket<T> take(int consumer, int consumers, long timeout, TimeUnit unit) {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        long backoff = 20_000;
        while (true) {
            Bucket<T> b = poll(consumer, consumers);
            if (b != null || closed) return b;
            long left = deadline - System.nanoTime();
            if (left <= 0) return null;
            LockSupport.parkNanos(Math.min(backoff, left));
            backoff = Math.min(backoff * 2, 1_000_000);
        }
    }

    private int[] checkConsumer(int consumer, int n) {
        if (n < 1 || consumer < 0 || consumer >= n) {
            throw new IllegalArgumentException("consumer " + consumer + " of " + n);
        }
        int fixed = consumers;
        if (fixed == 0) {
            synchronized (lock) {
                if (consumers == 0) {
                    cursors = new int[n];
                    consumers = n;
                }
                fixed = consumers;
            }
        }
        if (fixed != n) {
            throw new IllegalStateException("poll(" + consumer + ", " + n + "): this factory's consumers poll as "
                    + fixed + " (each queue must have one consumer)");
        }
        return cursors;
    }

    /** Runs whose every stream ended and was drained by the consumers. */
    public long completedRuns() {
        return completedRuns;
    }

    /** Waits until at least n runs are complete; false at the timeout or if the factory closed first. */
    public boolean awaitCompletedRuns(long n, long timeout, TimeUnit unit) throws InterruptedException {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        synchronized (lock) {
            while (completedRuns < n) {
                long left = deadline - System.nanoTime();
                if (left <= 0 || closed) return false;
                TimeUnit.NANOSECONDS.timedWait(lock, left);
            }
            return true;
        }
    }

    /** The reports of every stream that ended so far, in the order they ended. */
    public List<StreamReport> reports() {
        synchronized (lock) {
            return List.copyOf(reports);
        }
    }

    /** Connections closed because of a frame that could not be parsed. */
    public long malformedConnections() {
        return malformed.get();
    }

    /**
     * Connections closed as soon as they were accepted: {@link
     * Builder#maxConnections} were open already, or no thread could be
     * started for them (out of memory or of threads).
     */
    public long refusedConnections() {
        return refused.get();
    }

    /** Streams (connections past their HELLO) not yet ended and drained. */
    public int activeStreams() {
        return streams.length;
    }

    /**
     * Bytes charged to the budget now (a snapshot): the buckets in the queues
     * and the BUCKET frames being read; at most {@link #maxQueuedBytes()}.
     */
    public long queuedBytes() {
        return budget.used();
    }

    /** The byte budget in force ({@link Builder#maxQueuedBytes}). */
    public long maxQueuedBytes() {
        return budget.limit();
    }

    /** Connection threads waiting for room in the byte budget now (a snapshot; for tests). */
    int waitingForRoom() {
        return budget.waiters();
    }

    /** Buckets waiting in all queues now (a snapshot). */
    public int queuedBuckets() {
        int n = 0;
        for (Object c : streams) n += conn(c).queue.size();
        return n;
    }

    public boolean isClosed() {
        return closed;
    }

    /**
     * Stops accepting, closes every connection (a stream cut short gets no
     * REPORT; its sender sees the connection close), and waits for the
     * factory's threads, in all at most the builder's {@code joinMillis}
     * (5 s). Queued buckets are discarded: {@link #poll} returns null from
     * now on; threads waiting for room in the byte budget wake and end.
     * Idempotent.
     */
    @Override
    public void close() {
        List<Connection> open;
        synchronized (lock) {
            if (closed) return;
            closed = true;
            open = new ArrayList<>(connections);
            streams = new Object[0];
            lock.notifyAll();
        }
        budget.wakeAll(); // the threads waiting for room see closed and end
        try {
            server.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        for (Connection c : open) c.closeSocket();
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(joinMillis);
        join(acceptor, deadline);
        for (Connection c : open) {
            Thread t = c.thread;
            if (t != null) {
                LockSupport.unpark(t);
                join(t, deadline);
            }
        }
    }

    private static void join(Thread t, long deadline) {
        long left = deadline - System.nanoTime();
        if (left <= 0) return;
        try {
            t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public String toString() {
        return "ObjectFactory[" + address() + ", " + streams.length + " streams, " + completedRuns + " runs complete"
                + (closed ? ", closed" : "") + "]";
    }

    // ---- the factory's threads

    private void acceptLoop() {
        long backoff = 5_000_000L;
        while (!closed) {
            Socket s;
            try {
                s = server.accept();
                backoff = 5_000_000L;
            } catch (Throwable e) { // e.g. out of file descriptors or memory: retry soon
                if (closed) return;
                LockSupport.parkNanos(backoff);
                backoff = Math.min(backoff * 2, 1_000_000_000L);
                continue;
            }
            try {
                if (!startConnection(s)) return;
            } catch (Throwable e) { // never end the accept loop: this connection only is lost
                refused.incrementAndGet(); // counted before its peer can see it closed
                closeQuietly(s);
            }
        }
    }

    /** Gives an accepted socket its thread, or closes it (over the bound, or no thread); false if closed. */
    private boolean startConnection(Socket s) {
        Connection c;
        synchronized (lock) {
            if (closed) {
                closeQuietly(s);
                return false;
            }
            if (connections.size() >= maxConnections) {
                refused.incrementAndGet(); // counted before its peer can see it closed
                closeQuietly(s);
                return true;
            }
            c = new Connection(s);
            connections.add(c);
        }
        try {
            String threadName = name + "-" + nextConnection++; // the accept thread only
            Thread t;
            if (threadFactory != null) {
                t = threadFactory.newThread(c);
                if (t == null) throw new IllegalStateException("the thread factory made no thread");
            } else {
                t = new Thread(c, threadName);
                t.setDaemon(true);
            }
            c.thread = t;
            t.start();
        } catch (Throwable e) { // OutOfMemoryError: unable to create native thread, ...
            c.thread = null;
            synchronized (lock) {
                connections.remove(c);
            }
            refused.incrementAndGet();
            closeQuietly(s);
        }
        return true;
    }

    @SuppressWarnings("unchecked")
    private Connection conn(Object o) {
        return (Connection) o;
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // nothing to do
        }
    }

    /** A frame that cannot be parsed: the connection closes (FRAMING.md: never resynchronises). */
    static class MalformedFrame extends Exception {
        private static final long serialVersionUID = 1L;

        MalformedFrame(String msg) {
            super(msg);
        }
    }

    /**
     * A BUCKET that FRAMING.md allows but that is larger than the factory's
     * whole byte budget: it could never be admitted, so the connection is
     * closed (not counted as malformed: the frame is well formed).
     */
    static final class FrameOverBudget extends MalformedFrame {
        private static final long serialVersionUID = 1L;

        FrameOverBudget(String msg) {
            super(msg);
        }
    }

    /**
     * The socket's input, with FRAMING.md's timeouts: until {@link
     * #afterHello} a deadline for the whole HELLO (each read may wait only
     * what is left of it, so a byte every few seconds does not keep it
     * open), then an idle timeout per read.
     */
    private static final class TimedInput extends InputStream {
        private final Socket socket;
        private final InputStream in;
        private long deadline; // System.nanoTime() by which HELLO must be in; 0 after it
        private int idleMillis;
        private int current = -1; // the SO_TIMEOUT set now

        TimedInput(Socket socket, long helloMillis) throws IOException {
            this.socket = socket;
            this.in = socket.getInputStream();
            this.deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(helloMillis);
            if (deadline == 0) deadline = 1;
        }

        void afterHello(int idleMillis) {
            this.deadline = 0;
            this.idleMillis = idleMillis;
        }

        private void arm() throws IOException {
            int t;
            if (deadline != 0) {
                long left = deadline - System.nanoTime();
                if (left <= 0) throw new SocketTimeoutException("no HELLO in time");
                t = (int) Math.min(Integer.MAX_VALUE, Math.max(1, TimeUnit.NANOSECONDS.toMillis(left + 999_999)));
            } else {
                t = idleMillis;
            }
            if (t != current) {
                socket.setSoTimeout(t);
                current = t;
            }
        }

        @Override
        public int read() throws IOException {
            arm();
            return in.read();
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            arm();
            return in.read(b, off, len);
        }

        @Override
        public int available() throws IOException {
            return in.available();
        }
    }

    /** One sender connection: its thread reads, deserializes and enqueues; its accounting. */
    private final class Connection implements Runnable {
        final Socket socket;
        volatile Thread thread;
        FrameReader in;
        StreamInfo info;
        int queueNumber;
        SpscQueue<Bucket<T>> queue;
        // accounting (this connection's thread only)
        Accounting acc;
        long dropped, bytes;
        long firstAt;
        /** Bytes taken from the budget for the BUCKET being read, not yet handed to a queued bucket. */
        long reserved;

        Connection(Socket socket) {
            this.socket = socket;
        }

        void closeSocket() {
            closeQuietly(socket);
        }

        @Override
        public void run() {
            String error = null;
            boolean ended = false;
            long sent = 0;
            try {
                socket.setTcpNoDelay(true);
                TimedInput timed = new TimedInput(socket, helloTimeoutMillis);
                in = new FrameReader(timed, (int) Math.min(Integer.MAX_VALUE, budget.limit()));
                int type = in.next(true);
                if (type != HELLO) throw new MalformedFrame("first frame of type " + type + ", want HELLO");
                StreamInfo h = decodeHello(in.body(), in.length());
                timed.afterHello(idleTimeoutMillis);
                if (!register(h)) return; // closed meanwhile
                sent = h.tuples();
                while (!ended) {
                    type = in.readHeader(false);
                    if (type == BUCKET) {
                        // Its bytes are charged before any of them is read: with no room, this thread
                        // waits here, reading nothing, and TCP holds the sender back.
                        if (!budget.acquire(in.bodyLength(), () -> closed)) throw new IOException("object factory closed");
                        reserved = in.bodyLength();
                    }
                    in.readBody(type == BUCKET); // HELLO and END: a few bytes, in the reader's own buffer
                    switch (type) {
                        case BUCKET -> {
                            if (!bucket(in.body(), in.length())) throw new IOException("object factory closed");
                        }
                        case END -> {
                            long n = FrameReader.u64(in.body(), 0);
                            if (Long.compareUnsigned(n, h.tuples()) > 0) {
                                throw new MalformedFrame("END says " + Long.toUnsignedString(n)
                                        + " tuples sent, HELLO planned " + Long.toUnsignedString(h.tuples()));
                            }
                            sent = n;
                            ended = true;
                        }
                        default -> throw new MalformedFrame("unexpected frame type " + type);
                    }
                }
            } catch (FrameOverBudget e) {
                error = "refused: " + e.getMessage();
            } catch (MalformedFrame e) {
                malformed.incrementAndGet();
                error = "malformed: " + e.getMessage();
            } catch (java.io.EOFException e) {
                error = "connection closed before END";
            } catch (SocketTimeoutException e) {
                error = closed ? "object factory closed" : "nothing received for " + idleTimeoutMillis + " ms: closed";
            } catch (IOException e) {
                error = closed ? "object factory closed" : "connection: " + e;
            } catch (Throwable e) { // never into the host: the stream ends with the error
                error = "object factory: " + e;
            } finally {
                unreserve(); // a frame cut short, malformed, or refused at close: its bytes go back
                if (error != null || info == null) closeSocket();
                try {
                    if (info != null) finish(ended && error == null, sent, error);
                } finally {
                    closeSocket();
                    synchronized (lock) {
                        connections.remove(this);
                    }
                }
            }
        }

        private void unreserve() {
            budget.release(reserved);
            reserved = 0;
        }

        private StreamInfo decodeHello(byte[] b, int n) throws MalformedFrame {
            if (n < 51) throw new MalformedFrame("HELLO of " + n + " bytes, want at least 51");
            if (b[0] != 'C' || b[1] != 'P' || b[2] != 'D' || b[3] != 'G') throw new MalformedFrame("HELLO magic, want CPDG");
            int version = FrameReader.u16(b, 4);
            if (version != WIRE_VERSION) {
                throw new MalformedFrame("wire version " + version + ", this receiver speaks " + WIRE_VERSION);
            }
            long runId = FrameReader.u64(b, 8);
            long thread = FrameReader.u32(b, 16), threads = FrameReader.u32(b, 20);
            long firstId = FrameReader.u64(b, 24), tuples = FrameReader.u64(b, 32);
            double rate = Double.longBitsToDouble(FrameReader.u64(b, 40));
            int nameLen = FrameReader.u16(b, 48);
            if (nameLen < 1 || nameLen > MAX_NAME || n != 50 + nameLen) {
                throw new MalformedFrame("HELLO name of " + nameLen + " bytes in a body of " + n);
            }
            if (threads == 0 || thread >= threads || threads > Integer.MAX_VALUE) {
                throw new MalformedFrame("HELLO thread " + thread + " of " + threads);
            }
            if (Accounting.rangeOverflows(firstId, tuples)) {
                throw new MalformedFrame("HELLO range: first id " + Long.toUnsignedString(firstId) + " + "
                        + Long.toUnsignedString(tuples) + " tuples overflows 64 bits");
            }
            String sender = new String(b, 50, nameLen, java.nio.charset.StandardCharsets.UTF_8);
            return new StreamInfo(runId, sender, (int) thread, (int) threads, firstId, tuples, rate, -1,
                    String.valueOf(socket.getRemoteSocketAddress()));
        }

        /** Gives the stream its queue and its number, and counts it in its run. */
        private boolean register(StreamInfo h) {
            synchronized (lock) {
                if (closed) return false;
                queueNumber = nextQueue++;
                info = new StreamInfo(h.runId(), h.sender(), h.thread(), h.threads(), h.firstId(), h.tuples(), h.rate(),
                        queueNumber, h.remote());
                queue = new SpscQueue<>(queueCapacity);
                acc = new Accounting(h.firstId(), h.tuples());
                runs.computeIfAbsent(new RunKey(h.sender(), h.runId()), k -> new int[] {h.threads(), 0});
                Object[] s = streams;
                Object[] grown = java.util.Arrays.copyOf(s, s.length + 1);
                grown[s.length] = this;
                streams = grown;
                return true;
            }
        }

        /**
         * Parses, deserializes and enqueues one BUCKET; false if the factory
         * closed while it waited (the bucket's accounting is then undone: only
         * what reached the queue counts as received).
         */
        private boolean bucket(byte[] b, int n) throws MalformedFrame {
            if (n < 4) throw new MalformedFrame("BUCKET without a count");
            long count = FrameReader.u32(b, 0);
            if (count < 1 || count > MAX_BUCKET) {
                throw new MalformedFrame("BUCKET count " + count + " out of range 1.." + MAX_BUCKET);
            }
            // The structure first, so that a malformed bucket is refused whole.
            int off = 4;
            for (int i = 0; i < count; i++) {
                if (n - off < RECORD_HEADER) throw new MalformedFrame("BUCKET cut in tuple " + i + " of " + count);
                long len = FrameReader.u32(b, off + 8);
                if (len > MAX_PAYLOAD || n - off - RECORD_HEADER < len) {
                    throw new MalformedFrame("BUCKET tuple " + i + ": payload of " + len + " bytes, "
                            + (n - off - RECORD_HEADER) + " left");
                }
                off += RECORD_HEADER + (int) len;
            }
            if (off != n) throw new MalformedFrame("BUCKET has " + (n - off) + " bytes after its " + count + " tuples");
            if (firstAt == 0) firstAt = System.nanoTime();
            int c = (int) count;
            long[] ids = null;
            Object[] items = null;
            int k = 0;
            long size = 0;
            acc.mark();
            off = 4;
            for (int i = 0; i < c; i++) {
                long id = FrameReader.u64(b, off);
                int len = (int) FrameReader.u32(b, off + 8);
                int at = off + RECORD_HEADER;
                off = at + len;
                if (!acc.wouldReceive(id)) { // a duplicate or out of range: counted, not delivered
                    acc.add(id);
                    continue;
                }
                Object o;
                try {
                    o = deserializer.deserialize(id, b, at, len);
                } catch (Exception e) {
                    o = null;
                }
                if (o == null) { // dropped: its id stays missing (a gap)
                    dropped++;
                    continue;
                }
                acc.add(id);
                if (ids == null) {
                    ids = new long[c - i];
                    items = new Object[c - i];
                }
                ids[k] = id;
                items[k++] = o;
                size += len + RECORD_HEADER;
            }
            if (k == 0) {
                unreserve();
                return true;
            }
            // The bucket keeps the charge of the tuples it holds (size <= n); the frame's
            // other bytes (its count, tuples not delivered) go back now.
            budget.release(reserved - size);
            reserved = size;
            if (queue.put(new Bucket<>(info, ids, items, k, size), () -> closed)) {
                reserved = 0; // the consumer that takes it releases it
                bytes += size;
                return true;
            }
            acc.rollback();
            return false;
        }

        /**
         * The stream ended (END, an error, or the factory closing): waits until
         * the consumer has taken every bucket, then answers END with the REPORT
         * and counts the stream in its run.
         */
        private void finish(boolean withEnd, long sent, String error) {
            long backoff = 20_000;
            while (!queue.isEmpty() && !closed) {
                LockSupport.parkNanos(backoff);
                backoff = Math.min(backoff * 2, 1_000_000);
            }
            if (closed && error == null) {
                error = "object factory closed";
                withEnd = false;
            }
            acc.finish(sent);
            double seconds = firstAt == 0 ? 0 : (System.nanoTime() - firstAt) / 1e9;
            StreamReport r = new StreamReport(info.runId(), info.sender(), info.thread(), info.threads(), info.firstId(),
                    sent, acc.received, acc.lost, acc.outOfOrder, acc.duplicates, acc.outOfRange, dropped, bytes,
                    acc.gaps(MAX_GAPS), acc.truncated(MAX_GAPS), seconds, error);
            // Recorded before the sender hears its REPORT: a sender that
            // reads it and starts another stream finds this one in
            // reports() before the next (they are in the order they ended).
            // The run is complete only after the REPORT is written: a
            // program that waits for the run and then closes the factory
            // does not close the socket under it.
            synchronized (lock) {
                reports.add(r);
                Object[] s = streams;
                int i = java.util.Arrays.asList(s).indexOf(this);
                if (i >= 0) {
                    Object[] shrunk = new Object[s.length - 1];
                    System.arraycopy(s, 0, shrunk, 0, i);
                    System.arraycopy(s, i + 1, shrunk, i, s.length - i - 1);
                    streams = shrunk;
                }
            }
            if (withEnd) {
                try {
                    byte[] js = r.toJson().getBytes(java.nio.charset.StandardCharsets.UTF_8);
                    byte[] frame = new byte[5 + js.length];
                    FrameReader.putU32(frame, 0, js.length + 1);
                    frame[4] = REPORT;
                    System.arraycopy(js, 0, frame, 5, js.length);
                    socket.getOutputStream().write(frame);
                    socket.getOutputStream().flush();
                } catch (IOException e) {
                    // the sender went away: its report is still recorded here
                }
            }
            synchronized (lock) {
                RunKey key = new RunKey(info.sender(), info.runId());
                int[] run = runs.get(key);
                if (run != null && ++run[1] >= run[0]) {
                    runs.remove(key);
                    if (!closed) completedRuns++;
                    lock.notifyAll();
                }
            }
            if (onReport != null) {
                try {
                    onReport.accept(r);
                } catch (RuntimeException e) {
                    // the callback's own problem: the stream is done either way
                }
            }
        }
    }
}
