package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/** Marks (what the engine modules' wrappers call) and TupleIds (their ids for records without one). */
class MarksTest {
    @Test
    void marksWriteTheConventionsChannelsAndCount() throws Exception {
        String op = "marks-p" + ProcessHandle.current().pid();
        Marks m = Marks.open(op, "3", true, true);
        assertTrue(m.on());
        for (long id = 10; id < 15; id++) {
            m.in(id);
            m.out(id);
            m.sent(id);
        }
        m.in(99); // taken, never handed on
        assertEquals(6, m.tuplesIn());
        assertEquals(5, m.tuplesOut());
        assertNotNull(m.serviceRate(), "a count channel with withRate");
        m.close();
        assertNull(m.serviceRate(), "closed: no rate, no exception");
        Path dir = TestSupport.logDir(); // files are named with "_" for "#" and " "
        assertEquals(List.of(10L, 11L, 12L, 13L, 14L, 99L), ids(TestSupport.logFile(dir, op + "_3_in")));
        assertEquals(List.of(10L, 11L, 12L, 13L, 14L), ids(TestSupport.logFile(dir, op + "_3_out")));
        assertEquals(List.of(10L, 11L, 12L, 13L, 14L), ids(TestSupport.logFile(dir, op + "_3_sent")));
        assertTrue(TestSupport.describe(TestSupport.logFile(dir, op + "_3_count")).contains("SERVICERATE"));
    }

    /**
     * The live capacity: bursts of visits of 50 us of work each, a sleep of
     * 20 ms between bursts. What the instance takes a second while it works
     * is its visits over the time its bursts took, as the test clocks them
     * (about 20,000/s on an idle CPU, less where the machine preempts the
     * thread mid-burst, which is its cost too), well above what it carried
     * (about 2,000/s): the sleeps, waits of its thread, are not work. The
     * first read only starts the span. (It once held the capacity to the
     * 50 us of the design, and failed beside two busy loops with 9,431/s.)
     */
    @Test
    void capacityLeavesTheWaitsOut() throws Exception {
        String op = "live-p" + ProcessHandle.current().pid();
        try (Marks m = Marks.open(op, "0", false, false)) {
            assertTrue(Double.isNaN(m.capacity()), "no span yet");
            long id = 0, t0 = System.nanoTime(), bursts = 0;
            while (System.nanoTime() - t0 < 1_300_000_000L) {
                long b0 = System.nanoTime();
                for (int k = 0; k < 50; k++, id++) {
                    m.in(id);
                    long end = System.nanoTime() + 50_000;
                    while (System.nanoTime() < end) Thread.onSpinWait();
                    m.out(id);
                }
                bursts += System.nanoTime() - b0;
                Thread.sleep(20);
            }
            double carried = id / ((System.nanoTime() - t0) / 1e9), c = m.capacity(), truth = id / (bursts / 1e9);
            System.out.printf("[marks] live capacity %.0f/s, its bursts' truth %.0f/s, carried %.0f/s, work 50 us a tuple%n", c, truth, carried);
            assertTrue(c <= truth * 1.05, "more than the bursts' truth: " + c + ", truth " + truth);
            assertTrue(c >= truth * 0.85 && c > 4 * carried, "the sleeps counted as work: " + c + ", the bursts' truth " + truth + ", carried " + carried);
        }
    }

    /**
     * The JVM's collections are the instance's time: a thread always busy
     * (20 us of work a tuple, never waiting for one) while another thread
     * has the JVM collect every 20 ms stops at each
     * collection's safepoint, a voluntary switch of its thread; the
     * library learns the collections from the JVM (JVMTI) and counts such
     * stops as work. So what it took a second while it worked is what it
     * did a second: its capacity within 10% of its throughput, though the
     * collections took a large share of the time.
     */
    @Test
    void theJvmsCollectionsCountAsWork() throws Exception {
        String op = "gc-p" + ProcessHandle.current().pid();
        AtomicBoolean stop = new AtomicBoolean();
        // Full collections (System.gc(): stop-the-world), with some live data
        // to copy, every 20 ms: whatever the test JVM's heap.
        Thread alloc = new Thread(() -> {
            List<byte[]> keep = new ArrayList<>();
            while (!stop.get()) {
                for (int k = 0; k < 2_000; k++) keep.add(new byte[4096]);
                if (keep.size() > 20_000) keep.subList(0, 10_000).clear();
                System.gc();
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        alloc.setDaemon(true);
        long gc0 = gcMillis();
        try (Marks m = Marks.open(op, "0", false, false)) {
            alloc.start();
            // The work between a departure and the next in (taking a queued
            // tuple, as an engine's deserializing does): where a stop is no
            // own work, and only the JVM's word tells it from a wait.
            long id = 0, t0 = System.nanoTime();
            m.in(id);
            m.out(id);
            MarkStats first = m.markStats();
            while (System.nanoTime() - t0 < 2_000_000_000L) {
                long end = System.nanoTime() + 20_000;
                while (System.nanoTime() < end) Thread.onSpinWait();
                m.in(++id);
                m.out(id);
            }
            MarkStats last = m.markStats();
            double secs = (System.nanoTime() - t0) / 1e9, did = (last.visits() - first.visits()) / secs;
            double cap = last.capacitySince(first), gc = (gcMillis() - gc0) / 1e3 / secs;
            System.out.printf("[marks] busy with collections %.0f%% of the time: capacity %.0f/s, did %.0f/s%n", 100 * gc, cap, did);
            assertTrue(gc > 0.05, "the allocating thread made too few collections to tell: " + gc);
            assertTrue(Math.abs(cap / did - 1) <= 0.10, "capacity " + cap + " against " + did + " done a second");
        } finally {
            stop.set(true);
            alloc.join();
        }
    }

    static long gcMillis() {
        long ms = 0;
        for (java.lang.management.GarbageCollectorMXBean g : java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()) {
            ms += Math.max(0, g.getCollectionTime());
        }
        return ms;
    }

    static List<Long> ids(Path f) throws Exception {
        return TestSupport.dump(f).stream().map(r -> r[0]).toList();
    }

    @Test
    void offMarksAndCountsNothing() {
        Marks m = Marks.off();
        assertFalse(m.on());
        m.in(1);
        m.out(1);
        m.sent(1);
        assertEquals(0, m.tuplesIn());
        assertNull(m.serviceRate());
        m.close();
    }

    @Test
    void namesTheConventionCannotReadBackAreRefused() {
        for (String bad : new String[] {"", "a#1", "two words", "tab\there", null}) {
            assertThrows(IllegalArgumentException.class, () -> Marks.open(bad, "0", false, false), String.valueOf(bad));
        }
        assertEquals("count#7 out", Marks.channelName("count", "7", "out"));
    }

    @Test
    void tupleIdsAreDistinctAcrossInstancesAndAttempts() {
        Set<Long> seen = new HashSet<>();
        for (int attempt : new int[] {0, 1, 127}) {
            for (int instance : new int[] {0, 1, 65535}) {
                TupleIds ids = TupleIds.of(instance, attempt);
                for (int i = 0; i < 1000; i++) {
                    long id = ids.next();
                    assertTrue(seen.add(id), "id " + Long.toHexString(id) + " drawn twice");
                    assertEquals(attempt, id >>> 56);
                    assertEquals(instance, (id >>> 40) & 0xffff);
                    assertEquals(i, id & ((1L << 40) - 1));
                }
            }
        }
        assertThrows(IllegalArgumentException.class, () -> TupleIds.of(65536, 0));
        assertThrows(IllegalArgumentException.class, () -> TupleIds.of(-1, 0));
        assertThrows(IllegalArgumentException.class, () -> TupleIds.of(0, 128));
    }
}
