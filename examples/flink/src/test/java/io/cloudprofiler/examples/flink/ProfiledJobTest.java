package io.cloudprofiler.examples.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import io.cloudprofiler.testkit.Logs;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Runs {@link ProfiledJob} on a local MiniCluster (parallelism 2), then checks
 * its logs with the cloudprofiler tool: every file decodes, every tuple passed
 * every channel exactly once, each operator's count channels add up to the tuples, and
 * {@code analyze} reports each hop with the counts and extremes computed here
 * from the raw records.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ProfiledJobTest {
    static final long N = 200_000;
    static final int P = 2;
    /** Tuples per second (both source subtasks): a steady load, not a flood that measures Flink's queues. */
    static final double RATE = 100_000;
    /** Flink flushes a partly filled output buffer after this long (its default: 100 ms). */
    static final long BUFFER_TIMEOUT_MS = 1;

    /**
     * The tuple channels in pipeline order, as "OPERATOR ROLE" (the marking
     * convention's channel name without the "#SUBTASK"): {@link #name} makes
     * the name of subtask s's channel.
     */
    static final String[] ROLES = {"0-source in", "0-source out", "1-enrich in", "1-enrich out", "2-count in",
            "2-count out", "2-count sent", "3-sink in", "3-sink out"};
    /** Each operator's count channel: the counter behind the live service rate in Flink's metrics. */
    static final String[] OPERATORS = {"0-source", "1-enrich", "2-count", "3-sink"};

    Path logDir, outDir;
    String tool;
    long jobMillis, analyzeMillis;
    double hz;
    /** channel name -> its file, its dump summary */
    final Map<String, Path> files = new TreeMap<>();
    final Map<String, String> dumps = new TreeMap<>();
    /** per role: tsc[id], subtask[id] (-1: not seen) */
    long[][] tsc;
    byte[][] subtask;
    /** per tuple role: records read, per subtask */
    long[][] records;

    @BeforeAll
    void runJobAndAnalyze() throws Exception {
        tool = System.getProperty("cloudprofiler.tool");
        assertNotNull(tool, "the pom passes -Dcloudprofiler.tool");
        assertTrue(Files.isExecutable(Path.of(tool)), tool + " is not executable: run `make build` first");
        String dir = System.getenv("CP_LOG_DIR");
        assertNotNull(dir, "the pom sets CP_LOG_DIR for the test JVM");
        logDir = Path.of(dir);
        outDir = Path.of(System.getProperty("cloudprofiler.example.analysis"));
        emptyLogDir();
        deleteTree(outDir);

        ProfiledJob.Options opt = new ProfiledJob.Options();
        opt.tuples = N;
        opt.parallelism = P;
        opt.rate = RATE;
        opt.bufferTimeoutMs = BUFFER_TIMEOUT_MS;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(P, ProfiledJob.configuration());
        ProfiledJob.build(env, opt);
        long t0 = System.nanoTime();
        JobExecutionResult res = env.execute("cloudprofiler-flink-example-test");
        jobMillis = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("job (%s) on a MiniCluster: %d ms (net runtime %d ms)%n", opt, jobMillis, res.getNetRuntime());

        try (Stream<Path> s = Files.list(logDir)) {
            for (Path f : s.filter(p -> p.toString().endsWith(".cplog")).toList()) {
                String dump = tool("dump", f.toString());
                Matcher m = Pattern.compile("(?m)^channel:\\s+\\d+ \"([^\"]*)\"").matcher(dump);
                assertTrue(m.find(), dump);
                assertFalse(files.containsKey(m.group(1)), "two files for channel " + m.group(1));
                files.put(m.group(1), f);
                dumps.put(m.group(1), dump);
                Matcher hm = Pattern.compile("(?m)^tsc:\\s+([0-9.]+) GHz").matcher(dump);
                assertTrue(hm.find(), dump);
                double fileHz = Double.parseDouble(hm.group(1)) * 1e9;
                assertTrue(hz == 0 || hz == fileHz, "one process, one TSC frequency: " + hz + " vs " + fileHz);
                hz = fileHz;
            }
        }
        readTupleChannels();

        t0 = System.nanoTime();
        String out = tool("analyze", "--logs", logDir.toString(), "--out", outDir.toString());
        analyzeMillis = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("analyze: %d ms; %s%n", analyzeMillis,
                out.lines().filter(l -> l.startsWith("report:")).findFirst().orElse("no report line in its output"));
        System.out.println("---- " + outDir.resolve("summary.txt"));
        System.out.println(Files.readString(outDir.resolve("summary.txt")));
        printPerOperatorTable();
    }

    @Test
    void oneFilePerOperatorInstanceAndEveryFileDecodes() {
        TreeSet<String> want = new TreeSet<>();
        for (int s = 0; s < P; s++) {
            for (String r : ROLES) want.add(name(r, s));
            for (String op : OPERATORS) want.add(name(op + " count", s));
        }
        assertEquals(want, files.keySet());
        for (Map.Entry<String, String> e : dumps.entrySet()) {
            String d = e.getValue();
            // closed by close(), nothing dropped, no holes, no damage
            assertTrue(d.matches("(?s).*\\nclosed:\\s+\\S.* total \\d+, dropped 0, holes 0\\n.*"), e.getKey() + ":\n" + d);
            assertFalse(d.contains("DAMAGED") || d.contains("anomalies") || d.contains("truncated"), d);
        }
        // The tuple channels' records (dump --csv) are what their trailers counted.
        for (int r = 0; r < ROLES.length; r++) {
            for (int s = 0; s < P; s++) {
                String name = name(ROLES[r], s);
                assertEquals(closedTotal(name), records[r][s], name);
                assertTrue(dumps.get(name).contains("handler:    BUFFER_IDENTITY"), dumps.get(name));
                assertTrue(dumps.get(name).contains("format:     ZSTD_TSC"), dumps.get(name));
            }
        }
    }

    @Test
    void everyTupleCrossesEveryChannelExactlyOnce() {
        for (int r = 0; r < ROLES.length; r++) {
            long sum = 0;
            for (int s = 0; s < P; s++) {
                sum += records[r][s];
                assertTrue(records[r][s] > 0, name(ROLES[r], s) + " logged nothing");
            }
            assertEquals(N, sum, ROLES[r] + ": records over all subtasks");
            for (int id = 0; id < N; id++) {
                assertTrue(subtask[r][id] >= 0, ROLES[r] + ": tuple " + id + " missing");
            }
        }
        // Forward edges keep the subtask: source i -> enrich i, count i -> sink i;
        // inside an operator in, out and sent are the same instance.
        int[][] sameSubtask = {{0, 1}, {1, 2}, {2, 3}, {4, 5}, {5, 6}, {6, 7}, {7, 8}};
        for (int[] e : sameSubtask) {
            for (int id = 0; id < N; id++) {
                assertEquals(subtask[e[0]][id], subtask[e[1]][id], ROLES[e[0]] + " -> " + ROLES[e[1]] + " tuple " + id);
            }
        }
        // keyBy: every count subtask gets tuples from every enrich subtask, and one key's tuples one subtask.
        long[][] cross = new long[P][P];
        Map<Integer, Integer> keyOwner = new HashMap<>();
        for (int id = 0; id < N; id++) {
            cross[subtask[3][id]][subtask[4][id]]++;
            int key = (int) Long.remainderUnsigned(ProfiledJob.mix(id), new ProfiledJob.Options().keys);
            Integer prev = keyOwner.putIfAbsent(key, (int) subtask[4][id]);
            assertTrue(prev == null || prev == subtask[4][id], "key " + key + " on two count subtasks");
        }
        for (int a = 0; a < P; a++) {
            for (int b = 0; b < P; b++) {
                assertTrue(cross[a][b] > 0, "no tuple went from enrich " + a + " to count " + b + ": " + Arrays.deepToString(cross));
            }
        }
    }

    /**
     * Each marked instance's count channel (CP_SERVICERATE: every record it
     * took, in periods) holds what its in channel logged, period by period.
     */
    @Test
    void countChannelsTotalTheTuples() throws Exception {
        for (String op : OPERATORS) {
            int in = Arrays.asList(ROLES).indexOf(op + " in");
            long total = 0;
            for (int s = 0; s < P; s++) {
                String name = name(op + " count", s);
                String d = dumps.get(name);
                assertTrue(d.contains("handler:    SERVICERATE"), d);
                long t = closedTotal(name);
                assertEquals(records[in][s], t, name + " total vs " + name(ROLES[in], s));
                long periods = 0, counted = 0;
                for (String line : csvLines(tool("dump", "--csv", files.get(name).toString()), "period_end_tsc,count,skipped_periods")) {
                    String[] f = line.split(",");
                    counted += Long.parseLong(f[1]);
                    periods++;
                }
                assertEquals(t, counted, name + ": the periods' counts add up to the trailer's total");
                assertTrue(periods >= 1, name);
                total += t;
            }
            assertEquals(N, total, op + ": the count channels' totals");
        }
    }

    @Test
    void analyzeReportsEveryHopAsMeasuredFromTheRecords() throws Exception {
        List<String> lines = Files.readAllLines(outDir.resolve("summary.csv"));
        List<String> cols = List.of(lines.get(0).split(","));
        int kind = cols.indexOf("kind"), from = cols.indexOf("from"), to = cols.indexOf("to"), count = cols.indexOf("count"),
                min = cols.indexOf("min_s"), max = cols.indexOf("max_s"), errMax = cols.indexOf("error_max_s"),
                quant = cols.indexOf("quantiles");
        String[] ordered = {"min_s", "p25_s", "median_s", "p75_s", "p99_s", "max_s"};
        Map<String, Hop> want = expectedHops();
        Map<String, Long> perHop = new TreeMap<>();
        for (String line : lines.subList(1, lines.size())) {
            String[] f = line.split(",");
            String key = f[kind] + " " + channel(f[from]) + " -> " + channel(f[to]);
            Hop h = want.remove(key);
            assertNotNull(h, "unexpected row " + line + "; still expected: " + want.keySet());
            assertEquals(h.count, Long.parseLong(f[count]), key);
            // analyze's durations are TSC differences / the file's frequency: the same as ours
            assertClose(h.min / hz, Double.parseDouble(f[min]), key + " min");
            assertClose(h.max / hz, Double.parseDouble(f[max]), key + " max");
            // Ordered quantiles, none negative: every mark is logged before the
            // tuple is handed on, except sent, logged after collect returned.
            // Flink hands a buffer on when it is full or at the flush timeout,
            // so the next task's in is almost always later; but a count thread
            // preempted between collect and its sent mark can be overtaken by
            // the sink (a negative hop, the same in our numbers and analyze's).
            boolean afterHandOff = channel(f[from]).endsWith(" sent");
            double prev = Double.NEGATIVE_INFINITY;
            for (String c : ordered) {
                double v = Double.parseDouble(f[cols.indexOf(c)]);
                assertTrue((v >= 0 || (afterHandOff && !c.equals("median_s"))) && v >= prev,
                        key + ": " + c + " " + v + " after " + prev + " in " + line);
                prev = v;
            }
            assertTrue(prev * 1000 < jobMillis, key + ": max " + prev + " s longer than the job");
            // one node: its own counter, no translation, every bound 0
            assertEquals(0.0, Double.parseDouble(f[errMax]), key);
            assertEquals("exact", f[quant], key);
            perHop.merge(f[kind] + " " + role(channel(f[from])) + " -> " + role(channel(f[to])), h.count, Long::sum);
        }
        assertTrue(want.isEmpty(), "rows missing from summary.csv: " + want.keySet());
        // Every operator pair, subtasks summed: N tuples each.
        for (Map.Entry<String, Long> e : perHop.entrySet()) assertEquals(N, e.getValue(), e.getKey());
        assertEquals(ROLES.length, perHop.size(), perHop.toString());

        assertTrue(Files.size(outDir.resolve("report.html")) > 0);
        String text = Files.readString(outDir.resolve("summary.txt"));
        assertTrue(text.contains(" " + N + " tuples, "), text);
        assertTrue(text.contains((ROLES.length * N) + " tuple records"), text);
        // throughput.csv: the count channels' periods
        String tp = Files.readString(outDir.resolve("throughput.csv"));
        for (String op : OPERATORS) {
            for (int s = 0; s < P; s++) assertTrue(tp.contains(name(op + " count", s)), tp.lines().limit(3).toList().toString());
        }
    }

    // ---- expected rows, from the records

    static final class Hop {
        long count, min = Long.MAX_VALUE, max = Long.MIN_VALUE;

        void add(long d) {
            count++;
            min = Math.min(min, d);
            max = Math.max(max, d);
        }
    }

    /**
     * The rows analyze must write: each tuple's consecutive channels, and its
     * first to its last (end_to_end). Every channel is in this one JVM, so
     * analyze calls every hop "compute" (its "transfer" is between processes):
     * in -> out of one operator is the operator's work, out (or sent) -> in of
     * the next the hand-off between two tasks.
     */
    Map<String, Hop> expectedHops() {
        Map<String, Hop> m = new TreeMap<>();
        for (int id = 0; id < N; id++) {
            for (int r = 0; r + 1 < ROLES.length; r++) {
                hop(m, "compute", r, r + 1, id);
            }
            hop(m, "end_to_end", 0, ROLES.length - 1, id);
        }
        return m;
    }

    private void hop(Map<String, Hop> m, String kind, int r1, int r2, int id) {
        String key = kind + " " + name(ROLES[r1], subtask[r1][id]) + " -> " + name(ROLES[r2], subtask[r2][id]);
        m.computeIfAbsent(key, k -> new Hop()).add(tsc[r2][id] - tsc[r1][id]);
    }

    /** What the test prints: each hop, subtasks together, in microseconds. */
    void printPerOperatorTable() {
        System.out.println("per operator (subtasks together), microseconds, from the raw records:");
        System.out.printf("%-34s %8s %9s %9s %9s %9s %9s%n", "hop", "count", "min", "median", "p90", "p99", "max");
        for (int r = 0; r < ROLES.length; r++) {
            int a = r + 1 < ROLES.length ? r : 0, b = r + 1 < ROLES.length ? r + 1 : ROLES.length - 1;
            long[] d = new long[(int) N];
            for (int id = 0; id < N; id++) d[id] = tsc[b][id] - tsc[a][id];
            Arrays.sort(d);
            String what = a == 0 && b == ROLES.length - 1 ? "  (end to end)"
                    : operator(ROLES[a]).equals(operator(ROLES[b])) ? "  (in the operator)" : "  (hand-off)";
            System.out.printf("%-34s %8d %9.3f %9.3f %9.3f %9.3f %9.3f%s%n", ROLES[a] + " -> " + ROLES[b], N,
                    us(d[0]), us(d[d.length / 2]), us(d[(int) (d.length * 0.9)]), us(d[(int) (d.length * 0.99)]),
                    us(d[d.length - 1]), what);
        }
    }

    private double us(long cycles) {
        return cycles / hz * 1e6;
    }

    // ---- reading the logs

    void readTupleChannels() throws Exception {
        tsc = new long[ROLES.length][(int) N];
        subtask = new byte[ROLES.length][(int) N];
        records = new long[ROLES.length][P];
        for (int r = 0; r < ROLES.length; r++) {
            Arrays.fill(subtask[r], (byte) -1);
            for (int s = 0; s < P; s++) {
                String name = name(ROLES[r], s);
                Path f = files.get(name);
                assertNotNull(f, "no file for channel " + name + "; files: " + files.keySet());
                for (String line : csvLines(tool("dump", "--csv", f.toString()), "tuple_id,tsc")) {
                    int comma = line.indexOf(',');
                    long id = Long.parseLong(line, 0, comma, 10);
                    long t = Long.parseUnsignedLong(line, comma + 1, line.length(), 10);
                    records[r][s]++;
                    if (id < 0 || id >= N) fail(name + ": tuple id " + id + " was never emitted");
                    if (subtask[r][(int) id] >= 0) fail(name + ": tuple " + id + " twice in " + ROLES[r] + " (subtasks together)");
                    subtask[r][(int) id] = (byte) s;
                    tsc[r][(int) id] = t;
                }
            }
        }
    }

    long closedTotal(String name) {
        Matcher m = Pattern.compile("(?m)^closed:.* total (\\d+),").matcher(dumps.get(name));
        assertTrue(m.find(), name + ": no trailer:\n" + dumps.get(name));
        return Long.parseLong(m.group(1));
    }

    static List<String> csvLines(String out, String header) {
        List<String> lines = new ArrayList<>(out.lines().filter(l -> !l.isEmpty()).toList());
        assertFalse(lines.isEmpty(), "no output");
        assertEquals(header, lines.remove(0));
        return lines;
    }

    /** "host/1-enrich#0 out" -> "1-enrich#0 out" (analyze labels channels node/name). */
    static String channel(String label) {
        return label.substring(label.lastIndexOf('/') + 1);
    }

    /** "1-enrich#0 out" -> "1-enrich out": the role, subtasks together. */
    static String role(String channel) {
        int hash = channel.lastIndexOf('#'), space = channel.lastIndexOf(' ');
        return channel.substring(0, hash) + channel.substring(space);
    }

    /** ("1-enrich out", 0) -> "1-enrich#0 out": the marking convention's OPERATOR#SUBTASK ROLE. */
    static String name(String role, int subtask) {
        int space = role.lastIndexOf(' ');
        return role.substring(0, space) + "#" + subtask + role.substring(space);
    }

    /** "1-enrich out" -> "1-enrich". */
    static String operator(String role) {
        return role.substring(0, role.lastIndexOf(' '));
    }

    static void assertClose(double want, double got, String what) {
        assertTrue(Math.abs(want - got) <= 1e-6 * Math.abs(want) + 1e-12, what + ": want " + want + " got " + got);
    }

    /** Runs the tool; its stdout, failing the test with its stderr if it fails. */
    String tool(String... args) throws IOException, InterruptedException {
        return Logs.run(args);
    }

    /** Removes earlier runs' logs (only log files: CP_LOG_DIR may have been pointed elsewhere). */
    void emptyLogDir() throws IOException {
        if (!Files.isDirectory(logDir)) return;
        try (Stream<Path> s = Files.list(logDir)) {
            for (Path f : s.toList()) {
                String n = f.getFileName().toString();
                if (n.endsWith(".cplog") || n.endsWith(".cplog.txt")) Files.delete(f);
            }
        }
    }

    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) return;
        assertTrue(dir.toAbsolutePath().toString().contains("/target/"), "not deleting " + dir + ": not under target/");
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
        }
    }
}
