package io.cloudprofiler.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/** What the module's tests share: the log directory and the cloudprofiler tool that reads it. */
abstract class ToolTest {
    final String tool = System.getProperty("cloudprofiler.tool");
    final Path logDir = Path.of(System.getenv("CP_LOG_DIR"));

    List<Path> logFiles() throws IOException {
        if (!Files.isDirectory(logDir)) return List.of();
        try (Stream<Path> s = Files.list(logDir)) {
            return s.filter(p -> p.toString().endsWith(".cplog")).sorted().toList();
        }
    }

    void emptyLogDir() throws IOException {
        for (Path f : logFiles()) Files.delete(f);
    }

    /** Runs the tool; its standard output, or the test fails with its standard error. */
    String tool(String... args) throws IOException, InterruptedException {
        assertNotNull(tool, "the pom passes -Dcloudprofiler.tool");
        List<String> cmd = new ArrayList<>(List.of(tool));
        cmd.addAll(List.of(args));
        Path err = Files.createTempFile("cloudprofiler-tool", ".err");
        try {
            Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(p.waitFor(120, TimeUnit.SECONDS), String.join(" ", cmd) + ": timed out");
            assertEquals(0, p.exitValue(), String.join(" ", cmd) + " failed:\n" + Files.readString(err));
            return out;
        } finally {
            Files.deleteIfExists(err);
        }
    }

    /** A column of capacity.csv's whole-run row for an operator. */
    static String wholeRun(Path capacityCsv, String operator, String column) throws IOException {
        List<String> lines = Files.readAllLines(capacityCsv);
        List<String> cols = List.of(lines.get(0).split(","));
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(",", -1);
            if (f[cols.indexOf("level")].equals("operator") && f[cols.indexOf("window")].equals("-1")
                    && f[cols.indexOf("operator")].equals(operator)) {
                return f[cols.indexOf(column)];
            }
        }
        throw new AssertionError(capacityCsv + ": no whole-run row for operator " + operator);
    }

    static void deleteTree(Path dir) throws IOException {
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
        }
    }
}
