package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** SERVICERATE channels: markBlocked, serviceRate, the estimator's arguments. */
class ServiceRateTest {
    private static final AtomicLong SEQ = new AtomicLong();

    private static String unique(String base) {
        return base + "-p" + ProcessHandle.current().pid() + "-" + SEQ.incrementAndGet();
    }

    @Test
    void markBlockedReturnsCodesAndNeverThrows() {
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, CloudProfiler.markBlocked(0, CloudProfiler.BLOCKED_INPUT));
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, CloudProfiler.markBlocked(-5, CloudProfiler.BLOCKED_INPUT));
        Channel ch = Channel.open(unique("sr-codes"), LogFormat.BINARY_TSC, HandlerType.SERVICERATE);
        assertEquals(0, ch.markBlocked(CloudProfiler.BLOCKED_INPUT));
        assertEquals(0, ch.markBlocked(CloudProfiler.BLOCKED_OUTPUT));
        assertEquals(0, ch.markBlocked(CloudProfiler.BLOCKED_INPUT | CloudProfiler.BLOCKED_OUTPUT));
        for (int bad : new int[] {0, 4, 7, -1, Integer.MIN_VALUE}) {
            assertEquals(CloudProfiler.ERR_BAD_ARG_VALUE, ch.markBlocked(bad), "which " + bad);
        }
        ch.close();
        assertEquals(CloudProfiler.ERR_CLOSED, ch.markBlocked(CloudProfiler.BLOCKED_INPUT));
        try (Channel fpc = Channel.open(unique("sr-fpc"), LogFormat.BINARY_TSC, HandlerType.FASTPERIODICCOUNTER)) {
            assertEquals(CloudProfiler.ERR_BAD_HANDLER, fpc.markBlocked(CloudProfiler.BLOCKED_INPUT));
            CloudProfilerException e = assertThrows(CloudProfilerException.class, fpc::serviceRate);
            assertEquals(CloudProfiler.ERR_BAD_HANDLER, e.code());
            assertTrue(e.getMessage().contains(fpc.name()), e.getMessage());
        }
        CloudProfilerException e = assertThrows(CloudProfilerException.class, ch::serviceRate);
        assertEquals(CloudProfiler.ERR_CLOSED, e.code());
        e = assertThrows(CloudProfilerException.class, () -> CloudProfiler.serviceRate(12345));
        assertEquals(CloudProfiler.ERR_BAD_HANDLE, e.code());
    }

    @Test
    void serviceRateFollowsTheLoadAndTheArguments() throws Exception {
        String name = unique("sr-load");
        long items = 0;
        try (Channel ch = Channel.open(name, LogFormat.BINARY, HandlerType.SERVICERATE)) {
            ServiceRate sr = ch.serviceRate();
            assertEquals(0.001, sr.periodSeconds(), 1e-12, sr.toString());  // T starts at 1 ms
            assertEquals(0, sr.convergences(), sr.toString());
            assertFalse(sr.converged(), sr.toString());
            assertEquals(0, sr.mean(), sr.toString());  // no period yet
            ch.parameterize(CloudProfiler.ARG_SR_MIN_PERIOD_NS, 2_000_000)
              .parameterize(CloudProfiler.ARG_SR_WINDOW, 8)
              .parameterize(CloudProfiler.ARG_SR_WIDEN_AFTER, 4)
              .parameterize(CloudProfiler.ARG_SR_STABLE_PPM, 500_000)
              .parameterize(CloudProfiler.ARG_SR_TOLERANCE_PPM, 100_000)
              .parameterize(CloudProfiler.ARG0, 10_000_000);
            CloudProfilerException e = assertThrows(CloudProfilerException.class,
                    () -> ch.parameterize(CloudProfiler.ARG_SR_MAX_PERIOD_NS, 1_000_000));
            assertEquals(CloudProfiler.ERR_BAD_ARG_VALUE, e.code());
            e = assertThrows(CloudProfilerException.class, () -> ch.parameterize(CloudProfiler.ARG1, 1));
            assertEquals(CloudProfiler.ERR_BAD_ARG_NUM, e.code());
            double t = ch.serviceRate().periodSeconds();  // from the new min period (widened since, perhaps)
            assertTrue(t >= 0.002 && t <= 0.016, "T " + t);
            // A busy operator for half a second: items counted, periods sampled.
            long[] ids = new long[64];
            long start = System.nanoTime(), end = start + 500_000_000L;
            while (System.nanoTime() < end) {
                assertEquals(0, ch.logTS(items++));
                assertEquals(ids.length, ch.logTS(ids, ids.length));
                items += ids.length;
            }
            sr = ch.serviceRate();
            double done = items / ((System.nanoTime() - start) / 1e9);
            assertTrue(sr.periods() >= 20, sr.toString());
            // The window's mean rate: what the loop did a second (never blocked), within a factor of two.
            assertTrue(sr.mean() > done / 2 && sr.mean() < 2 * done, sr + " against " + done + " items/s done");
            assertTrue(sr.samples() > 0 && sr.samples() <= sr.periods(), sr.toString());
            assertTrue(sr.running() > 0 || sr.rate() > 0, sr.toString());
            assertTrue(sr.periodSeconds() >= 0.002 && sr.periodSeconds() <= 0.016, sr.toString());
            if (sr.converged()) assertTrue(sr.convergences() > 0 && sr.rate() > 0, sr.toString());
        }
        String d = TestSupport.describe(TestSupport.logFile(TestSupport.logDir(), name));
        assertTrue(d.contains("handler:    SERVICERATE"), d);
        assertTrue(d.contains("total " + items), d);
    }
}
