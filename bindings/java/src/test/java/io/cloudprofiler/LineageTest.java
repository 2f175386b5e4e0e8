package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** LINEAGE channels: logLineage, its codes, and the file `cloudprofiler dump` reads. */
class LineageTest {
    private static final AtomicLong SEQ = new AtomicLong();

    private static String unique(String base) {
        return base + "-p" + ProcessHandle.current().pid() + "-" + SEQ.incrementAndGet();
    }

    /** The input id a LINEAGE record's TSC column holds (0 is stored as 2^63). */
    private static long input(long tsc) {
        return tsc == Long.MIN_VALUE ? 0 : tsc;
    }

    @Test
    void logLineageWritesThePairs() throws Exception {
        String name = unique("win-lineage");
        Random r = new Random(18);
        int n = 5000;
        long[][] pairs = new long[n][];
        for (int i = 0; i < n; i++) {
            long in = i % 5 == 0 ? 0 : i % 5 == 1 ? -r.nextInt(1000) : i % 5 == 2 ? Long.MAX_VALUE - i : r.nextLong();
            if (in == Long.MIN_VALUE) in = 1;
            pairs[i] = new long[] {1_000_000L + i / 4, in};
        }
        try (Channel ch = Channel.open(name + " lineage", LogFormat.ZSTD_TSC, HandlerType.LINEAGE)) {
            for (long[] p : pairs) assertEquals(0, ch.logLineage(p[0], p[1]));
            assertEquals(CloudProfiler.ERR_BAD_HANDLER, ch.logTS(7), "logTS on LINEAGE");
            assertEquals(CloudProfiler.ERR_BAD_ARG_VALUE, ch.logLineage(1, Long.MIN_VALUE));
        }
        List<long[]> rows = TestSupport.dump(TestSupport.logFile(TestSupport.logDir(), name + "_lineage"));
        assertEquals(n, rows.size());
        for (int i = 0; i < n; i++) {
            assertEquals(pairs[i][0], rows.get(i)[0], "output of record " + i);
            assertEquals(pairs[i][1], input(rows.get(i)[1]), "input of record " + i);
        }
        String d = TestSupport.describe(TestSupport.logFile(TestSupport.logDir(), name + "_lineage"));
        assertTrue(d.contains("handler:    LINEAGE"), d);
    }

    @Test
    void logLineageReturnsCodesAndNeverThrows() {
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, CloudProfiler.logLineage(0, 1, 2));
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, CloudProfiler.logLineage(-5, 1, 2));
        Channel ch = Channel.open(unique("lin-codes") + " lineage", LogFormat.BINARY_TSC, HandlerType.LINEAGE);
        assertEquals(15, HandlerType.LINEAGE.value());
        assertEquals(0, ch.logLineage(2, 1));
        ch.close();
        assertEquals(CloudProfiler.ERR_CLOSED, ch.logLineage(2, 1));
        try (Channel bi = Channel.open(unique("lin-bi"), LogFormat.BINARY_TSC, HandlerType.BUFFER_IDENTITY)) {
            assertEquals(CloudProfiler.ERR_BAD_HANDLER, bi.logLineage(2, 1));
        }
    }
}
