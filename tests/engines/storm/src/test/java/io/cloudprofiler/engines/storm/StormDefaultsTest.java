package io.cloudprofiler.engines.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.cloudprofiler.engines.storm.DigestTopology.Variant;
import io.cloudprofiler.storm.MarkingState;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.KillOptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Issue 43's test on Storm: {@link DigestTopology} in Storm 2.8.3's
 * default settings, profiled as docs/storm.md says, wrapped (W) and with
 * the task hook alone (H), each overloaded (a: the spout unthrottled) and at
 * {@value #LIGHT} of what (a) carried, in bursts (b). For each run, side by
 * side and over the same range of time:
 * <ul>
 * <li><b>ours</b>: {@code cloudprofiler analyze} on the run's marks
 * (capacity.csv's whole-run rows, summary.txt);</li>
 * <li><b>the truth</b>, never from the marks: the times each 1-decode and
 * 2-digest execute ended, logged by the bolt, split by the executor
 * thread's states as a sampler saw them ({@link SplitTruth}: TRUE
 * CAPACITY, the one the checks hold us to); and, secondary, the same log
 * cut at gap thresholds ({@link Departures}) and the sampled states alone
 * ({@link TruthSampler});</li>
 * <li><b>the live gauge</b> {@code cloudprofiler.capacity} of each wrapped
 * bolt task (W), read through Storm's metrics v2 registry while the run
 * goes ({@link CapacityGauges});</li>
 * <li><b>Storm UI</b>: executed x execute latency / window from the
 * executor stats of getTopologyInfo ({@link StormUi}), and the rate that
 * implies per busy second.</li>
 * </ul>
 *
 * <p>One run: a warm-up topology, the same one at the same rate for
 * {@value #WARM_UP_S} s, drained, killed and its logs discarded (the
 * library has no way to pause the marks: they go to files that close at
 * the kill); then the logged topology, its spout gated ({@link
 * RunControl}): Storm's stats are read and the sampler started with the
 * topology up and nothing emitted, the gate opens for {@code engines.emit.s}
 * (default {@value #EMIT_S}) s, closes, and the topology drains: the range
 * ends when every tuple emitted has been through every bolt and acked.
 * Marks, truth and Storm's stats then cover the same tuples. Then the kill,
 * the logs moved to the run's directory, analyze.
 *
 * <p>Both topologies of a run are drained before they are killed: an
 * executor killed with a backlog goes on executing after its cleanup closed
 * its channels (Storm stops waiting for it after 100 ms), marks refused
 * and CPU taken from the next topology. And the next topology is submitted
 * only once the threads of the last one have ended.
 *
 * <p>The checks ({@link Checks}, one test each, every failure naming the
 * run, the task and the numbers) are issue 43's "How we know it works" for
 * Storm; each run's table ends with their outcome for it.
 *
 * <p>One setting differs from Storm's defaults, and it is the LocalCluster
 * daemons', not the topology's: {@code executor.metrics.frequency.secs} 1
 * instead of 60 ({@code -Dengines.storm.stats.secs=60} puts the default
 * back, to see it). Storm 2.8.3 writes the executor stats that
 * getTopologyInfo (and the UI) reads only that often (Worker: the executor
 * heartbeat timer, when no Pacemaker is used); at 60 s a run of seconds
 * would read nothing at all. It changes when the stats are published, not
 * how the topology runs.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class StormDefaultsTest {
    /** (b) offers this share of what (a) carried. */
    static final double LIGHT = 0.35;
    static final double WARM_UP_S = 3;
    /**
     * The gate stays open this long in a logged run: 4 s keeps the whole test
     * at 110-124 s here, under 2.5 minutes with the other vCPU busy (an
     * unthrottled run's backlog, and so its drain, grows with it; 6 s took
     * up to 2 min 40 s), and still gives each 2-digest task some 60,000
     * tuples in (a), 20 bursts in (b).
     */
    static final double EMIT_S = 4;
    /** (b)'s spout emits a burst every this many ms (RecordSpout says why). */
    static final double BURST_MS = 200;
    /** The longest a drain may take before the run goes on without it (said in its header). */
    static final double DRAIN_MAX_S = 40;
    static final String[] MEASURED = {DigestTopology.DECODE, DigestTopology.DIGEST};

    Path tool, runsDir, cpLogDir;
    final List<Run> runs = new ArrayList<>();
    long started;

    /** Everything one run gave. */
    static final class Run {
        final Variant variant;
        final String label, name;
        final double rate; // offered, tuples/s; 0 unthrottled
        Path dir;
        long emitted, acked, failed, kept, stored;
        double emitS, rangeS, drainS, warmUpDrainS;
        long openNs; // System.nanoTime() when the gate opened: the range's start
        long endNs; // System.nanoTime() when the drain was seen complete: the range's end
        boolean drained, warmUpDrained;
        final Map<String, TruthSampler.Truth> truth = new LinkedHashMap<>();
        /** The headline truth of each 1-decode and 2-digest task (its whole log classified). */
        final Map<String, SplitTruth> split = new LinkedHashMap<>();
        /** The secondary departure truth (gap thresholds) of each 1-decode and 2-digest task. */
        final Map<String, Departures> departures = new LinkedHashMap<>();
        /** The sampler's intervals between sweeps, ns: median, 99th percentile, longest. */
        long[] samplerGaps = {0, 0, 0};
        /** The live gauge's reads by wrapped task (W); empty for H, null when Storm never prepared the reader. */
        Map<String, List<CapacityGauges.Read>> gauges = Map.of();
        /** The same variant's unthrottled run, whose median gaps are "at saturation"; null for that run itself. */
        final Run saturated;
        double burstMs;
        /** The JVM's garbage collections that overlap the range. */
        List<GcPauses.Pause> gc = List.of();
        /** What the machine's CPUs did over the range (CpuUse). */
        String cpu = "";
        StormUi.Snapshot uiStart, uiEnd;
        boolean uiFinal;
        Analysis analysis;
        List<String> logFiles = List.of();
        long markingFailures;
        double seconds;

        Run(Variant variant, String label, double rate, Run saturated) {
            this.variant = variant;
            this.label = label;
            this.name = variant.letter + "-" + label;
            this.rate = rate;
            this.saturated = saturated;
        }

        /** A task's median gap between departures in the same variant's unthrottled run; -1 unknown. */
        long saturationMedianGapNs(String task) {
            Departures d = (saturated == null ? this : saturated).departures.get(task);
            return d == null ? -1 : d.medianGapNs();
        }

        /** Source tuples the topology took a second over the range: what (b)'s rate is a share of. */
        double carried() {
            return emitted / rangeS;
        }

        List<String> tasks(String component) {
            return truth.keySet().stream().filter(t -> t.startsWith(component + "#")).toList();
        }

        StormUi.Ui ui(String task) {
            return StormUi.between(uiStart, uiEnd, task, rangeS);
        }

        /** The split truth of a task over (a, b], with the JVM's pauses in its service gaps. */
        SplitTruth.Split split(String task, long a, long b) {
            return split.get(task).over(a, b, gc.stream().mapToLong(GcPauses.Pause::startNs).toArray(),
                    gc.stream().mapToLong(GcPauses.Pause::endNs).toArray());
        }

        /** The split truth of a task over the logged range. */
        SplitTruth.Split split(String task) {
            return split(task, openNs, endNs);
        }

        /**
         * The skew-aware TRUE CAPACITY of an operator, as capacity.csv's
         * operator row defines capacity (the highest arrival rate the tasks
         * sustain given how arrivals are shared among them): the smallest of
         * a task's split capacity over its share of the operator's
         * departures (every tuple is drained, so departures are arrivals).
         */
        double splitSkewAware(String component) {
            return skewAware(component, false);
        }

        /** The same with the GC time taken out of each task's service gaps: a diagnostic (SplitTruth.Split#capacityWithoutGc). */
        double splitSkewAwareWithoutGc(String component) {
            return skewAware(component, true);
        }

        private double skewAware(String component, boolean withoutGc) {
            long total = 0;
            for (String t : tasks(component)) total += split(t).count();
            double min = Double.NaN;
            for (String t : tasks(component)) {
                SplitTruth.Split s = split(t);
                double c = (withoutGc ? s.capacityWithoutGc() : s.capacity()) / (s.count() / (double) total);
                if (Double.isNaN(min) || c < min) min = c;
            }
            return min;
        }
    }

    @BeforeAll
    @Timeout(900)
    @SuppressWarnings("try") // LocalCluster.close() throws Exception
    void measure() throws Exception {
        started = System.nanoTime();
        tool = Path.of(System.getProperty("cloudprofiler.tool", "../../../build/cloudprofiler")).toAbsolutePath();
        assertTrue(Files.isExecutable(tool), tool + ": no tool (-Dcloudprofiler.native.dir=/work/main/build)");
        String dir = System.getenv("CP_LOG_DIR");
        assertNotNull(dir, "surefire sets CP_LOG_DIR (pom.xml)");
        cpLogDir = Path.of(dir);
        runsDir = Path.of(System.getProperty("engines.run.dir", cpLogDir.getParent().toString()));
        Files.createDirectories(cpLogDir);
        double emitS = Double.parseDouble(System.getProperty("engines.emit.s", "" + EMIT_S));
        int statsSecs = Integer.getInteger("engines.storm.stats.secs", 1);
        double burstMs = Double.parseDouble(System.getProperty("engines.burst.ms", "" + BURST_MS));

        // The digest's work is calibrated as its class loads: here, before
        // Storm's threads start.
        long tc = System.nanoTime();
        int rounds = DigestBolt.ROUNDS;
        System.out.printf(Locale.ROOT, "[storm engines] 2-digest: %d SHA-256 rounds a tuple (%.1f ns a round, calibrated in %.1f s: %.1f us)%n",
                rounds, DigestBolt.NANOS_PER_ROUND, (System.nanoTime() - tc) / 1e9, rounds * DigestBolt.NANOS_PER_ROUND / 1e3);
        long t0 = System.nanoTime();
        LocalCluster.Builder builder = new LocalCluster.Builder()
                .withDaemonConf(Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS, 1) // a kill's shutdown, not the topology
                .withDaemonConf(Config.EXECUTOR_METRICS_FREQUENCY_SECS, statsSecs) // see the class comment
                // The reader of the live gauges, where a storm.yaml lists a
                // reporter: the topologies' own configuration stays Storm's.
                .withDaemonConf(Config.TOPOLOGY_METRICS_REPORTERS, List.of(CapacityGauges.reporterConf()));
        try (LocalCluster cluster = builder.build()) {
            System.out.printf(Locale.ROOT, "[storm engines] LocalCluster up in %.1f s (executor stats published every %d s); runs in %s"
                    + " (Storm's own warnings in storm.log there)%n", (System.nanoTime() - t0) / 1e9, statsSecs, runsDir);
            for (Variant v : Variant.values()) {
                Run a = measureRun(cluster, new Run(v, "a", 0, null), emitS, burstMs);
                measureRun(cluster, new Run(v, "b", LIGHT * a.carried(), a), emitS, burstMs);
            }
        }
        System.out.printf(Locale.ROOT, "[storm engines] %d runs in %.1f s (the LocalCluster's start and stop included)%n", runs.size(),
                (System.nanoTime() - started) / 1e9);
    }

    /** One run (see the class comment); prints its table as soon as it is done. */
    Run measureRun(LocalCluster cluster, Run run, double emitS, double burstMs) throws Exception {
        long tStart = System.nanoTime();
        runs.add(run);
        run.burstMs = burstMs;
        run.dir = runsDir.resolve(run.name);
        Path logs = run.dir.resolve("cp-logs");
        Files.createDirectories(logs);

        // The warm-up: JIT, Storm's first buffers, the library's first channels. Its files go.
        Set<Path> before = cplogs(cpLogDir);
        RunControl.Counts counts = submit(cluster, run, run.name + "-warm-up");
        String warmUpId = StormUi.topologyId(cluster, run.name + "-warm-up");
        long open = counts.open();
        Thread.sleep(Math.round(WARM_UP_S * 1e3));
        long closed = counts.close();
        RunControl.Counts warm = counts;
        run.warmUpDrained = waitFor(() -> drained(warm), DRAIN_MAX_S);
        run.warmUpDrainS = (System.nanoTime() - closed) / 1e9;
        kill(cluster, run.name + "-warm-up");
        CapacityGauges.forget(warmUpId);
        for (Path f : cplogs(cpLogDir)) {
            if (!before.contains(f)) Files.delete(f);
        }

        // The logged topology, gated.
        long failuresBefore = MarkingState.failures();
        before = cplogs(cpLogDir);
        RunControl.Counts logged = submit(cluster, run, run.name);
        String id = StormUi.topologyId(cluster, run.name);
        run.uiStart = StormUi.take(cluster, id);
        TruthSampler sampler = new TruthSampler(TaskCounter.all()).start();
        // The gauges are read from before the gate opens, so that the gauge
        // has a read to measure from when the tuples come.
        CapacityGauges.Sampler gauges = null;
        if (run.variant == Variant.WRAPPED) {
            Map<String, Integer> measured = new LinkedHashMap<>();
            for (TaskCounter c : TaskCounter.all()) {
                if (c.logsDepartures()) measured.put(c.name(), c.task);
            }
            gauges = CapacityGauges.start(id, measured);
            if (gauges == null) run.gauges = null;
        }
        GcPauses gc = GcPauses.start();
        CpuUse cpuAtOpen = CpuUse.now();
        open = logged.open();
        Thread.sleep(Math.round(emitS * 1e3));
        closed = logged.close();
        run.emitS = (closed - open) / 1e9;
        run.drained = waitFor(() -> drained(logged), DRAIN_MAX_S);
        TruthSampler.Series[] series = sampler.stop();
        if (gauges != null) run.gauges = gauges.finish(); // the last read: the gauge's last second of the range
        long end = System.nanoTime();
        run.cpu = CpuUse.between(cpuAtOpen, CpuUse.now());
        long opened = open;
        run.gc = gc.stop().stream().filter(p -> p.endNs() > opened && p.startNs() < end).toList();
        run.rangeS = (end - open) / 1e9;
        run.drainS = (end - closed) / 1e9;
        run.emitted = logged.emitted.sum();
        run.acked = logged.acked.sum();
        run.failed = logged.failed.sum();
        run.kept = logged.kept.sum();
        run.stored = done(DigestTopology.STORE);
        Map<String, TruthSampler.Series> byTask = new LinkedHashMap<>();
        for (TruthSampler.Series s : series) {
            run.truth.put(s.task, TruthSampler.truth(s));
            byTask.put(s.task, s);
        }
        // The drain is complete: every execute has ended, so the logs are whole.
        for (TaskCounter c : TaskCounter.all()) {
            if (!c.logsDepartures()) continue;
            long[] log = c.departures();
            run.split.put(c.name(), new SplitTruth(c.name(), log, c.overflow(), byTask.get(c.name())));
            run.departures.put(c.name(), new Departures(c.name(), log, c.overflow(), open, end));
        }
        run.samplerGaps = TruthSampler.intervals(series[0]);
        run.openNs = open;
        run.endNs = end;
        TruthSampler.write(series, open, run.dir.resolve("truth-samples.csv"));
        writeRaw(run);
        run.uiEnd = finalStats(cluster, id, run);
        Files.writeString(run.dir.resolve("storm-stats.txt"), "start of the range: " + run.uiStart + "\nend of the range:   " + run.uiEnd
                + (run.uiFinal ? "" : " (not confirmed final)") + "\nwindow: " + run.rangeS + " s\n");
        kill(cluster, run.name);
        CapacityGauges.forget(id);
        run.markingFailures = MarkingState.failures() - failuresBefore;

        List<String> moved = new ArrayList<>();
        for (Path f : cplogs(cpLogDir)) {
            if (before.contains(f)) continue;
            Files.move(f, logs.resolve(f.getFileName()));
            moved.add(f.getFileName().toString());
        }
        moved.sort(null);
        run.logFiles = moved;
        // H: with the durations, for "Where the p99 goes"; W: without, as the issue ran it.
        run.analysis = Analysis.run(tool, logs, run.dir.resolve("analysis"), run.variant == Variant.HOOK);
        run.seconds = (System.nanoTime() - tStart) / 1e9;
        String table = Tables.run(run);
        System.out.print(table);
        Files.writeString(run.dir.resolve("table.txt"), table);
        Files.writeString(runsDir.resolve("tables.txt"), table, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        return run;
    }

    /** departures.csv (task, ns since the gate opened) and, W, gauges.csv (task, ns since the gate opened, value, the span's start). */
    static void writeRaw(Run run) throws IOException {
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(run.dir.resolve("departures.csv")))) {
            w.println("task,t_ns");
            for (Departures d : run.departures.values()) d.write(w, run.openNs);
        }
        if (run.gauges == null || run.gauges.isEmpty()) return;
        try (PrintWriter w = new PrintWriter(Files.newBufferedWriter(run.dir.resolve("gauges.csv")))) {
            w.println("task,t_ns,capacity,span_from_ns");
            for (Map.Entry<String, List<CapacityGauges.Read>> e : run.gauges.entrySet()) {
                for (CapacityGauges.Read r : e.getValue()) {
                    w.printf(Locale.ROOT, "%s,%d,%s,%s%n", e.getKey(), r.at() - run.openNs, r.value(), r.spanFrom() == 0 ? "" : r.spanFrom() - run.openNs);
                }
            }
        }
    }

    /**
     * Every tuple emitted has been through every bolt (the digest's kept
     * ones through the store) and acked; the tasks' counters are the
     * topology's own (the registry holds the last one submitted).
     */
    static boolean drained(RunControl.Counts counts) {
        long emitted = counts.emitted.sum();
        return done(DigestTopology.DECODE) == emitted && done(DigestTopology.DIGEST) == emitted
                && done(DigestTopology.STORE) == counts.kept.sum() && counts.acked.sum() + counts.failed.sum() == emitted;
    }

    /** The tuples a component's tasks have done. */
    static long done(String component) {
        long n = 0;
        for (TaskCounter c : TaskCounter.all()) {
            if (c.component.equals(component)) n += c.done();
        }
        return n;
    }

    /**
     * Submits a topology with the run's variant and rate and returns its
     * counts once every task is up (its counter made in prepare or open) and
     * the spout is being called (the topology is active). The gate is
     * closed: nothing is emitted yet.
     */
    RunControl.Counts submit(LocalCluster cluster, Run run, String name) throws Exception {
        RunControl.Counts counts = RunControl.next();
        TaskCounter.reset();
        cluster.submitTopology(name, DigestTopology.config(run.variant), DigestTopology.build(run.variant, run.rate, run.burstMs));
        int tasks = 1 + 1 + DigestTopology.DIGEST_TASKS + 1;
        boolean up = waitFor(() -> {
            List<TaskCounter> all = TaskCounter.all();
            return all.size() == tasks && all.stream().anyMatch(c -> c.component.equals(DigestTopology.SPOUT) && c.thread() != null);
        }, 120);
        assertTrue(up, name + ": not every task came up: " + TaskCounter.all().stream().map(TaskCounter::name).toList());
        return counts;
    }

    /**
     * Kills the topology submitted last and waits until every task's
     * cleanup has closed its channels (the wrapped tasks' and the hook's),
     * so that its files are complete when they are moved, and until its
     * executor threads have ended, so that none runs beside the next one.
     */
    static void kill(LocalCluster cluster, String name) throws Exception {
        List<Thread> threads = TaskCounter.all().stream().map(TaskCounter::thread).filter(t -> t != null).toList();
        KillOptions kill = new KillOptions();
        kill.set_wait_secs(0);
        cluster.killTopologyWithOpts(name, kill);
        assertTrue(waitFor(() -> MarkingState.open() == 0, 60), name + ": channels still open 60 s after the kill");
        assertTrue(waitFor(() -> threads.stream().noneMatch(Thread::isAlive), 60), name + ": executor threads alive 60 s after the kill");
    }

    /**
     * The stats as of the end of the range: Storm publishes them with each
     * executor heartbeat, so wait until two heartbeats written after the
     * drain agree (nothing executes after it: the second repeats the
     * first). Gives up after 10 s and keeps the last, flagged.
     */
    static StormUi.Snapshot finalStats(LocalCluster cluster, String id, Run run) throws Exception {
        StormUi.Snapshot first = StormUi.take(cluster, id), prev = first, last = first;
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() < deadline) {
            Thread.sleep(200);
            last = StormUi.take(cluster, id);
            if (last.uptime() == prev.uptime()) continue;
            if (last.uptime() >= first.uptime() + 2 && last.sameCounts(prev)) {
                run.uiFinal = true;
                return last;
            }
            prev = last;
        }
        return last;
    }

    static Set<Path> cplogs(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) return Set.of();
        try (Stream<Path> s = Files.list(dir)) {
            return new HashSet<>(s.filter(p -> p.getFileName().toString().contains(".cplog")).toList());
        }
    }

    /** Polls every 5 ms until done or timeoutS; whether it got there. */
    static boolean waitFor(BooleanSupplier done, double timeoutS) throws InterruptedException {
        long deadline = System.nanoTime() + Math.round(timeoutS * 1e9);
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) return false;
            Thread.sleep(5);
        }
        return true;
    }

    // ---- the checks: issue 43's "How we know it works" for Storm (Checks
    // holds them and their tolerances). Each test collects its failures over
    // every run, so that one failing run does not hide what the others showed.

    /** Four runs; in each, tuples reached the sink (all of them, acked), every component logged, analyze exited 0, no mark refused. */
    @Test
    void everyRunRanAndWasAnalyzed() {
        assertEquals(4, runs.size(), "runs measured");
        failIfAny(Checks.Kind.CERTAIN);
    }

    /** In every run, capacity.csv's bottleneck column and summary.txt's verdict name 2-digest; 1-decode is never named. */
    @Test
    void bottleneckIs2Digest() {
        failIfAny(Checks.Kind.BOTTLENECK);
    }

    /**
     * In every run, each 2-digest task's capacity (capacity.csv's whole-run
     * instance row) within 10% of its split truth, and the operator row
     * within 10% of the skew-aware split truth.
     */
    @Test
    void capacityWithinTenPercentOfTheSplitTruth() {
        failIfAny(Checks.Kind.CAPACITY);
    }

    /**
     * In every run, each 2-digest task's busy_share within 0.10 of the split
     * truth's busy share, and at least as close to it as Storm UI's
     * (executed x execute latency / window), or within 0.03 of it.
     */
    @Test
    void busyShareAtLeastAsCloseAsStormUis() {
        failIfAny(Checks.Kind.BUSY_SHARE);
    }

    /** 2-digest's load below 0.8 in the light runs (b), at least 0.9 in the overloaded runs (a). */
    @Test
    void loadTellsSaturatedFromNot() {
        failIfAny(Checks.Kind.LOAD);
    }

    /** With the task hook alone (H), summary.txt's "Where the p99 goes" names a part other than "other". */
    @Test
    void p99TakenApartWithTheHookAlone() {
        failIfAny(Checks.Kind.P99);
    }

    /**
     * With wrapped bolts (W), each 2-digest task's live gauge capacity (the
     * median of its reads in the logged range) within 15% of the split truth
     * over the span those reads cover.
     */
    @Test
    void liveGaugeWithinFifteenPercentOfTheSplitTruth() {
        failIfAny(Checks.Kind.GAUGE);
    }

    void failIfAny(Checks.Kind kind) {
        List<String> failures = Checks.failures(runs, kind);
        if (!failures.isEmpty()) fail("issue 43, " + kind.what + ":\n  " + String.join("\n  ", failures));
    }
}
