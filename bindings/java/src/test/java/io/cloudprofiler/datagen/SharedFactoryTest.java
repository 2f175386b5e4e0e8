package io.cloudprofiler.datagen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The reference-counted factory of a JVM, with real (loopback, ephemeral port) factories. */
@Timeout(60)
class SharedFactoryTest {
    static final Deserializer<String> TEXT = (id, b, off, len) -> new String(b, off, len, StandardCharsets.ISO_8859_1);

    /** Starts loopback factories on ephemeral ports, counting them and keeping them to close at the end. */
    static final class Starts implements SharedFactory.Starter<String>, AutoCloseable {
        final AtomicInteger count = new AtomicInteger();
        final List<ObjectFactory<String>> started = new ArrayList<>();

        @Override
        public synchronized ObjectFactory<String> start() throws IOException {
            count.incrementAndGet();
            ObjectFactory<String> f = ObjectFactory.builder(TEXT).port(0).joinMillis(1_000).start();
            started.add(f);
            return f;
        }

        @Override
        public synchronized void close() {
            for (ObjectFactory<String> f : started) f.close();
        }
    }

    @Test
    void countsUsersAndRestartsAfterTheLastRelease() throws Exception {
        SharedFactory<String> shared = new SharedFactory<>();
        try (Starts starts = new Starts()) {
            assertNull(shared.current());
            ObjectFactory<String> a = shared.acquire(starts);
            ObjectFactory<String> b = shared.acquire(starts);
            assertSame(a, b, "the second acquirer shares the first one's factory");
            assertEquals(1, starts.count.get());
            assertEquals(2, shared.users());
            assertTrue(a.port() > 0);

            shared.release(a);
            assertFalse(a.isClosed(), "one user is left");
            assertSame(a, shared.current());
            assertEquals(1, shared.users());

            shared.release(b);
            assertTrue(a.isClosed(), "the last user closes it");
            assertNull(shared.current());
            assertEquals(0, shared.users());

            ObjectFactory<String> c = shared.acquire(starts);
            assertNotSame(a, c, "a new factory after the close");
            assertFalse(c.isClosed());
            assertEquals(2, starts.count.get());
            shared.release(c);
            assertTrue(c.isClosed());
        }
    }

    @Test
    void firstAcquirersSettingsWin() throws Exception {
        SharedFactory<String> shared = new SharedFactory<>();
        try (Starts starts = new Starts()) {
            ObjectFactory<String> a = shared.acquire(starts);
            ObjectFactory<String> b = shared.acquire(() -> {
                throw new AssertionError("not started: there is an open factory");
            });
            assertSame(a, b);
            shared.release(a);
            shared.release(b);
        }
    }

    @Test
    void aClosedFactoryIsReplacedAndTheStaleOneJustClosed() throws Exception {
        SharedFactory<String> shared = new SharedFactory<>();
        try (Starts starts = new Starts()) {
            ObjectFactory<String> old = shared.acquire(starts);
            ObjectFactory<String> other = shared.acquire(starts);
            old.close(); // closed under its users, e.g. by a failing task
            ObjectFactory<String> fresh = shared.acquire(starts);
            assertNotSame(old, fresh);
            assertEquals(1, shared.users(), "the new factory's count starts afresh");

            shared.release(old); // stale: closed, does not touch the new one's count
            shared.release(other);
            assertFalse(fresh.isClosed());
            assertEquals(1, shared.users());
            shared.release(fresh);
            assertTrue(fresh.isClosed());
            assertNull(shared.current());
            shared.release(null); // ignored
        }
    }

    @Test
    void aFailedStartCountsNoUser() throws Exception {
        SharedFactory<String> shared = new SharedFactory<>();
        IOException boom = new IOException("cannot listen");
        assertSame(boom, assertThrows(IOException.class, () -> shared.acquire(() -> {
            throw boom;
        })));
        assertNull(shared.current());
        assertEquals(0, shared.users());
        assertThrows(NullPointerException.class, () -> shared.acquire(() -> null));
        assertEquals(0, shared.users());
    }

    @Test
    void awaitTimesOutThenReturnsTheFactoryOnceEnoughConsumersRun() throws Exception {
        SharedFactory<String> shared = new SharedFactory<>();
        try (Starts starts = new Starts()) {
            long t0 = System.nanoTime();
            assertNull(shared.await(1, 100, TimeUnit.MILLISECONDS), "no factory yet");
            assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(100));

            ObjectFactory<String> f = shared.acquire(starts);
            shared.consumerStarted();
            assertNull(shared.await(2, 50, TimeUnit.MILLISECONDS), "one consumer of two");

            // A waiter is woken by the second consumer.
            CountDownLatch waiting = new CountDownLatch(1);
            ExecutorService ex = Executors.newSingleThreadExecutor();
            try {
                Future<ObjectFactory<String>> got = ex.submit(() -> {
                    waiting.countDown();
                    return shared.await(2, 30, TimeUnit.SECONDS);
                });
                waiting.await();
                Thread.sleep(50);
                assertFalse(got.isDone());
                shared.consumerStarted();
                assertSame(f, got.get(10, TimeUnit.SECONDS));
            } finally {
                ex.shutdownNow();
            }
            assertEquals(2, shared.runningConsumers());
            assertSame(f, shared.await(2, 0, TimeUnit.MILLISECONDS));

            shared.consumerStopped();
            shared.consumerStopped();
            assertEquals(0, shared.runningConsumers());
            assertThrows(IllegalStateException.class, shared::consumerStopped);
            shared.release(f);
            assertNull(shared.await(0, 10, TimeUnit.MILLISECONDS), "no factory after the last release");
        }
    }

    @Test
    void concurrentAcquireAndReleaseKeepConsistentCounts() throws Exception {
        SharedFactory<String> shared = new SharedFactory<>();
        Starts starts = new Starts();
        int threads = 8, rounds = 200;
        CyclicBarrier go = new CyclicBarrier(threads);
        ExecutorService ex = Executors.newFixedThreadPool(threads);
        Set<ObjectFactory<String>> seen = ConcurrentHashMap.newKeySet();
        try {
            List<Future<?>> done = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                done.add(ex.submit(() -> {
                    go.await();
                    for (int r = 0; r < rounds; r++) {
                        ObjectFactory<String> f = shared.acquire(starts);
                        seen.add(f);
                        shared.consumerStarted();
                        if (f.isClosed()) throw new AssertionError("acquired a closed factory");
                        if (shared.users() < 1) throw new AssertionError("no user counted while held");
                        shared.consumerStopped();
                        shared.release(f);
                    }
                    return null;
                }));
            }
            for (Future<?> d : done) d.get(60, TimeUnit.SECONDS);
            assertEquals(0, shared.users());
            assertEquals(0, shared.runningConsumers());
            assertNull(shared.current(), "the last release closed it");
            assertEquals(starts.count.get(), seen.size(), "every start was handed out");
            for (ObjectFactory<String> f : seen) assertTrue(f.isClosed(), "every factory closed by its last user");
        } finally {
            ex.shutdownNow();
            starts.close();
        }
    }
}
