package io.cloudprofiler;

import static io.cloudprofiler.CloudProfiler.batchAccepted;
import static io.cloudprofiler.CloudProfiler.batchError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The API against the real library, logs decoded by the real tool. */
class ApiTest {
    private static final AtomicLong SEQ = new AtomicLong();

    private static String unique(String base) {
        return base + "-p" + ProcessHandle.current().pid() + "-" + SEQ.incrementAndGet();
    }

    @Test
    void loadedFromTheJarsOwnCopy() {
        assertTrue(CloudProfiler.isAvailable(), () -> String.valueOf(CloudProfiler.loadError()));
        // Surefire runs from target/classes, which carries resources/Linux-amd64/.
        assertTrue(CloudProfiler.libraryPath().contains("extracted from the jar"), CloudProfiler.libraryPath());
    }

    @ParameterizedTest
    @EnumSource(LogFormat.class)
    void everyFormatRoundTrips(LogFormat f) throws Exception {
        String name = unique("fmt-" + f);
        long[] ids = new long[20000];
        for (int i = 0; i < ids.length; i++) ids[i] = (i % 3 == 0) ? -i * 1_000_003L : Long.MAX_VALUE - i;
        try (Channel ch = Channel.open(name, f, HandlerType.BUFFER_IDENTITY)) {
            for (int i = 0; i < 10000; i++) assertEquals(0, ch.logTS(ids[i]));
            assertEquals(10000, ch.logTS(ids, 10000, 10000));
        }
        List<long[]> rows = TestSupport.dump(TestSupport.logFile(TestSupport.logDir(), name));
        assertEquals(ids.length, rows.size());
        long prev = 0;
        for (int i = 0; i < ids.length; i++) {
            assertEquals(ids[i], rows.get(i)[0], "record " + i);
            long tsc = rows.get(i)[1];
            assertTrue(Long.compareUnsigned(tsc, prev) >= 0, "TSC goes back at " + i);
            prev = tsc;
            assertEquals(f.name().endsWith("_TSC") ? 2 : 3, rows.get(i).length);
        }
    }

    @ParameterizedTest
    @EnumSource(HandlerType.class)
    void everyHandlerOpensOrSaysWhy(HandlerType h) {
        String name = unique("h-" + h);
        switch (h) {
            case GPIORTT: {
                CloudProfilerException e = assertThrows(CloudProfilerException.class,
                        () -> CloudProfiler.openChannel(name, LogFormat.BINARY, h));
                assertEquals(CloudProfiler.ERR_UNSUPPORTED_PLATFORM, e.code());
                assertTrue(e.getMessage().contains("aarch64"), e.getMessage());
                return;
            }
            case FOX_END: {  // no CP_RET_START, no configuration server: no peer
                CloudProfilerException e = assertThrows(CloudProfilerException.class,
                        () -> CloudProfiler.openChannel(name, LogFormat.BINARY, h));
                assertEquals(CloudProfiler.ERR_CONFIG, e.code());
                assertTrue(e.getMessage().contains("CP_RET_START"), e.getMessage());
                return;
            }
            case LINEAGE:  // pairs through logLineage; logTS is refused
                try (Channel ch = Channel.open(name, LogFormat.BINARY, h)) {
                    for (int i = 0; i < 100; i++) assertEquals(0, ch.logLineage(1000 + i, i));
                    assertEquals(CloudProfiler.ERR_BAD_HANDLER, ch.logTS(1));
                }
                return;
            default:
                try (Channel ch = Channel.open(name, LogFormat.BINARY, h)) {
                    for (int i = 0; i < 100; i++) assertEquals(0, ch.logTS(i));
                }
        }
    }

    @Test
    void badInputThrowsNamingTheCause() {
        CloudProfilerException e;
        e = assertThrows(CloudProfilerException.class, () -> CloudProfiler.openChannel(null, LogFormat.BINARY, HandlerType.NULLH));
        assertEquals(CloudProfiler.ERR_BAD_NAME, e.code());
        e = assertThrows(CloudProfilerException.class, () -> CloudProfiler.openChannel("", LogFormat.BINARY, HandlerType.NULLH));
        assertEquals(CloudProfiler.ERR_BAD_NAME, e.code());
        assertTrue(e.getMessage().contains("1..4096 bytes"), e.getMessage());
        e = assertThrows(CloudProfilerException.class, () -> CloudProfiler.openChannel("a\0b", LogFormat.BINARY, HandlerType.NULLH));
        assertTrue(e.getMessage().contains("NUL"), e.getMessage());
        e = assertThrows(CloudProfilerException.class,
                () -> CloudProfiler.openChannel("x".repeat(4097), LogFormat.BINARY, HandlerType.NULLH));
        assertEquals(CloudProfiler.ERR_BAD_NAME, e.code());
        e = assertThrows(CloudProfilerException.class, () -> CloudProfiler.openChannel("n", null, HandlerType.NULLH));
        assertEquals(CloudProfiler.ERR_BAD_FORMAT, e.code());
        e = assertThrows(CloudProfilerException.class, () -> CloudProfiler.openChannel("n", LogFormat.BINARY, null));
        assertEquals(CloudProfiler.ERR_BAD_HANDLER, e.code());
        e = assertThrows(CloudProfilerException.class, () -> Channel.open("zstd-identity", LogFormat.ZSTD, HandlerType.IDENTITY));
        assertEquals(CloudProfiler.ERR_FORMAT_HANDLER, e.code());
        assertTrue(e.getMessage().contains("openChannel(\"zstd-identity\", ZSTD, IDENTITY)"), e.getMessage());
        assertTrue(e.getMessage().contains("use BUFFER_IDENTITY"), e.getMessage());
    }

    @Test
    void namesNeverLeaveTheLogDirectory() throws Exception {
        String name = "../../escape/" + unique("x") + "/..";
        try (Channel ch = Channel.open(name, LogFormat.BINARY_TSC, HandlerType.BUFFER_IDENTITY)) {
            ch.logTS(7);
        }
        Path dir = TestSupport.logDir();
        try (var s = Files.list(dir)) {
            assertTrue(s.anyMatch(p -> p.getFileName().toString().contains("escape")), "file in " + dir);
        }
        assertTrue(Files.notExists(dir.resolve("../../escape")));
    }

    @Test
    void theHotPathNeverThrows() {
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, CloudProfiler.logTS(0, 1));
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, CloudProfiler.logTS(-5, 1));
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, CloudProfiler.logTS(Long.MAX_VALUE, 1));
        long h = CloudProfiler.openChannel(unique("closed"), LogFormat.BINARY_TSC, HandlerType.BUFFER_IDENTITY);
        assertEquals(0, CloudProfiler.logTS(h, 1));
        assertEquals(0, CloudProfiler.closeChannel(h));
        assertEquals(CloudProfiler.ERR_CLOSED, CloudProfiler.logTS(h, 2));
        assertEquals(CloudProfiler.ERR_CLOSED, CloudProfiler.closeChannel(h));
        assertEquals(CloudProfiler.ERR_CLOSED, CloudProfiler.parameterizeChannel(h, CloudProfiler.ARG_DROP_WHEN_FULL, 1));

        long r = CloudProfiler.logTS(h, new long[] {1, 2}, 2);
        assertEquals(CloudProfiler.ERR_CLOSED, batchError(r));
        assertEquals(0, batchAccepted(r));
        for (long bad : new long[] {
                CloudProfiler.logTS(h, null, 1), CloudProfiler.logTS(h, new long[2], 3),
                CloudProfiler.logTS(h, new long[2], -1), CloudProfiler.logTS(h, new long[2], -1, 1),
                CloudProfiler.logTS(h, new long[2], 2, 1), CloudProfiler.logTS(h, new long[2], Integer.MAX_VALUE, 2)}) {
            assertEquals(CloudProfiler.ERR_BAD_ARG_VALUE, batchError(bad));
            assertEquals(0, batchAccepted(bad));
        }
        assertEquals(0, CloudProfiler.logTS(12345, new long[0], 0), "an empty batch is accepted");
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, batchError(CloudProfiler.logTS(12345, new long[1], 1)));
    }

    @Test
    void batchStopsAtAClosedChannelAndSaysHowFar() throws Exception {
        String name = unique("batch");
        long h = CloudProfiler.openChannel(name, LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
        long[] ids = new long[5000];
        for (int i = 0; i < ids.length; i++) ids[i] = i;
        assertEquals(3000, CloudProfiler.logTS(h, ids, 3000));
        assertEquals(2000, CloudProfiler.logTS(h, ids, 3000, 2000));
        CloudProfiler.closeChannel(h);
        assertEquals(5000, TestSupport.dump(TestSupport.logFile(TestSupport.logDir(), name)).size());
    }

    @Test
    void parameterizeSetsTheHandlersArguments() throws Exception {
        String name = unique("downsample");
        try (Channel ch = Channel.open(name, LogFormat.BINARY_TSC, HandlerType.DOWNSAMPLE)) {
            ch.parameterize(CloudProfiler.ARG0, 3);
            for (int i = 0; i < 100; i++) ch.logTS(i);
            CloudProfilerException e = assertThrows(CloudProfilerException.class, () -> ch.parameterize(CloudProfiler.ARG1, 1));
            assertEquals(CloudProfiler.ERR_BAD_ARG_NUM, e.code());
            e = assertThrows(CloudProfilerException.class, () -> ch.parameterize(CloudProfiler.ARG0, 0));
            assertEquals(CloudProfiler.ERR_BAD_ARG_VALUE, e.code());
            assertTrue(e.getMessage().startsWith("parameterizeChannel(\"" + name + "\", 0, 0)"), e.getMessage());
            assertEquals(CloudProfiler.ERR_BAD_ARG_NUM, CloudProfiler.parameterizeChannel(ch.handle(), 55, 1));
        }
        List<long[]> rows = TestSupport.dump(TestSupport.logFile(TestSupport.logDir(), name));
        assertEquals(34, rows.size());
        for (int i = 0; i < rows.size(); i++) assertEquals(3L * i, rows.get(i)[0]);
    }

    @Test
    void closeIsIdempotentAndCountersCountEverything() throws Exception {
        String name = unique("fpc");
        Channel ch = Channel.open(name, LogFormat.BINARY, HandlerType.FASTPERIODICCOUNTER);
        for (int i = 0; i < 12345; i++) ch.logTS(i);
        assertEquals(1000, ch.logTS(new long[1000], 1000));
        ch.close();
        ch.close();
        assertTrue(TestSupport.describe(TestSupport.logFile(TestSupport.logDir(), name)).contains("total 13345"));
    }

    @Test
    void dropModeNeverWaits() throws Exception {
        String name = unique("drop");
        long accepted = 0, dropped = 0;
        try (Channel ch = Channel.open(name, LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY)) {
            ch.parameterize(CloudProfiler.ARG_DROP_WHEN_FULL, 1);
            long[] ids = new long[1 << 16];
            for (int i = 0; i < ids.length; i++) ids[i] = i;
            for (int round = 0; round < 64; round++) {
                long r = ch.logTS(ids, ids.length);
                int err = batchError(r);
                assertTrue(err == 0 || err == CloudProfiler.ERR_DROPPED, "err " + err);
                accepted += batchAccepted(r);
                dropped += ids.length - batchAccepted(r);
            }
        }
        String d = TestSupport.describe(TestSupport.logFile(TestSupport.logDir(), name));
        assertTrue(d.contains("dropped " + dropped), "dropped " + dropped + " accepted " + accepted + ":\n" + d);
        assertEquals(accepted, TestSupport.dump(TestSupport.logFile(TestSupport.logDir(), name)).size());
    }

    @Test
    void threadsOnOwnAndSharedChannelsLoseNothing() throws Exception {
        String shared = unique("shared");
        Channel sh = Channel.open(shared, LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
        int threads = 4, per = 200_000;
        List<String> own = new ArrayList<>();
        List<Thread> ts = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            String name = unique("own" + t);
            own.add(name);
            final long base = (long) t << 32;
            Thread th = new Thread(() -> {
                try (Channel ch = Channel.open(name, LogFormat.S2_TSC, HandlerType.BUFFER_IDENTITY)) {
                    for (int i = 0; i < per; i++) {
                        if (ch.logTS(base + i) != 0 || sh.logTS(base + i) != 0) throw new AssertionError("refused at " + i);
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            ts.add(th);
            th.start();
        }
        for (Thread th : ts) th.join();
        sh.close();
        assertTrue(failures.isEmpty(), failures.toString());
        for (int t = 0; t < threads; t++) {
            List<long[]> rows = TestSupport.dump(TestSupport.logFile(TestSupport.logDir(), own.get(t)));
            assertEquals(per, rows.size());
            for (int i = 0; i < per; i++) assertEquals(((long) t << 32) + i, rows.get(i)[0]);
        }
        List<long[]> rows = TestSupport.dump(TestSupport.logFile(TestSupport.logDir(), shared));
        assertEquals((long) threads * per, rows.size());
        long[] next = new long[threads];  // each thread's ids appear in its order
        for (long[] r : rows) {
            int t = (int) (r[0] >>> 32);
            assertEquals(next[t]++, r[0] & 0xffffffffL);
        }
    }

    @Test
    void closeRacingWithLoggersKeepsExactlyWhatWasAccepted() throws Exception {
        String name = unique("race");
        long h = CloudProfiler.openChannel(name, LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
        int threads = 4;
        long[] accepted = new long[threads];
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int tt = t;
            ts[t] = new Thread(() -> {
                long n = 0;
                while (CloudProfiler.logTS(h, ((long) tt << 40) + n) == 0) n++;
                accepted[tt] = n;
            });
            ts[t].start();
        }
        Thread.sleep(100);
        assertEquals(0, CloudProfiler.closeChannel(h));
        for (Thread th : ts) th.join();
        long sum = 0;
        for (long a : accepted) sum += a;
        assertTrue(sum > 0);
        assertEquals(sum, TestSupport.dump(TestSupport.logFile(TestSupport.logDir(), name)).size());
    }

    @Test
    void errorStringsComeFromTheLibrary() {
        assertEquals("channel is closed", CloudProfiler.errorString(CloudProfiler.ERR_CLOSED));
        assertEquals("unknown error code", CloudProfiler.errorString(-999));
    }
}
