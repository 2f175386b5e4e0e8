package io.cloudprofiler.datagen;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The object factory against the real sender ({@code cloudprofiler gen
 * send}, a subprocess) and against hand-made frames.
 */
class ObjectFactoryTest {
    static final long THREAD_SHIFT = 40;

    /** The payload as text: a real deserialization (a copy of the bytes), checked to be an ad event. */
    /** A payload the Drainer takes for an ad event. */
    static final String AD = "{\"user_id\":1}";

    static final Deserializer<String> TEXT = (id, b, off, len) -> new String(b, off, len, StandardCharsets.ISO_8859_1);

    // ---- the queue

    @Test
    void spscQueueKeepsOrderAndBound() throws Exception {
        SpscQueue<Long> q = new SpscQueue<>(5);
        assertEquals(8, q.capacity());
        assertNull(q.poll());
        assertTrue(q.isEmpty());
        for (long i = 0; i < 8; i++) assertTrue(q.offer(i));
        assertFalse(q.offer(8L), "full");
        assertEquals(8, q.size());
        assertEquals(0L, q.peek());
        assertEquals(0L, q.poll());
        assertTrue(q.offer(8L));
        for (long i = 1; i <= 8; i++) assertEquals(i, q.poll());
        assertNull(q.poll());
        assertThrows(NullPointerException.class, () -> q.offer(null));

        // One producer, one consumer, 2M elements through a ring of 64: in order, none lost.
        SpscQueue<Long> r = new SpscQueue<>(64);
        final long n = 2_000_000;
        Thread producer = new Thread(() -> {
            for (long i = 0; i < n; i++) r.put(i, () -> false);
        });
        producer.start();
        long expect = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (expect < n) {
            Long v = r.poll();
            if (v == null) {
                if (System.nanoTime() > deadline) fail("stuck at " + expect);
                Thread.onSpinWait();
                continue;
            }
            assertEquals(expect++, v.longValue());
        }
        producer.join(5000);
        assertNull(r.poll());
    }

    // ---- against gen send

    @Test
    @Timeout(60)
    void exactCountsWithSeveralThreads() throws Exception {
        final int threads = 3, consumers = 2;
        final long rate = 150_000;
        final long total = rate; // 1 s
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).host("127.0.0.1").start()) {
            Drainer d = new Drainer(f, consumers, 0);
            Send s = send(f.port(), "--rate", "150k", "--duration", "1s", "--threads", "" + threads);
            // Exit 3 (the rate not reached) is a busy machine's, not the factory's: the counts are what
            // this test is about (the rates are measured by make bench-java and bench-gen).
            assertTrue(s.exit == 0 || s.exit == 3, s.toString());
            assertTrue(s.out.contains(s.exit == 0 ? "(reached)" : "NOT REACHED"), s.out);
            assertTrue(s.out.contains("sent " + total + " of " + total + " tuples"), s.out);
            assertTrue(s.out.contains("receiver: received " + total + ", lost 0 (dropped by it 0), out of order 0"), s.out);
            assertTrue(f.awaitCompletedRuns(1, 10, TimeUnit.SECONDS));
            d.stop();
            assertNull(d.error.get(), () -> String.valueOf(d.error.get()));
            assertEquals(total, d.tuples.get());
            // every id exactly once: thread t's ids t<<40 .. t<<40 + n_t - 1
            for (int t = 0; t < threads; t++) {
                long nt = total / threads + (t < total % threads ? 1 : 0);
                BitSet seen = d.ids.get(t);
                assertNotNull(seen, "thread " + t);
                assertEquals(nt, seen.cardinality(), "thread " + t);
                assertEquals(nt, seen.nextClearBit(0), "thread " + t + ": ids 0.." + (nt - 1));
            }
            assertEquals(0, d.duplicates.get());
            // each stream's buckets went to consumer queue % consumers only
            for (Map.Entry<Integer, Integer> e : d.queueConsumer.entrySet()) {
                assertEquals(e.getKey() % consumers, e.getValue().intValue(), "queue " + e.getKey());
            }
            List<StreamReport> reps = f.reports();
            assertEquals(threads, reps.size(), reps.toString());
            for (StreamReport r : reps) {
                assertNull(r.error(), r.toString());
                assertEquals(r.sent(), r.received(), r.toString());
                assertEquals(0, r.lost());
                assertEquals((long) r.thread() << THREAD_SHIFT, r.firstId());
                assertEquals(threads, r.threads());
            }
            assertEquals(1, f.completedRuns());
            assertEquals(0, f.activeStreams());
            assertEquals(0, f.malformedConnections());
        }
    }

    @Test
    @Timeout(60)
    void aSlowConsumerHoldsTheSenderBackAndNothingIsLost() throws Exception {
        // Consumer at ~25k tuples/s (a 50-tuple bucket every 2 ms) against a sender at 50k/s:
        // the queue (4 buckets) fills, the factory thread waits, TCP holds the sender back.
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).host("127.0.0.1").queueCapacity(4)
                .receiveBuffer(32 << 10).start()) {
            Drainer d = new Drainer(f, 1, 2_000_000L);
            long t0 = System.nanoTime();
            Send s = send(f.port(), "--rate", "50k", "--duration", "1s", "--threads", "1");
            double secs = (System.nanoTime() - t0) / 1e9;
            assertEquals(3, s.exit, "rate not reached: exit 3\n" + s);
            assertTrue(s.out.contains("NOT REACHED"), s.out);
            assertTrue(s.out.contains("receiver: received 50000, lost 0 (dropped by it 0), out of order 0"), s.out);
            assertTrue(secs > 1.5, "the sender was held back: " + secs + " s");
            assertTrue(f.awaitCompletedRuns(1, 10, TimeUnit.SECONDS));
            d.stop();
            assertEquals(50_000, d.tuples.get());
            assertEquals(0, d.duplicates.get());
            // the report came after the consumer had everything: nothing was still queued
            StreamReport r = f.reports().get(0);
            assertEquals(50_000, r.received());
            assertEquals(0, r.lost());
            System.out.printf("backpressure: sender took %.2f s for 1 s of tuples; %s%n", secs,
                    s.out.lines().filter(l -> l.startsWith("sent ")).findFirst().orElse(""));
        }
    }

    // ---- hand-made frames

    @Test
    @Timeout(30)
    void accountingAndReportOfAHandMadeStream() throws Exception {
        // ids 100..109 announced; sent: 100, 101, 104 (gap 102-103), 103 (out of order: repays it), 105, a
        // payload the deserializer refuses (106: dropped, a gap), 107; END says 10: 108, 109 never came (lost).
        Deserializer<String> refuse106 = (id, b, off, len) -> {
            if (id == 106) throw new IllegalArgumentException("bad payload");
            return TEXT.deserialize(id, b, off, len);
        };
        try (ObjectFactory<String> f = ObjectFactory.builder(refuse106).host("127.0.0.1").start();
                Socket s = new Socket("127.0.0.1", f.port())) {
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            out.write(hello(42, 0, 1, 100, 10, "hand"));
            out.write(bucket(new long[] {100, 101, 104}, "p"));
            out.write(bucket(new long[] {103, 105, 106, 107}, "q"));
            out.write(end(10, 2));
            out.flush();
            List<Long> got = new ArrayList<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (got.size() < 6 && System.nanoTime() < deadline) {
                Bucket<String> b = f.take(0, 1, 10, TimeUnit.MILLISECONDS);
                if (b == null) continue;
                for (int i = 0; i < b.size(); i++) {
                    got.add(b.id(i));
                    assertTrue(b.get(i).equals("p") || b.get(i).equals("q"));
                }
                assertEquals(42, b.stream().runId());
                assertEquals("hand", b.stream().sender());
            }
            assertEquals(List.of(100L, 101L, 104L, 103L, 105L, 107L), got);
            String json = readReport(s.getInputStream());
            assertTrue(json.startsWith("{\"run_id\":42,\"sender\":\"hand\",\"thread\":0,\"threads\":1,\"first_id\":100,"
                    + "\"sent\":10,\"received\":6,\"lost\":4,\"out_of_order\":1,\"duplicates\":0,\"out_of_range\":0,"
                    + "\"dropped\":1,"), json);
            assertTrue(json.contains("\"gaps\":[[102,102],[106,106],[108,109]],\"gaps_truncated\":false"), json);
            assertFalse(json.contains("error"), json);
            assertEquals(-1, s.getInputStream().read(), "closed after the REPORT");
            assertTrue(f.awaitCompletedRuns(1, 5, TimeUnit.SECONDS));
            StreamReport r = f.reports().get(0);
            assertArrayEquals(new long[][] {{102, 102}, {106, 106}, {108, 109}}, r.gaps());
            assertEquals(r.sent(), r.received() + r.lost());
        }
    }

    @Test
    @Timeout(30)
    void pollWhileStreamsEnd() throws Exception {
        // Three streams (queues 0, 1, 2), one consumer: it takes from queue 1, so it looks at 2 next;
        // then streams 0 and 1 end: the list of queues it walks is shorter than where it was.
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).host("127.0.0.1").start();
                Socket a = new Socket("127.0.0.1", f.port());
                Socket b = new Socket("127.0.0.1", f.port());
                Socket c = new Socket("127.0.0.1", f.port())) {
            Socket[] s = {a, b, c};
            for (int i = 0; i < 3; i++) {
                s[i].getOutputStream().write(hello(5, i, 3, (long) i << THREAD_SHIFT, 1, "ends"));
                while (f.activeStreams() < i + 1) Thread.sleep(1); // queue numbers in this order
            }
            b.getOutputStream().write(bucket(new long[] {1L << THREAD_SHIFT}, "b"));
            Bucket<String> got = f.take(0, 1, 5, TimeUnit.SECONDS);
            assertNotNull(got);
            assertEquals("b", got.get(0));
            assertEquals(1, got.stream().queue());
            a.getOutputStream().write(end(0, 0));
            b.getOutputStream().write(end(1, 1));
            assertTrue(readReport(a.getInputStream()).contains("\"received\":0,\"lost\":0"));
            assertTrue(readReport(b.getInputStream()).contains("\"received\":1,\"lost\":0"));
            while (f.activeStreams() > 1) Thread.sleep(1);
            c.getOutputStream().write(bucket(new long[] {2L << THREAD_SHIFT}, "c"));
            got = f.take(0, 1, 5, TimeUnit.SECONDS);
            assertNotNull(got);
            assertEquals("c", got.get(0));
            c.getOutputStream().write(end(1, 1));
            assertTrue(readReport(c.getInputStream()).contains("\"received\":1,\"lost\":0"));
            assertTrue(f.awaitCompletedRuns(1, 5, TimeUnit.SECONDS));
        }
    }

    @Test
    @Timeout(30)
    void malformedFramesCloseTheirConnectionOnly() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).host("127.0.0.1").helloTimeoutMillis(500).start()) {
            byte[] good = hello(7, 0, 1, 0, 100, "bad");
            byte[] badMagic = good.clone();
            badMagic[5] = 'X';
            byte[] badThread = hello(7, 3, 2, 0, 100, "bad");
            byte[] badVersion = good.clone();
            badVersion[10] = 2;
            List<byte[][]> cases = List.of(
                    new byte[][] {badMagic},
                    new byte[][] {badVersion},
                    new byte[][] {badThread},
                    new byte[][] {{0, 0, 0, 0, 1}}, // length 0
                    new byte[][] {{0x7f, (byte) 0xff, (byte) 0xff, (byte) 0xff, 2}}, // 2 GiB: refused before reading it
                    new byte[][] {bucket(new long[] {0}, "x")}, // a BUCKET before HELLO
                    new byte[][] {good, frame(9, new byte[3], 3)}, // unknown type
                    new byte[][] {good, frame(1, good, good.length)}, // a second HELLO
                    new byte[][] {good, frame(3, new byte[15], 15)}, // END of 15 bytes
                    new byte[][] {good, frame(2, new byte[] {0, 0, 0, 0}, 4)}, // a bucket of 0 tuples
                    new byte[][] {good, frame(2, new byte[] {0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 16)}); // cut
            for (int i = 0; i < cases.size(); i++) {
                try (Socket s = new Socket("127.0.0.1", f.port())) {
                    s.setSoTimeout(5000);
                    for (byte[] b : cases.get(i)) s.getOutputStream().write(b);
                    assertEquals(-1, s.getInputStream().read(), "case " + i + ": the factory closes the connection");
                }
                long want = i + 1;
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (f.malformedConnections() < want && System.nanoTime() < deadline) Thread.sleep(2);
                assertEquals(want, f.malformedConnections(), "case " + i);
                // Cases 6.. got past the same HELLO (one sender, one run id, one thread): each
                // stream's end completes that run, once the one before it was counted (two
                // streams of one run open at once would be one run of two ends).
                if (i >= 6) assertTrue(f.awaitCompletedRuns(i - 5, 10, TimeUnit.SECONDS), "case " + i + ": runs complete: " + f.completedRuns());
            }
            // A good bucket, then a malformed one: the good one is still delivered, the stream's report
            // says why it ended, no REPORT frame is sent.
            try (Socket s = new Socket("127.0.0.1", f.port())) {
                s.setSoTimeout(5000);
                s.getOutputStream().write(hello(8, 0, 1, 0, 100, "half"));
                s.getOutputStream().write(bucket(new long[] {0, 1, 2}, "ok"));
                byte[] cut = bucket(new long[] {3, 4}, "no");
                cut[3] -= 2; // the frame's length and the count agree, the last payload is cut short
                s.getOutputStream().write(cut, 0, cut.length - 2);
                assertEquals(-1, s.getInputStream().read());
            }
            Bucket<String> b = f.take(0, 1, 5, TimeUnit.SECONDS);
            assertNotNull(b);
            assertEquals(3, b.size());
            // Every stream that got past its HELLO is a run of one thread here, ended: each one
            // completes its run (a stream that broke still ends it, so that a bounded job ends).
            assertTrue(f.awaitCompletedRuns(6, 10, TimeUnit.SECONDS), "runs complete: " + f.completedRuns());
            long runs = f.completedRuns();
            StreamReport r = f.reports().get(f.reports().size() - 1);
            assertEquals("half", r.sender());
            assertEquals(3, r.received());
            assertEquals(97, r.lost());
            assertTrue(r.error().startsWith("malformed: BUCKET tuple 1"), r.error());
            assertEquals(cases.size() + 1, f.malformedConnections());
            // A connection that says nothing is closed after the HELLO timeout, not counted as malformed.
            try (Socket s = new Socket("127.0.0.1", f.port())) {
                s.setSoTimeout(5000);
                assertEquals(-1, s.getInputStream().read());
            }
            // The factory still serves a real sender.
            Drainer d = new Drainer(f, 1, 0);
            Send s = send(f.port(), "--rate", "20k", "--duration", "200ms", "--threads", "2");
            // 0, or 3 when a busy machine kept gen send from its rate: the counts below are what is asserted.
            assertTrue(s.exit == 0 || s.exit == 3, s.toString());
            assertTrue(s.out.contains("receiver: received 4000, lost 0"), s.out);
            assertTrue(f.awaitCompletedRuns(runs + 1, 5, TimeUnit.SECONDS));
            d.stop();
            assertEquals(4000, d.tuples.get());
            assertEquals(cases.size() + 1, f.malformedConnections());
        }
    }

    @Test
    @Timeout(60)
    void closeWhileStreamsAreActive() throws Exception {
        String prefix = "close-test-factory";
        ObjectFactory<String> f = ObjectFactory.builder(TEXT).host("127.0.0.1").queueCapacity(2).threadName(prefix).start();
        int port = f.port();
        // Two streams: consumer 0 drains stream 0; stream 1's consumer (1) never polls, so its
        // factory thread waits on a full queue. Close while the sender is mid-run.
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong taken = new AtomicLong();
        Thread consumer = new Thread(() -> {
            while (!stop.get()) {
                Bucket<String> b = f.take(0, 2, 5, TimeUnit.MILLISECONDS);
                if (b != null) taken.addAndGet(b.size());
            }
        });
        consumer.start();
        Process p = new ProcessBuilder(tool(), "gen", "send", "--to", "127.0.0.1:" + port, "--synthetic", "--rate", "100k",
                "--duration", "5s", "--threads", "2").redirectErrorStream(true).start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while ((taken.get() < 10_000 || f.activeStreams() < 2) && System.nanoTime() < deadline) Thread.sleep(5);
        assertTrue(taken.get() >= 10_000, "consumer 0 got " + taken.get());
        assertEquals(2, f.activeStreams());
        long t0 = System.nanoTime();
        f.close(); // returns with every factory thread ended (checked below), a full queue's thread too
        long closeMs = (System.nanoTime() - t0) / 1_000_000;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            assertFalse(t.getName().startsWith(prefix) && t.isAlive(), "still running: " + t.getName());
        }
        assertNull(f.poll(0, 2));
        assertTrue(f.isClosed());
        f.close(); // twice: nothing
        assertThrows(ConnectException.class, () -> new Socket("127.0.0.1", port).close());
        assertTrue(p.waitFor(15, TimeUnit.SECONDS), "the sender ends when its connections are closed");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.exitValue() != 0, "exit " + p.exitValue() + ":\n" + out);
        assertEquals(0, f.completedRuns());
        stop.set(true);
        consumer.join(5000);
        System.out.printf("close with 2 active streams: %d ms; sender exit %d%n", closeMs, p.exitValue());
    }

    /** Hand-made streams, the counts FRAMING.md's Accounting gives, in the REPORT and in the StreamReport. */
    @Test
    @Timeout(30)
    void accountingOfLateDuplicateAndStrayIds() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).start()) {
            Drainer d = new Drainer(f, 1, 0, false);
            // 0, 2, 1: all received, 1 late
            String js = stream(f, 10, 3, 3, new long[] {0, 2}, new long[] {1});
            assertTrue(js.contains("\"sent\":3,\"received\":3,\"lost\":0,\"out_of_order\":1,\"duplicates\":0,"
                    + "\"out_of_range\":0,"), js);
            assertTrue(js.contains("\"gaps\":[],\"gaps_truncated\":false"), js);
            // a stray id 2^50 in a stream of 0..2: out of range, nothing else
            js = stream(f, 11, 3, 3, new long[] {0, 1L << 50, 1}, new long[] {2});
            assertTrue(js.contains("\"sent\":3,\"received\":3,\"lost\":0,\"out_of_order\":0,\"duplicates\":0,"
                    + "\"out_of_range\":1,"), js);
            // duplicates, within a bucket and across buckets, and a late id that came twice
            js = stream(f, 12, 5, 5, new long[] {0, 0, 2, 1}, new long[] {1, 2, 4, 4});
            assertTrue(js.contains("\"sent\":5,\"received\":4,\"lost\":1,\"out_of_order\":1,\"duplicates\":4,"
                    + "\"out_of_range\":0,"), js);
            assertTrue(js.contains("\"gaps\":[[3,3]],"), js);
            assertTrue(f.awaitCompletedRuns(3, 5, TimeUnit.SECONDS));
            d.stop();
            // each in-range id reached the consumer once, and nothing else did
            assertEquals(3 + 3 + 4, d.tuples.get());
            for (StreamReport r : f.reports()) {
                assertEquals(r.sent(), r.received() + r.lost(), r.toString());
                assertNull(r.error());
            }
            StreamReport r = f.reports().get(2);
            assertEquals(4, r.duplicates());
            assertEquals(0, r.outOfRange());
            assertEquals(1, f.reports().get(1).outOfRange());
            assertTrue(r.toString().contains("duplicates 4"), r.toString());
        }
    }

    /** Sends HELLO (ids 0..tuples-1 of run), the buckets, END(sent); returns the REPORT. */
    static String stream(ObjectFactory<String> f, long run, long tuples, long sent, long[]... buckets) throws Exception {
        try (Socket s = new Socket("127.0.0.1", f.port())) {
            s.setSoTimeout(10_000);
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            out.write(hello(run, 0, 1, 0, tuples, "acct"));
            for (long[] b : buckets) out.write(bucket(b, AD));
            out.write(end(sent, buckets.length));
            out.flush();
            return readReport(s.getInputStream());
        }
    }

    @Test
    @Timeout(30)
    void aHelloWhoseRangeOverflowsAndAnEndThatSaysTooMuchAreRefused() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).start()) {
            Drainer d = new Drainer(f, 1, 0, false);
            try (Socket s = new Socket("127.0.0.1", f.port())) {
                s.setSoTimeout(5000);
                s.getOutputStream().write(hello(1, 0, 1, -10L, 10, "overflow")); // 2^64 - 10 + 10
                assertEquals(-1, s.getInputStream().read());
            }
            awaitMalformed(f, 1);
            assertEquals(0, f.reports().size(), "refused at HELLO: no stream");
            try (Socket s = new Socket("127.0.0.1", f.port())) {
                s.setSoTimeout(5000);
                s.getOutputStream().write(hello(2, 0, 1, -11L, 10, "top")); // up to 2^64 - 2: fine
                s.getOutputStream().write(bucket(new long[] {-11L, -2L}, AD));
                s.getOutputStream().write(end(10, 1));
                String js = readReport(s.getInputStream());
                assertTrue(js.contains("\"first_id\":18446744073709551605,\"sent\":10,\"received\":2,\"lost\":8,"), js);
                assertTrue(js.contains("\"gaps\":[[18446744073709551606,18446744073709551613]]"), js);
            }
            try (Socket s = new Socket("127.0.0.1", f.port())) {
                s.setSoTimeout(5000);
                s.getOutputStream().write(hello(3, 0, 1, 0, 10, "liar"));
                s.getOutputStream().write(bucket(new long[] {0, 1}, AD));
                s.getOutputStream().write(end(11, 1));
                assertEquals(-1, s.getInputStream().read(), "no REPORT");
            }
            awaitMalformed(f, 2);
            assertTrue(f.awaitCompletedRuns(2, 5, TimeUnit.SECONDS));
            StreamReport r = f.reports().get(f.reports().size() - 1);
            assertEquals("liar", r.sender());
            assertTrue(r.error().contains("END says 11 tuples sent, HELLO planned 10"), r.error());
            assertEquals(10, r.sent());
            assertEquals(2, r.received());
            assertEquals(8, r.lost());
            d.stop();
        }
    }

    static void awaitMalformed(ObjectFactory<?> f, long n) throws InterruptedException {
        awaitCount(f::malformedConnections, n, 5);
    }

    /** Until value reaches want (polled every 2 ms, for at most the given seconds); then it must equal want. */
    static void awaitCount(LongSupplier value, long want, long seconds) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (value.getAsLong() < want && System.nanoTime() < deadline) Thread.sleep(2);
        assertEquals(want, value.getAsLong());
    }

    /** received counts what reached the queue: a bucket still waiting for room when the factory closes is not. */
    @Test
    @Timeout(30)
    void aBucketDiscardedAtCloseIsNotReceived() throws Exception {
        ObjectFactory<String> f = ObjectFactory.builder(TEXT).queueCapacity(1).start();
        try (Socket s = new Socket("127.0.0.1", f.port())) {
            s.getOutputStream().write(hello(4, 0, 1, 0, 10, "full"));
            s.getOutputStream().write(bucket(new long[] {0, 1, 2}, "a")); // into the queue
            s.getOutputStream().write(bucket(new long[] {3, 4}, "b")); // waits: nobody polls
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (f.queuedBuckets() < 1 && System.nanoTime() < deadline) Thread.sleep(2);
            Thread.sleep(100);
            f.close();
        }
        assertEquals(1, f.reports().size());
        StreamReport r = f.reports().get(0);
        assertEquals("object factory closed", r.error());
        assertEquals(3, r.received());
        assertEquals(7, r.lost());
        assertArrayEquals(new long[][] {{3, 9}}, r.gaps());
        assertEquals(3 * (12 + 1), r.bytes());
    }

    @Test
    void itListensOnLoopbackByDefault() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).start()) {
            assertTrue(f.address().getAddress().isLoopbackAddress(), f.address().toString());
        }
        assertThrows(NullPointerException.class, () -> ObjectFactory.builder(TEXT).host(null));
    }

    @Test
    @Timeout(30)
    void connectionsAreBounded() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).maxConnections(2).start();
                Socket a = new Socket("127.0.0.1", f.port());
                Socket b = new Socket("127.0.0.1", f.port())) {
            a.getOutputStream().write(hello(5, 0, 1, 0, 1, "a"));
            try (Socket c = new Socket("127.0.0.1", f.port())) {
                c.setSoTimeout(5000);
                assertEquals(-1, c.getInputStream().read(), "the third is closed at once");
            }
            assertEquals(1, f.refusedConnections());
            b.close(); // a slot is free again once its thread ends
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            String js = null;
            while (js == null && System.nanoTime() < deadline) {
                try (Socket d = new Socket("127.0.0.1", f.port())) {
                    d.setSoTimeout(5000);
                    d.getOutputStream().write(hello(6, 0, 1, 0, 0, "d"));
                    d.getOutputStream().write(end(0, 0));
                    js = readReport(d.getInputStream());
                } catch (IOException refusedAgain) {
                    Thread.sleep(10);
                }
            }
            assertNotNull(js);
            assertTrue(js.contains("\"sender\":\"d\""), js);
            a.getOutputStream().write(end(0, 0));
            assertTrue(readReport(a.getInputStream()).contains("\"sender\":\"a\""));
            assertEquals(0, f.malformedConnections());
        }
    }

    /**
     * HELLO within the timeout in all: a byte every 50 ms (a HELLO of 306 bytes: 15 s of trickle) does
     * not keep a connection open past 600 ms. Asserted on what happened, not on the time it took: the
     * factory closed the connection while the trickle still had bytes to send.
     */
    @Test
    @Timeout(60)
    void aTrickledHelloIsClosedAtItsDeadline() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).helloTimeoutMillis(600).start();
                Socket s = new Socket("127.0.0.1", f.port())) {
            byte[] h = hello(7, 0, 1, 0, 1, "s".repeat(ObjectFactory.MAX_NAME));
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong written = new AtomicLong();
            Thread trickle = new Thread(() -> {
                try {
                    for (int i = 0; i < h.length - 1 && !stop.get(); i++) { // never the last byte
                        s.getOutputStream().write(h[i]);
                        written.incrementAndGet();
                        Thread.sleep(50);
                    }
                } catch (IOException | InterruptedException e) {
                    // closed by the factory
                }
            });
            trickle.start();
            s.setSoTimeout(30_000); // a bound for a hung test, not a measurement
            assertEquals(-1, s.getInputStream().read());
            stop.set(true);
            trickle.join(5000);
            assertTrue(written.get() < h.length - 1, "closed only when the trickle ended: " + written.get() + " bytes");
            assertEquals(0, f.malformedConnections());
            assertEquals(0, f.reports().size());
        }
    }

    /** After its HELLO, a connection that sends nothing for the idle timeout is closed, its report saying so. */
    @Test
    @Timeout(60)
    void anIdleStreamIsClosed() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).idleTimeoutMillis(300).start();
                Socket s = new Socket("127.0.0.1", f.port())) {
            Drainer d = new Drainer(f, 1, 0, false);
            // HELLO and three buckets in one write: no pause for the short timeout to catch.
            ByteArrayOutputStream frames = new ByteArrayOutputStream();
            frames.write(hello(8, 0, 1, 0, 5, "idle"));
            for (int i = 0; i < 3; i++) frames.write(bucket(new long[] {i}, AD));
            s.getOutputStream().write(frames.toByteArray());
            s.setSoTimeout(30_000); // a bound for a hung test, not a measurement
            assertEquals(-1, s.getInputStream().read());
            assertTrue(f.awaitCompletedRuns(1, 30, TimeUnit.SECONDS));
            d.stop();
            StreamReport r = f.reports().get(0);
            assertTrue(r.error().startsWith("nothing received for 300 ms"), r.error());
            assertEquals(3, r.received());
            assertEquals(2, r.lost());
        }
    }

    /** The defaults FRAMING.md gives: 1024 connections, HELLO within 10 s, 5 minutes idle. */
    @Test
    void theBoundsHaveTheirDocumentedDefaults() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).start()) {
            assertEquals(1024, f.maxConnections());
            assertEquals(10_000, f.helloTimeoutMillis());
            assertEquals(300_000, f.idleTimeoutMillis());
        }
        assertThrows(IllegalArgumentException.class, () -> ObjectFactory.builder(TEXT).maxConnections(0));
        assertThrows(IllegalArgumentException.class, () -> ObjectFactory.builder(TEXT).helloTimeoutMillis(0));
        assertThrows(IllegalArgumentException.class, () -> ObjectFactory.builder(TEXT).idleTimeoutMillis(0));
    }

    /** No thread for a connection (OutOfMemoryError from Thread.start): that connection closes, the factory goes on. */
    @Test
    @Timeout(30)
    void aThreadThatCannotStartCostsOneConnection() throws Exception {
        AtomicLong made = new AtomicLong();
        java.util.concurrent.ThreadFactory failFirst = r -> {
            if (made.getAndIncrement() == 0) {
                return new Thread(r) {
                    @Override
                    public synchronized void start() {
                        throw new OutOfMemoryError("unable to create native thread: possibly out of memory");
                    }
                };
            }
            Thread t = new Thread(r, "factory-test-conn");
            t.setDaemon(true);
            return t;
        };
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).threadFactory(failFirst).start()) {
            try (Socket s = new Socket("127.0.0.1", f.port())) {
                s.setSoTimeout(5000);
                assertEquals(-1, s.getInputStream().read(), "closed");
            }
            assertEquals(1, f.refusedConnections());
            try (Socket s = new Socket("127.0.0.1", f.port())) {
                s.setSoTimeout(5000);
                s.getOutputStream().write(hello(9, 0, 1, 0, 0, "next"));
                s.getOutputStream().write(end(0, 0));
                assertTrue(readReport(s.getInputStream()).contains("\"sender\":\"next\""));
            }
            assertEquals(1, f.refusedConnections());
        }
    }

    @Test
    void pollChecksItsArguments() throws Exception {
        try (ObjectFactory<String> f = ObjectFactory.builder(TEXT).host("127.0.0.1").start()) {
            assertThrows(IllegalArgumentException.class, () -> f.poll(2, 2));
            assertThrows(IllegalArgumentException.class, () -> f.poll(0, 0));
            assertNull(f.poll(1, 2));
            assertThrows(IllegalStateException.class, () -> f.poll(0, 3), "one consumers count per factory");
            long t0 = System.nanoTime();
            assertNull(f.take(0, 2, 30, TimeUnit.MILLISECONDS));
            assertTrue(System.nanoTime() - t0 >= 30_000_000L);
        }
    }

    // ---- helpers

    /** Consumer threads: take buckets, record every id, optionally pause after each bucket. */
    static final class Drainer {
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicLong tuples = new AtomicLong(), duplicates = new AtomicLong();
        final AtomicLong buckets = new AtomicLong();
        final Map<Integer, BitSet> ids = new ConcurrentHashMap<>();
        final Map<Integer, Integer> queueConsumer = new ConcurrentHashMap<>();
        final java.util.concurrent.atomic.AtomicReference<Throwable> error = new java.util.concurrent.atomic.AtomicReference<>();
        final Thread[] threads;

        Drainer(ObjectFactory<String> f, int consumers, long pauseNanosPerBucket) {
            this(f, consumers, pauseNanosPerBucket, true);
        }

        /** threadIds: ids are t << 40 + i on thread t (gen send's), checked. */
        Drainer(ObjectFactory<String> f, int consumers, long pauseNanosPerBucket, boolean threadIds) {
            threads = new Thread[consumers];
            for (int c = 0; c < consumers; c++) {
                final int me = c;
                threads[c] = new Thread(() -> {
                    try {
                        while (!stop.get()) {
                            Bucket<String> b = f.take(me, consumers, 5, TimeUnit.MILLISECONDS);
                            if (b == null) continue;
                            queueConsumer.put(b.stream().queue(), me);
                            BitSet set = ids.computeIfAbsent(b.stream().thread(), k -> new BitSet());
                            synchronized (set) {
                                for (int i = 0; i < b.size(); i++) {
                                    long id = b.id(i);
                                    int t = (int) (id >>> THREAD_SHIFT);
                                    if (!b.get(i).startsWith("{\"user_id\":")) throw new AssertionError(b.get(i));
                                    if (!threadIds) continue; // any ids: counted only
                                    if (t != b.stream().thread()) throw new AssertionError("id " + id + " on thread " + t);
                                    int idx = (int) (id & ((1L << THREAD_SHIFT) - 1));
                                    if (set.get(idx)) duplicates.incrementAndGet();
                                    set.set(idx);
                                }
                            }
                            tuples.addAndGet(b.size());
                            buckets.incrementAndGet();
                            if (pauseNanosPerBucket > 0) LockSupport.parkNanos(pauseNanosPerBucket);
                        }
                    } catch (Throwable e) {
                        error.compareAndSet(null, e);
                    }
                }, "drainer-" + c);
                threads[c].start();
            }
        }

        void stop() throws InterruptedException {
            stop.set(true);
            for (Thread t : threads) t.join(5000);
        }
    }

    record Send(int exit, String out, String err) {
        @Override
        public String toString() {
            return "gen send exited " + exit + "\nstdout:\n" + out + "stderr:\n" + err;
        }
    }

    static String tool() {
        String t = System.getProperty("cloudprofiler.test.tool");
        assertNotNull(t, "-Dcloudprofiler.test.tool (run the tests through Maven)");
        assertTrue(Files.isExecutable(Path.of(t)), t + ": run `make build` first");
        return t;
    }

    /** Runs gen send --to 127.0.0.1:port --synthetic ARGS to its end. */
    static Send send(int port, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(tool(), "gen", "send", "--to", "127.0.0.1:" + port, "--synthetic"));
        cmd.addAll(List.of(args));
        Path err = Files.createTempFile("gen-send", ".err");
        try {
            Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "gen send did not end");
            return new Send(p.exitValue(), out, Files.readString(err));
        } finally {
            Files.deleteIfExists(err);
        }
    }

    static byte[] frame(int type, byte[] body, int n) {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        DataOutputStream d = new DataOutputStream(b);
        try {
            d.writeInt(n + 1);
            d.writeByte(type);
            d.write(body, 0, n);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        return b.toByteArray();
    }

    static byte[] hello(long run, int thread, int threads, long firstId, long tuples, String name) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        DataOutputStream d = new DataOutputStream(b);
        d.write("CPDG".getBytes(StandardCharsets.US_ASCII));
        d.writeShort(1);
        d.writeShort(0);
        d.writeLong(run);
        d.writeInt(thread);
        d.writeInt(threads);
        d.writeLong(firstId);
        d.writeLong(tuples);
        d.writeDouble(1000.0);
        byte[] nm = name.getBytes(StandardCharsets.UTF_8);
        d.writeShort(nm.length);
        d.write(nm);
        byte[] body = b.toByteArray();
        return frame(1, body, body.length);
    }

    static byte[] bucket(long[] ids, String payload) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        DataOutputStream d = new DataOutputStream(b);
        d.writeInt(ids.length);
        byte[] p = payload.getBytes(StandardCharsets.UTF_8);
        for (long id : ids) {
            d.writeLong(id);
            d.writeInt(p.length);
            d.write(p);
        }
        byte[] body = b.toByteArray();
        return frame(2, body, body.length);
    }

    static byte[] end(long tuples, long buckets) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        DataOutputStream d = new DataOutputStream(b);
        d.writeLong(tuples);
        d.writeLong(buckets);
        return frame(3, b.toByteArray(), 16);
    }

    static String readReport(InputStream in) throws IOException {
        DataInputStream d = new DataInputStream(in);
        int n = d.readInt();
        assertEquals(4, d.readUnsignedByte(), "REPORT");
        byte[] js = new byte[n - 1];
        d.readFully(js);
        return new String(js, StandardCharsets.UTF_8);
    }
}
