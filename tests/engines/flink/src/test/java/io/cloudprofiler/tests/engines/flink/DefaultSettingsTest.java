package io.cloudprofiler.tests.engines.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.cloudprofiler.AnalysisCsv;
import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.tests.engines.flink.FlinkRest.Snapshot;
import io.cloudprofiler.tests.engines.flink.Truth.Departures;
import io.cloudprofiler.tests.engines.flink.Truth.Probe;
import io.cloudprofiler.tests.engines.flink.Truth.Split;
import io.cloudprofiler.tests.engines.flink.Truth.Stats;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.JobStatus;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.runtime.jobmaster.JobResult;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 43's test for Flink ("How we know it works"): {@link HashJob} in
 * Flink's default settings (100 ms output-buffer timeout, chaining on,
 * default network buffers) on one MiniCluster, three runs, each its own job:
 *
 * <ol>
 * <li>(a) unthrottled: 2-hash saturated;
 * <li>(b) offered twice the throughput (a) carried: 2-hash overloaded;
 * <li>(c) offered 0.35 of it: 2-hash busy about a third of the time.
 * </ol>
 *
 * Each run first runs the same job, at the same rate, as a warm-up (JIT,
 * the first buffers) and cancels it after a few seconds; its channel files
 * are deleted unread (the binding has no switch to pause marks within a
 * job). Then the logged job: a bounded source of about {@link #LOGGED_S} s
 * of lines, so the job ends by itself once every record has gone through,
 * and the logged range is its whole life, from the first line to the last
 * record hashed. Its channel files go to a directory of the run's, and
 * {@code cloudprofiler analyze --no-durations} reads them.
 *
 * <p>Over the same range, side by side, for 2-hash's subtasks and the
 * operator:
 * <ul>
 * <li><b>ours</b>: capacity.csv's whole-run rows (capacity, load,
 *     backlogged, note) and the bottleneck it and summary.txt name;
 * <li><b>TRUE CAPACITY (split)</b> ({@link Truth}, the truth every ratio
 *     is taken against): from the times 2-hash's function itself logs as
 *     each record's processing ends (never from the marks), the gaps
 *     between consecutive departures in which the sampler never saw the
 *     task thread parked: their number over their sum. The operator's: the
 *     subtasks' sum, and the skew-aware figure capacity.csv's operator row
 *     stands for (the smallest capacity over share of the departures);
 * <li>two secondary truths, beside it: G = {@link #G_MS} ms (gaps below G
 *     counted, the last round's headline) and the thread-state truth
 *     (records finished in the sampler's intervals RUNNABLE at both ends);
 * <li><b>Flink's</b> ({@link FlinkRest}): numRecordsIn over
 *     accumulateBusyTimeMs of each subtask from its REST API, between the
 *     first and the last fresh snapshot of its life (their true times placed
 *     by the truth's counters), against the split truth over that same
 *     range (f/t');
 * <li><b>our live gauge</b> {@code 2-hash.cloudprofiler.capacity}, read
 *     through the same REST API: each subtask's last reading before the job
 *     ended, against the split truth over the span it measured (1 to 1.5
 *     s; the truth over the {@link #GAUGE_SPAN_NS} ns before it beside), and
 *     against analyze's whole-run capacity.
 * </ul>
 *
 * The checks are issue 43's acceptance, on by default; each failure names
 * the run, the subtask and the numbers: see the tests below.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class DefaultSettingsTest {
    static final int P = 2;
    /** The logged range's length, about (the source is bounded by records, not time). */
    static final double LOGGED_S = 6;
    /**
     * The warm-up, from its first record hashed (a job takes 0.1-2 s to start
     * here, depending on the machine's load): long enough to measure what
     * the job carries over its last 2 s.
     */
    static final long WARMUP_UNTHROTTLED_MS = 3000, WARMUP_MS = 2500, WARMUP_MEASURED_MS = 2000;
    /** The warm-up job's source: more lines than it can make before it is cancelled. */
    static final long WARMUP_RECORDS = 1L << 40;
    /** Offered rates of (b) and (c), as shares of what (a) carried. */
    static final double OVERLOAD = 2.0, LIGHT = 0.35;
    /** If (a) carried nothing measurable (it then fails its checks anyway): the issue's rates. */
    static final double FALLBACK_THROUGHPUT = 12_500;
    /** Issue 43: each capacity capacity.csv prints within this share of the split truth, in every run. */
    static final double TOLERANCE = 0.10;
    /**
     * Ours counts as "at least as close to the truth as Flink's" when it is
     * within this share of the truth, whatever Flink's is. At saturation
     * both are within a percent or two of the truth, and which of the two
     * is the closer is then a coin flip that must not fail the test.
     */
    static final double CLOSE_ENOUGH = 0.02;
    /**
     * The live gauge against the split truth over the span it measured:
     * looser than analyze's 10% because the gauge sees a second or so (a
     * dozen of run (c)'s bursts) and the span's ends are placed to about a
     * millisecond.
     */
    static final double GAUGE_TOLERANCE = 0.15;
    /**
     * The gauge's span, at least: Marks#capacity() measures from the newest
     * of its earlier reads at least this old (Marks.CAPACITY_SPAN_NS), and
     * every read is one of Flink's metric fetches, which come here every
     * 0.5 s or so while the test polls: so its span is 1 to about 1.5 s,
     * and the fetches, each a fresh REST snapshot, say which.
     */
    static final long GAUGE_MIN_SPAN_NS = 1_000_000_000L;
    /**
     * The span before the gauge's reading a second truth is taken over,
     * printed beside (not checked): "the last 1.5 s". It is not the
     * gauge's own span, and where the machine's load moves from second to
     * second it is not its truth either (seen: 17% apart, while the truth
     * over the gauge's own span was within 1% of the gauge).
     */
    static final long GAUGE_SPAN_NS = 1_500_000_000L;
    /** The load analyze prints for 2-hash: below this in the light run (c), at least the next in the unthrottled run (a). */
    static final double LIGHT_LOAD_BELOW = 0.8, SATURATED_LOAD_AT_LEAST = 0.9;
    /**
     * The split truth's busy share of each 2-hash subtask while the source
     * still made lines (service gaps over [first line, last line]) above
     * which run (a) counts as saturated: the task thread parked for input
     * for under a tenth of that time. Below it, the machine starved the
     * source, and (a)'s load check takes the truth's load instead of "at
     * least 0.9" (and says so). Not over the whole range: the subtask that
     * finishes its share first then idles while the other drains its
     * backlog, saturated or not (seen: 0.90 in an unthrottled run whose
     * other subtask was at 0.99).
     */
    static final double SATURATED_BUSY = 0.9;
    /**
     * The secondary truth's threshold: a gap between two departures of a
     * subtask shorter than this is service, a longer one a wait. The last
     * round's headline, printed beside the split truth.
     */
    static final long G_MS = 20;
    /**
     * A REST snapshot's time is known only as far as the truth's counters
     * place it (Run#placement: a few ms normally, seconds while the JVM
     * stands still). A range between two snapshots is used where the truth
     * over it moves by at most this share from the narrowest placement of
     * its ends to the widest (Run#spanPlaced).
     */
    static final double PLACEMENT_TOLERANCE = 0.02;
    /** A sampler interval longer than this is reported as a stall (the sampler asks for 1 ms). */
    static final long STALL_MS = 5;
    static final String PREFIX = "[engines]";
    /**
     * The job as it is, with no code of ours, marked by the agent this JVM
     * was started with, carrying ids (pom.xml's execution "agent":
     * -Dengines.mode=agent -javaagent:...=ids): the same runs, truths and checks,
     * held against the agent's marks instead of the wrappers'. analyze then
     * names the hash operator as the agent does, "2-hash-VERTEX"
     * ({@link Run#hash}), and there is no live gauge (the wrappers register it).
     */
    static final boolean AGENT = "agent".equals(System.getProperty("engines.mode"));

    String tool;
    Path cpLogDir, out;
    MiniCluster cluster;
    URI rest;
    final List<Run> runs = new ArrayList<>();
    final StringBuilder printed = new StringBuilder();

    // ---- the runs

    @BeforeAll
    @Timeout(360)
    void measure() throws Exception {
        long t0 = System.nanoTime();
        tool = System.getProperty("cloudprofiler.tool");
        assertNotNull(tool, "the pom passes -Dcloudprofiler.tool");
        assertTrue(Files.isExecutable(Path.of(tool)), tool + " is not executable: pass -Dcloudprofiler.native.dir=/work/main/build");
        String dir = System.getenv("CP_LOG_DIR");
        assertNotNull(dir, "the pom sets CP_LOG_DIR for the test JVM");
        cpLogDir = Path.of(dir);
        Files.createDirectories(cpLogDir);
        for (Path f : cplogs()) Files.delete(f); // an earlier, interrupted run's; this module's own directory
        out = Path.of(System.getProperty("engines.out", "target/engines-flink"));
        deleteTree(out);
        Files.createDirectories(out);

        // The tool is rebuilt under this test by whoever works on the analysis: say which build read the logs.
        say("tool: " + tool + ", built " + Files.getLastModifiedTime(Path.of(tool)));
        say(AGENT ? "marks: the agent's (-javaagent:...=ids), on the job with no code of ours" : "marks: the wrappers' (docs/flink.md)");
        long tc = System.nanoTime();
        int rounds = HashJob.Hash.ROUNDS; // the class loads here, and calibrates
        say(String.format("2-hash: %d SHA-256 rounds a record (%.0f ns a round when calibrated at class load, in %.1f s: %.1f us)",
                rounds, HashJob.Hash.NS_PER_ROUND, (System.nanoTime() - tc) / 1e9, rounds * HashJob.Hash.NS_PER_ROUND / 1e3));
        long t1 = System.nanoTime();
        startCluster();
        long t2 = System.nanoTime();

        Run a = run("a-unthrottled", "(a) unthrottled", 0, WARMUP_UNTHROTTLED_MS, 0);
        double carried = a.threadStateOperator(HashJob.HASH).throughput();
        if (!(carried > 0)) carried = FALLBACK_THROUGHPUT;
        double rateB = round100(OVERLOAD * carried), rateC = round100(LIGHT * carried);
        // (b)'s pace is 2-hash's, which the machine's load moves (its warm-up says), but not
        // below (a)'s (seen: a warm-up at 9.6k/s between (a)'s 14.3k/s and the logged job's
        // 18k/s, and a 3.2 s run); (c)'s is its source's: 2-hash keeps up with it whatever
        // the warm-up saw
        run("b-overloaded", String.format("(b) offered %.0f/s (%.1fx what (a) carried)", rateB, OVERLOAD), rateB, WARMUP_MS,
                carried);
        run("c-light", String.format("(c) offered %.0f/s (%.2fx what (a) carried)", rateC, LIGHT), rateC, WARMUP_MS, rateC);

        for (Run r : runs) r.print();
        say("");
        say(String.format("2-hash's work re-timed after the runs: %.1f us a record (the fastest of 50; calibrated for %.0f)",
                HashJob.Hash.workNs() / 1e3, HashJob.HASH_WORK_NS / 1e3));
        // the binding is loaded by the first channel, in the jobs: which file (-Dcloudprofiler.library, or the jar's copy)
        say("library: " + CloudProfiler.libraryPath());
        say(String.format("took %.1f s (the MiniCluster up in %.1f s); raw outputs in %s", (System.nanoTime() - t0) / 1e9,
                (t2 - t1) / 1e9, out));
        Files.writeString(out.resolve("tables.txt"), printed);
    }

    @AfterAll
    void stopCluster() throws Exception {
        if (cluster != null) cluster.close();
    }

    /**
     * One MiniCluster for every job: a TaskManager with a slot per subtask,
     * Flink's defaults but for what does not touch performance: a REST port
     * of its own, and a metric store refreshed every 500 ms (Flink's default
     * is 10 s, which would leave the REST API nothing fresh over a 6 s run).
     */
    void startCluster() throws Exception {
        Configuration conf = new Configuration();
        conf.set(RestOptions.PORT, 0);
        conf.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, Duration.ofMillis(500));
        cluster = new MiniCluster(new MiniClusterConfiguration.Builder().setConfiguration(conf)
                .setNumTaskManagers(1).setNumSlotsPerTaskManager(P).build());
        cluster.start();
        rest = cluster.getRestAddress().get(30, TimeUnit.SECONDS);
    }

    JobID submit(String name, long records, double rate) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(HashJob.configuration());
        HashJob.build(env, P, records, rate, !AGENT);
        StreamGraph graph = env.getStreamGraph();
        graph.setJobName(name);
        return cluster.submitJob(graph.getJobGraph()).get(60, TimeUnit.SECONDS).getJobID();
    }

    /**
     * A warm-up, discarded, then the logged job, its files analyzed. The
     * logged job's source makes as many lines as the warm-up carried in
     * LOGGED_S, at most its rate's worth (a rate-limited source faster than
     * the job is held back to the job's pace, and the machine's load moves
     * that pace from run to run: the warm-up just before is the best guess
     * of it), and at least paceFloor's worth.
     */
    Run run(String name, String label, double rate, long warmupMs, double paceFloor) throws Exception {
        Run r = new Run(name, label, rate);
        runs.add(r);
        r.dir = out.resolve(name);
        Files.createDirectories(r.dir);

        // The warm-up: the same job at the same rate, cancelled; its files deleted unread.
        Set<Path> before = cplogs();
        HashJob.resetCounters();
        Truth.begin();
        JobID warm = submit(name + "-warm-up", WARMUP_RECORDS, rate);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (Truth.finishedNow(HashJob.HASH) == 0 && System.nanoTime() < deadline) Thread.sleep(10);
        // The REST API polled through the warm-up too, and its first complete answer
        // awaited before the warm-up's measured span: the cluster's first REST requests
        // are slow (seen: the hash task listed 2.7-3.2 s after the first logged job was
        // submitted, 0.1 s in the runs after it, and a CI run where one subtask then had
        // no two snapshots to compare with), and they take CPU the warm-up would
        // otherwise measure as the job's pace (seen: a logged job of 3.4 s, not 6).
        FlinkRest warmRest = new FlinkRest(rest, warm, HashJob.HASH, HashJob.HASH, P);
        long warmPolled = System.nanoTime();
        warmRest.start();
        while (warmRest.firstComplete == 0 && System.nanoTime() < deadline) Thread.sleep(10);
        Thread.sleep(warmupMs);
        warmRest.stop();
        r.warmRestCounts = String.format("%d answers, %d failed requests, the hash task listed %s and its metrics first %s"
                + " after polling began", warmRest.answers, warmRest.errors, since(warmRest.vertexFound, warmPolled),
                since(warmRest.firstComplete, warmPolled));
        long cancelled = System.nanoTime();
        cluster.cancelJob(warm).get(60, TimeUnit.SECONDS);
        cluster.requestJobResult(warm).get(60, TimeUnit.SECONDS); // its tasks, and so their channels, closed
        Truth.Recording warmed = Truth.end();
        for (Path f : cplogs()) {
            if (!before.contains(f)) Files.delete(f);
        }
        long from = cancelled - TimeUnit.MILLISECONDS.toNanos(WARMUP_MEASURED_MS);
        r.warmThroughput = (warmed.countAt(HashJob.HASH, cancelled) - warmed.countAt(HashJob.HASH, from))
                / (WARMUP_MEASURED_MS / 1e3);
        // never more than the source's rate: a warm-up that started slowly caught up in a
        // burst of the rate limiter's stored permits, which the logged job will not see again;
        // never below paceFloor: a warm-up the machine stalled for most of its measured 2 s
        // (seen at a load of 16: (c) measured 365/s of the 2,100/s offered, and its logged
        // job lasted 0.47 s, too short for Flink's metrics or our gauge to appear)
        double pace = Math.max(paceFloor, r.warmThroughput);
        if (rate > 0) pace = Math.min(rate, pace);
        r.records = Math.max(1000, Math.round(pace * LOGGED_S));

        // The logged job: it ends by itself when its source has made its lines and they went through.
        before = cplogs();
        HashJob.resetCounters();
        Truth.begin();
        long[] gc0 = gc();
        long submitted = System.nanoTime();
        JobID job = submit(name, r.records, rate);
        // The REST API's job details are cached for web.refresh-interval (3 s): a first
        // request while the job still initializes caches it without its vertices, and
        // the hash task was then listed only 3 s later (a 3 s run had no Flink metrics).
        // So the first request waits until the job runs (asked of the cluster itself).
        long running = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        for (JobStatus st = cluster.getJobStatus(job).get(60, TimeUnit.SECONDS);
                (st == JobStatus.INITIALIZING || st == JobStatus.CREATED) && System.nanoTime() < running;
                st = cluster.getJobStatus(job).get(60, TimeUnit.SECONDS)) {
            Thread.sleep(5);
        }
        FlinkRest flink = new FlinkRest(rest, job, HashJob.HASH, HashJob.HASH, P);
        flink.start();
        r.result = cluster.requestJobResult(job).get(180, TimeUnit.SECONDS);
        r.snapshots = flink.stop();
        r.vertexNames = flink.vertexNames;
        r.hashVertex = flink.vertexName;
        r.restError = flink.lastError;
        r.gaugeIds = flink.gaugeIds();
        r.gaugeIdsListed = flink.gaugeIdsListed;
        r.restCounts = String.format("%d answers (%d without every subtask's metrics), %d failed requests; the hash task"
                + " listed %s, its metrics first %s after the job was submitted", flink.answers, flink.incomplete, flink.errors,
                since(flink.vertexFound, submitted), since(flink.firstComplete, submitted));
        r.rec = Truth.end();
        long[] gc1 = gc();
        r.gcCount = gc1[0] - gc0[0];
        r.gcMs = gc1[1] - gc0[1];
        r.loadAverage = loadAverage();
        r.kept = HashJob.KEPT.sum();
        r.sunk = HashJob.SUNK.sum();

        r.logs = r.dir.resolve("cp-logs");
        Files.createDirectories(r.logs);
        for (Path f : cplogs()) {
            if (!before.contains(f)) Files.move(f, r.logs.resolve(f.getFileName()));
        }
        r.analysis = r.dir.resolve("analysis");
        long t = System.nanoTime();
        Process p = new ProcessBuilder(tool, "analyze", "--logs", r.logs.toString(), "--out", r.analysis.toString(),
                "--no-durations", "--trace", r.analysis.resolve("trace.json").toString()).redirectErrorStream(true).redirectOutput(r.dir.resolve("analyze.txt").toFile()).start();
        if (!p.waitFor(180, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail("analyze of " + r.logs + " took more than 180 s");
        }
        r.analyzeExit = p.exitValue();
        r.analyzeSeconds = (System.nanoTime() - t) / 1e9;
        r.compute();
        r.rec.writeCsv(r.dir.resolve("truth-samples.csv"));
        r.rec.writeDeparturesCsv(r.dir.resolve("truth-departures.csv"));
        r.writeFlinkCsv(r.dir.resolve("flink-rest.csv"));
        return r;
    }

    // ---- the checks: what holds whatever the machine does

    /** Every job ran to its end, and every line went through: parsed, hashed, and those kept at the sink. */
    @Test
    void everyJobRanAndEveryRecordReachedTheSink() {
        assertEquals(3, runs.size(), "runs");
        for (Run r : runs) {
            assertTrue(r.result.isSuccess(), r.label + ": the job did not succeed: " + r.result.getJobStatus().map(Object::toString).orElse("?")
                    + " " + r.result.getSerializedThrowable().map(Throwable::toString).orElse(""));
            assertEquals(r.records, r.finalCount(HashJob.PARSE), r.label + ": lines parsed");
            assertEquals(r.records, r.finalCount(HashJob.HASH), r.label + ": records hashed");
            assertEquals(r.kept, r.sunk, r.label + ": records 3-keep kept against records at 4-sink");
            assertTrue(r.kept > 0.4 * r.records && r.kept < 0.6 * r.records, r.label + ": 3-keep kept " + r.kept + " of " + r.records);
        }
    }

    /** Each run's channel files were kept, analyze read them and exited 0, and its tables and the truth's samples are there. */
    @Test
    void analyzeRanOnEachRunsFiles() throws IOException {
        for (Run r : runs) {
            try (Stream<Path> s = Files.list(r.logs)) {
                assertTrue(s.anyMatch(f -> f.getFileName().toString().contains(".cplog")), r.label + ": no channel file in " + r.logs);
            }
            assertEquals(0, r.analyzeExit, r.label + ": analyze exited " + r.analyzeExit + ", see " + r.dir.resolve("analyze.txt"));
            for (Path f : List.of(r.analysis.resolve("capacity.csv"), r.analysis.resolve("summary.txt"),
                    r.dir.resolve("truth-samples.csv"), r.dir.resolve("truth-departures.csv"), r.dir.resolve("flink-rest.csv"))) {
                assertTrue(Files.isRegularFile(f), r.label + ": no " + f);
            }
        }
    }

    // ---- the checks: issue 43's acceptance, against the split truth of the same run.
    // Each collects its failures over every run and subtask, so that one
    // failing run does not hide what the others showed.

    /**
     * Each Flink instance its own figures: every subtask-0 of the job's
     * operators runs in one TaskManager, so node, pid and subtask index
     * name no instance alone. Every instance row of capacity.csv (the whole
     * run) has one box of its own in the report's topology, named
     * OPERATOR#SUBTASK and showing that row's load, and one track of its
     * own in the trace, whose slices are steps between its own channels.
     */
    @Test
    void eachInstanceHasItsOwnBoxAndTrack() throws IOException {
        List<String> failures = new ArrayList<>();
        Pattern box = Pattern.compile("<g class=\"op\" data-name=\"([^\"]*)\" data-load=\"([^\"]*)\"");
        Pattern thread = Pattern.compile("\\{\"args\":\\{\"name\":\"([^\"]*)\"\\},\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":(\\d+),\"tid\":(\\d+)");
        Pattern slice = Pattern.compile("\\{\"name\":\"([^\"]*)\",\"cat\":\"compute\",\"ph\":\"X\",\"pid\":(\\d+),\"tid\":(\\d+),"
                + "[^{]*\"args\":\\{\"tuple\":\\d+,\"from\":\"([^\"]*)\",\"to\":\"([^\"]*)\"");
        for (Run r : runs) {
            Map<String, List<String>> boxes = new HashMap<>();
            Matcher m = box.matcher(Files.readString(r.analysis.resolve("report.html")));
            while (m.find()) boxes.computeIfAbsent(m.group(1), k -> new ArrayList<>()).add(m.group(2));
            String trace = Files.readString(r.analysis.resolve("trace.json"));
            Map<String, Set<String>> tracks = new HashMap<>(); // instance -> its tracks (pid/tid)
            Map<String, String> trackName = new HashMap<>();
            m = thread.matcher(trace);
            while (m.find()) {
                String name = m.group(1).replaceFirst(" \\(\\d+\\)$", ""), track = m.group(2) + "/" + m.group(3);
                tracks.computeIfAbsent(name, k -> new HashSet<>()).add(track);
                trackName.put(track, name);
            }
            Map<String, Integer> slices = new HashMap<>();
            int strays = 0;
            m = slice.matcher(trace);
            while (m.find()) {
                String on = trackName.get(m.group(2) + "/" + m.group(3)), name = m.group(1);
                if (!name.equals(on) || !ofInstance(m.group(4), name) || !ofInstance(m.group(5), name)) {
                    if (strays++ < 3) failures.add(String.format("%s: a slice named %s from %s to %s on %s's track", r.label, name,
                            m.group(4), m.group(5), on));
                    continue;
                }
                slices.merge(name, 1, Integer::sum);
            }
            Set<String> instances = new TreeSet<>();
            for (Map<String, String> row : r.capacity) {
                if (!row.get("level").equals("instance") || !row.get("window").equals("-1") || !row.get("method").equals("in/out")) continue;
                String label = row.get("instance"), name = row.get("operator") + "#" + label.substring(label.lastIndexOf('/') + 1);
                instances.add(name);
                List<String> b = boxes.getOrDefault(name, List.of());
                double load = number(row.get("load"));
                String want = Double.isNaN(load) ? "" : String.format(Locale.ROOT, "%.4f", load);
                if (b.size() != 1) {
                    failures.add(String.format("%s: %d boxes named %s in report.html (boxes: %s)", r.label, b.size(), name, boxes.keySet()));
                } else if (!b.get(0).equals(want)) {
                    failures.add(String.format("%s: %s's box shows load %s, its row of capacity.csv %s", r.label, name, b.get(0), want));
                }
                if (tracks.getOrDefault(name, Set.of()).isEmpty()) {
                    failures.add(String.format("%s: no track named %s in trace.json (tracks: %s)", r.label, name, tracks.keySet()));
                } else if (slices.getOrDefault(name, 0) == 0) {
                    failures.add(String.format("%s: no slice of %s's own on its track", r.label, name));
                }
            }
            Set<String> hashes = new TreeSet<>();
            for (int i = 0; i < P; i++) hashes.add(r.hash + "#" + i);
            if (!instances.containsAll(hashes)) failures.add(r.label + ": capacity.csv's instances " + instances + " lack one of " + hashes);
            say(String.format("  %s: %d instances, each its own box and track; slices per track %s", r.label, instances.size(),
                    new java.util.TreeMap<>(slices)));
        }
        failIfAny("each instance its own box and track", failures);
    }

    /** Whether a trace's channel label ("NODE/OPERATOR#SUBTASK ROLE") is one of instance name's channels. */
    static boolean ofInstance(String channel, String name) {
        return channel.substring(channel.indexOf('/') + 1).startsWith(name + " ");
    }

    /** In every run, analyze names 2-hash the bottleneck: capacity.csv's bottleneck column and summary.txt's verdict. */
    @Test
    void bottleneckIs2Hash() {
        List<String> failures = new ArrayList<>();
        for (Run r : runs) {
            if (!r.hash.equals(r.bottleneck())) failures.add(r.label + ": capacity.csv's bottleneck is " + r.bottleneck());
            if (!r.hash.equals(r.verdictBottleneck())) {
                String line = r.verdictLine();
                failures.add(r.label + ": summary.txt's verdict names " + r.verdictBottleneck() + ": \""
                        + (line.length() > 300 ? line.substring(0, 300) + "..." : line) + "\"");
            }
        }
        failIfAny("the bottleneck", failures);
    }

    /**
     * In every run, each 2-hash subtask's capacity (capacity.csv's whole-run
     * instance row) within {@link #TOLERANCE} of its split truth, and the
     * operator row within it of the skew-aware split truth.
     */
    @Test
    void capacityWithinTenPercentOfTheTruth() {
        List<String> failures = new ArrayList<>();
        for (Run r : runs) {
            for (int i = 0; i < P; i++) {
                double o = r.oursInstanceCapacity(i), t = r.truth(i);
                if (!(Math.abs(o / t - 1) <= TOLERANCE)) {
                    failures.add(String.format("%s: 2-hash#%d's capacity %.0f/s, its split truth %.0f/s (%+.1f%%)", r.label, i, o,
                            t, 100 * (o / t - 1)));
                }
            }
            double o = r.oursOperatorCapacity(), t = r.truthSkewAware();
            if (!(Math.abs(o / t - 1) <= TOLERANCE)) {
                failures.add(String.format("%s: 2-hash's operator capacity %.0f/s, the skew-aware split truth %.0f/s (%+.1f%%)",
                        r.label, o, t, 100 * (o / t - 1)));
            }
        }
        failIfAny("capacity against the split truth (within " + pct(TOLERANCE) + ")", failures);
    }

    /**
     * In every run and subtask, ours at least as close to the split truth as
     * Flink's numRecordsIn / accumulateBusyTimeMs is to the split truth of
     * the range its two snapshots cover (f/t'), or within {@link
     * #CLOSE_ENOUGH} of the truth: at saturation both are within a percent
     * or two, and a coin flip between them must not fail the test.
     */
    @Test
    void oursAtLeastAsCloseAsFlinks() {
        List<String> failures = new ArrayList<>();
        for (Run r : runs) {
            for (int i = 0; i < P; i++) {
                double o = r.oursInstanceCapacity(i), t = r.truth(i), f = r.flinkSubtask(i), ft = r.truthOverFlinksRange(i);
                double ours = Math.abs(o / t - 1), flinks = Math.abs(f / ft - 1);
                if (Double.isNaN(flinks)) {
                    failures.add(String.format("%s: 2-hash#%d: no two fresh snapshots of Flink's metrics, their range placed well, to"
                            + " compare with (the table's REST line says what came)", r.label, i));
                } else if (!(ours <= flinks || ours <= CLOSE_ENOUGH)) {
                    failures.add(String.format("%s: 2-hash#%d: ours %.0f/s is %+.1f%% off its split truth %.0f/s; Flink's %.0f/s only"
                            + " %+.1f%% off the split truth over its range, %.0f/s", r.label, i, o, 100 * (o / t - 1), t, f,
                            100 * (f / ft - 1), ft));
                }
            }
        }
        failIfAny("ours against Flink's (at least as close, or within " + pct(CLOSE_ENOUGH) + ")", failures);
    }

    /**
     * The load analyze prints for 2-hash (capacity.csv's whole-run operator
     * row) tells saturated from not: below {@link #LIGHT_LOAD_BELOW} in the
     * light run (c), at least {@link #SATURATED_LOAD_AT_LEAST} in the
     * unthrottled run (a). "Unthrottled" is not "saturated" when the
     * machine starves the source: if the split truth shows a 2-hash subtask
     * busy under {@link #SATURATED_BUSY} of the time the source made lines,
     * the run was not saturated, and ours is held to the truth's load
     * instead (the source's rate over the skew-aware split truth), within {@link #TOLERANCE},
     * the capacity's own tolerance, which is what a load's error is. The
     * table says which check was made, and why.
     */
    @Test
    void loadTellsSaturatedFromNot() {
        List<String> failures = new ArrayList<>();
        for (Run r : runs) {
            double load = r.load();
            if (r.name.startsWith("c-") && !(load < LIGHT_LOAD_BELOW)) {
                failures.add(String.format("%s: 2-hash's load %.2f, not below %.2f (the split truth's busy shares while the source"
                        + " made lines %s, its load %.2f)",
                        r.label, load, LIGHT_LOAD_BELOW, r.busyShares(), r.truthLoad()));
            }
            if (r.name.startsWith("a-")) {
                if (r.saturatedByTheTruth()) {
                    if (!(load >= SATURATED_LOAD_AT_LEAST)) {
                        failures.add(String.format("%s: 2-hash's load %.2f, below %.2f, though the split truth has it busy %s of the"
                                + " time the source made lines", r.label, load, SATURATED_LOAD_AT_LEAST, r.busyShares()));
                    }
                } else if (!(Math.abs(load / r.truthLoad() - 1) <= TOLERANCE)) {
                    failures.add(String.format("%s: not saturated (the split truth's busy shares while the source made lines %s):"
                            + " 2-hash's load %.2f against the"
                            + " truth's %.2f (%+.1f%%)", r.label, r.busyShares(), load, r.truthLoad(), 100 * (load / r.truthLoad() - 1)));
                }
            }
        }
        failIfAny("2-hash's load", failures);
    }

    /**
     * Our live gauge, 2-hash.cloudprofiler.capacity as Flink's REST API shows
     * it, where a subtask has a reading: its last before the job ended
     * within {@link #GAUGE_TOLERANCE} of the split truth over the span that
     * reading measured (from the fetch at least {@link #GAUGE_MIN_SPAN_NS}
     * before it; the truth over the last {@link #GAUGE_SPAN_NS} ns is
     * printed beside, and is in the message).
     */
    @Test
    void liveGaugeWithinFifteenPercentOfTheTruth() {
        Assumptions.assumeFalse(AGENT, "the agent registers no gauge: the wrappers do (docs/flink-agent.md)");
        List<String> failures = new ArrayList<>();
        for (Run r : runs) {
            for (int i = 0; i < P; i++) {
                double g = r.gauge(i), t = r.gaugeTruth(i);
                if (Double.isNaN(g)) continue; // no reading: the table says why
                if (!(Math.abs(g / t - 1) <= GAUGE_TOLERANCE)) {
                    failures.add(String.format("%s: 2-hash#%d's gauge %.0f/s at %.2f s of the range, the split truth over the %.2f s"
                            + " it measured %.0f/s (%+.1f%%; over the last %.1f s %.0f/s)", r.label, i, g, r.gaugeSeconds(i),
                            r.gaugeSpanSeconds(i), t, 100 * (g / t - 1), GAUGE_SPAN_NS / 1e9, r.gaugeTruth15(i)));
                }
            }
        }
        failIfAny("the live gauge against the split truth (within " + pct(GAUGE_TOLERANCE) + ")", failures);
    }

    static void failIfAny(String what, List<String> failures) {
        if (!failures.isEmpty()) fail((AGENT ? "issue 45 (the agent's marks), " : "issue 43, ") + what + ":\n  " + String.join("\n  ", failures));
    }

    // ---- one run

    final class Run {
        final String name, label;
        final double rate;
        long records;
        double warmThroughput;
        Path dir, logs, analysis;
        JobResult result;
        List<Snapshot> snapshots;
        List<String> vertexNames;
        String hashVertex, restError, restCounts, warmRestCounts;
        /** The gauge's id per subtask (null: never listed), and every id of ours the vertex listed. */
        String[] gaugeIds = new String[P];
        List<String> gaugeIdsListed = List.of();
        Truth.Recording rec;
        long kept, sunk;
        int analyzeExit;
        /** This JVM's garbage collections during the logged job, and their time; the machine's load average (1 min) after it. */
        long gcCount, gcMs;
        String loadAverage;
        double analyzeSeconds;
        /** The logged range (System.nanoTime()): from just before the first line left the source to the last record hashed. */
        long from, to;
        /** When the source's last line was parsed (System.nanoTime(), to a sample): the end of what the run offered. */
        long sourceEnd;
        List<Map<String, String>> capacity = List.of();
        /**
         * The hash operator's name in analyze's output: 2-hash with the
         * wrappers; with the agent, its name for it, 2-hash-VERTEX (the one
         * operator of capacity.csv named so; "2-hash-?" when none or several are).
         */
        String hash = HashJob.HASH;
        /**
         * Per subtask, Flink's two snapshots its rate is taken between (null:
         * fewer than two), and their true times (placed by the truth's counters).
         */
        final Snapshot[] first = new Snapshot[P], last = new Snapshot[P];
        final long[] firstAt = new long[P], lastAt = new long[P];
        /** Per subtask, its fresh snapshots taken while it worked (some records in, not all). */
        final int[] freshWorking = new int[P];
        /** Of each fresh snapshot of a working subtask, its answer's time less its true time: how old the REST API's values were. */
        long[] staleness = new long[0];
        /**
         * Per subtask, the snapshot of the gauge's last reading (null: none
         * with a number), its true time, and how many fresh readings had a
         * number and how many were NaN (the gauge is NaN for its first second).
         */
        final Snapshot[] gaugeSnap = new Snapshot[P];
        final long[] gaugeAt = new long[P];
        /** Per subtask, the start of the span the gauge's last reading measured (Long.MIN_VALUE: not known). */
        final long[] gaugeFrom = new long[P];
        final int[] gaugeNumbers = new int[P], gaugeNaNs = new int[P];
        /** Per subtask, later readings with a number not held against the truth: their span not placed well (spanPlaced). */
        final int[] gaugeSetAside = new int[P];

        Run(String name, String label, double rate) {
            this.name = name;
            this.label = label;
            this.rate = rate;
        }

        void compute() throws IOException {
            // The range: the marks' (the first line's 0-source mark comes just after the last
            // sample of 1-parse at 0; the last record's 4-sink marks just before 2-hash
            // counted it, in the same call).
            from = Long.MAX_VALUE;
            for (Probe p : rec.of(HashJob.PARSE)) {
                for (int i = 0; i < p.samples(); i++) {
                    if (p.count(i) > 0) {
                        from = Math.min(from, p.time(Math.max(0, i - 1)));
                        break;
                    }
                }
            }
            to = Long.MIN_VALUE;
            for (Probe p : rec.of(HashJob.HASH)) {
                long fin = p.samples() == 0 ? 0 : p.count(p.samples() - 1);
                for (int i = 0; i < p.samples(); i++) {
                    if (p.count(i) == fin) {
                        to = Math.max(to, p.time(i));
                        break;
                    }
                }
            }
            sourceEnd = Long.MIN_VALUE;
            for (Probe p : rec.of(HashJob.PARSE)) {
                long fin = p.samples() == 0 ? 0 : p.count(p.samples() - 1);
                for (int i = 0; i < p.samples(); i++) {
                    if (p.count(i) == fin) {
                        sourceEnd = Math.max(sourceEnd, p.time(i));
                        break;
                    }
                }
            }
            Path csv = analysis.resolve("capacity.csv");
            if (Files.isRegularFile(csv)) capacity = AnalysisCsv.read(csv);
            hash = ours(HashJob.HASH);

            // Flink's, per subtask, from its fresh snapshots only: as a subtask ends, the
            // TaskManager stops reporting it and the JobManager's store answers its last
            // values again beside the other subtask's new ones (seen: numRecordsIn the same,
            // busyTimeMsPerSecond gone). Of the pairs of them whose range is placed well
            // (spanPlaced: a multi-second stall of the JVM leaves a read's time unknown),
            // the widest: from the last snapshot before its first record (it had done
            // nothing yet) or one taken while it worked, to a later one taken while it still
            // had records to do. Normally that is from the last before its first record to
            // the last while it worked; a stall at either end moves that end inwards (seen
            // in a CI run: no pair with the first end fixed was placed well, and the run
            // had no comparison with Flink's at all).
            List<Long> stale = new ArrayList<>();
            List<Probe> hash = rec.of(HashJob.HASH);
            for (int i = 0; i < Math.min(P, hash.size()); i++) {
                long fin = hash.get(i).count(hash.get(i).samples() - 1);
                List<Snapshot> fresh = new ArrayList<>();
                Snapshot previous = null;
                for (Snapshot s : snapshots) {
                    if (s.freshFor(i, previous)) fresh.add(s);
                    previous = s;
                }
                List<Snapshot> starts = new ArrayList<>(), ends = new ArrayList<>();
                for (Snapshot s : fresh) {
                    long in = s.recordsIn()[i];
                    if (in == 0) {
                        starts.clear(); // every one before its first record is at `from`: the last stands for them
                        starts.add(s);
                    }
                    if (in > 0 && in < fin) {
                        starts.add(s);
                        ends.add(s);
                        stale.add(s.answeredNanos() - timeOf(s, i));
                        if (Double.isNaN(s.gauge()[i])) gaugeNaNs[i]++;
                        else gaugeNumbers[i]++;
                    }
                }
                freshWorking[i] = ends.size();
                long widest = 0;
                for (Snapshot a : starts) {
                    long at = a.recordsIn()[i] == 0 ? from : timeOf(a, i);
                    for (int r = ends.size() - 1; r >= 0; r--) {
                        Snapshot b = ends.get(r);
                        if (b.answeredNanos() <= a.answeredNanos()) break;
                        long bt = timeOf(b, i);
                        if (bt - at > widest && spanPlaced(a, b, i)) {
                            widest = bt - at;
                            first[i] = a;
                            firstAt[i] = at;
                            last[i] = b;
                            lastAt[i] = bt;
                            break; // the latest end placed well with this start is its widest
                        }
                    }
                }
                pickGaugeReading(i, fresh, fin);
            }
            staleness = stale.stream().mapToLong(Long::longValue).sorted().toArray();
        }

        /**
         * The gauge's reading of subtask i to hold against the truth: the last
         * with a number while the subtask still had records to do (read in the
         * same dump as numRecordsIn, so placed at its time; the truth over
         * the span before it then lies inside the range), whose time and
         * span's start (the newest earlier read at least GAUGE_MIN_SPAN_NS
         * before it: every fetch reads the gauge, and every fetch is a fresh
         * snapshot) are both placed well; else the one before.
         */
        void pickGaugeReading(int i, List<Snapshot> fresh, long fin) {
            gaugeFrom[i] = Long.MIN_VALUE;
            for (int r = fresh.size() - 1; r >= 0; r--) {
                Snapshot s = fresh.get(r);
                long in = s.recordsIn()[i];
                if (in <= 0 || in >= fin || Double.isNaN(s.gauge()[i])) continue;
                long at = timeOf(s, i);
                Snapshot base = null;
                for (int b = r - 1; b >= 0 && base == null; b--) {
                    if (timeOf(fresh.get(b), i) <= at - GAUGE_MIN_SPAN_NS) base = fresh.get(b);
                }
                if (base == null || !spanPlaced(base, s, i)) {
                    gaugeSetAside[i]++;
                    continue;
                }
                gaugeSnap[i] = s;
                gaugeAt[i] = at;
                gaugeFrom[i] = timeOf(base, i);
                return;
            }
        }

        /**
         * When a REST snapshot's values of subtask i were read on the
         * TaskManager, as far as the truth's samples tell: from when the
         * subtask's finished count reached its numRecordsIn less one (one
         * record taken, not yet finished) to when it passed numRecordsIn, or
         * the answer came. Normally a millisecond or two; while the subtask
         * waits for input, or the JVM stands still, as long as that.
         */
        long[] placement(Snapshot s, int i) {
            Probe p = hashProbe(i);
            if (p.samples() == 0) return new long[] {s.answeredNanos(), s.answeredNanos()};
            long in = s.recordsIn()[i];
            if (in == 0) return new long[] {from, from}; // before its first record: where exactly moves no truth
            int k = 0;
            while (k < p.samples() && p.count(k) < in - 1) k++;
            int m = k;
            while (m < p.samples() && p.count(m) <= in) m++;
            long lo = p.time(Math.max(0, Math.min(k, p.samples() - 1) - 1));
            long hi = Math.min(s.answeredNanos(), p.time(Math.min(m, p.samples() - 1)));
            return new long[] {lo, Math.max(lo, hi)};
        }

        /** The middle of its placement. */
        long timeOf(Snapshot s, int i) {
            long[] p = placement(s, i);
            return p[0] / 2 + p[1] / 2;
        }

        /**
         * Whether the range from snapshot a to snapshot b is placed well
         * enough for subtask i's truth over it: from the narrowest placement
         * of its ends to the widest, the split truth moves by at most
         * PLACEMENT_TOLERANCE. Where the ends lie within their placements
         * normally moves it by nothing (a few ms of like gaps); not when a
         * stall of the JVM with work at hand lies at an end (seen: 2 s in
         * which no count moved, and a gauge's span misplaced by a second,
         * its truth 25 times the gauge's).
         */
        boolean spanPlaced(Snapshot a, Snapshot b, int i) {
            long[] pa = placement(a, i), pb = placement(b, i);
            double wide = hashProbe(i).splitOver(pa[0], pb[1]).capacity(), narrow = hashProbe(i).splitOver(pa[1], pb[0]).capacity();
            return Math.abs(wide / narrow - 1) <= PLACEMENT_TOLERANCE;
        }

        /** The sampler's intervals in the range longer than STALL_MS (the sampler kept from its CPU): how many, their length. */
        long[] stalls() {
            if (rec.probes().isEmpty()) return new long[] {0, 0};
            Probe p = rec.probes().get(0);
            long n = 0, ns = 0;
            for (int i = 1; i < p.samples(); i++) {
                long gap = p.time(i) - p.time(i - 1);
                if (p.time(i - 1) >= from && p.time(i) <= to && gap > TimeUnit.MILLISECONDS.toNanos(STALL_MS)) {
                    n++;
                    ns += gap;
                }
            }
            return new long[] {n, ns};
        }

        long finalCount(String operator) {
            return rec.countAt(operator, Long.MAX_VALUE);
        }

        Probe hashProbe(int subtask) {
            return rec.of(HashJob.HASH).get(subtask);
        }

        /** 2-hash's subtask's split truth over the logged range. */
        Split split(int subtask) {
            return hashProbe(subtask).splitOver(from, to);
        }

        /** TRUE CAPACITY: a subtask's split truth over the logged range, departures a second. */
        double truth(int subtask) {
            return split(subtask).capacity();
        }

        /** The operator's split truth: the subtasks' sum. */
        double truthSum() {
            double c = 0;
            for (int i = 0; i < P; i++) c += truth(i);
            return c;
        }

        /**
         * The highest rate 2-hash sustains given how its records were shared
         * (what capacity.csv's operator row means), by the split truth: the
         * smallest of a subtask's capacity over its share of the departures.
         */
        double truthSkewAware() {
            long total = 0;
            for (int i = 0; i < P; i++) total += split(i).count();
            double min = Double.MAX_VALUE;
            for (int i = 0; i < P; i++) min = Math.min(min, truth(i) / ((double) split(i).count() / total));
            return min;
        }

        /** The split truth's busy share of a subtask: its service gaps over the range. */
        double busyShare(int subtask) {
            return split(subtask).busyShare(to - from);
        }

        /** The split truth's busy share of a subtask while the source made lines: service gaps over [from, sourceEnd]. */
        double busyWhileOffered(int subtask) {
            return hashProbe(subtask).splitOver(from, sourceEnd).busyShare(sourceEnd - from);
        }

        /** The subtasks' busy shares while the source made lines, for messages: "0.99, 0.98". */
        String busyShares() {
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < P; i++) b.append(i == 0 ? "" : ", ").append(share(busyWhileOffered(i)));
            return b.toString();
        }

        /** Whether the split truth has every 2-hash subtask busy at least SATURATED_BUSY while the source made lines. */
        boolean saturatedByTheTruth() {
            for (int i = 0; i < P; i++) {
                if (!(busyWhileOffered(i) >= SATURATED_BUSY)) return false;
            }
            return true;
        }

        /**
         * The truth's load, as analyze's operator row defines it (the rate
         * offered at the source over the capacity): the lines a second while
         * the source made them over the skew-aware split truth.
         */
        double truthLoad() {
            return records / ((sourceEnd - from) / 1e9) / truthSkewAware();
        }

        /** The secondary truth, G = G_MS: 2-hash's subtask's departure log over the logged range, its gaps split at G. */
        Departures departures(int subtask) {
            return hashProbe(subtask).departuresOver(from, to, TimeUnit.MILLISECONDS.toNanos(G_MS));
        }

        /** The secondary truth G = G_MS of a subtask, or (-1) the operator's, the subtasks' sum. */
        double truthG(int subtask) {
            if (subtask >= 0) return departures(subtask).capacity();
            double c = 0;
            for (int i = 0; i < P; i++) c += departures(i).capacity();
            return c;
        }

        /** The thread-state truth of a subtask over the logged range. */
        Stats threadStateSubtask(String operator, int subtask) {
            for (Probe p : rec.of(operator)) {
                if (p.subtask == subtask) return p.over(from, to);
            }
            return new Stats(0, 0, 0, 0, 0, 0);
        }

        /** The operator's thread-state truth: its subtasks' together (capacities and throughputs summed, busy shares averaged). */
        OperatorTruth threadStateOperator(String operator) {
            double capacity = 0, busy = 0, throughput = 0;
            long done = 0;
            List<Probe> ps = rec.of(operator);
            for (Probe p : ps) {
                Stats s = p.over(from, to);
                capacity += s.capacity();
                busy += s.busyShare() / ps.size();
                throughput += s.throughput();
                done += s.done();
            }
            return new OperatorTruth(capacity, busy, throughput, done);
        }

        /**
         * The split truth over the range Flink's two snapshots cover (its
         * metrics appear only some time after the job started, and go with
         * it), of a subtask or (-1) of the operator, the subtasks' sum.
         */
        double truthOverFlinksRange(int subtask) {
            double c = 0;
            for (int i = 0; i < P; i++) {
                if (subtask >= 0 && i != subtask) continue;
                if (first[i] == null) return Double.NaN;
                c += hashProbe(i).splitOver(firstAt[i], lastAt[i]).capacity();
            }
            return c;
        }

        /** Subtask i's last gauge reading with a number (NaN: none). */
        double gauge(int i) {
            return gaugeSnap[i] == null ? Double.NaN : gaugeSnap[i].gauge()[i];
        }

        /** When it was read, s into the logged range. */
        double gaugeSeconds(int i) {
            return gaugeSnap[i] == null ? Double.NaN : (gaugeAt[i] - from) / 1e9;
        }

        /** The split truth over the GAUGE_SPAN_NS before subtask i's last gauge reading (NaN: no reading). */
        double gaugeTruth15(int i) {
            if (gaugeSnap[i] == null) return Double.NaN;
            return hashProbe(i).splitOver(gaugeAt[i] - GAUGE_SPAN_NS, gaugeAt[i]).capacity();
        }

        /** The split truth over the span subtask i's last gauge reading measured (NaN: no reading, or its start unknown). */
        double gaugeTruth(int i) {
            if (gaugeSnap[i] == null || gaugeFrom[i] == Long.MIN_VALUE) return Double.NaN;
            return hashProbe(i).splitOver(gaugeFrom[i], gaugeAt[i]).capacity();
        }

        /** The length of that span, s. */
        double gaugeSpanSeconds(int i) {
            return gaugeSnap[i] == null || gaugeFrom[i] == Long.MIN_VALUE ? Double.NaN : (gaugeAt[i] - gaugeFrom[i]) / 1e9;
        }

        double flinkSubtask(int i) {
            if (first[i] == null) return Double.NaN;
            return (last[i].recordsIn()[i] - first[i].recordsIn()[i]) / ((last[i].busyMs()[i] - first[i].busyMs()[i]) / 1e3);
        }

        double flinkBusyShare(int i) {
            if (first[i] == null) return Double.NaN;
            return (last[i].busyMs()[i] - first[i].busyMs()[i]) / ((lastAt[i] - firstAt[i]) / 1e6);
        }

        double flinkOperator() {
            double s = 0;
            for (int i = 0; i < P; i++) s += flinkSubtask(i);
            return s;
        }

        /**
         * The operator job-name op has in analyze's output: op with the
         * wrappers; with the agent, the one operator of capacity.csv named
         * op-VERTEX ("op-?" when none or several are).
         */
        String ours(String op) {
            if (!AGENT) return op;
            List<String> named = capacity.stream().filter(row -> row.get("level").equals("operator")).map(row -> row.get("operator"))
                    .filter(o -> o.matches(Pattern.quote(op) + "-\\d+")).distinct().toList();
            return named.size() == 1 ? named.get(0) : op + "-?";
        }

        Map<String, String> oursRow(String level, String operator, int subtask) {
            for (Map<String, String> row : capacity) {
                if (row.get("level").equals(level) && row.get("window").equals("-1") && row.get("operator").equals(operator)
                        && (subtask < 0 || row.get("instance").endsWith("/" + subtask))) {
                    return row;
                }
            }
            return Map.of();
        }

        double oursOperatorCapacity() {
            return number(oursRow("operator", hash, -1).get("capacity"));
        }

        double oursInstanceCapacity(int i) {
            return number(oursRow("instance", hash, i).get("capacity"));
        }

        /** The load capacity.csv's whole-run operator row prints for 2-hash (the offered rate over its capacity). */
        double load() {
            return number(oursRow("operator", hash, -1).get("load"));
        }

        /**
         * The operator summary.txt's verdict names ("   ! Bottleneck: 2-hash
         * (2 instances), ..."), "not named" where analyze refused to name one
         * ("Bottleneck: not named: 2-hash has the lowest capacity, but the run
         * contradicts it: ..."), "none" without a verdict line.
         */
        String verdictBottleneck() {
            String line = verdictLine();
            Matcher m = VERDICT.matcher(line);
            return m.find() ? m.group(1) : "none";
        }

        /** summary.txt's verdict line on the bottleneck, stripped ("" without one). */
        String verdictLine() {
            try {
                for (String line : Files.readAllLines(analysis.resolve("summary.txt"))) {
                    if (VERDICT.matcher(line).find()) return line.strip();
                }
            } catch (IOException e) {
                return "(" + e + ")";
            }
            return "";
        }

        String bottleneck() {
            for (Map<String, String> row : capacity) {
                if (row.get("level").equals("operator") && row.get("window").equals("-1") && "true".equals(row.get("bottleneck"))) {
                    return row.get("operator");
                }
            }
            return "none";
        }

        void print() throws IOException {
            double seconds = (to - from) / 1e9;
            say("");
            say(String.format("%s: %,d lines in %.2f s (the logged range), %s; hash task \"%s\"", label, records, seconds,
                    rate > 0 ? String.format("source limited to %.0f/s", rate)
                            : String.format("the warm-up carried %.0f/s", warmThroughput), hashVertex));
            say("  the job's tasks (as Flink chained them): " + String.join(" | ", vertexNames));
            long[] gaps = rec.intervals();
            long[] stalls = stalls();
            say(String.format("  sink: %,d of %,d records kept by 3-keep; machine: load average %s, this JVM's GC %d collections,"
                    + " %d ms", sunk, kept, loadAverage, gcCount, gcMs));
            say(String.format("  truth sampler: %,d rounds, interval median %.2f ms, p99 %.2f ms, longest %.1f ms; %d intervals over"
                    + " %d ms, %.1f%% of the range", rec.probes().isEmpty() ? 0 : rec.probes().get(0).samples(), gaps[0] / 1e6,
                    gaps[1] / 1e6, gaps[2] / 1e6, stalls[0], STALL_MS, 100.0 * stalls[1] / (to - from)));
            if (!snapshots.isEmpty()) {
                StringBuilder ranges = new StringBuilder();
                for (int i = 0; i < P; i++) {
                    ranges.append(i == 0 ? "" : ", ").append('#').append(i).append(' ').append(first[i] == null
                            ? String.format("none (%d fresh while it worked, no pair placed well)", freshWorking[i])
                            : String.format("%.2f..%.2f s%s", (firstAt[i] - from) / 1e9, (lastAt[i] - from) / 1e9,
                                    first[i].recordsIn()[i] == 0 ? " (from before its first record)" : ""));
                }
                say(String.format("  Flink REST: %d distinct snapshots; rate taken over %s of the range; snapshots %s old when"
                        + " answered (median; range %s .. %s)", snapshots.size(), ranges, ms(percentile(staleness, 0.5)),
                        ms(percentile(staleness, 0)), ms(percentile(staleness, 1))));
                say("    (" + restCounts + "; in the warm-up before: " + warmRestCounts + ")");
            } else {
                say("  Flink REST: no snapshot of the hash task (last error: " + restError + ")");
            }
            printGauges();
            say(String.format("  analyze: exit %d in %.1f s, %s", analyzeExit, analyzeSeconds, analysis));
            printDepartures();

            // The split truth first, and every ratio against it; the secondary truths beside; then
            // Flink's and our live gauge, each against the split truth of the range it covers.
            String groups = "  %-9s | %-26s | %-22s | %-24s | %-25s | %-13s | %-62s |";
            String head = "  %-9s | %9s %5s %10s | %9s %5s %6s | %9s %14s | %9s %5s %9s | %6s %6s | %5s %7s %5s %7s %6s %7s %6s %6s | %s";
            say(String.format(groups, "", "ours (capacity.csv)", "TRUE CAPACITY (split)", "secondary truths", "Flink REST",
                    "against TRUTH", "live gauge cloudprofiler.capacity, its last reading"));
            say(String.format(head, "2-hash", "capacity", "load", "backlogged", "capacity", "busy", "parked", "G=" + G_MS + "ms",
                    "thread-state", "capacity", "busy", "busyMs/s*", "o/t", "f/t'", "at s", "gauge", "span", "truth", "g/t",
                    "t(1.5s)", "g/t1.5", "g/ours", "ours: note"));
            for (int i = 0; i < P; i++) {
                Map<String, String> o = oursRow("instance", hash, i);
                Split d = split(i);
                double oc = number(o.get("capacity")), fc = flinkSubtask(i), tc = d.capacity(), g = gauge(i);
                say(String.format(head, "#" + i, num(oc), fix(o.get("load")), num(number(o.get("backlogged"))), num(tc),
                        share(d.busyShare(to - from)), String.format("%.2fs", d.parkedNs() / 1e9), num(truthG(i)),
                        num(threadStateSubtask(HashJob.HASH, i).capacity()), num(fc), share(flinkBusyShare(i)),
                        last[i] == null ? "-" : num(last[i].busyPerSecond()[i]), ratio(oc / tc), ratio(fc / truthOverFlinksRange(i)),
                        Double.isNaN(g) ? "-" : String.format("%.2f", gaugeSeconds(i)), num(g),
                        Double.isNaN(gaugeSpanSeconds(i)) ? "-" : String.format("%.2f", gaugeSpanSeconds(i)), num(gaugeTruth(i)),
                        ratio(g / gaugeTruth(i)), num(gaugeTruth15(i)), ratio(g / gaugeTruth15(i)), ratio(g / oc),
                        o.getOrDefault("note", "(no row)")));
            }
            // the operator row: capacity.csv's, against the skew-aware truth it stands for
            Map<String, String> o = oursRow("operator", hash, -1);
            double oc = number(o.get("capacity")), tc = truthSkewAware();
            double db = 0, fb = 0;
            for (int i = 0; i < P; i++) {
                db += busyShare(i) / P;
                fb += flinkBusyShare(i) / P;
            }
            say(String.format(head, "operator", num(oc), fix(o.get("load")), num(number(o.get("backlogged"))), num(tc), share(db),
                    "", "", "", "", "", "", ratio(oc / tc), "", "", "", "", "", "", "", "", "", o.getOrDefault("note", "(no row)")
                            + " [skew-aware: min capacity / share of departures]"));
            // the subtasks' sums, where Flink's figure is (it has no skew-aware one)
            double os = 0;
            for (int i = 0; i < P; i++) os += oursInstanceCapacity(i);
            double ts = truthSum(), fs = flinkOperator();
            say(String.format(head, "sum", num(os), "", "", num(ts), share(db), "", num(truthG(-1)),
                    num(threadStateOperator(HashJob.HASH).capacity()), num(fs), share(fb), "", ratio(os / ts),
                    ratio(fs / truthOverFlinksRange(-1)), "", "", "", "", "", "", "", "", "[the subtasks' sum]"));
            say(String.format("  load: ours (capacity.csv's operator row) %s; the truth's %.2f (the source's %,.0f lines/s over its"
                    + " %.2f s, over the skew-aware split truth); split busy shares while the source made lines %s: %s",
                    fix(o.get("load")), truthLoad(), records / ((sourceEnd - from) / 1e9), (sourceEnd - from) / 1e9, busyShares(),
                    name.startsWith("a-") ? (saturatedByTheTruth()
                            ? String.format("saturated (every subtask at least %.2f): (a) is held to a load of at least %.2f",
                                    SATURATED_BUSY, SATURATED_LOAD_AT_LEAST)
                            : String.format("NOT saturated although unthrottled (a subtask under %.2f: the machine starved the"
                                    + " source): (a)'s load is held to the truth's, within %s", SATURATED_BUSY, pct(TOLERANCE)))
                            : name.startsWith("c-") ? String.format("(c) is held to a load below %.2f", LIGHT_LOAD_BELOW) : "no load check"));
            say("  (TRUE CAPACITY (split): of each subtask's gaps between consecutive departures, those with no sample of its"
                    + " task thread parked (not RUNNABLE) strictly inside, nor the longest where the JVM counted a wait between two"
                    + " samples that saw none, their number over their sum; busy: their sum over the"
                    + " range; parked: the gaps left out. Secondary: G=" + G_MS + "ms, the gaps below G whatever the thread did;"
                    + " thread-state, records finished in the sampler's intervals RUNNABLE at both ends over their length. o/t:"
                    + " ours against the split truth over the logged range; f/t': Flink's against the split truth over the range"
                    + " of its own two snapshots; gauge: its last reading before the job ended, at s into the range, over the span"
                    + " (s) it measured; g/t: against the split truth over that span; t(1.5s), g/t1.5: the truth over the 1.5 s"
                    + " before the reading, and the gauge against it; g/ours: against analyze's whole-run capacity. *: Flink's"
                    + " busyTimeMsPerSecond at the last snapshot used)");
            Map<String, String> po = oursRow("operator", ours(HashJob.PARSE), -1), so = oursRow("operator", "0-source", -1);
            OperatorTruth pt = threadStateOperator(HashJob.PARSE);
            say(String.format("  the source's thread (source, 0-source, 1-parse chained): thread-state truth %s/s (busy %s, %s/s); ours: 1-parse"
                    + " %s/s (load %s), 0-source %s/s (load %s)", num(pt.capacity()), share(pt.busyShare()), num(pt.throughput()),
                    num(number(po.get("capacity"))), fix(po.get("load")), num(number(so.get("capacity"))), fix(so.get("load"))));
            say("  bottleneck: capacity.csv " + bottleneck() + "; summary.txt's verdict " + verdictBottleneck() + ":");
            Path summary = analysis.resolve("summary.txt");
            if (Files.isRegularFile(summary)) {
                for (String line : Files.readAllLines(summary)) {
                    if (line.toLowerCase().contains("bottleneck")) say("    " + line.strip());
                }
            }
        }

        /** Where the gauges' readings came from, and why a subtask has none. */
        void printGauges() {
            StringBuilder b = new StringBuilder();
            for (int i = 0; i < P; i++) {
                b.append(i == 0 ? "" : "; ").append('#').append(i).append(' ');
                if (gaugeIds[i] == null) {
                    b.append("never listed");
                } else if (gaugeSnap[i] == null) {
                    b.append(String.format("no reading to hold against the truth (while it had records to do: %d fresh readings with"
                            + " a number, %d NaN; %d of them set aside, their span not placed well)", gaugeNumbers[i], gaugeNaNs[i],
                            gaugeSetAside[i]));
                } else {
                    b.append(String.format("\"%s\", %d fresh readings with a number and %d NaN before the job ended, the one used at"
                            + " %.2f s of the range%s", gaugeIds[i], gaugeNumbers[i], gaugeNaNs[i], gaugeSeconds(i),
                            gaugeSetAside[i] == 0 ? "" : String.format(" (%d later set aside, their span not placed well)",
                                    gaugeSetAside[i])));
                }
            }
            say("  live gauge: " + b + (gaugeIdsListed.isEmpty() ? "; the vertex listed no metric of ours"
                    : "; the capacity gauges the vertex listed: " + String.join(", ", gaugeIdsListed)));
        }

        /**
         * The departure logs: how many departures each subtask logged in the
         * range, whether a log overflowed, and the gaps each truth left out:
         * the split truth's (a parked sample inside), and G's (G or longer):
         * how many and their total time. At a light load they should be about
         * one a burst and most of the range; saturated, few.
         */
        void printDepartures() {
            StringBuilder logged = new StringBuilder(), lost = new StringBuilder();
            for (int i = 0; i < P; i++) {
                Probe p = hashProbe(i);
                logged.append(i == 0 ? "" : ", ").append(String.format("#%d %,d (of %,d logged)", i, split(i).count(),
                        p.departures()));
                if (p.overflow() > 0) {
                    lost.append(String.format("; OVERFLOW: #%d's log was full, %,d departures not stored, its truth covers"
                            + " only the first %,d", i, p.overflow(), p.departures()));
                }
            }
            say(String.format("  departure log (2-hash's System.nanoTime() after collect returned, %,d slots a subtask): %s"
                    + " departures in the range%s", Truth.DEPARTURE_SLOTS, logged, lost.length() == 0 ? "; no overflow" : lost));
            StringBuilder gaps = new StringBuilder("split (parked in them):");
            for (int i = 0; i < P; i++) {
                Split d = split(i);
                gaps.append(String.format(" #%d %,d (%.2f s; %d seen by the JVM's count of waits alone)", i, d.parkedGaps(),
                        d.parkedNs() / 1e9, d.unseenGaps()));
            }
            gaps.append("; G=").append(G_MS).append(" ms (G or longer):");
            for (int i = 0; i < P; i++) {
                Departures d = departures(i);
                gaps.append(String.format(" #%d %,d (%.2f s)", i, d.longGaps(), d.longNs() / 1e9));
            }
            say(String.format("  departure gaps left out (count, total time; the range is %.2f s): %s", (to - from) / 1e9, gaps));
        }

        /** Every distinct REST snapshot: when answered, and per subtask its true time (placed by the truth) and its metrics. */
        void writeFlinkCsv(Path file) throws IOException {
            try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(file))) {
                StringBuilder h = new StringBuilder("answered_ns");
                for (int i = 0; i < P; i++) {
                    h.append(',').append(i).append(".true_ns");
                    for (String m : FlinkRest.METRICS) h.append(',').append(i).append('.').append(m);
                    h.append(',').append(i).append(".cloudprofiler.capacity");
                }
                w.println(h);
                for (Snapshot s : snapshots) {
                    StringBuilder l = new StringBuilder().append(s.answeredNanos() - rec.startNanos);
                    for (int i = 0; i < P; i++) {
                        l.append(',').append(timeOf(s, i) - rec.startNanos).append(',').append(s.recordsIn()[i]).append(',')
                                .append(s.busyMs()[i]).append(',').append(s.busyPerSecond()[i]).append(',')
                                .append(s.idleMs()[i]).append(',').append(s.backPressuredMs()[i]).append(',').append(s.gauge()[i]);
                    }
                    w.println(l);
                }
            }
        }
    }

    /** An operator's truth over a range. */
    record OperatorTruth(double capacity, double busyShare, double throughput, long done) {}

    // ---- helpers

    void say(String line) {
        System.out.println(PREFIX + " " + line);
        printed.append(line).append('\n');
    }

    Set<Path> cplogs() throws IOException {
        try (Stream<Path> s = Files.list(cpLogDir)) {
            return new HashSet<>(s.filter(p -> p.getFileName().toString().contains(".cplog")).toList());
        }
    }

    static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) return;
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
        }
    }

    /** This JVM's garbage collections so far: count, ms. */
    static long[] gc() {
        long n = 0, ms = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            n += Math.max(0, b.getCollectionCount());
            ms += Math.max(0, b.getCollectionTime());
        }
        return new long[] {n, ms};
    }

    /** The machine's 1, 5 and 15 min load averages (/proc/loadavg), "?" where there is none. */
    static String loadAverage() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+");
            return f[0] + " " + f[1] + " " + f[2];
        } catch (IOException | RuntimeException e) {
            return "?";
        }
    }

    /** summary.txt's verdict line: "   ! Bottleneck: 2-hash (2 instances), capacity ..." (the "!" when saturated). */
    static final Pattern VERDICT = Pattern.compile("^\\s*!?\\s*Bottleneck: (not named|[^\\s,(:]+)");

    static String pct(double x) {
        return String.format("%.0f%%", 100 * x);
    }

    static double round100(double x) {
        return Math.round(x / 100) * 100.0;
    }

    static double number(String s) {
        if (s == null || s.isEmpty()) return Double.NaN;
        try {
            return Double.parseDouble(s);
        } catch (NumberFormatException e) {
            return Double.NaN;
        }
    }

    static String num(double x) {
        return Double.isNaN(x) || Double.isInfinite(x) ? "-" : String.format("%,.0f", x);
    }

    static String fix(String s) {
        double x = number(s);
        return Double.isNaN(x) ? "-" : String.format("%.2f", x);
    }

    static String share(double x) {
        return Double.isNaN(x) ? "-" : String.format("%.2f", x);
    }

    static String ratio(double x) {
        return Double.isNaN(x) || Double.isInfinite(x) ? "-" : String.format("%.3f", x);
    }

    static String since(long t, long start) {
        return t == 0 ? "never" : String.format("%.2f s", (t - start) / 1e9);
    }

    static String ms(long ns) {
        return String.format("%.0f ms", ns / 1e6);
    }

    static long percentile(long[] sorted, double q) {
        if (sorted.length == 0) return 0;
        return sorted[(int) Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))];
    }
}
