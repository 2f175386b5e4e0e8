package io.cloudprofiler.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * What the engine modules' tests share (bindings/flink and bindings/storm
 * add this directory to their test sources): the log directory (CP_LOG_DIR,
 * set by each pom), the cloudprofiler tool that reads it (the system
 * property cloudprofiler.tool), and the results of analyze.
 */
public final class Logs {
    private Logs() {}

    public static final Path LOG_DIR = Path.of(System.getenv("CP_LOG_DIR"));
    private static final Pattern CHANNEL = Pattern.compile("(?m)^channel:\\s+\\d+ \"([^\"]*)\"");

    public static List<Path> logFiles() throws IOException {
        if (!Files.isDirectory(LOG_DIR)) return List.of();
        try (Stream<Path> s = Files.list(LOG_DIR)) {
            return s.filter(p -> p.toString().endsWith(".cplog")).sorted().toList();
        }
    }

    public static void emptyLogDir() throws IOException {
        for (Path f : logFiles()) Files.delete(f);
    }

    /** Runs the tool; its standard output, or the test fails with its standard error. */
    public static String run(String... args) throws IOException, InterruptedException {
        String tool = System.getProperty("cloudprofiler.tool");
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

    /** Every channel in the log directory by name ("OP#TASK ROLE"), with its ids and how often each was logged (none for count channels). */
    public static Map<String, Map<Long, Integer>> channels() throws IOException, InterruptedException {
        Map<String, Map<Long, Integer>> all = new TreeMap<>();
        for (Path f : logFiles()) {
            Matcher m = CHANNEL.matcher(run("dump", f.toString()));
            assertTrue(m.find(), f + ": no channel line");
            Map<Long, Integer> ids = new HashMap<>();
            assertEquals(null, all.put(m.group(1), ids), "two files of channel " + m.group(1));
            if (m.group(1).endsWith(" count")) continue; // the service rate's counter: no ids
            for (String line : run("dump", "--csv", f.toString()).split("\n")) {
                if (line.isEmpty() || line.startsWith("tuple_id")) continue;
                ids.merge(Long.parseLong(line.substring(0, line.indexOf(','))), 1, Integer::sum);
            }
        }
        return all;
    }

    /** channels() with the tasks together: "OP ROLE" -> id -> times. */
    public static Map<String, Map<Long, Integer>> byOperator(Map<String, Map<Long, Integer>> channels) {
        Map<String, Map<Long, Integer>> ops = new TreeMap<>();
        channels.forEach((name, ids) -> {
            Map<Long, Integer> to = ops.computeIfAbsent(name.replaceFirst("#\\d+ ", " "), k -> new HashMap<>());
            ids.forEach((id, n) -> to.merge(id, n, Integer::sum));
        });
        return ops;
    }

    /** Runs {@code analyze --strict} on the log directory into target/cp-analysis/name (emptied first; kept to look at). */
    public static Path analyze(String name) throws IOException, InterruptedException {
        Path out = LOG_DIR.resolveSibling("cp-analysis").resolve(name);
        if (Files.exists(out)) {
            try (Stream<Path> s = Files.walk(out)) {
                for (Path p : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
            }
        }
        run("analyze", "--strict", "--quiet", "--logs", LOG_DIR.toString(), "--out", out.toString());
        return out;
    }

    /**
     * Every hop of summary.csv is in time order: min_s of no row below 0
     * (one node, one TSC, so exact). A negative hop is an out marked after
     * the hand-off, which the next task's mark can overtake.
     */
    public static void assertNoNegativeHop(Path analysis) throws IOException {
        List<String> lines = Files.readAllLines(analysis.resolve("summary.csv"));
        List<String> cols = List.of(lines.get(0).split(","));
        assertTrue(lines.size() > 1, "summary.csv has no row");
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(",", -1);
            double min = Double.parseDouble(f[cols.indexOf("min_s")]);
            assertTrue(min >= 0, "a negative hop: " + f[cols.indexOf("from")] + " -> " + f[cols.indexOf("to")] + ": min " + min + " s");
        }
    }

    /** A column of capacity.csv's whole-run row for an operator. */
    public static String wholeRun(Path capacityCsv, String operator, String column) throws IOException {
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
}
