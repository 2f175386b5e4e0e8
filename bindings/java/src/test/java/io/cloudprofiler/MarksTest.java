package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
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
     * is 1/50us = 20,000/s, well above what it carried (about 2,000/s): the
     * sleeps, waits of its thread, are not work. The first read only starts
     * the span.
     */
    @Test
    void capacityLeavesTheWaitsOut() throws Exception {
        String op = "live-p" + ProcessHandle.current().pid();
        try (Marks m = Marks.open(op, "0", false, false)) {
            assertTrue(Double.isNaN(m.capacity()), "no span yet");
            long id = 0, t0 = System.nanoTime();
            while (System.nanoTime() - t0 < 1_300_000_000L) {
                for (int k = 0; k < 50; k++, id++) {
                    m.in(id);
                    long end = System.nanoTime() + 50_000;
                    while (System.nanoTime() < end) Thread.onSpinWait();
                    m.out(id);
                }
                Thread.sleep(20);
            }
            double carried = id / ((System.nanoTime() - t0) / 1e9), c = m.capacity();
            System.out.printf("[marks] live capacity %.0f/s, carried %.0f/s, work 50 us a tuple%n", c, carried);
            assertTrue(c <= 20_000 * 1.02, "more than one over the work: " + c);
            assertTrue(c >= 20_000 * 0.5 && c > 4 * carried, "the sleeps counted as work: " + c + ", carried " + carried);
        }
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
