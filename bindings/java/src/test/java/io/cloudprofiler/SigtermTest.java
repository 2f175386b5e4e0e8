package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A child JVM logging through JNI gets SIGTERM mid-run: the library flushes
 * in its signal handler and chains to the JVM's, the shutdown hooks run (the
 * binding's closes every channel), the JVM exits 143, and every record a
 * logTS accepted is in the file, in order, nothing more.
 */
class SigtermTest {
    private static final Pattern HOOK = Pattern.compile("hook: thread (\\d+) accepted=(\\d+) stop=(-?\\d+) alive=(\\w+)");

    @ParameterizedTest
    @ValueSource(strings = {"ZSTD_TSC", "BINARY"})
    void sigtermMidRunLosesNothing(String format, @TempDir Path dir) throws Exception {
        int threads = 2;
        ProcessBuilder pb = TestSupport.childJvm(TestSupport.classesDirs(), List.of("-Dformat=" + format, "-Xmx256m"),
                SigtermChild.class.getName(), "term", String.valueOf(threads));
        pb.environment().put("CP_LOG_DIR", dir.toString());
        Path outFile = dir.resolve("child.out");
        pb.redirectErrorStream(true).redirectOutput(outFile.toFile());
        Process p = pb.start();
        for (int i = 0; i < 600 && !Files.readString(outFile).contains("logging"); i++) Thread.sleep(50);
        assertTrue(Files.readString(outFile).contains("logging"), Files.readString(outFile));
        Thread.sleep(700);  // millions of records, some already written, some in the ring
        // SIGTERM, as kill(1) or a cluster manager sends it (Process.destroy would close our pipes).
        assertEquals(0, new ProcessBuilder("kill", "-TERM", String.valueOf(p.pid())).start().waitFor());
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), Files.readString(outFile));
        String out = Files.readString(outFile);
        assertEquals(143, p.exitValue(), out);
        checkFiles(dir, "term", threads, out, 1_000_000);
    }
    @Test
    void exitWithoutClosingFlushesEverything(@TempDir Path dir) throws Exception {
        TestSupport.Result res = TestSupport.run(
                TestSupport.childJvm(TestSupport.classesDirs(), List.of(), SigtermChild.class.getName(), "exit", "2", "3000000"),
                Map.of("CP_LOG_DIR", dir.toString()), 120);
        assertEquals(0, res.status, res.toString());
        checkFiles(dir, "exit", 2, res.out, 3_000_000);
    }

    private static void checkFiles(Path dir, String mode, int threads, String out, long atLeast) throws Exception {
        Matcher m = HOOK.matcher(out);
        List<long[]> hooks = new ArrayList<>();
        while (m.find()) {
            assertEquals("false", m.group(4), "a logging thread did not stop:\n" + out);
            if (mode.equals("term")) assertEquals(CloudProfiler.ERR_CLOSED, Integer.parseInt(m.group(3)), out);
            hooks.add(new long[] {Long.parseLong(m.group(1)), Long.parseLong(m.group(2))});
        }
        assertEquals(threads, hooks.size(), "the child's shutdown hook did not report:\n" + out);
        for (long[] h : hooks) {
            Path f = TestSupport.logFile(dir, "child-" + mode + "-" + h[0]);
            assertTrue(h[1] >= atLeast || mode.equals("term") && h[1] > 100_000, "accepted only " + h[1]);
            long inFile = TestSupport.countSequential(f);
            System.out.println("SigtermTest " + mode + ": thread " + h[0] + " accepted " + h[1] + ", " + inFile + " in the file");
            assertEquals(h[1], inFile, "records in " + f + " vs accepted\n" + TestSupport.describe(f));
            assertTrue(Files.size(f) > 0);
        }
    }
}
