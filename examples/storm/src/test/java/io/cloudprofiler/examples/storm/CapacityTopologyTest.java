package io.cloudprofiler.examples.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.cloudprofiler.AnalysisCsv;
import io.cloudprofiler.datagen.ObjectFactory;
import io.cloudprofiler.examples.Backlog;
import io.cloudprofiler.storm.MarkingState;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.tuple.Values;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * {@link CapacityTopology} (its score bolt spins {@link #SCORE_NANOS} per
 * tuple) on a LocalCluster, fed through the object factory at {@link #RATE}
 * of what the spin alone would allow, so that the score bolt is at or past
 * its capacity whatever else the machine runs; then {@code analyze}: the
 * capacity analysis names the score bolt as the bottleneck, and its capacity
 * lies within {@link #TOLERANCE} of what it departed per second while
 * backlogged, worked out of the same run's records (its in and out marks,
 * the count tasks' outs its hand-offs) by this test, apart from the
 * analysis. No rate is asserted against a measurement taken at another
 * time (gen maxrate's answer against a prediction: {@code make validate}).
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class CapacityTopologyTest {
    static final long SCORE_NANOS = 50_000;
    /** What the score bolt could do if nothing but the spin took time. */
    static final double NOMINAL = 1e9 / SCORE_NANOS;
    static final int THREADS = 2;
    /** The logged run's rate, a share of NOMINAL. */
    static final double RATE = 0.9;
    static final long LOGGED_SECONDS = 5;
    static final String TOPOLOGY = "cloudprofiler-capacity-test";
    /** capacity.csv's capacity against the score bolt's departures per second while backlogged. */
    static final double TOLERANCE = 0.10;
    static final String SCORE = CapacityTopology.SCORE;
    static final String[] COMPONENTS = {"spout", "count", SCORE, "sink"};
    static final String PREFIX = "[storm capacity]";

    Path tool, logDir, outDir;
    /** task ("count#3") -> role -> tuple id -> TSC */
    final Map<String, Map<String, Map<Long, Long>>> marks = new TreeMap<>();
    double hz;

    @BeforeAll
    @Timeout(600)
    @SuppressWarnings("try") // LocalCluster.close() throws Exception
    void measure() throws Exception {
        tool = Path.of(System.getProperty("cloudprofiler.tool", "../../build/cloudprofiler")).toAbsolutePath();
        assertTrue(Files.isExecutable(tool), tool + ": no tool (make build, or -Dcloudprofiler.tool=...)");
        String dir = System.getenv("CP_LOG_DIR");
        assertNotNull(dir, "Surefire sets CP_LOG_DIR (pom.xml)");
        Path cpLogDir = Path.of(dir);
        long t0 = System.nanoTime();
        LocalCluster.Builder builder = new LocalCluster.Builder()
                .withDaemonConf(Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS, 1);
        try (LocalCluster cluster = builder.build()) {
            System.out.printf(PREFIX + " LocalCluster up %.1f s%n", (System.nanoTime() - t0) / 1e9);
            // The run's directory (pom.xml: target/storm-runs/<time>/), beside cp-logs: its own,
            // so that the other tests find CP_LOG_DIR as they expect it.
            measureOnce(cluster, cpLogDir, cpLogDir.resolveSibling("capacity"), TOPOLOGY);
        }
    }

    /**
     * One measurement: a warm-up on the same topology without its marks
     * (JIT, the first buffers: gen send's ids restart with each run, so its
     * tuples must not be logged), killed; then the marked topology, one
     * logged run, its kill, and analyze over the logs moved to runDir.
     */
    void measureOnce(LocalCluster cluster, Path cpLogDir, Path runDir, String name) throws Exception {
        logDir = runDir.resolve("cp-logs");
        outDir = runDir.resolve("analysis");
        Files.createDirectories(logDir);
        FactorySpout.ERRORS.clear();
        marks.clear();
        long tUp = System.nanoTime();
        Set<Path> before = cplogs(cpLogDir);
        ObjectFactory<Values> f = submit(cluster, name + "-warm-up", false);
        try {
            run(List.of(tool.toString(), "gen", "send", "--to", "127.0.0.1:" + f.port(), "--synthetic", "--threads",
                    "" + THREADS, "--rate", "" + Math.round(NOMINAL / 4), "--duration", "3s"), 0, 3);
        } finally {
            kill(cluster, name + "-warm-up", f);
        }
        assertEquals(before, cplogs(cpLogDir), "the warm-up topology logged");
        long tMax = System.nanoTime();
        f = submit(cluster, name, true);
        try {
            runLogged("127.0.0.1:" + f.port());
        } finally {
            kill(cluster, name, f);
        }
        for (Path file : cplogs(cpLogDir)) {
            if (!before.contains(file)) Files.move(file, logDir.resolve(file.getFileName()));
        }
        System.out.printf(PREFIX + " topology up and warm-up %.1f s, marked topology up and logged run %.1f s%n",
                (tMax - tUp) / 1e9, (System.nanoTime() - tMax) / 1e9);
        assertEquals(List.of(), List.copyOf(FactorySpout.ERRORS), "the spout's marking failures");
        assertEquals(0, MarkingState.failures(), "marking failures (cloudprofiler-storm logs them instead of throwing)");
        long t1 = System.nanoTime();
        run(List.of(tool.toString(), "analyze", "--logs", logDir.toString(), "--out", outDir.toString(), "--no-durations"), 0);
        System.out.printf(PREFIX + " analyze %.1f s: %s%n", (System.nanoTime() - t1) / 1e9, outDir);
        readMarks();
    }

    /** The logged run: one gen send run. */
    void runLogged(String to) throws Exception {
        long rate = Math.round(NOMINAL * RATE), n = rate * LOGGED_SECONDS;
        // The warm-up's garbage is collected (else young-GC pauses of tens of ms fall
        // inside the score bolt's spins).
        long seen = IngestTopology.SinkBolt.SEEN.sum();
        System.gc();
        Thread.sleep(500);
        String out = run(List.of(tool.toString(), "gen", "send", "--to", to, "--synthetic", "--threads", "" + THREADS,
                "--rate", "" + rate, "--duration", LOGGED_SECONDS + "s"), 0, 3);
        System.out.print("[storm capacity] logged run: gen send --rate " + rate + " --duration " + LOGGED_SECONDS + "s\n" + out);
        assertTrue(out.contains("receiver: received " + n + ", lost 0"), out);
        waitFor("the sink to see the run's " + n + " tuples", IngestTopology.SinkBolt.SEEN::sum, seen + n, 60_000);
    }

    /** Submits the topology; its factory once both spout tasks are open. */
    static ObjectFactory<Values> submit(LocalCluster cluster, String name, boolean marks) throws Exception {
        cluster.submitTopology(name, CapacityTopology.config(), CapacityTopology.build("127.0.0.1", 0, SCORE_NANOS, marks));
        ObjectFactory<Values> f = FactorySpout.awaitFactory(CapacityTopology.SPOUTS, 60, TimeUnit.SECONDS);
        assertNotNull(f, name + ": the spouts did not open");
        return f;
    }

    /**
     * Kills the topology and waits until every task's close()/cleanup() has
     * closed its channels: the wrapped bolts' (the module's count of open
     * ones back at 0) and the spouts' (each closes its marks before it
     * releases the factory, which the last one closes).
     */
    static void kill(LocalCluster cluster, String name, ObjectFactory<Values> f) throws Exception {
        KillOptions kill = new KillOptions();
        kill.set_wait_secs(0);
        cluster.killTopologyWithOpts(name, kill);
        waitFor("close()/cleanup() of every task of " + name, () -> f.isClosed() && MarkingState.open() == 0 ? 1 : 0, 1, 60_000);
    }

    @Test
    void theScoreBoltIsTheSlowest() {
        Map<String, Double> rates = new TreeMap<>();
        for (String c : COMPONENTS) rates.put(c, serviceRate(c));
        double score = rates.get(SCORE);
        System.out.printf("[storm capacity] service rates from the marks (tuples / own service time, tasks together): %s%n", rates);
        for (String c : COMPONENTS) {
            if (!c.equals(SCORE)) assertTrue(rates.get(c) > 5 * score, c + " is not much faster than " + SCORE + ": " + rates);
        }
        assertTrue(score <= NOMINAL * 1.01, "score's service rate above 1 / its spin: " + score);
    }

    @Test
    void capacityCsvNamesTheBottleneckAndItsCapacityHolds() throws IOException {
        Path csv = outDir.resolve("capacity.csv");
        assertTrue(Files.exists(csv), "analyze wrote no capacity.csv");
        Map<String, String> bottleneck = bottleneckRow(csv);
        assertNotNull(bottleneck, "no operator row of the whole run is the bottleneck in " + csv + ":" + wholeRun(csv));
        assertEquals(SCORE, bottleneck.get("operator"), "the bottleneck, in " + csv + ":" + wholeRun(csv));
        double capacity = Double.parseDouble(bottleneck.get("capacity"));
        double lo = Double.parseDouble(bottleneck.get("capacity_low")), hi = Double.parseDouble(bottleneck.get("capacity_high"));
        double[] truth = backlogged(SCORE + "#", "count");
        System.out.printf("[storm capacity] %s: capacity %.0f/s [%.0f, %.0f], its departures per second while backlogged"
                + " %.0f/s (%.0f of %.0f visits backlogged): %+.1f%%, %s%n", SCORE, capacity, lo, hi, truth[0], truth[1],
                truth[2], 100 * (capacity / truth[0] - 1), lo <= truth[0] && truth[0] <= hi ? "covered" : "not covered");
        assertTrue(truth[1] > 1000, "too few backlogged visits of " + SCORE + ": " + truth[1]);
        assertTrue(Math.abs(capacity / truth[0] - 1) <= TOLERANCE, "capacity.csv says " + capacity
                + " tuples/s, the records " + truth[0]);
    }

    /**
     * A task's departures per second while backlogged, from its records:
     * its visits by their in, each departing at its out; a visit taken while
     * backlogged when its hand-off (the upstream tasks' out of the tuple)
     * came no later than the previous visit's departure. Returns the rate,
     * the backlogged visits and all visits.
     */
    double[] backlogged(String taskPrefix, String upstream) {
        Map<Long, Long> in = new HashMap<>(), dep = new HashMap<>(), hand = new HashMap<>();
        for (Map.Entry<String, Map<String, Map<Long, Long>>> e : marks.entrySet()) {
            if (e.getKey().startsWith(taskPrefix)) {
                in.putAll(e.getValue().get("in"));
                dep.putAll(e.getValue().get("out"));
            }
            if (e.getKey().startsWith(upstream + "#")) hand.putAll(e.getValue().get("out"));
        }
        return Backlog.departures(in, dep, hand, hz);
    }

    /**
     * capacity.csv's whole-run operator row marked as the bottleneck (null:
     * none; a file without capacity.csv: null), printing the whole-run
     * operator rows. Two bottleneck rows fail the test.
     */
    static Map<String, String> bottleneckRow(Path csv) throws IOException {
        if (!Files.exists(csv)) return null;
        Map<String, String> bottleneck = null;
        for (Map<String, String> r : AnalysisCsv.read(csv)) { // a note may be quoted, with commas in it
            if (!r.get("level").equals("operator")) continue;
            if (!r.get("window").equals("-1")) continue;
            if (!r.get("method").equals("in/out")) continue; // not the count channels' Beard & Chamberlain rows
            System.out.printf("[storm capacity] capacity.csv %-6s cost_us %s capacity %10s [%s, %s] load %s"
                    + " max_source_rate %s bottleneck %s%n", r.get("operator"), r.get("cost_us"), r.get("capacity"),
                    r.get("capacity_low"), r.get("capacity_high"), r.get("load"), r.get("max_source_rate"),
                    r.get("bottleneck"));
            if (r.get("bottleneck").equals("true")) {
                assertTrue(bottleneck == null, "two bottlenecks: " + bottleneck + " and " + r);
                bottleneck = r;
            }
        }
        return bottleneck;
    }

    /** capacity.csv's whole-run rows, operators and instances, for a failure's message: what analyze saw. */
    static String wholeRun(Path csv) throws IOException {
        StringBuilder b = new StringBuilder();
        for (Map<String, String> r : AnalysisCsv.read(csv)) {
            if (!r.get("window").equals("-1")) continue;
            b.append(String.format("%n  %-8s %-10s %-12s %-17s cost_us %s (own %s, hand-off %s) backlogged %s capacity %s"
                    + " max_source_rate %s bottleneck %s note %s", r.get("level"), r.get("operator"), r.get("instance"), r.get("method"),
                    r.get("cost_us"), r.get("own_us"), r.get("handoff_us"), r.get("backlogged"), r.get("capacity"),
                    r.get("max_source_rate"), r.get("bottleneck"), r.get("note")));
        }
        return b.toString();
    }

    // ---- the marks, from the raw records

    /** Tuples / own service time of a component's tasks together. */
    double serviceRate(String component) {
        long tuples = 0, cycles = 0;
        for (Map.Entry<String, Map<String, Map<Long, Long>>> e : marks.entrySet()) {
            if (!e.getKey().startsWith(component + "#")) continue;
            Map<Long, Long> out = e.getValue().get("out");
            for (Map.Entry<Long, Long> t : e.getValue().get("in").entrySet()) {
                Long o = out.get(t.getKey());
                if (o == null) continue;
                tuples++;
                cycles += o - t.getValue();
            }
        }
        assertTrue(tuples > 0, "no paired tuples of " + component + ": " + marks.keySet());
        return tuples / (cycles / hz);
    }

    /**
     * Reads every mark's records; each wrapped bolt task's count channel
     * (CP_SERVICERATE) must total what its in logged.
     */
    void readMarks() throws Exception {
        Pattern name = Pattern.compile("(?m)^channel:\\s+\\d+ \"([a-z]+)#(\\d+) (in|out|count)\"");
        Map<String, Long> counted = new TreeMap<>(); // task -> its count channel's total
        try (Stream<Path> s = Files.list(logDir)) {
            for (Path f : s.filter(p -> p.toString().endsWith(".cplog")).sorted().toList()) {
                String dump = run(List.of(tool.toString(), "dump", f.toString()), 0);
                Matcher m = name.matcher(dump);
                assertTrue(m.find(), "not a channel of the convention: " + f + "\n" + dump);
                assertTrue(dump.contains("dropped 0, holes 0"), f + ":\n" + dump);
                if (m.group(3).equals("count")) {
                    Matcher total = Pattern.compile("closed:.* total (\\d+),").matcher(dump);
                    assertTrue(dump.contains("handler:    SERVICERATE") && total.find(), f + ":\n" + dump);
                    counted.put(m.group(1) + "#" + m.group(2), Long.parseLong(total.group(1)));
                    continue;
                }
                Matcher hm = Pattern.compile("(?m)^tsc:\\s+([0-9.]+) GHz").matcher(dump);
                assertTrue(hm.find(), dump);
                hz = Double.parseDouble(hm.group(1)) * 1e9;
                List<String> lines = run(List.of(tool.toString(), "dump", "--csv", f.toString()), 0).lines().toList();
                assertEquals("tuple_id,tsc", lines.get(0), f.toString());
                Map<Long, Long> records = new HashMap<>();
                for (String line : lines.subList(1, lines.size())) {
                    int c = line.indexOf(',');
                    long id = Long.parseLong(line, 0, c, 10);
                    assertTrue(records.put(id, Long.parseUnsignedLong(line, c + 1, line.length(), 10)) == null,
                            f + ": tuple " + id + " twice");
                }
                String task = m.group(1) + "#" + m.group(2);
                assertTrue(marks.computeIfAbsent(task, k -> new HashMap<>()).put(m.group(3), records) == null,
                        "two files for " + task + " " + m.group(3));
            }
        }
        Map<String, Integer> tasks = new TreeMap<>();
        Map<String, Long> took = new TreeMap<>(); // bolt task -> its in records
        for (String t : marks.keySet()) {
            tasks.merge(t.substring(0, t.indexOf('#')), 1, Integer::sum);
            if (!t.startsWith("spout#")) took.put(t, (long) marks.get(t).get("in").size());
        }
        assertEquals(Map.of("spout", CapacityTopology.SPOUTS, "count", CapacityTopology.COUNTERS, SCORE, 1, "sink", 1),
                tasks, "tasks marked: " + marks.keySet());
        assertEquals(took, counted, "each bolt task's count channel total against its in records (the spouts have none)");
    }

    // ---- helpers

    static Set<Path> cplogs(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) return Set.of();
        try (Stream<Path> s = Files.list(dir)) {
            return new HashSet<>(s.filter(p -> p.toString().endsWith(".cplog")).toList());
        }
    }

    static void waitFor(String what, LongSupplier value, long target, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (value.getAsLong() < target) {
            if (System.currentTimeMillis() > deadline) {
                fail("timed out waiting for " + what + ": " + value.getAsLong() + " of " + target + "; errors "
                        + List.copyOf(FactorySpout.ERRORS) + ", marking failures " + MarkingState.failures());
            }
            Thread.sleep(20);
        }
    }

    record Result(int code, String out, String err) {}

    /** Runs cmd to its end (or 180 s): its exit code, stdout and stderr. */
    static Result exec(List<String> cmd) throws IOException, InterruptedException {
        Path err = Files.createTempFile(PrivateTmpDir.DIR, "tool", ".err");
        try {
            Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(180, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                fail(String.join(" ", cmd) + ": timed out");
            }
            return new Result(p.exitValue(), out, Files.readString(err));
        } finally {
            Files.deleteIfExists(err);
        }
    }

    /** Runs cmd; its stdout, failing the test with its stderr unless it exits with one of ok. */
    static String run(List<String> cmd, int... ok) throws IOException, InterruptedException {
        Result r = exec(cmd);
        for (int code : ok) {
            if (r.code == code) return r.out;
        }
        fail(String.join(" ", cmd) + " exited " + r.code + ":\n" + r.out + r.err);
        return r.out;
    }
}
