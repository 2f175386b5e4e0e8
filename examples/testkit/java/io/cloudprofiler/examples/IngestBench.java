package io.cloudprofiler.examples;

import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The paper's ingestion result (section 4.4, Figs. 3 and 4) for one engine,
 * side by side ({@code make bench-ingest}): the same job fed by {@code gen
 * send} two ways, its sources deserializing the events themselves (plain,
 * the paper's "StormIR") and the object factory's threads deserializing
 * them (the paper's "CPIR"). For each: {@code gen maxrate}'s highest rate
 * without a tuple lost or the sender held back (the paper's method), the
 * GC time per second the JVM spent during the search (its
 * GarbageCollectorMXBeans: the engine runs in this JVM), and the rate at
 * the sink every 200 ms at a constant emission at each variant's maximum
 * (Fig. 3 and 4's rate over time), with the GC time in each interval.
 * Test code shared by the Flink and Storm examples (pom.xml's
 * build-helper); a benchmark, not a test: it prints, it asserts nothing.
 */
public final class IngestBench {
    private IngestBench() {}

    /** A job of one engine, in this JVM. */
    public interface Engine {
        /** Starts the job, plain or through the factory; returns the port its factory listens on. */
        int start(boolean plain) throws Exception;

        /** Tuples at the job's sink so far (this JVM's). */
        long sink();

        /** Stops the job. */
        void stop() throws Exception;
    }

    /** What maxrate found, and the GC time during the search. */
    record Search(double max, double failed, String table, double gcMsPerS, long gcCount, double seconds) {}

    /** A constant-rate run, sampled. */
    record Constant(double rate, boolean reached, double achieved, List<double[]> samples, double gcMsPerS) {}

    static final int THREADS = 2;
    static final double SAMPLE_S = 0.2;

    /**
     * Runs the comparison on e and prints it, in one piece at the end (the
     * engines log to the same console); name: the engine, as printed.
     */
    public static void run(String name, Engine e) throws Exception {
        StringBuilder report = new StringBuilder();
        try {
            compare(name, e, report);
        } finally {
            System.out.println();
            System.out.println("==== bench-ingest: " + name);
            System.out.print(report);
            System.out.flush();
        }
    }

    static void compare(String name, Engine e, StringBuilder out) throws Exception {
        String tool = System.getProperty("cloudprofiler.tool");
        if (tool == null || !Files.isExecutable(Path.of(tool))) throw new IllegalStateException("-Dcloudprofiler.tool: the cloudprofiler executable (make build)");
        String duration = System.getProperty("cloudprofiler.bench.duration", "2s");
        double constantS = Double.parseDouble(System.getProperty("cloudprofiler.bench.constant", "6"));
        out.append(String.format(Locale.ROOT, "== %s: ingestion, plain (the sources deserialize) against the object factory; %s, JDK %s, %d vCPUs, heap %d MiB, load %s%n",
                name, gcNames(), Runtime.version(), Runtime.getRuntime().availableProcessors(), Runtime.getRuntime().maxMemory() >> 20, loadavg()));
        Search[] found = new Search[2];
        for (int v = 0; v < 2; v++) {
            boolean plain = v == 0;
            int port = e.start(plain);
            try {
                found[v] = maxrate(tool, port, duration);
            } finally {
                e.stop();
            }
            out.append(String.format("-- %s, %s: gen maxrate --start 100k --duration %s --threads %d --synthetic --resolution 2%%%n%s",
                    name, variant(plain), duration, THREADS, found[v].table));
        }
        // Each variant at each one's maximum: the rate at the sink over time.
        List<String> lines = new ArrayList<>();
        for (int v = 0; v < 2; v++) {
            boolean plain = v == 0;
            int port = e.start(plain);
            try {
                for (int r = 0; r < 2; r++) {
                    if (found[r].max <= 0) continue;
                    Constant c = constant(tool, port, found[r].max, constantS, e);
                    lines.add(String.format(Locale.ROOT, "%-8s at %9.0f/s (%s's max): %s, sink %9.0f/s, GC %5.1f ms/s%n    sink k tuples/s every %.1f s: %s%n    GC ms in each:            %s%n",
                            variant(plain), c.rate, variant(r == 0), c.reached ? "reached" : "NOT REACHED", c.achieved, c.gcMsPerS, SAMPLE_S,
                            series(c.samples, 1), series(c.samples, 2)));
                    Thread.sleep(1000); // the queues drain
                }
            } finally {
                e.stop();
            }
        }
        out.append(String.format(Locale.ROOT, "-- %s: the highest rates (gen maxrate) and the GC time during each search%n", name));
        for (int v = 0; v < 2; v++) {
            Search s = found[v];
            out.append(String.format(Locale.ROOT, "%-8s %10.0f tuples/s (%.0f failed)   GC %6.1f ms/s, %d collections in %.0f s%n", variant(v == 0), s.max, s.failed,
                    s.gcMsPerS, s.gcCount, s.seconds));
        }
        out.append(String.format(Locale.ROOT, "factory / plain: %.2fx (the paper: 4.68M / 0.7-0.9M = 5.2-6.7x on GCE)%n", found[1].max / found[0].max));
        out.append(String.format("-- %s: the rate at the sink at a constant emission (Fig. 3, 4)%n", name));
        lines.forEach(out::append);
        out.append(String.format("load after: %s%n", loadavg()));
    }

    static String variant(boolean plain) {
        return plain ? "plain" : "factory";
    }

    /** gen maxrate against the job, and the JVM's GC time during it. */
    static Search maxrate(String tool, int port, String duration) throws Exception {
        long[] gc0 = gc();
        long t0 = System.nanoTime();
        String out = runTool(tool, "gen", "maxrate", "--to", "127.0.0.1:" + port, "--start", "100k", "--duration", duration, "--threads",
                "" + THREADS, "--synthetic", "--resolution", "2%", "--pause", "1s");
        double s = (System.nanoTime() - t0) / 1e9;
        long[] gc1 = gc();
        Matcher m = Pattern.compile("maximum sustainable throughput: (?:at least )?(\\d+) tuples/s(?: \\((\\d+) failed)?").matcher(out);
        double max = 0, failed = 0;
        if (m.find()) {
            max = Double.parseDouble(m.group(1));
            failed = m.group(2) == null ? 0 : Double.parseDouble(m.group(2));
        }
        return new Search(max, failed, out, (gc1[0] - gc0[0]) / s, gc1[1] - gc0[1], s);
    }

    /** gen send at rate for seconds, the sink sampled every SAMPLE_S: {t, k tuples/s, GC ms}. */
    static Constant constant(String tool, int port, double rate, double seconds, Engine e) throws Exception {
        Path out = Files.createTempFile("cp-ingest-bench", ".out");
        try {
            Process p = new ProcessBuilder(tool, "gen", "send", "--to", "127.0.0.1:" + port, "--rate", String.format(Locale.ROOT, "%.0f", rate),
                    "--duration", seconds + "s", "--threads", "" + THREADS, "--synthetic")
                    .redirectOutput(out.toFile()).redirectError(ProcessBuilder.Redirect.DISCARD).start();
            List<double[]> samples = new ArrayList<>();
            long start = System.nanoTime(), next = start;
            long n0 = e.sink(), last = n0;
            long[] gcStart = gc(), gcLast = gcStart;
            while (p.isAlive()) {
                next += (long) (SAMPLE_S * 1e9);
                long wait = next - System.nanoTime();
                if (wait > 0) p.waitFor(wait, TimeUnit.NANOSECONDS);
                long n = e.sink();
                long[] g = gc();
                samples.add(new double[] {(System.nanoTime() - start) / 1e9, (n - last) / SAMPLE_S / 1e3, g[0] - gcLast[0]});
                last = n;
                gcLast = g;
            }
            double s = (System.nanoTime() - start) / 1e9;
            String text = Files.readString(out, StandardCharsets.UTF_8);
            boolean reached = p.exitValue() == 0 && !text.contains("NOT REACHED");
            return new Constant(rate, reached, (e.sink() - n0) / s, samples, (gc()[0] - gcStart[0]) / s);
        } finally {
            Files.deleteIfExists(out);
        }
    }

    static String series(List<double[]> samples, int k) {
        StringBuilder b = new StringBuilder();
        for (double[] x : samples) b.append(String.format(Locale.ROOT, "%5.0f", x[k]));
        return b.toString().trim();
    }

    /** The GC time (ms) and collections so far, every collector. */
    static long[] gc() {
        long t = 0, n = 0;
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) {
            t += Math.max(b.getCollectionTime(), 0);
            n += Math.max(b.getCollectionCount(), 0);
        }
        return new long[] {t, n};
    }

    static String gcNames() {
        List<String> names = new ArrayList<>();
        for (GarbageCollectorMXBean b : ManagementFactory.getGarbageCollectorMXBeans()) names.add(b.getName());
        return String.join(" + ", names);
    }

    static String loadavg() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).trim();
        } catch (IOException x) {
            return "?";
        }
    }

    /** Runs the tool; its stdout (its stderr discarded). */
    static String runTool(String... args) throws Exception {
        Process p = new ProcessBuilder(args).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        p.waitFor();
        return out;
    }
}
