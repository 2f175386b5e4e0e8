package io.cloudprofiler.examples.flink;

import io.cloudprofiler.datagen.ObjectFactory;
import java.util.BitSet;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.util.Collector;

/**
 * A Flink job fed by {@code cloudprofiler gen send} through the object
 * factory (paper section 4.4, Fig. 8):
 *
 * <pre>
 * FactorySource (P subtasks; ad events deserialized by the factory's threads)
 *   -> campaign (map: the ad's campaign, as the Yahoo benchmark's join)
 *   -> keyBy(campaign) -> count (per-campaign sequence number in keyed state)
 *   -> sink (counts every event, and which ids it saw)
 * </pre>
 *
 * The sink's counts are per JVM ({@link Counts}): on a MiniCluster, the
 * whole job's.
 */
public final class IngestJob {

    /** What a run does. */
    public static final class Options {
        public String host = "127.0.0.1";
        /** The factory's port; 0: an ephemeral one (printed by main). */
        public int port = 7400;
        /** Runs of gen send after which the job ends; 0: until cancelled. */
        public long runs = 1;
        public int parallelism = 2;
        /** Buckets per stream queue. */
        public int queueCapacity = 64;
        /** Campaigns (the key space of the keyBy). */
        public int campaigns = 100;
        /** Flink's output-buffer timeout, ms (-1: Flink's default, 100 ms). */
        public long bufferTimeoutMs = 1;
        /** Record which ids the sink saw (exact check of every id once; a bit per tuple). */
        public boolean trackIds = true;
        /** The source deserializes on the task's thread ({@link FactorySource#plain()}, the paper's baseline). */
        public boolean plain;

        @Override
        public String toString() {
            return "host=" + host + " port=" + port + " runs=" + runs + " parallelism=" + parallelism + " queueCapacity="
                    + queueCapacity + " campaigns=" + campaigns + " bufferTimeoutMs=" + bufferTimeoutMs + (plain ? " plain" : "");
        }
    }

    private IngestJob() {}

    /** No Kryo: AdEvent is a POJO. */
    /** The same settings as {@link ProfiledJob#configuration()} (no Kryo fallback). */
    public static Configuration configuration() {
        return ProfiledJob.configuration();
    }

    public static void build(StreamExecutionEnvironment env, Options opt) {
        env.setParallelism(opt.parallelism);
        if (opt.bufferTimeoutMs >= 0) env.setBufferTimeout(opt.bufferTimeoutMs);
        final int campaigns = opt.campaigns;
        FactorySource src = new FactorySource(opt.host, opt.port, opt.runs, opt.queueCapacity);
        env.fromSource(opt.plain ? src.plain() : src, WatermarkStrategy.noWatermarks(),
                        "factory-source", TypeInformation.of(AdEvent.class))
                .map(new Campaign(campaigns)).name("campaign")
                .keyBy(e -> e.campaign, Types.INT)
                .process(new CountPerCampaign()).name("count")
                .sinkTo(new CountingSink(opt.trackIds)).name("sink");
    }

    /** The ad's campaign: a hash of its id (the benchmark looks it up in Redis). */
    public static final class Campaign extends RichMapFunction<AdEvent, AdEvent> {
        private static final long serialVersionUID = 1L;
        private final int campaigns;

        Campaign(int campaigns) {
            this.campaigns = campaigns;
        }

        @Override
        public AdEvent map(AdEvent e) {
            e.campaign = Math.floorMod(e.adId == null ? 0 : e.adId.hashCode(), campaigns);
            return e;
        }
    }

    /** Numbers each campaign's events in keyed state. */
    public static final class CountPerCampaign extends KeyedProcessFunction<Integer, AdEvent, AdEvent> {
        private static final long serialVersionUID = 1L;
        private transient ValueState<Long> seen;

        @Override
        public void open(OpenContext ctx) {
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.LONG));
        }

        @Override
        public void processElement(AdEvent e, Context ctx, Collector<AdEvent> out) throws Exception {
            Long n = seen.value();
            e.seq = n == null ? 1 : n + 1;
            seen.update(e.seq);
            out.collect(e);
        }
    }

    /** Counts what arrives, in {@link Counts} (this JVM's); a Sink V2. */
    public static final class CountingSink implements Sink<AdEvent> {
        private static final long serialVersionUID = 2L;
        private final boolean trackIds;

        CountingSink(boolean trackIds) {
            this.trackIds = trackIds;
        }

        @Override
        public SinkWriter<AdEvent> createWriter(WriterInitContext ctx) {
            return new SinkWriter<>() {
                @Override
                public void write(AdEvent e, Context c) {
                    if (e.userId == null || e.adId == null || e.eventType == null || e.eventTime <= 0 || e.seq < 1) {
                        Counts.INCOMPLETE.increment();
                    }
                    Counts.EVENTS.increment();
                    if (trackIds) Counts.see(e.id);
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }

    /** What the sinks of this JVM counted. */
    public static final class Counts {
        public static final LongAdder EVENTS = new LongAdder();
        /** Events with a field missing (a parser that lost something). */
        public static final LongAdder INCOMPLETE = new LongAdder();
        public static final LongAdder DUPLICATES = new LongAdder();
        /** sender thread (id >>> 40) -> the ids seen (id & (2^40 - 1)). */
        public static final Map<Integer, BitSet> IDS = new ConcurrentHashMap<>();

        private Counts() {}

        static void see(long id) {
            BitSet s = IDS.computeIfAbsent((int) (id >>> 40), k -> new BitSet());
            int i = (int) (id & ((1L << 40) - 1));
            synchronized (s) {
                if (s.get(i)) DUPLICATES.increment();
                s.set(i);
            }
        }

        public static void reset() {
            EVENTS.reset();
            INCOMPLETE.reset();
            DUPLICATES.reset();
            IDS.clear();
        }
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
                case "--queue" -> o.queueCapacity = Integer.parseInt(ProfiledJob.value(args, ++i, a));
                case "--campaigns" -> o.campaigns = Integer.parseInt(ProfiledJob.value(args, ++i, a));
                case "--buffer-timeout-ms" -> o.bufferTimeoutMs = Long.parseLong(ProfiledJob.value(args, ++i, a));
                case "--no-track-ids" -> o.trackIds = false;
                case "--plain" -> o.plain = true;
                default -> throw new IllegalArgumentException("unknown argument " + a + "; usage: IngestJob [--host H]"
                        + " [--port P] [--runs N (0: until killed)] [--parallelism P] [--queue BUCKETS] [--campaigns C]"
                        + " [--buffer-timeout-ms MS] [--no-track-ids] [--plain]");
            }
        }
        return o;
    }

    /**
     * Runs the job on a local MiniCluster (started with java) and prints
     * where the factory listens; then {@code gen send --to HOST:PORT ...}
     * (or {@code gen maxrate}, with {@code --runs 0}) feeds it.
     */
    public static void main(String[] args) throws Exception {
        Options opt = parse(args);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(configuration());
        if (opt.runs == 0) opt.trackIds = false; // unbounded: do not grow a bit set forever
        build(env, opt);
        System.out.println("cloudprofiler flink ingestion example: " + opt);
        JobClient job = env.executeAsync("cloudprofiler-flink-ingest");
        ObjectFactory<?> f = opt.plain ? FactorySource.awaitPlainFactory(opt.parallelism, 120, TimeUnit.SECONDS)
                : FactorySource.awaitFactory(opt.parallelism, 120, TimeUnit.SECONDS);
        if (f == null) throw new IllegalStateException("the source did not start within 120 s");
        System.out.printf("object factory listening on %s: cloudprofiler gen send --to %s:%d --synthetic ...%n",
                f.address(), opt.host, f.port());
        CompletableFuture<JobExecutionResult> done = job.getJobExecutionResult();
        long last = -1;
        while (!done.isDone()) {
            Thread.sleep(1000);
            long n = Counts.EVENTS.sum();
            if (n != last) {
                System.out.printf("sink: %d events, %d runs complete%n", n, f.completedRuns());
                last = n;
            }
        }
        System.out.printf("done in %d ms: %d events at the sink%n", done.get().getNetRuntime(), Counts.EVENTS.sum());
    }
}
