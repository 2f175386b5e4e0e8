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
