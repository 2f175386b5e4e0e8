package io.cloudprofiler.datagen;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;

/** FRAMING.md's "Accounting" on hand-made id sequences. */
class AccountingTest {
    static Accounting run(long first, long tuples, long sent, long... ids) {
        Accounting a = new Accounting(first, tuples);
        for (long id : ids) a.add(id);
        a.finish(sent);
        return a;
    }

    static void counts(Accounting a, long received, long lost, long outOfOrder, long duplicates, long outOfRange) {
        assertEquals(received, a.received, "received");
        assertEquals(lost, a.lost, "lost");
        assertEquals(outOfOrder, a.outOfOrder, "out of order");
        assertEquals(duplicates, a.duplicates, "duplicates");
        assertEquals(outOfRange, a.outOfRange, "out of range");
    }

    @Test
    void aLateIdRepaysItsGap() {
        Accounting a = run(0, 3, 3, 0, 2, 1);
        counts(a, 3, 0, 1, 0, 0);
        assertEquals(0, a.gaps(100).length);
        assertFalse(a.truncated(100));
    }

    @Test
    void aStrayIdCountsOutOfRangeOnly() {
        Accounting a = run(0, 3, 3, 0, 1L << 50, 1, 2);
        counts(a, 3, 0, 0, 0, 1);
        // below the range, and at its end
        a = run(100, 10, 10, 99, 110, 100, -1L);
        counts(a, 1, 9, 0, 0, 3);
        assertArrayEquals(new long[][] {{101, 109}}, a.gaps(100));
        // a stray id does not move next: the ids after it are not late
        a = run(0, 5, 5, 0, 1000, 1, 2, 3, 4);
        counts(a, 5, 0, 0, 0, 1);
    }

    @Test
    void duplicates() {
        Accounting a = run(0, 4, 4, 0, 1, 1, 0, 2, 2, 3, 3);
        counts(a, 4, 0, 0, 4, 0);
        // a late id fills its gap once; again, it is a duplicate
        a = run(0, 4, 4, 0, 3, 1, 1, 2, 2);
        counts(a, 4, 0, 2, 2, 0);
        // an id below next and in no gap was received before
        a = run(10, 5, 5, 10, 11, 12, 10);
        counts(a, 3, 2, 0, 1, 0);
        assertArrayEquals(new long[][] {{13, 14}}, a.gaps(100));
    }

    @Test
    void gapsSplitShrinkAndTheTail() {
        Accounting a = new Accounting(0, 20);
        a.add(0);
        a.add(10); // gap 1..9
        assertArrayEquals(new long[][] {{1, 9}}, a.gaps(100));
        a.add(5); // split
        assertArrayEquals(new long[][] {{1, 4}, {6, 9}}, a.gaps(100));
        a.add(1); // shrink from below
        a.add(9); // from above
        assertArrayEquals(new long[][] {{2, 4}, {6, 8}}, a.gaps(100));
        a.add(15); // gap 11..14
        a.add(7);
        assertArrayEquals(new long[][] {{2, 4}, {6, 6}, {8, 8}, {11, 14}}, a.gaps(100));
        a.add(6); // a one-id gap goes
        assertArrayEquals(new long[][] {{2, 4}, {8, 8}, {11, 14}}, a.gaps(100));
        a.finish(18); // tail 16..17, not up to HELLO's 20
        assertArrayEquals(new long[][] {{2, 4}, {8, 8}, {11, 14}, {16, 17}}, a.gaps(100));
        counts(a, 8, 10, 5, 0, 0);
        assertEquals(18, a.received + a.lost);
        assertArrayEquals(new long[][] {{2, 4}, {8, 8}}, a.gaps(2));
        assertTrue(a.truncated(2));
        assertFalse(a.truncated(100));
    }

    @Test
    void rangeOverflow() {
        assertFalse(Accounting.rangeOverflows(0, -1L)); // [0, 2^64 - 1)
        assertFalse(Accounting.rangeOverflows(-11L, 10)); // ends at 2^64 - 1
        assertTrue(Accounting.rangeOverflows(-10L, 10)); // the sum is 2^64: not a 64-bit number
        assertTrue(Accounting.rangeOverflows(-10L, 11));
        assertTrue(Accounting.rangeOverflows(1, -1L));
        assertTrue(Accounting.rangeOverflows(-1L, -1L));
        // a range near the top, ids compared unsigned
        Accounting a = run(-100L, 50, 50, -100L, -98L, -99L, -51L, 5);
        counts(a, 4, 46, 1, 0, 1);
        assertArrayEquals(new long[][] {{-97L, -52L}}, a.gaps(100));
    }

    @Test
    void pastTheRecordedGapsLostIsAnUpperBound() {
        int max = Accounting.MAX_RECORDED_GAPS;
        Accounting a = new Accounting(0, 1L << 20);
        // ids 0, 2, 4, ...: one-id gaps 1, 3, 5, ...; max + 2 gaps in all
        for (long id = 0; id <= 2L * (max + 2); id += 2) a.add(id);
        assertEquals(max, a.recordedGaps());
        assertTrue(a.overflow);
        assertEquals(max + 2, a.lost);
        a.add(1); // recorded: repaid
        a.add(2L * max + 3); // not recorded: counts as a duplicate
        assertEquals(max + 1, a.lost);
        assertEquals(1, a.outOfOrder);
        assertEquals(1, a.duplicates);
        assertEquals(100, a.gaps(100).length);
        assertTrue(a.truncated(100));
        assertEquals(3, a.gaps(100)[0][0]);
    }

    @Test
    void aSplitWithNoRoomKeepsTheLowerHalf() {
        int max = Accounting.MAX_RECORDED_GAPS;
        Accounting a = new Accounting(0, 1L << 20);
        a.add(10); // gap 0..9
        for (long id = 12; a.recordedGaps() < max; id += 2) a.add(id);
        assertFalse(a.overflow);
        a.add(5);
        assertTrue(a.overflow);
        assertArrayEquals(new long[] {0, 4}, a.gaps(1)[0]);
        a.add(7); // in the half no longer recorded
        assertEquals(1, a.duplicates);
        assertEquals(1, a.outOfOrder);
    }

    @Test
    void markAndRollback() {
        Accounting a = new Accounting(0, 100);
        a.add(0);
        a.add(5); // gap 1..4
        a.mark();
        a.add(2); // split
        a.add(9); // gap 6..8
        a.add(9); // duplicate
        a.add(1000); // out of range
        a.rollback();
        counts(a, 2, 4, 0, 0, 0);
        assertEquals(6, a.next);
        assertArrayEquals(new long[][] {{1, 4}}, a.gaps(100));
        // and it goes on from there
        a.mark();
        a.add(6);
        a.add(3);
        a.finish(8);
        counts(a, 4, 4, 1, 0, 0);
        assertArrayEquals(new long[][] {{1, 2}, {4, 4}, {7, 7}}, a.gaps(100));
        // many appends after a mark, the arrays grown: rolled back to the mark
        Accounting b = new Accounting(0, 1000);
        b.add(1);
        b.mark();
        for (long id = 3; id < 200; id += 2) b.add(id);
        b.add(0);
        b.rollback();
        assertArrayEquals(new long[][] {{0, 0}}, b.gaps(100));
        counts(b, 1, 1, 0, 0, 0);
    }

    /** Random streams (reordered, dropped, duplicated, strays): received + lost == sent, each id received once. */
    @Test
    void theInvariant() {
        Random r = new Random(7);
        for (int round = 0; round < 300; round++) {
            long first = r.nextBoolean() ? r.nextInt(1000) : -1L - r.nextInt(5000) - 3000; // near 2^64 too
            int tuples = 1 + r.nextInt(2000);
            int sent = r.nextBoolean() ? tuples : r.nextInt(tuples + 1);
            List<Long> ids = new ArrayList<>();
            for (int i = 0; i < sent; i++) if (r.nextInt(10) != 0) ids.add(first + i); // ~10% lost
            // local reordering: swap neighbours now and then
            for (int i = 0; i + 1 < ids.size(); i++) if (r.nextInt(8) == 0) Collections.swap(ids, i, i + 1 + r.nextInt(Math.min(20, ids.size() - i - 1)));
            int dups = 0, strays = 0;
            for (int i = 0; i < ids.size(); i++) {
                long again = ids.get(r.nextInt(i + 1));
                if (r.nextInt(50) == 0 && Long.compareUnsigned(again - first, tuples) < 0) {
                    ids.add(i + 1, again);
                    dups++;
                    i++;
                } else if (r.nextInt(80) == 0) {
                    ids.add(i + 1, first + tuples + r.nextInt(1000));
                    strays++;
                    i++;
                }
            }
            Accounting a = new Accounting(first, tuples);
            BitSet seen = new BitSet();
            for (long id : ids) {
                long off = id - first;
                boolean inRange = Long.compareUnsigned(off, tuples) < 0;
                boolean fresh = inRange && !seen.get((int) off);
                assertEquals(fresh, a.wouldReceive(id), "round " + round + " id " + Long.toUnsignedString(id));
                if (fresh) seen.set((int) off);
                a.add(id);
            }
            a.finish(sent);
            assertFalse(a.overflow);
            assertEquals(sent, a.received + a.lost, "round " + round);
            assertEquals(seen.cardinality(), a.received, "round " + round);
            assertEquals(dups, a.duplicates, "round " + round);
            assertEquals(strays, a.outOfRange, "round " + round);
            // the gaps are exactly the ids never received, in order
            long missing = 0;
            long prev = Long.MIN_VALUE;
            for (long[] g : a.gaps(Integer.MAX_VALUE)) {
                assertTrue(Long.compareUnsigned(g[0], g[1]) <= 0);
                if (prev != Long.MIN_VALUE) assertTrue(Long.compareUnsigned(prev + 1, g[0]) < 0, "disjoint, in order");
                for (long id = g[0]; id != g[1] + 1; id++) assertFalse(seen.get((int) (id - first)));
                missing += g[1] - g[0] + 1;
                prev = g[1];
            }
            assertEquals(a.lost, missing);
        }
    }
}
