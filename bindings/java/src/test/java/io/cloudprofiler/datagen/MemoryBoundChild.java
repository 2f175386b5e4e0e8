package io.cloudprofiler.datagen;

import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Child JVM main for {@link ObjectFactoryMemoryTest}, run with a small heap
 * (issue 26, item 5: loopback senders filled a host's heap while its
 * consumer was not taking). An object factory with a byte budget; {@code
 * gen send} with THREADS connections sends buckets of a few MiB; the
 * consumer takes nothing for HOLD_MS while a thread samples {@link
 * ObjectFactory#queuedBytes()}; then it takes everything. Prints what it
 * saw as {@code key=value} lines for the test to check; the JVM runs with
 * {@code -XX:+ExitOnOutOfMemoryError}, so running out of heap anywhere
 * ends it at once with exit 3.
 *
 * <p>Args: tool budgetBytes threads tuplesPerThread payloadBytes holdMillis.
 */
public final class MemoryBoundChild {
    static final long THREAD_SHIFT = 40;

    public static void main(String[] args) throws Exception {
        String tool = args[0];
        long budget = Long.parseLong(args[1]);
        int threads = Integer.parseInt(args[2]);
        int perThread = Integer.parseInt(args[3]);
        int payload = Integer.parseInt(args[4]);
        long holdMillis = Long.parseLong(args[5]);

        // The tuples gen send cycles: 4 payloads, each one byte repeated (checked on arrival).
        Path tuples = Files.createTempFile(Paths.get(System.getProperty("java.io.tmpdir")), "big-tuples", ".bin");
        Process send = null;
        try {
            try (OutputStream fo = Files.newOutputStream(tuples);
                    DataOutputStream d = new DataOutputStream(new BufferedOutputStream(fo, 1 << 16))) {
                byte[] p = new byte[payload];
                for (int i = 0; i < 4; i++) {
                    Arrays.fill(p, (byte) ('a' + i));
                    d.writeInt(payload);
                    d.write(p);
                }
            }
            // The objects: a copy of each payload, as big as its bytes on the wire.
            Deserializer<byte[]> copy = (id, b, off, len) -> Arrays.copyOfRange(b, off, off + len);
            try (ObjectFactory<byte[]> f = ObjectFactory.builder(copy).maxQueuedBytes(budget).start()) {
                AtomicBoolean stop = new AtomicBoolean();
                AtomicLong maxQueued = new AtomicLong(), samples = new AtomicLong();
                Thread sampler = new Thread(() -> {
                    while (!stop.get()) {
                        long q = f.queuedBytes();
                        if (q > maxQueued.get()) maxQueued.set(q);
                        samples.incrementAndGet();
                        LockSupport.parkNanos(50_000);
                    }
                }, "sampler");
                sampler.setDaemon(true);
                sampler.start();

                // tuples = rate * duration: perThread per thread. --bucket 1s: as many tuples per bucket as
                // gen send allows, at most 4 MiB of them; the rate is far above what loopback takes, so
                // the senders write as fast as the factory reads.
                long total = (long) perThread * threads;
                long rate = 10L * total;
                send = new ProcessBuilder(tool, "gen", "send", "--to", "127.0.0.1:" + f.port(), "--tuples",
                        tuples.toString(), "--rate", String.valueOf(rate), "--duration", "100ms", "--bucket", "1s",
                        "--threads", String.valueOf(threads), "--name", "memory-bound").redirectErrorStream(true).start();
                Process sp = send;
                StringBuilder sendOut = new StringBuilder();
                Thread reader = new Thread(() -> {
                    try {
                        sendOut.append(new String(sp.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
                    } catch (java.io.IOException e) {
                        sendOut.append("reading gen send's output: ").append(e);
                    }
                }, "send-output");
                reader.start();

                // Phase 1: nobody takes. The queues fill to the budget; the senders are held back.
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
                while ((f.activeStreams() < threads || f.queuedBytes() < budget / 2) && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                System.out.println("filled=" + (f.queuedBytes() >= budget / 2) + " streams=" + f.activeStreams());
                Thread.sleep(holdMillis);
                System.out.println("held_back=" + send.isAlive());
                System.out.println("queued_bytes_at_hold_end=" + f.queuedBytes());
                System.out.println("queued_buckets_at_hold_end=" + f.queuedBuckets());

                // Phase 2: the consumer takes everything; each id is counted.
                BitSet[] seen = new BitSet[threads];
                for (int t = 0; t < threads; t++) seen[t] = new BitSet(perThread);
                long got = 0, duplicates = 0, bad = 0;
                deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (f.completedRuns() < 1 && System.nanoTime() < deadline) {
                    Bucket<byte[]> b = f.take(0, 1, 10, TimeUnit.MILLISECONDS);
                    if (b == null) continue;
                    for (int i = 0; i < b.size(); i++) {
                        long id = b.id(i);
                        int t = (int) (id >>> THREAD_SHIFT);
                        long idx = id & ((1L << THREAD_SHIFT) - 1);
                        byte[] o = b.get(i);
                        if (t != b.stream().thread() || idx >= perThread || o.length != payload || o[0] < 'a' || o[0] > 'd'
                                || o[0] != o[payload - 1] || o[0] != o[payload / 2]) {
                            bad++;
                            continue;
                        }
                        if (seen[t].get((int) idx)) duplicates++;
                        seen[t].set((int) idx);
                        got++;
                    }
                }
                if (!send.waitFor(30, TimeUnit.SECONDS)) send.destroyForcibly();
                reader.join(5000);
                stop.set(true);
                sampler.join(5000);
                long unique = 0;
                for (BitSet s : seen) unique += s.cardinality();
                System.out.println("budget=" + f.maxQueuedBytes());
                System.out.println("max_queued_bytes=" + maxQueued.get());
                System.out.println("samples=" + samples.get());
                System.out.println("completed_runs=" + f.completedRuns());
                System.out.println("sent_planned=" + total);
                System.out.println("tuples=" + got);
                System.out.println("unique=" + unique);
                System.out.println("duplicates=" + duplicates);
                System.out.println("bad=" + bad);
                System.out.println("queued_bytes_after=" + f.queuedBytes());
                List<StreamReport> reps = f.reports();
                long received = 0, lost = 0;
                StringBuilder errors = new StringBuilder();
                for (StreamReport r : reps) {
                    received += r.received();
                    lost += r.lost();
                    if (r.error() != null) errors.append(r.error()).append(';');
                }
                System.out.println("reports=" + reps.size() + " received=" + received + " lost=" + lost + " errors=" + errors);
                System.out.println("send_exit=" + send.exitValue());
                System.out.println("peak_heap_bytes=" + peakHeap());
                System.out.println("max_heap_bytes=" + Runtime.getRuntime().maxMemory());
                System.out.println("send_output<<");
                System.out.print(sendOut);
                System.out.println(">>");
            }
        } finally {
            if (send != null && send.isAlive()) send.destroyForcibly();
            Files.deleteIfExists(tuples);
        }
    }

    /** The heap pools' peaks summed (an upper bound of the peak heap use, for the log only). */
    private static long peakHeap() {
        long n = 0;
        for (MemoryPoolMXBean p : ManagementFactory.getMemoryPoolMXBeans()) {
            if (p.getType() == MemoryType.HEAP) n += p.getPeakUsage().getUsed();
        }
        return n;
    }
}
