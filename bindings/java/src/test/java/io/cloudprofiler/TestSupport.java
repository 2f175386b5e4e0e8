package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/** Shared by the tests: where things are, decoding logs with the real tool, child JVMs. */
final class TestSupport {
    private TestSupport() {}

    static String prop(String name) {
        String v = System.getProperty(name);
        if (v == null) throw new IllegalStateException("-D" + name + " is not set (run the tests through Maven)");
        return v;
    }

    static Path logDir() {
        return Paths.get(System.getenv("CP_LOG_DIR"));
    }

    static Path nativeLib() {
        return Paths.get(prop("cloudprofiler.test.native.dir"), "libcloudprofiler.so").toAbsolutePath().normalize();
    }

    static Path repo() {
        return Paths.get(prop("cloudprofiler.test.repo")).toAbsolutePath().normalize();
    }

    /** The one log file of a channel name (unique per test) in dir. */
    static Path logFile(Path dir, String name) throws IOException {
        try (Stream<Path> s = Files.list(dir)) {
            List<Path> m = s.filter(p -> {
                String f = p.getFileName().toString();
                return f.endsWith("-" + name + ".cplog") || f.endsWith("-" + name + ".cplog.txt");
            }).collect(Collectors.toList());
            assertEquals(1, m.size(), "log files for " + name + " in " + dir + ": " + m);
            return m.get(0);
        }
    }

    /** `cloudprofiler dump --csv FILE`: the rows, header dropped, as longs (unsigned TSCs fit). */
    static List<long[]> dump(Path file) throws Exception {
        Process p = new ProcessBuilder(prop("cloudprofiler.test.tool"), "dump", "--csv", file.toString())
                .redirectErrorStream(false).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), "dump " + file + ": " + err);
        List<long[]> rows = new ArrayList<>();
        String[] lines = out.split("\n");
        for (int i = 1; i < lines.length; i++) {
            if (lines[i].isEmpty()) continue;
            String[] f = lines[i].split(",");
            long[] r = new long[f.length];
            for (int j = 0; j < f.length; j++) r[j] = f[j].startsWith("-") ? Long.parseLong(f[j]) : Long.parseUnsignedLong(f[j]);
            rows.add(r);
        }
        return rows;
    }

    /**
     * Streams `cloudprofiler dump --csv FILE` and checks that the tuple ids
     * are 0, 1, 2, ... in order; returns how many there are. For files of
     * tens of millions of records (nothing is held in memory).
     */
    static long countSequential(Path file) throws Exception {
        Process p = new ProcessBuilder(prop("cloudprofiler.test.tool"), "dump", "--csv", file.toString())
                .redirectError(ProcessBuilder.Redirect.DISCARD).start();
        long n = 0;
        try (java.io.BufferedReader r = new java.io.BufferedReader(
                new java.io.InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII), 1 << 16)) {
            String line = r.readLine();  // the CSV header
            while ((line = r.readLine()) != null) {
                int comma = line.indexOf(',');
                long id = Long.parseLong(comma < 0 ? line : line.substring(0, comma));
                if (id != n) {
                    p.destroyForcibly();
                    throw new AssertionError("record " + n + " is id " + id + " in " + file);
                }
                n++;
            }
        }
        assertTrue(p.waitFor(120, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), "dump " + file);
        return n;
    }

    /** The tool's text summary of a file. */
    static String describe(Path file) throws Exception {
        Process p = new ProcessBuilder(prop("cloudprofiler.test.tool"), "dump", file.toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor(60, TimeUnit.SECONDS);
        return out;
    }

    /**
     * A child JVM running mainClass with this JVM's java and the given
     * classpath; its java.io.tmpdir is this one's {@link PrivateTmpDir}.
     */
    static ProcessBuilder childJvm(String classpath, List<String> jvmArgs, String mainClass, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("-Djava.io.tmpdir=" + PrivateTmpDir.DIR);
        cmd.addAll(jvmArgs);
        cmd.add("-cp");
        cmd.add(classpath);
        cmd.add(mainClass);
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd);
    }

    /** target/classes and target/test-classes: what the tests themselves run from. */
    /** target/classes: the binding as the jar has it. */
    static Path mainClasses() {
        return Stream.of(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(e -> e.endsWith("classes") && !e.endsWith("test-classes")).map(Paths::get).findFirst().orElseThrow();
    }

    /** target/test-classes. */
    static Path testClasses() {
        return Stream.of(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(e -> e.endsWith("test-classes")).map(Paths::get).findFirst().orElseThrow();
    }

    static String classesDirs() {
        String cp = System.getProperty("java.class.path");
        return Stream.of(cp.split(File.pathSeparator))
                .filter(e -> e.endsWith("classes") || e.endsWith("test-classes"))
                .collect(Collectors.joining(File.pathSeparator));
    }

    static Result run(ProcessBuilder pb, Map<String, String> env, long timeoutS) throws Exception {
        pb.environment().putAll(env);
        pb.redirectErrorStream(true);
        Process p = pb.start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(timeoutS, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("child JVM did not finish in " + timeoutS + " s: " + pb.command());
        }
        return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8));
    }

    static final class Result {
        final int status;
        final String out;

        Result(int status, String out) {
            this.status = status;
            this.out = out;
        }

        @Override
        public String toString() {
            return "exit " + status + ", output:\n" + out;
        }
    }
}
