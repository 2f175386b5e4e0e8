package io.cloudprofiler.datagen;

import static io.cloudprofiler.datagen.ObjectFactoryTest.TEXT;
import static io.cloudprofiler.datagen.ObjectFactoryTest.bucket;
import static io.cloudprofiler.datagen.ObjectFactoryTest.end;
import static io.cloudprofiler.datagen.ObjectFactoryTest.hello;
import static io.cloudprofiler.datagen.ObjectFactoryTest.readReport;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The object factory bounds its memory in bytes across its connections
 * (issue 26, item 5: two loopback senders filled a 1 GiB heap while the
 * consumer was not taking, because the queues were bounded in buckets).
 */
class ObjectFactoryMemoryTest {
    static final int MIB = 1 << 20;

    /**
     * The issue, for real: a child JVM with a 64 MiB heap (exiting at once on
     * OutOfMemoryError) hosts a factory with a budget of 8 MiB; {@code gen
     * send} sends 2 x 25 buckets of 3.8 MiB (190 MiB; without the budget the
     * queues, 64 buckets each, would take all of them) while the consumer
     * takes nothing for 1.5 s, then everything. The factory never holds more
     * than the budget (sampled every ~50 us), the senders are held back, the
     * JVM does not run out of heap, and every tuple arrives exactly once.
     */
    @Test
    @Timeout(90)
    void twoSendersOfLargeBucketsStayWithinTheBudget() throws Exception {
        long budget = 8 * MIB;
        int threads = 2, perThread = 200, payload = 500_000; // 8 tuples per bucket: 4,000,100 bytes each
        String tool = ObjectFactoryTest.tool();
        List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx64m", "-XX:+ExitOnOutOfMemoryError", "-Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir"),
                "-cp", classesDirs(), MemoryBoundChild.class.getName(), tool, String.valueOf(budget),
                String.valueOf(threads), String.valueOf(perThread), String.valueOf(payload), "1500"));
        Path log = Files.createTempFile(Paths.get(System.getProperty("java.io.tmpdir")), "memory-child", ".out");
        String out;
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
            boolean ended = p.waitFor(60, TimeUnit.SECONDS);
            if (!ended) p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            out = Files.readString(log);
            System.out.println("ObjectFactoryMemoryTest child:\n" + out);
            assertTrue(ended, "the child JVM did not end in 60 s:\n" + out);
            assertFalse(out.contains("OutOfMemoryError"), out);
            assertEquals(0, p.exitValue(), "the child JVM (exit 3: out of heap):\n" + out);
        } finally {
            Files.deleteIfExists(log);
        }
        Map<String, String> v = values(out);
        long total = (long) threads * perThread;

        assertEquals("true", v.get("filled"), "the queues filled up to the budget while nobody took:\n" + out);
        assertEquals("true", v.get("held_back"), "gen send was still sending after the hold: held back\n" + out);
        assertTrue(Long.parseLong(v.get("queued_bytes_at_hold_end")) <= budget, out);
        assertEquals(budget, Long.parseLong(v.get("budget")));
        long max = Long.parseLong(v.get("max_queued_bytes"));
        assertTrue(max <= budget, "queued " + max + " bytes, budget " + budget + "\n" + out);
        assertTrue(max >= 2 * 4_000_000L, "two buckets fit in 8 MiB, and were queued: " + max);
        assertTrue(Long.parseLong(v.get("samples")) > 100, out);

        // Nothing accepted was lost: every tuple once, in the consumer and in the reports.
        assertEquals("1", v.get("completed_runs"), out);
        assertEquals(String.valueOf(total), v.get("tuples"), out);
        assertEquals(String.valueOf(total), v.get("unique"), out);
        assertEquals("0", v.get("duplicates"), out);
        assertEquals("0", v.get("bad"), out);
        assertEquals("0", v.get("queued_bytes_after"), "every charge went back as the buckets were taken");
        assertTrue(out.contains("reports=" + threads + " received=" + total + " lost=0 errors=\n"), out);
        // gen send: 3 (the rate not reached: it was held back) or 0; its receiver line is the factory's REPORT.
        String exit = v.get("send_exit");
        assertTrue(exit.equals("3") || exit.equals("0"), out);
        assertTrue(out.contains("receiver: received " + total + ", lost 0 (dropped by it 0), out of order 0"), out);
    }

    /** key=value lines of the child's output (the first of each key). */
    static Map<String, String> values(String out) {
        Map<String, String> m = new HashMap<>();
        Matcher mt = Pattern.compile("(?m)^([a-z_]+)=(\\S*)").matcher(out);
        while (mt.find()) m.putIfAbsent(mt.group(1), mt.group(2));
        return m;
    }

    static String classesDirs() {
        return Stream.of(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(e -> e.endsWith("classes") || e.endsWith("test-classes")).collect(Collectors.joining(File.pathSeparator));
    }

    // ---- hand-made frames

    /** A bucket of n tuples of the payload p, and the bytes it is charged: 12 + |p| per tuple. */
    static long charge(int n, String p) {
        return n * (12L + p.getBytes(StandardCharsets.UTF_8).length);
    }

    /**
     * A connection whose bucket does not fit waits, reading nothing, until the
     * consumer takes what fills the budget; then its bucket comes. Closing the
     * factory wakes one that is still waiting: its thread ends, its stream
     * with "object factory closed".
     */
    @Test
    @Timeout(30)
    void aBucketThatDoesNotFitWaitsForTheConsumerAndCloseWakesIt() throws Exception {
        String big = "x".repeat(6000);
        long one = charge(1, big);
        String prefix = "budget-wait-test";
        ObjectFactory<String> f = ObjectFactory.builder(TEXT).maxQueuedBytes(10_000).threadName(prefix).start();
        try (Socket a = new Socket("127.0.0.1", f.port());
                Socket b = new Socket("127.0.0.1", f.port());
                Socket c = new Socket("127.0.0.1", f.port())) {
            a.getOutputStream().write(hello(1, 0, 1, 0, 1, "a"));
            a.getOutputStream().write(bucket(new long[] {0}, big));
            awaitQueued(f, 1);
            assertEquals(one, f.queuedBytes());
            b.getOutputStream().write(hello(2, 0, 1, 0, 1, "b"));
            b.getOutputStream().write(bucket(new long[] {0}, big));
            awaitWaitingForRoom(f, 1); // b's thread has its header, and waits for room
            assertEquals(1, f.queuedBuckets(), "b's bucket does not fit next to a's");
            assertEquals(one, f.queuedBytes());

            Bucket<String> got = f.take(0, 1, 5, TimeUnit.SECONDS);
            assertNotNull(got);
            assertEquals("a", got.stream().sender());
            Bucket<String> next = f.take(0, 1, 10, TimeUnit.SECONDS);
            assertNotNull(next, "b's bucket came once a's was taken");
            assertEquals("b", next.stream().sender());
            assertEquals(big, next.get(0));
            assertEquals(0, f.queuedBytes());

            // c fills the budget and b's next bucket waits; then the factory closes.
            c.getOutputStream().write(hello(3, 0, 1, 0, 2, "c"));
            c.getOutputStream().write(bucket(new long[] {0}, big));
            awaitQueued(f, 1);
            b.getOutputStream().write(end(1, 1));
            assertTrue(readReport(b.getInputStream()).contains("\"received\":1,\"lost\":0"));
            a.getOutputStream().write(end(1, 1));
            assertTrue(readReport(a.getInputStream()).contains("\"received\":1,\"lost\":0"));
            c.getOutputStream().write(bucket(new long[] {1}, big));
            awaitWaitingForRoom(f, 1);
            assertEquals(1, f.queuedBuckets());
            f.close();
            assertEquals(0, f.waitingForRoom());
            for (Thread t : Thread.getAllStackTraces().keySet()) {
                assertFalse(t.getName().startsWith(prefix) && t.isAlive(), "still running: " + t.getName());
            }
            StreamReport r = f.reports().stream().filter(x -> x.sender().equals("c")).findFirst().orElseThrow();
            assertEquals("object factory closed", r.error());
            assertEquals(1, r.received(), "the bucket in the queue; not the one that waited");
        } finally {
            f.close();
        }
    }

    static void awaitWaitingForRoom(ObjectFactory<?> f, int threads) throws InterruptedException {
        ObjectFactoryTest.awaitCount(f::waitingForRoom, threads, 10);
    }

    static void awaitQueued(ObjectFactory<?> f, int buckets) throws InterruptedException {
        ObjectFactoryTest.awaitCount(f::queuedBuckets, buckets, 10);
    }

    /**
     * A BUCKET larger than the whole budget could never be admitted: it is
     * refused from its header, before its body is read; the buckets before
     * it are delivered, the stream's report says why, and it is not counted
     * as malformed (FRAMING.md allows it). Duplicates give their charge back
     * at once: only what is delivered stays charged.
     */
    @Test
    @Timeout(30)
    void aBucketLargerThanTheBudgetIsRefusedAndTheChargeIsWhatIsDelivered() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).maxQueuedBytes(4096).start();
                Socket s = new Socket("127.0.0.1", f.port())) {
            s.setSoTimeout(5000);
            s.getOutputStream().write(hello(4, 0, 1, 0, 10, "over"));
            s.getOutputStream().write(bucket(new long[] {0, 1}, "ok"));
            s.getOutputStream().write(bucket(new long[] {1, 2}, "ok")); // 1 again: a duplicate, never queued
            awaitQueued(f, 2);
            assertEquals(charge(3, "ok"), f.queuedBytes());
            byte[] header = {0, 0, 0x10, 0x0d, 2}; // a BUCKET of 4108 bytes: the header alone, no body follows
            s.getOutputStream().write(header);
            assertEquals(-1, s.getInputStream().read(), "closed, no REPORT");
            // the stream's report waits for the consumer: take its buckets
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            int tuples = 0;
            while (f.reports().isEmpty() && System.nanoTime() < deadline) {
                Bucket<String> b = f.poll(0, 1);
                if (b != null) tuples += b.size();
                Thread.sleep(1);
            }
            for (Bucket<String> b; (b = f.poll(0, 1)) != null; ) tuples += b.size();
            assertEquals(3, tuples);
            assertEquals(0, f.queuedBytes());
            assertEquals(1, f.reports().size());
            StreamReport r = f.reports().get(0);
            assertEquals("refused: BUCKET of 4108 bytes, more than the object factory's whole budget of 4096 bytes"
                    + " (maxQueuedBytes)", r.error());
            assertEquals(3, r.received());
            assertEquals(0, f.malformedConnections());
        }
    }

    @Test
    void theBudgetHasItsDocumentedDefault() throws Exception {
        long expect = Math.max(MIB, Math.min(256L * MIB, Runtime.getRuntime().maxMemory() / 8));
        assertEquals(expect, ObjectFactory.defaultMaxQueuedBytes());
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).start()) {
            assertEquals(expect, f.maxQueuedBytes());
            assertEquals(0, f.queuedBytes());
        }
        assertThrows(IllegalArgumentException.class, () -> ObjectFactory.builder(TEXT).maxQueuedBytes(0));
    }

    // ---- the budget itself

    /**
     * First come, first served: a request that arrives while another waits
     * waits behind it even if it would fit; a release wakes the first; one
     * that gives up (the factory closing) lets the next one go.
     */
    @Test
    @Timeout(30)
    void theBudgetServesWaitersInOrder() throws Exception {
        ByteBudget b = new ByteBudget(100);
        assertTrue(b.acquire(90, () -> false));
        assertThrows(IllegalArgumentException.class, () -> b.acquire(101, () -> false));
        Set<String> got = ConcurrentHashMap.newKeySet();
        AtomicBoolean stopFirst = new AtomicBoolean();
        Thread big = acquirer(b, 50, () -> false, "big", got);
        awaitWaiters(b, 1, big);
        Thread small = acquirer(b, 5, () -> false, "small", got);
        awaitWaiters(b, 2, small);
        assertEquals(Set.of(), got, "5 bytes would fit next to 90, but the 50 came first");
        assertEquals(90, b.used());
        b.release(45); // 45 used: the big one fits, then the small one
        big.join(5000);
        small.join(5000);
        assertEquals(Set.of("big", "small"), got);
        assertEquals(100, b.used()); // 90 - 45 + 50 + 5

        // The head of the line gives up: the next one, which fits, goes.
        Thread first = acquirer(b, 90, stopFirst::get, "first", got);
        awaitWaiters(b, 1, first);
        Thread second = acquirer(b, 1, () -> false, "second", got);
        awaitWaiters(b, 2, second);
        b.release(5); // 95 used: 1 more would fit, but 90 came first
        Thread.sleep(100);
        assertTrue(second.isAlive(), "behind the first in line");
        assertEquals(95, b.used());
        stopFirst.set(true); // as the factory closing does: wake them all
        b.wakeAll();
        first.join(5000);
        second.join(5000);
        assertFalse(first.isAlive() || second.isAlive());
        assertEquals(Set.of("big", "small", "second"), got, "the first gave up; the second went");
        assertEquals(96, b.used());
        assertEquals(0, b.waiters());
    }

    static Thread acquirer(ByteBudget b, long n, BooleanSupplier stop, String name, Set<String> got) {
        Thread t = new Thread(() -> {
            if (b.acquire(n, stop)) got.add(name);
        }, name);
        t.start();
        return t;
    }

    /** Until the budget has n waiters, t among them (parked in its timed wait). */
    static void awaitWaiters(ByteBudget b, int n, Thread t) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while ((b.waiters() < n || t.getState() != Thread.State.TIMED_WAITING) && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertEquals(n, b.waiters());
        assertEquals(Thread.State.TIMED_WAITING, t.getState());
    }
}
