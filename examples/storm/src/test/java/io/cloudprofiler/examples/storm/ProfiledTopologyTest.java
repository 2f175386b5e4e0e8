package io.cloudprofiler.examples.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.storm.MarkingState;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.KillOptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Runs the profiled topology (cloudprofiler-storm: the bolts wrapped, the
 * spout marked by the hook) on an in-process LocalCluster until the sink has
 * seen every tuple, kills it, and checks what the channels wrote: every file
 * decodes with the cloudprofiler tool, every tuple id is logged exactly once
 * where it should be, each bolt task's count channel totals what it took,
 * and `cloudprofiler analyze` times every bolt and every hop between
 * executors.
 */
class ProfiledTopologyTest {
    static final long N = 100_000L;
    static final String TOPOLOGY = "cloudprofiler-storm-example";
    /**
     * The marking convention's OPERATOR#INSTANCE ROLE (the component id the
     * operator, Storm's task id the instance); count: a wrapped bolt's
     * counter of the tuples it took (CP_SERVICERATE: its live service rate).
     */
    static final Pattern CHANNEL = Pattern.compile("(spout|transform|keyed|sink)#(\\d+) (in|out|count)");
    static final List<String> BOLTS = List.of("transform", "keyed", "sink");

    /** One decoded channel file. */
    record Log(Path file, String name, String component, int task, String point, String info, long[] ids,
               List<long[]> counters) {}

    /** One row of analyze's summary.csv (seconds), channels by name. */
    record Row(String kind, String from, String to, long count, double min, double median, double p99, double max,
               double errorMax) {}

    @Test
    @Timeout(300)
    void everyTupleLoggedOnceAndEveryBoltTimed() throws Exception {
        String dir = System.getenv("CP_LOG_DIR");
        assertNotNull(dir, "Surefire sets CP_LOG_DIR (pom.xml)");
        Path logDir = Path.of(dir);
        Path tool = Path.of(System.getProperty("cloudprofiler.tool", "../../build/cloudprofiler")).toAbsolutePath();
        Path outDir = Path.of(System.getProperty("storm.example.analysis.dir", logDir.resolveSibling("analysis").toString()));
        assertTrue(Files.isExecutable(tool), tool + ": no tool (make build, or -Dcloudprofiler.tool=...)");
        // A fresh directory per run (pom.xml: target/storm-runs/<time>/): runs
        // more than an hour old are removed, the last hour's kept to look at.
        pruneOldRuns(logDir.getParent());
        if (Files.exists(logDir)) {
            try (Stream<Path> s = Files.list(logDir)) {
                assertFalse(s.findAny().isPresent(), logDir + " is not empty");
            }
        }
        Files.createDirectories(logDir);
        System.out.println("[storm] CP_LOG_DIR=" + logDir);

        long t0 = System.nanoTime();
        runTopology();
        long tRun = System.nanoTime();
        assertTrue(CloudProfiler.isAvailable(), () -> "binding not loaded: " + CloudProfiler.loadError());
        System.out.println("[storm] library " + CloudProfiler.libraryPath());

        // What Storm did: exactly N tuples, all acked, none failed (so none replayed).
        assertEquals(0, MarkingState.failures(), "marking failures (cloudprofiler-storm logs them instead of throwing)");
        assertEquals(N, IdSpout.EMITTED.get(), "spout emitted");
        assertEquals(0, IdSpout.FAILED.get(), "failed tuples: each would be replayed and logged twice");
        assertEquals(N, IdSpout.ACKED.get(), "acked tuple trees");
        assertEquals(N, PlainTopology.SinkBolt.SEEN.get(), "tuples at the sink");

        // Every file decodes, was closed by cleanup() (the hook's and the
        // wrappers', not the shutdown hook), lost nothing: one file per task
        // and role.
        List<Log> logs = new ArrayList<>();
        try (Stream<Path> files = Files.list(logDir)) {
            for (Path f : files.sorted().toList()) logs.add(decode(tool, f));
        }
        Map<String, List<Log>> byPoint = new TreeMap<>();
        for (Log l : logs) byPoint.computeIfAbsent(l.component + " " + l.point, k -> new ArrayList<>()).add(l);
        int p = PlainTopology.PARALLELISM;
        assertEquals(Map.of("spout out", 1, "transform in", p, "transform out", p, "transform count", p, "keyed in", p,
                        "keyed out", p, "keyed count", p, "sink in", 1, "sink out", 1, "sink count", 1),
                byPoint.entrySet().stream().collect(Collectors.toMap(Map.Entry::getKey, e -> e.getValue().size())),
                "channel files: " + logs.stream().map(Log::name).toList());
        for (Log l : logs) {
            assertTrue(l.info.contains("closed:     close at"), l.file + " was not closed by cleanup():\n" + l.info);
            assertTrue(l.info.contains("dropped 0, holes 0"), l.file + ":\n" + l.info);
            for (String bad : List.of("DAMAGED", "anomalies", "truncated")) {
                assertFalse(l.info.contains(bad), l.file + ":\n" + l.info);
            }
        }

        // The spout (its out, marked by the hook at each emit) logged ids
        // FIRST_ID .. FIRST_ID+N-1, once each, in order.
        long[] emitted = byPoint.get("spout out").get(0).ids;
        long[] expected = new long[(int) N];
        Arrays.setAll(expected, i -> IdSpout.FIRST_ID + i);
        assertTrue(Arrays.equals(expected, emitted), "spout emit ids are not FIRST_ID.. in order (" + emitted.length + " ids)");
        Set<Long> spoutIds = new HashSet<>((int) (2 * N));
        for (long id : emitted) spoutIds.add(id);

        // Each bolt: a task's out ids are its in ids in the same order; over
        // its tasks every id exactly once. taskOf: which task of the bolt had the id.
        Map<String, Map<Long, Integer>> taskOf = new HashMap<>();
        for (String bolt : BOLTS) {
            Map<Long, Integer> where = new HashMap<>((int) (2 * N));
            for (Log in : byPoint.get(bolt + " in")) {
                Log out = byPoint.get(bolt + " out").stream().filter(l -> l.task == in.task).findFirst().orElseThrow();
                assertTrue(Arrays.equals(in.ids, out.ids), bolt + " task " + in.task + ": out ids differ from in ids");
                assertTrue(in.ids.length > 0, bolt + " task " + in.task + " saw no tuple");
                for (long id : in.ids) {
                    assertTrue(spoutIds.contains(id), bolt + " task " + in.task + ": id " + id + " has no spout record");
                    Integer before = where.put(id, in.task);
                    if (before != null) fail(bolt + ": id " + id + " logged by tasks " + before + " and " + in.task);
                }
            }
            assertEquals(N, where.size(), bolt + ": distinct ids over its tasks");
            taskOf.put(bolt, where);
        }
        // fieldsGrouping: a key's tuples all went to one keyed task; every
        // transform task sent to every keyed task (tuples cross executors).
        Map<String, Integer> keyTask = new HashMap<>();
        Map<List<Integer>, Long> crossing = new TreeMap<>(Comparator.comparing((List<Integer> l) -> l.get(0)).thenComparing(l -> l.get(1)));
        for (long id : emitted) {
            int k = taskOf.get("keyed").get(id);
            Integer was = keyTask.putIfAbsent(IdSpout.key(id, PlainTopology.KEYS), k);
            assertTrue(was == null || was == k, "key " + IdSpout.key(id, PlainTopology.KEYS) + " went to keyed tasks " + was + " and " + k);
            crossing.merge(List.of(taskOf.get("transform").get(id), k), 1L, Long::sum);
        }
        System.out.println("[storm] tuples per (transform task, keyed task): " + crossing);
        assertEquals(p * p, crossing.size(), "transform -> keyed task pairs used");

        // Each bolt task's count channel (CP_SERVICERATE, behind its live
        // metrics): its total is what the task's in logged, and so is the sum
        // of its periods; over a bolt's tasks, N.
        Map<String, Long> counted = new TreeMap<>(); // count channel -> its total
        for (String bolt : BOLTS) {
            long sum = 0;
            for (Log count : byPoint.get(bolt + " count")) {
                assertTrue(count.info.contains("handler:    SERVICERATE"), count.info);
                Matcher total = Pattern.compile("closed:.* total (\\d+),").matcher(count.info);
                assertTrue(total.find(), "no total on the count channel's closed: line:\n" + count.info);
                long t = Long.parseLong(total.group(1));
                Log in = byPoint.get(bolt + " in").stream().filter(l -> l.task == count.task).findFirst().orElseThrow();
                assertEquals(in.ids.length, t, count.name + ": total vs " + in.name);
                assertEquals(t, count.counters.stream().mapToLong(r -> r[1]).sum(), count.name + ": the sum of its periods");
                counted.put(count.name, t);
                sum += t;
            }
            assertEquals(N, sum, bolt + ": its count channels' totals");
        }
        long tDecoded = System.nanoTime();

        // analyze: every log from one node, so no --rounds; bounds are 0.
        ToolResult an = run(tool, "analyze", "--logs", logDir.toString(), "--out", outDir.toString(), "--no-durations");
        assertEquals(0, an.code, "analyze failed:\n" + an.out);
        String summaryTxt = Files.readString(outDir.resolve("summary.txt"));
        System.out.println("[storm] cloudprofiler analyze --logs " + logDir + " --out " + outDir + "\n" + summaryTxt);
        List<Row> rows = readSummary(outDir.resolve("summary.csv"));
        checkSummary(rows, byPoint, taskOf);
        checkThroughput(outDir.resolve("throughput.csv"), counted);
        long tDone = System.nanoTime();
        System.out.printf("[storm] topology %.1f s (LocalCluster start to close), decode and checks %.1f s, analyze and checks %.1f s%n",
                secs(tRun - t0), secs(tDecoded - tRun), secs(tDone - tDecoded));
    }

    /** Starts a LocalCluster, runs the topology until the sink has seen N and the spout N acks, kills it, closes the cluster. */
    @SuppressWarnings("try") // LocalCluster.close() throws Exception, InterruptedException among them: fine here
    private static void runTopology() throws Exception {
        IdSpout.reset();
        PlainTopology.SinkBolt.SEEN.set(0);
        long t0 = System.nanoTime();
        // The supervisor sleeps supervisor.worker.shutdown.sleep.secs (3) after
        // a kill even in local mode: 1 s makes close() 2 s faster.
        LocalCluster.Builder builder = new LocalCluster.Builder()
                .withDaemonConf(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, true)
                .withDaemonConf(Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS, 1);
        try (LocalCluster cluster = builder.build()) {
            long tStarted = System.nanoTime();
            cluster.submitTopology(TOPOLOGY, ProfiledTopology.config(), ProfiledTopology.build(N));
            long tSubmitted = System.nanoTime();
            waitFor("the sink to see N tuples", PlainTopology.SinkBolt.SEEN::get, N, 180_000);
            waitFor("the spout to get N acks", IdSpout.ACKED::get, N, 60_000);
            long tDone = System.nanoTime();
            KillOptions kill = new KillOptions();
            kill.set_wait_secs(0); // the default waits topology.message.timeout.secs
            cluster.killTopologyWithOpts(TOPOLOGY, kill);
            // The kill is asynchronous: wait until every task's cleanup has
            // closed its channels (the wrappers' and the hook's).
            waitFor("the cleanup of every marked task", () -> MarkingState.open() == 0 ? 1 : 0, 1, 60_000);
            long tKilled = System.nanoTime();
            System.out.printf("[storm] LocalCluster start %.1f s, submit %.1f s, %d tuples through %.1f s, kill to cleanup %.1f s%n",
                    secs(tStarted - t0), secs(tSubmitted - tStarted), N, secs(tDone - tSubmitted), secs(tKilled - tDone));
        }
    }

    /** The summary.csv rows analyze must write, and their counts and values. */
    private static void checkSummary(List<Row> rows, Map<String, List<Log>> byPoint, Map<String, Map<Long, Integer>> taskOf) {
        String spoutOut = byPoint.get("spout out").get(0).name;
        String sinkIn = byPoint.get("sink in").get(0).name, sinkOut = byPoint.get("sink out").get(0).name;
        // Every hop of a tuple: pair -> how many tuples took it, from the logs themselves.
        Map<List<String>, Long> hops = new HashMap<>();
        Set<String> withinExecutor = new TreeSet<>(); // in -> out of one task (a bolt's own work)
        for (String bolt : BOLTS) {
            for (Log in : byPoint.get(bolt + " in")) {
                String out = bolt + "#" + in.task + " out";
                hops.put(List.of(in.name, out), (long) in.ids.length);
                withinExecutor.add(in.name + " -> " + out);
            }
        }
        for (long id = IdSpout.FIRST_ID; id < IdSpout.FIRST_ID + N; id++) {
            int t = taskOf.get("transform").get(id), k = taskOf.get("keyed").get(id);
            hops.merge(List.of(spoutOut, "transform#" + t + " in"), 1L, Long::sum);
            hops.merge(List.of("transform#" + t + " out", "keyed#" + k + " in"), 1L, Long::sum);
            hops.merge(List.of("keyed#" + k + " out", sinkIn), 1L, Long::sum);
        }
        // All channels are in one process (the LocalCluster's JVM), and analyze
        // calls a hop between two channels of one process "compute": the hops
        // between executors are compute rows too, and there are no transfer rows.
        Map<String, Long> want = new TreeMap<>();
        hops.forEach((p, n) -> want.put("compute " + p.get(0) + " -> " + p.get(1), n));
        want.put("end_to_end " + spoutOut + " -> " + sinkOut, N);
        Map<String, Long> got = new TreeMap<>();
        for (Row r : rows) got.put(r.kind + " " + r.from + " -> " + r.to, r.count);
        assertEquals(want, got, "summary.csv rows (kind from -> to = count)");

        double e2eMinFloor = 0, e2eMaxCeil = 0;
        Map<String, double[]> stage = new TreeMap<>(); // stage -> min over its rows' min, max over their max
        for (Row r : rows) {
            String what = r.kind + " " + r.from + " -> " + r.to;
            assertEquals(0.0, r.errorMax, what + ": one node, so every bound is 0");
            assertTrue(r.min >= 0, what + ": negative duration " + r.min + " s");
            assertTrue(r.min <= r.median && r.median <= r.p99 && r.p99 <= r.max, what + ": quantiles out of order");
            assertTrue(r.median < 1.0, what + ": median " + r.median + " s");
            assertTrue(r.max < 120, what + ": max " + r.max + " s");
            if (r.kind.equals("compute")) {
                String s = r.from.replaceAll("#\\d+ ", " ") + " -> " + r.to.replaceAll("#\\d+ ", " ");
                double[] mm = stage.computeIfAbsent(s, k -> new double[] {Double.MAX_VALUE, 0});
                mm[0] = Math.min(mm[0], r.min);
                mm[1] = Math.max(mm[1], r.max);
            }
        }
        assertEquals(6, stage.size(), "stages (3 bolts' own work, 3 hops): " + stage.keySet());
        for (double[] mm : stage.values()) {
            e2eMinFloor += mm[0];
            e2eMaxCeil += mm[1];
        }
        // A tuple's end-to-end duration is the sum of its hops.
        Row e2e = rows.stream().filter(r -> r.kind.equals("end_to_end")).findFirst().orElseThrow();
        assertTrue(e2e.min >= e2eMinFloor - 1e-9, "end-to-end min " + e2e.min + " < sum of the stages' minima " + e2eMinFloor);
        assertTrue(e2e.max <= e2eMaxCeil + 1e-9, "end-to-end max " + e2e.max + " > sum of the stages' maxima " + e2eMaxCeil);
        // Medians, per kind of hop, for the report.
        for (Row r : rows) {
            String kind = withinExecutor.contains(r.from + " -> " + r.to) ? "own" : r.kind.equals("end_to_end") ? "e2e" : "hop";
            System.out.printf("[storm] %-4s %-20s -> %-20s %7d  median %9.1f us  p99 %9.1f us  max %10.1f us%n",
                    kind, r.from, r.to, r.count, r.median * 1e6, r.p99 * 1e6, r.max * 1e6);
        }
    }

    /** throughput.csv: the count channels' periods, each channel's adding up to its total. */
    private static void checkThroughput(Path csv, Map<String, Long> totals) throws IOException {
        List<String> lines = Files.readAllLines(csv);
        assertEquals("node,channel,period_end_s,period_s,count,tuples_per_s", lines.get(0));
        Map<String, Long> sums = new TreeMap<>();
        double peak = 0;
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(",");
            sums.merge(f[1], Long.parseLong(f[4]), Long::sum);
            if (f[1].startsWith("sink#")) peak = Math.max(peak, Double.parseDouble(f[5]));
        }
        assertEquals(totals, sums, "throughput.csv: tuples over every period, per count channel");
        System.out.printf("[storm] throughput.csv: %d periods, peak %.0f tuples/s at the sink%n", lines.size() - 1, peak);
        assertTrue(peak > 0);
    }

    // ---- the tool

    record ToolResult(int code, String out) {}

    private static ToolResult run(Path tool, String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(tool.toString());
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out;
        try (InputStream in = p.getInputStream()) {
            out = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail(cmd + ": timed out");
        }
        return new ToolResult(p.exitValue(), out);
    }

    private static Log decode(Path tool, Path file) throws IOException, InterruptedException {
        ToolResult info = run(tool, "dump", file.toString());
        assertEquals(0, info.code, "dump " + file + ":\n" + info.out);
        Matcher m = Pattern.compile("channel:\\s+\\d+ \"(.*)\" \\(host").matcher(info.out);
        assertTrue(m.find(), "no channel line:\n" + info.out);
        String name = m.group(1);
        Matcher c = CHANNEL.matcher(name);
        assertTrue(c.matches(), file + ": unexpected channel " + name);
        ToolResult csv = run(tool, "dump", "--csv", file.toString());
        assertEquals(0, csv.code, "dump --csv " + file + ":\n" + csv.out.lines().limit(5).toList());
        List<String> lines = csv.out.lines().toList();
        boolean isCounter = c.group(3).equals("count");
        assertEquals(isCounter ? "period_end_tsc,count,skipped_periods" : "tuple_id,tsc", lines.get(0), file + ": CSV header");
        long[] ids = new long[lines.size() - 1];
        List<long[]> counters = new ArrayList<>();
        for (int i = 1; i < lines.size(); i++) {
            String[] f = lines.get(i).split(",");
            if (isCounter) {
                counters.add(new long[] {Long.parseUnsignedLong(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2])});
            } else {
                ids[i - 1] = Long.parseLong(f[0]);
            }
        }
        Matcher records = Pattern.compile("records:\\s+(\\d+)").matcher(info.out);
        assertTrue(records.find(), info.out);
        assertEquals(Long.parseLong(records.group(1)), lines.size() - 1, file + ": CSV rows vs the records: line");
        return new Log(file, name, c.group(1), Integer.parseInt(c.group(2)), c.group(3), info.out,
                isCounter ? new long[0] : ids, counters);
    }

    private static List<Row> readSummary(Path csv) throws IOException {
        List<String> lines = Files.readAllLines(csv);
        List<String> head = List.of(lines.get(0).split(","));
        List<Row> rows = new ArrayList<>();
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(","); // no field here needs quoting: names are [a-z0-9#- ] (no leading space), labels node/name
            assertEquals(head.size(), f.length, line);
            java.util.function.ToDoubleFunction<String> d = col -> Double.parseDouble(f[head.indexOf(col)]);
            rows.add(new Row(f[head.indexOf("kind")], name(f[head.indexOf("from")]), name(f[head.indexOf("to")]),
                    Long.parseLong(f[head.indexOf("count")]), d.applyAsDouble("min_s"), d.applyAsDouble("median_s"),
                    d.applyAsDouble("p99_s"), d.applyAsDouble("max_s"), d.applyAsDouble("error_max_s")));
        }
        return rows;
    }

    /** "node/name" -> name. */
    private static String name(String label) {
        return label.substring(label.lastIndexOf('/') + 1);
    }

    // ---- helpers

    private static void waitFor(String what, LongSupplier value, long target, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (value.getAsLong() < target) {
            if (System.currentTimeMillis() > deadline) {
                fail("timed out waiting for " + what + ": " + value.getAsLong() + " of " + target
                        + "; marking failures " + MarkingState.failures() + ", failed " + IdSpout.FAILED.get());
            }
            Thread.sleep(20);
        }
    }

    /** Deletes the sibling run directories of runDir last modified over an hour ago. */
    private static void pruneOldRuns(Path runDir) throws IOException {
        Path runs = runDir.getParent();
        if (runs == null || !Files.isDirectory(runs)) return;
        long cutoff = System.currentTimeMillis() - TimeUnit.HOURS.toMillis(1);
        try (Stream<Path> s = Files.list(runs)) {
            for (Path old : s.filter(p -> !p.equals(runDir)).toList()) {
                if (Files.getLastModifiedTime(old).toMillis() < cutoff) deleteTree(old);
            }
        }
    }

    private static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path x : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(x);
        }
    }

    private static double secs(long nanos) {
        return nanos / 1e9;
    }
}
