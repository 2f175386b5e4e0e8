package io.cloudprofiler.examples.flink;

import io.cloudprofiler.flink.Profiled;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.util.Collector;

/**
 * A small Flink job profiled with cloudprofiler-flink ({@code Profiled}),
 * its functions unchanged (docs/flink.md):
 *
 * <pre>
 * source (DataGeneratorSource: tuple ids 0..n-1)
 *   -> 0-source (Profiled.mark: the records as the source emits them)
 *   -> 1-enrich (map: key and value from the id)
 *   -> keyBy(key) -> 2-count (keyed process: per-key sequence number in keyed state)
 *   -> 3-sink (a writer-only sink: a checksum)
 * </pre>
 *
 * Channels, per operator instance (subtask {@code i}), named by the
 * marking convention ({@code OPERATOR#SUBTASK ROLE}): {@code in} and
 * {@code out} of each, {@code 2-count#i sent} after each collect returned
 * (collect waits for a free output buffer under backpressure: out -&gt;
 * sent is that wait), and {@code OPERATOR#i count}, a counter of the
 * records taken (throughput). The live capacity in Flink's metrics ({@code
 * cloudprofiler.capacity}) comes from the marks.
 * The hop from one operator's {@code out} (or {@code sent}) to the next
 * one's {@code in} holds serialization, Flink's buffers and the hand-off
 * between the two tasks.
 *
 * <p>By default each operator is its own task (thread), but for the mark
 * chained to its source, so every hop after it is a real hand-off through
 * Flink's network stack (local channels on one TaskManager); {@code
 * --chaining} keeps Flink's default, where 1-enrich chains to the source
 * and 3-sink to 2-count.
 */
public final class ProfiledJob {

    /** What a run does; the defaults are main's. */
    public static final class Options {
        /** Tuples the source emits (ids 0..n-1). */
        public long tuples = 200_000;
        /** Subtasks per operator. */
        public int parallelism = 2;
        /** Tuples per second, all source subtasks together; 0: as fast as the job goes. */
        public double rate = 100_000;
        /** Keep Flink's operator chaining (default: off, every operator its own task). */
        public boolean chaining = false;
        /**
         * Flink's output-buffer timeout in ms: a partly filled buffer is sent
         * after this long (0: after every record); -1 keeps Flink's default, 100 ms.
         */
        public long bufferTimeoutMs = 1;
        /** Distinct keys of the keyBy. */
        public int keys = 64;
        /**
         * The enrich map throws at this tuple id in the job's first attempt
         * (-1: never): a job that fails once and is restarted, as the
         * cluster's restart strategy says.
         */
        public long failAt = -1;

        @Override
        public String toString() {
            return "tuples=" + tuples + " parallelism=" + parallelism + " rate="
                    + (rate > 0 ? rate + "/s" : "unlimited") + " chaining=" + chaining + " bufferTimeoutMs="
                    + (bufferTimeoutMs < 0 ? "default" : bufferTimeoutMs)
                    + " keys=" + keys + (failAt >= 0 ? " failAt=" + failAt : "");
        }
    }

    private ProfiledJob() {}

    /** The configuration the job needs: no Kryo (Event is a POJO; Kryo would need --add-opens on JDK 17). */
    public static Configuration configuration() {
        Configuration conf = new Configuration();
        conf.set(PipelineOptions.GENERIC_TYPES, false);
        return conf;
    }

    /** Adds the pipeline to env; env.execute() runs it. */
    public static void build(StreamExecutionEnvironment env, Options opt) {
        env.setParallelism(opt.parallelism);
        if (opt.bufferTimeoutMs >= 0) env.setBufferTimeout(opt.bufferTimeoutMs);
        DataGeneratorSource<Event> source = new DataGeneratorSource<>(Event::new, opt.tuples,
                opt.rate > 0 ? RateLimiterStrategy.perSecond(opt.rate) : RateLimiterStrategy.noOp(),
                TypeInformation.of(Event.class));
        DataStream<Event> events = Profiled.mark(env.fromSource(source, WatermarkStrategy.noWatermarks(), "source"), "0-source", e -> e.id);
        SingleOutputStreamOperator<Event> enriched = Profiled.map(events, "1-enrich", new Enrich(opt.keys, opt.failAt), e -> e.id);
        // hash-partitioned: tuples cross from every enrich to every count subtask
        SingleOutputStreamOperator<Event> counted = Profiled.process(enriched.keyBy(e -> e.key, Types.INT), "2-count", new Count(), e -> e.id);
        DataStreamSink<Event> sink = Profiled.sinkTo(counted, "3-sink", new Sink(), e -> e.id);
        if (!opt.chaining) {
            enriched.disableChaining();
            sink.disableChaining();
        }
    }

    /** Map: derives the key and a value from the id. */
    public static final class Enrich extends RichMapFunction<Event, Event> {
        private static final long serialVersionUID = 3L;
        private final int keys;
        private final long failAt;

        Enrich(int keys, long failAt) {
            this.keys = keys;
            this.failAt = failAt;
        }

        @Override
        public Event map(Event e) {
            if (e.id == failAt && getRuntimeContext().getTaskInfo().getAttemptNumber() == 0) {
                throw new IllegalStateException("ProfiledJob --fail-at " + failAt + ": the first attempt fails here, as asked");
            }
            e.value = mix(e.id);
            e.key = (int) Long.remainderUnsigned(e.value, keys);
            return e;
        }
    }

    /** Keyed: numbers each key's tuples with a counter in keyed state. */
    public static final class Count extends KeyedProcessFunction<Integer, Event, Event> {
        private static final long serialVersionUID = 2L;
        private transient ValueState<Long> seen;

        @Override
        public void open(OpenContext ctx) {
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.LONG));
        }

        @Override
        public void processElement(Event e, Context ctx, Collector<Event> out) throws Exception {
            Long n = seen.value();
            e.seq = n == null ? 1 : n + 1;
            seen.update(e.seq);
            out.collect(e);
        }
    }

    /** Sink: a checksum of what arrives (a Sink V2 with a writer only: its writer runs on the task's thread). */
    public static final class Sink implements org.apache.flink.api.connector.sink2.Sink<Event> {
        private static final long serialVersionUID = 3L;

        @Override
        public SinkWriter<Event> createWriter(WriterInitContext ctx) {
            return new SinkWriter<>() {
                long checksum;

                @Override
                public void write(Event e, Context c) {
                    checksum += e.value ^ e.seq;
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }

    /** splitmix64's finalizer: spreads consecutive ids over the keys. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    static Options parse(String[] args) {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--chaining" -> o.chaining = true;
                case "--tuples" -> o.tuples = Long.parseLong(value(args, ++i, a));
                case "--parallelism" -> o.parallelism = Integer.parseInt(value(args, ++i, a));
                case "--rate" -> o.rate = Double.parseDouble(value(args, ++i, a));
                case "--buffer-timeout-ms" -> o.bufferTimeoutMs = Long.parseLong(value(args, ++i, a));
                case "--keys" -> o.keys = Integer.parseInt(value(args, ++i, a));
                case "--fail-at" -> o.failAt = Long.parseLong(value(args, ++i, a));
                default -> throw new IllegalArgumentException("unknown argument " + a + "; usage: ProfiledJob"
                        + " [--tuples N] [--parallelism P] [--rate TUPLES_PER_S] [--chaining]"
                        + " [--buffer-timeout-ms MS] [--keys K] [--fail-at TUPLE_ID]");
            }
        }
        return o;
    }

    /** args[i], the value of flag (IngestJob parses its flags with it too). */
    static String value(String[] args, int i, String flag) {
        if (i >= args.length) throw new IllegalArgumentException(flag + " needs a value");
        return args[i];
    }

    /**
     * Runs the job: on a local MiniCluster when started with java, on the
     * cluster when submitted with {@code flink run}. The logs go to
     * $CP_LOG_DIR (default ./cloudprofiler-logs) of each process that runs
     * a task.
     */
    public static void main(String[] args) throws Exception {
        Options opt = parse(args);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(configuration());
        build(env, opt);
        System.out.println("cloudprofiler flink example: " + opt);
        JobExecutionResult res = env.execute("cloudprofiler-flink-example");
        String dir = System.getenv().getOrDefault("CP_LOG_DIR", "cloudprofiler-logs");
        if (!res.isJobExecutionResult()) {
            // Submitted detached (flink run -d, the REST API's /jars/:id/run): the job runs on.
            System.out.printf("submitted as job %s; logs in %s of each TaskManager that runs a task%n", res.getJobID(), dir);
            return;
        }
        System.out.printf("done in %d ms; logs in %s (of each process that ran a task); then:%n"
                + "  cloudprofiler analyze --logs %s --out results/ && cat results/summary.txt%n",
                res.getNetRuntime(), dir, dir);
    }
}
