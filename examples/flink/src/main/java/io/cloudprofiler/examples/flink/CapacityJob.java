package io.cloudprofiler.examples.flink;

import io.cloudprofiler.datagen.ObjectFactory;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.util.Collector;

/**
 * A job with one operator made slow on purpose, fed by {@code cloudprofiler
 * gen send} through the object factory, every operator marked by the marking
 * convention ({@link Marks}): the capacity analysis should name the slow one
 * as the bottleneck and predict the highest rate the job sustains, which
 * {@code gen maxrate} measures from outside.
 *
 * <pre>
 * 0-source        FactorySource, P subtasks                              in, out, sent
 *   -> 1-campaign map, P: the ad's campaign, as a small {@link Ad}        in, out
 *   -> keyBy(campaign)
 *   -> 2-score    keyed, scoreParallelism: spins scoreNanos per tuple,
 *                 numbers it per campaign, hands on a small {@link Scored} in, out, sent
 *   -> 3-sink     scoreParallelism: counts                               in, out
 * </pre>
 *
 * The score operator spins on {@link System#nanoTime()} until scoreNanos
 * have passed since its {@code in}: a known service time in wall time,
 * whatever the CPU's speed, like a model that takes that long per event. A
 * thread preempted during the spin still ends it at its deadline (or later),
 * so its service time stays the spin, plus any preemption that outlasts it.
 * It takes a small record (id, campaign: the campaign operator keeps only
 * what the score needs) and hands on a small one (id, campaign, sequence
 * number, score), as a scoring model would: deserializing its input and
 * serializing its output is Flink's work in the score task outside the
 * operator's own service time (before {@code in}; between {@code out} and
 * {@code sent}), and small records keep that part small.
 *
 * <p>Operator chaining is off: every operator is a task of its own (the
 * score task is the score operator alone, so Flink's busy time of that task
 * is comparable with the operator's service time), and every hop is a real
 * hand-off through Flink's network stack. {@link #configuration} keeps little
 * in flight between the source and the score operator (4 KiB network
 * buffers, few per channel), and {@link Options#receiveBuffer} little in
 * the kernel: the data in flight, which a run of {@code gen send} can fill
 * before the sender feels backpressure, is what lets a rate above the job's
 * capacity pass a short run; with Flink's defaults (32 KiB buffers, 10 per
 * channel) it is thousands of events. The factory's queues hold {@link
 * Options#queueCapacity} buckets (32 ms of a sender thread's tuples): a
 * source that parks up to 1 ms when its queue is empty, longer on a busy
 * machine, must not find them full meanwhile.
 */
public final class CapacityJob {

    /** What a run does. */
    public static final class Options {
        public String host = "127.0.0.1";
        /** The factory's port; 0: an ephemeral one (printed by main). */
        public int port = 7400;
        /** Runs of gen send after which the job ends; 0: until cancelled. */
        public long runs = 1;
        /** Subtasks of the source and campaign operators. */
        public int parallelism = 2;
        /** Subtasks of the score operator (and the sink). */
        public int scoreParallelism = 1;
        /** The score operator's busy spin per event, ns. */
        public long scoreNanos = 50_000;
        /** Buckets per stream queue of the factory. */
        public int queueCapacity = 32;
        /** The factory's socket receive buffer, bytes (0: the system's). */
        public int receiveBuffer = 64 << 10;
        /** Campaigns (the key space of the keyBy). */
        public int campaigns = 100;
        /** Flink's output-buffer timeout, ms (-1: Flink's default, 100 ms). */
        public long bufferTimeoutMs = 1;
        /** Log the marks (false: the same job without channels). */
        public boolean marks = true;

        @Override
        public String toString() {
            return "host=" + host + " port=" + port + " runs=" + runs + " parallelism=" + parallelism
                    + " scoreParallelism=" + scoreParallelism + " scoreNanos=" + scoreNanos + " queueCapacity="
                    + queueCapacity + " receiveBuffer=" + receiveBuffer + " campaigns=" + campaigns
                    + " bufferTimeoutMs=" + bufferTimeoutMs + " marks=" + marks;
        }
    }

    private CapacityJob() {}

    /**
     * {@link ProfiledJob#configuration()} (no Kryo), small network buffers
     * (4 KiB segments: about 17 events each; Flink 2 sizes the buffers per
     * channel and gate itself: the options that set them in 1.x are gone),
     * and {@link FlinkMetrics} as a metric reporter (what the test reads
     * Flink's own metrics of the score task with).
     */
    public static Configuration configuration() {
        Configuration conf = ProfiledJob.configuration();
        conf.set(TaskManagerOptions.MEMORY_SEGMENT_SIZE, MemorySize.parse("4kb"));
        FlinkMetrics.register(conf);
        return conf;
    }

    public static void build(StreamExecutionEnvironment env, Options opt) {
        env.setParallelism(opt.parallelism);
        env.disableOperatorChaining();
        if (opt.bufferTimeoutMs >= 0) env.setBufferTimeout(opt.bufferTimeoutMs);
        FactorySource source = new FactorySource(opt.host, opt.port, opt.runs, opt.queueCapacity)
                .receiveBuffer(opt.receiveBuffer);
        if (opt.marks) source.marked("0-source");
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "0-source", TypeInformation.of(AdEvent.class))
                .map(new Campaign(opt.campaigns, opt.marks)).name("1-campaign")
                .returns(Ad.class)
                .keyBy(a -> a.campaign, Types.INT)
                .process(new Score(opt.scoreNanos, opt.marks)).name(SCORE).setParallelism(opt.scoreParallelism)
                .returns(Scored.class)
                .sinkTo(new Sink(opt.marks)).name("3-sink").setParallelism(opt.scoreParallelism);
    }

    /** The slow operator's name (its task's too: chaining is off). */
    public static final String SCORE = "2-score";

    /** What the campaign operator hands on: the tuple id and the ad's campaign (a POJO: no Kryo). */
    public static class Ad {
        public long id;
        public int campaign;

        public Ad() {}
    }

    /** The ad's campaign: a hash of its id (the benchmark looks it up in Redis). */
    public static final class Campaign extends RichMapFunction<AdEvent, Ad> {
        private static final long serialVersionUID = 1L;
        private final int campaigns;
        private final boolean marked;
        private transient Marks marks;

        Campaign(int campaigns, boolean marked) {
            this.campaigns = campaigns;
            this.marked = marked;
        }

        @Override
        public void open(OpenContext ctx) {
            marks = marked ? Marks.open("1-campaign", getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), false)
                    : Marks.off();
        }

        @Override
        public Ad map(AdEvent e) {
            marks.in(e.id);
            Ad a = new Ad();
            a.id = e.id;
            a.campaign = Math.floorMod(e.adId == null ? 0 : e.adId.hashCode(), campaigns);
            marks.out(a.id);
            return a;
        }

        @Override
        public void close() {
            marks.close();
        }
    }

    /** What the score operator hands on: a POJO (no Kryo). */
    public static class Scored {
        public long id;
        public int campaign;
        /** How many events of this campaign the score operator had seen, this one included. */
        public long seq;
        public long score;

        public Scored() {}
    }

    /** The slow operator: spins scoreNanos per event, then numbers the campaign's events in keyed state. */
    public static final class Score extends KeyedProcessFunction<Integer, Ad, Scored> {
        private static final long serialVersionUID = 1L;
        private final long scoreNanos;
        private final boolean marked;
        private transient ValueState<Long> seen;
        private transient Marks marks;

        Score(long scoreNanos, boolean marked) {
            this.scoreNanos = scoreNanos;
            this.marked = marked;
        }

        @Override
        public void open(OpenContext ctx) {
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.LONG));
            marks = marked ? Marks.open(SCORE, getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), true)
                    : Marks.off();
        }

        @Override
        public void processElement(Ad a, Context ctx, Collector<Scored> out) throws Exception {
            marks.in(a.id);
            Scored s = new Scored();
            s.id = a.id;
            s.campaign = a.campaign;
            s.score = spin(scoreNanos);
            Long n = seen.value();
            s.seq = n == null ? 1 : n + 1;
            seen.update(s.seq);
            marks.out(s.id);
            out.collect(s);
            marks.sent(s.id);
        }

        @Override
        public void close() {
            marks.close();
        }
    }

    /** Counts what arrives, in {@link #EVENTS} (this JVM's); a Sink V2, its writer on the task's thread. */
    public static final class Sink implements org.apache.flink.api.connector.sink2.Sink<Scored> {
        private static final long serialVersionUID = 2L;
        /** Events at the sinks of this JVM. */
        public static final LongAdder EVENTS = new LongAdder();
        private final boolean marked;

        Sink(boolean marked) {
            this.marked = marked;
        }

        @Override
        public SinkWriter<Scored> createWriter(WriterInitContext ctx) {
            Marks marks = marked ? Marks.open("3-sink", ctx.getTaskInfo().getIndexOfThisSubtask(), false) : Marks.off();
            return new SinkWriter<>() {
                @Override
                public void write(Scored s, Context c) {
                    marks.in(s.id);
                    EVENTS.increment();
                    marks.out(s.id);
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {
                    marks.close();
                }
            };
        }
    }

    /**
     * Spins until nanos have passed (wall time, {@link System#nanoTime()});
     * returns the loop's count, so that the loop has a result.
     */
    static long spin(long nanos) {
        long end = System.nanoTime() + nanos, n = 0;
        while (System.nanoTime() - end < 0) n++;
        return n;
    }

    static Options parse(String[] args) {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--host" -> o.host = ProfiledJob.value(args, ++i, a);
                case "--port" -> o.port = Integer.parseInt(ProfiledJob.value(args, ++i, a));
                case "--runs" -> o.runs = Long.parseLong(ProfiledJob.value(args, ++i, a));
                case "--parallelism" -> o.parallelism = Integer.parseInt(ProfiledJob.value(args, ++i, a));
                case "--score-parallelism" -> o.scoreParallelism = Integer.parseInt(ProfiledJob.value(args, ++i, a));
                case "--score-us" -> o.scoreNanos = Math.round(Double.parseDouble(ProfiledJob.value(args, ++i, a)) * 1e3);
                case "--queue" -> o.queueCapacity = Integer.parseInt(ProfiledJob.value(args, ++i, a));
                case "--receive-buffer" -> o.receiveBuffer = Integer.parseInt(ProfiledJob.value(args, ++i, a));
                case "--campaigns" -> o.campaigns = Integer.parseInt(ProfiledJob.value(args, ++i, a));
                case "--buffer-timeout-ms" -> o.bufferTimeoutMs = Long.parseLong(ProfiledJob.value(args, ++i, a));
                case "--no-marks" -> o.marks = false;
                default -> throw new IllegalArgumentException("unknown argument " + a + "; usage: CapacityJob [--host H]"
                        + " [--port P] [--runs N (0: until killed)] [--parallelism P] [--score-parallelism P]"
                        + " [--score-us MICROSECONDS] [--queue BUCKETS] [--receive-buffer BYTES] [--campaigns C]"
                        + " [--buffer-timeout-ms MS] [--no-marks]");
            }
        }
        return o;
    }

    /**
     * Runs the job on a local MiniCluster (started with java) and prints
     * where the factory listens; then {@code gen maxrate --to HOST:PORT ...}
     * (with {@code --runs 0 --no-marks}) or {@code gen send} feeds it.
     */
    public static void main(String[] args) throws Exception {
        Options opt = parse(args);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(configuration());
        build(env, opt);
        System.out.println("cloudprofiler flink capacity example: " + opt);
        JobClient job = env.executeAsync("cloudprofiler-flink-capacity");
        ObjectFactory<AdEvent> f = FactorySource.awaitFactory(opt.parallelism, 120, TimeUnit.SECONDS);
        if (f == null) throw new IllegalStateException("the source did not start within 120 s");
        System.out.printf("object factory listening on %s: cloudprofiler gen send --to %s:%d --synthetic ...%n",
                f.address(), opt.host, f.port());
        CompletableFuture<JobExecutionResult> done = job.getJobExecutionResult();
        long last = -1;
        while (!done.isDone()) {
            Thread.sleep(1000);
            long n = Sink.EVENTS.sum();
            if (n != last) {
                FlinkMetrics.Sample s = FlinkMetrics.sample(SCORE, 0);
                System.out.printf("sink: %d events, %d runs complete; %s: %s%n", n, f.completedRuns(), SCORE,
                        s == null ? "no metrics yet" : s);
                last = n;
            }
        }
        System.out.printf("done in %d ms: %d events at the sink%n", done.get().getNetRuntime(), Sink.EVENTS.sum());
    }
}
