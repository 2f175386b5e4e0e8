package io.cloudprofiler.jmh;

import io.cloudprofiler.Baselines;
import io.cloudprofiler.Channel;
import io.cloudprofiler.CloudProfiler;
import io.cloudprofiler.HandlerType;
import io.cloudprofiler.LogFormat;
import io.cloudprofiler.Marks;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.IterationParams;

/**
 * ns per logTS from Java, next to two JNI floors measured in the same run
 * with the same JVM flags and the same mode (the Java twin of tests/c/bench.c).
 *
 * <p>Method: as the C bench, bursts of {@value #BURST} calls into an emptied
 * ring. Each iteration is one shot of {@value #BURST} calls
 * ({@link Mode#SingleShotTime} with batchSize); before it, a pause of
 * {@value #DRAIN_MS} ms lets the background drain empty the ring, so a
 * buffered channel never waits for ring space while it is measured (with
 * CP_RING_BLOCKS=32 the ring holds 32 x 64Ki = 2M records, twice a burst).
 * The first two warm-up shots are the ring's first lap (fresh pages). Every
 * benchmark, floors included, has the same shape: one static native call
 * with a counter field as tuple id, its result OR-ed into a field that is
 * checked after each iteration (a failing call would otherwise be measured
 * as a fast one). One benchmark thread, which is also the thread that runs
 * the setups: it becomes the owner of the owner-biased buffered channels,
 * and a setup that finds another thread fails the run (a second thread
 * would revoke the bias and measure the shared path).
 *
 * <p>The machine is shared and noisy (2 vCPUs): a floor measured minutes
 * apart from a benchmark may see another load. So, with CP_JMH_PAIRS set
 * (the Makefile sets it), each iteration's setup also times one burst of
 * each floor right before the shot, outside the measured time, and appends
 * them to that file: report.py then also gives the median of per-shot ratios
 * to the neighbouring floor, as tests/c/bench.c does. The paired floor next
 * to the floor benchmarks themselves checks that the two measure alike.
 *
 * <p>Why the buffered ratio is no lower through JNI than from C although
 * the JNI transition (~8 ns, emptyCall) is added to both sides: on JDK 17
 * HotSpot's native wrapper ends every call with a full fence (lock addl,
 * after the switch to _thread_in_native_trans), which serialises each call
 * with the next and drains LogTS's five stores. A C loop with the same fence
 * after each call moves LogTS / (rdtscp + store) from ~1.25 to ~1.33 here.
 *
 * <p>JMH's score of a shot is its time divided by @OperationsPerInvocation,
 * not by batchSize: report.py divides by batchSize too, giving ns per record.
 * (With ms as the unit and batchSize 1M, JMH's own score reads as ns per
 * call; the batch benchmark's shot is 1024 calls of 1024 ids.)
 */
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 8, batchSize = LogTSBench.BURST)
@Measurement(iterations = 15, batchSize = LogTSBench.BURST)
@Fork(value = 2, jvmArgsAppend = {"-XX:+UseSerialGC", "-Xms256m", "-Xmx256m"})
@Threads(1)
public class LogTSBench {
    static final int BURST = 1_000_000;
    static final int DRAIN_MS = 200;
    static final int BATCH = 1024;
    /** Where each shot's paired floors go (report.py reads them); none if unset. */
    static final String PAIRS = System.getenv("CP_JMH_PAIRS");

    /** The common state: a channel handle, the tuple id counter, the OR of the results. */
    public abstract static class Base {
        long ch;
        long id;
        long bad;
        private Thread thread;

        abstract long open();

        @Setup(Level.Trial)
        public void openChannel() {
            ch = open();
        }

        @Setup(Level.Iteration)
        public void drain(BenchmarkParams bp, IterationParams ip) throws InterruptedException, IOException {
            Thread t = Thread.currentThread();
            if (thread == null) thread = t;
            if (thread != t) {
                throw new IllegalStateException("iterations run on " + thread + " and " + t
                        + ": a second logging thread revokes the owner bias");
            }
            Thread.sleep(DRAIN_MS);  // let the background drain empty the ring
            if (PAIRS != null) pairedFloors(bp, ip);
        }

        // The floors again, as one burst each just before this shot, in the
        // shape of JMH's loop (state fields, a volatile read a call): the
        // neighbours in time that tests/c/bench.c compares each burst with.
        long pid;
        int pbad;
        volatile boolean spoiler;

        private void pairedFloors(BenchmarkParams bp, IterationParams ip) throws IOException {
            long t0 = System.nanoTime();
            for (int i = 0; i < BURST; i++) {
                if (spoiler) break;
                pbad |= Baselines.emptyCall(ch, pid++);
            }
            long t1 = System.nanoTime();
            for (int i = 0; i < BURST; i++) {
                if (spoiler) break;
                pbad |= Baselines.tscStore(ch, pid++);
            }
            long t2 = System.nanoTime();
            if (pbad != 0) throw new IllegalStateException("a floor call failed");
            String b = bp.getBenchmark();
            String line = b.substring(b.lastIndexOf('.') + 1) + "\t" + ProcessHandle.current().pid() + "\t"
                    + ip.getType() + "\t" + (double) (t1 - t0) / BURST + "\t" + (double) (t2 - t1) / BURST + "\n";
            Files.write(Paths.get(PAIRS), line.getBytes(StandardCharsets.US_ASCII),
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        }

        @TearDown(Level.Iteration)
        public void check() {
            if (bad != 0) {
                int code = (int) (bad < 0 && bad >= Integer.MIN_VALUE ? bad : CloudProfiler.batchError(bad));
                throw new IllegalStateException("a call failed: " + CloudProfiler.errorString(code) + " (" + bad + ")");
            }
        }

        @TearDown(Level.Trial)
        public void closeChannel() {
            if (ch > 0) {
                int rc = CloudProfiler.closeChannel(ch);
                if (rc != 0) throw new IllegalStateException("close: " + CloudProfiler.errorString(rc));
            }
        }
    }

    static long openRaw(String name, LogFormat f, HandlerType h) {
        return CloudProfiler.openChannel(name, f, h);
    }

    /** The floors need no channel (their C bodies ignore the handle). */
    @State(Scope.Thread)
    public static class NoChannel extends Base {
        @Override
        long open() {
            if (!CloudProfiler.isAvailable()) throw CloudProfiler.loadError();
            return 0;
        }
    }

    @State(Scope.Thread)
    public static class BufferedBinaryTsc extends Base {
        @Override
        long open() {
            return openRaw("jmh-buf-binary-tsc", LogFormat.BINARY_TSC, HandlerType.BUFFER_IDENTITY);
        }
    }

    @State(Scope.Thread)
    public static class BufferedZstdTsc extends Base {
        @Override
        long open() {
            return openRaw("jmh-buf-zstd-tsc", LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
        }
    }

    @State(Scope.Thread)
    public static class Nullh extends Base {
        @Override
        long open() {
            return openRaw("jmh-nullh", LogFormat.BINARY_TSC, HandlerType.NULLH);
        }
    }

    @State(Scope.Thread)
    public static class Fpc extends Base {
        @Override
        long open() {
            return openRaw("jmh-fpc", LogFormat.BINARY_TSC, HandlerType.FASTPERIODICCOUNTER);
        }
    }

    /** The same channel kind through the Channel object. */
    @State(Scope.Thread)
    public static class ChannelZstdTsc extends Base {
        Channel channel;

        @Override
        long open() {
            channel = Channel.open("jmh-channel-zstd-tsc", LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
            return channel.handle();
        }
    }

    /** Batches of 1024 ids on BUFFER_IDENTITY ZSTD_TSC. */
    @State(Scope.Thread)
    public static class BatchZstdTsc extends Base {
        final long[] ids = new long[BATCH];

        @Override
        long open() {
            return openRaw("jmh-batch-zstd-tsc", LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
        }
    }

    /** A second channel beside Base's: an instance's in and out. */
    @State(Scope.Thread)
    public static class PairZstdTsc extends Base {
        long out;

        @Override
        long open() {
            out = openRaw("jmh-pair#0 out", LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
            return openRaw("jmh-pair#0 in", LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
        }

        @TearDown(Level.Trial)
        public void closeOut() {
            int rc = CloudProfiler.closeChannel(out);
            if (rc != 0) throw new IllegalStateException("close: " + CloudProfiler.errorString(rc));
        }
    }

    /**
     * The same pair under names that mark nothing ("in" and "out" are the
     * roles the library notes waits for): the pair without the notes of
     * the thread's waits, the floor of what the notes cost.
     */
    @State(Scope.Thread)
    public static class PlainPairZstdTsc extends PairZstdTsc {
        @Override
        long open() {
            out = openRaw("jmh-plain#0 left", LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
            return openRaw("jmh-plain#0 entered", LogFormat.ZSTD_TSC, HandlerType.BUFFER_IDENTITY);
        }
    }

    /**
     * What the engine modules' wrappers do a record (cloudprofiler-flink's
     * Profiled, cloudprofiler-storm's): Marks.in and Marks.out (their
     * records note the thread's waits, which the live capacity reads),
     * without and with the live metrics (a SERVICERATE count channel, whose
     * periods are throughput.csv's, and the counts the gauges read). Base's
     * channel is a NULLH one for the paired floors.
     */
    @State(Scope.Thread)
    public static class MarksState extends Base {
        Marks marks;

        boolean withRate() {
            return false;
        }

        @Override
        long open() {
            marks = Marks.open(withRate() ? "jmh-marks-rate" : "jmh-marks", "0", false, withRate());
            return openRaw("jmh-marks-floor", LogFormat.BINARY_TSC, HandlerType.NULLH);
        }

        @TearDown(Level.Trial)
        public void closeMarks() {
            marks.close(); // throws if a mark was refused
        }
    }

    @State(Scope.Thread)
    public static class MarksRateState extends MarksState {
        @Override
        boolean withRate() {
            return true;
        }
    }

    // ---- floors

    @Benchmark
    public void floorEmptyCall(NoChannel s) {
        s.bad |= Baselines.emptyCall(s.ch, s.id++);
    }

    @Benchmark
    public void floorTscStore(NoChannel s) {
        s.bad |= Baselines.tscStore(s.ch, s.id++);
    }

    // ---- CloudProfiler.logTS(ch, id)

    @Benchmark
    public void bufferedBinaryTsc(BufferedBinaryTsc s) {
        s.bad |= CloudProfiler.logTS(s.ch, s.id++);
    }

    @Benchmark
    public void bufferedZstdTsc(BufferedZstdTsc s) {
        s.bad |= CloudProfiler.logTS(s.ch, s.id++);
    }

    @Benchmark
    public void nullh(Nullh s) {
        s.bad |= CloudProfiler.logTS(s.ch, s.id++);
    }

    @Benchmark
    public void fastPeriodicCounter(Fpc s) {
        s.bad |= CloudProfiler.logTS(s.ch, s.id++);
    }

    // ---- a marked tuple: its in and its out, as bare calls and through Marks

    @Benchmark
    public void pairZstdTsc(PairZstdTsc s) {
        long id = s.id++;
        s.bad |= CloudProfiler.logTS(s.ch, id);
        s.bad |= CloudProfiler.logTS(s.out, id);
    }

    @Benchmark
    public void plainPairZstdTsc(PlainPairZstdTsc s) {
        long id = s.id++;
        s.bad |= CloudProfiler.logTS(s.ch, id);
        s.bad |= CloudProfiler.logTS(s.out, id);
    }

    @Benchmark
    public void marksInOut(MarksState s) {
        long id = s.id++;
        s.marks.in(id);
        s.marks.out(id);
    }

    @Benchmark
    public void marksInOutMetrics(MarksRateState s) {
        long id = s.id++;
        s.marks.in(id);
        s.marks.out(id);
    }

    // ---- Channel.logTS(id)

    @Benchmark
    public void channelZstdTsc(ChannelZstdTsc s) {
        s.bad |= s.channel.logTS(s.id++);
    }

    // ---- CloudProfiler.logTS(ch, ids, 1024): a shot is 1024 calls (1Mi records,
    // still half the ring); each call's ids are new (a vectorised store,
    // ~0.1 ns a record, measured too).

    @Benchmark
    @OperationsPerInvocation(BATCH)
    @Warmup(iterations = 8, batchSize = BATCH)
    @Measurement(iterations = 15, batchSize = BATCH)
    public void batch1024ZstdTsc(BatchZstdTsc s) {
        long[] ids = s.ids;
        long base = s.id;
        for (int k = 0; k < BATCH; k++) ids[k] = base + k;
        s.id = base + BATCH;
        long r = CloudProfiler.logTS(s.ch, ids, BATCH);
        if (r != BATCH) s.bad |= r;
    }
}
