package io.cloudprofiler.examples.flink;

import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.util.Collector;

/**
 * A small Flink job instrumented with Cloudprofiler:
 *
 * <pre>
 * source (DataGeneratorSource: tuple ids 0..n-1)
 *   -> enrich (map: key and value from the id)
 *   -> keyBy(key) -> count (keyed process: per-key sequence number in keyed state)
 *   -> sink (checksum)
 * </pre>
 *
 * Channels, one per operator instance (subtask {@code i}) and mark, named
 * by the marking convention ({@code OPERATOR#SUBTASK ROLE}, {@link Marks}),
 * each BUFFER_IDENTITY / ZSTD_TSC unless said otherwise:
 *
 * <ul>
 * <li>{@code 0-source#i in}, {@code 0-source#i out}: as the generator
 *     function makes the tuple, and as it returns it (Flink emits it then);
 * <li>{@code 1-enrich#i in}, {@code 1-enrich#i out}: as the map gets the
 *     tuple, and just before it returns it;
 * <li>{@code 2-count#i in}, {@code 2-count#i out}, {@code 2-count#i sent}: as
 *     the keyed function gets the tuple, just before {@code out.collect}, and
 *     after it returned (collect waits for a free output buffer under
 *     backpressure: out -&gt; sent is that wait);
 * <li>{@code 3-sink#i in}, {@code 3-sink#i out}: as the sink gets the tuple,
 *     and after its work;
 * <li>{@code 3-sink#i counter}: FASTPERIODICCOUNTER, tuples per period (not
 *     a mark).
 * </ul>
 *
 * The hop from one operator's {@code out} (or {@code sent}) to the next one's
 * {@code in} holds serialization, Flink's buffers and the hand-off between
 * the two tasks.
 *
 * Operator chaining is off by default, so each operator is its own task
 * (thread) and every exit -&gt; entry hop is a real hand-off through Flink's
 * network stack (local channels on one TaskManager); {@code --chaining}
 * keeps Flink's default, where source, enrich and (after the keyBy) count and
 * sink run chained as method calls on one thread.
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
        /** The sink counter's period, ns (the library's minimum is 1e6). */
        public long counterPeriodNanos = 10_000_000L;
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
                    + (bufferTimeoutMs < 0 ? "default" : bufferTimeoutMs) + " counterPeriodNs=" + counterPeriodNanos
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
        if (!opt.chaining) env.disableOperatorChaining();
        if (opt.bufferTimeoutMs >= 0) env.setBufferTimeout(opt.bufferTimeoutMs);
        DataGeneratorSource<Event> source = new DataGeneratorSource<>(new TupleSource(), opt.tuples,
                opt.rate > 0 ? RateLimiterStrategy.perSecond(opt.rate) : RateLimiterStrategy.noOp(),
                TypeInformation.of(Event.class));
        final int keys = opt.keys;
        env.fromSource(source, WatermarkStrategy.noWatermarks(), "source")
                .map(new Enrich(keys, opt.failAt)).name("enrich")
                .keyBy(e -> e.key, Types.INT) // hash-partitioned: tuples cross from every enrich to every count subtask
                .process(new Count()).name("count")
                .sinkTo(new Sink(opt.counterPeriodNanos)).name("sink");
    }

    /** The source: tuple i of the sequence gets id i; logs it as it emits it. */
    public static final class TupleSource implements GeneratorFunction<Long, Event> {
        private static final long serialVersionUID = 1L;
        private transient Marks marks;

        @Override
        public void open(SourceReaderContext ctx) {
            marks = Marks.open("0-source", ctx.getIndexOfSubtask(), false);
        }

        @Override
        public Event map(Long index) {
            marks.in(index);
            Event e = new Event(index);
            marks.out(e.id);
            return e;
        }

        @Override
        public void close() {
            Probe.closeAll(marks);
        }
    }

    /** Map: derives the key and a value from the id. */
    public static final class Enrich extends RichMapFunction<Event, Event> {
        private static final long serialVersionUID = 2L;
        private final int keys;
        private final long failAt;
        private transient Marks marks;

        Enrich(int keys, long failAt) {
            this.keys = keys;
            this.failAt = failAt;
        }

        @Override
        public void open(OpenContext ctx) {
            marks = Marks.open("1-enrich", getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), false);
        }

        @Override
        public Event map(Event e) {
            if (e.id == failAt && getRuntimeContext().getTaskInfo().getAttemptNumber() == 0) {
                throw new IllegalStateException("ProfiledJob --fail-at " + failAt + ": the first attempt fails here, as asked");
            }
            marks.in(e.id);
            e.value = mix(e.id);
            e.key = (int) Long.remainderUnsigned(e.value, keys);
            marks.out(e.id);
            return e;
        }

        @Override
        public void close() {
            Probe.closeAll(marks);
        }
    }

    /** Keyed: numbers each key's tuples with a counter in keyed state. */
    public static final class Count extends KeyedProcessFunction<Integer, Event, Event> {
        private static final long serialVersionUID = 1L;
        private transient ValueState<Long> seen;
        private transient Marks marks;

        @Override
        public void open(OpenContext ctx) {
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.LONG));
            marks = Marks.open("2-count", getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), true);
        }

        @Override
        public void processElement(Event e, Context ctx, Collector<Event> out) throws Exception {
            marks.in(e.id);
            Long n = seen.value();
            e.seq = n == null ? 1 : n + 1;
            seen.update(e.seq);
            marks.out(e.id);
            out.collect(e);
            marks.sent(e.id);
        }

        @Override
        public void close() {
            Probe.closeAll(marks);
        }
    }

    /** Sink: a checksum of what arrives, and a periodic counter of tuples (a Sink V2: its writer runs on the task's thread). */
    public static final class Sink implements org.apache.flink.api.connector.sink2.Sink<Event> {
        private static final long serialVersionUID = 2L;
        private final long counterPeriodNanos;

        Sink(long counterPeriodNanos) {
            this.counterPeriodNanos = counterPeriodNanos;
        }

        @Override
        public SinkWriter<Event> createWriter(WriterInitContext ctx) {
            int subtask = ctx.getTaskInfo().getIndexOfThisSubtask();
            Marks marks = Marks.open("3-sink", subtask, false);
            Probe counter;
            try {
                counter = Probe.counter("3-sink", subtask, "counter", counterPeriodNanos);
            } catch (RuntimeException e) {
                marks.close();
                throw e;
            }
            return new SinkWriter<>() {
                long checksum;

                @Override
                public void write(Event e, Context c) {
                    marks.in(e.id);
                    counter.log(e.id);
                    checksum += e.value ^ e.seq;
                    marks.out(e.id);
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {
                    Probe.closeAll(marks, counter);
                }
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
                case "--counter-period-ms" -> o.counterPeriodNanos = Long.parseLong(value(args, ++i, a)) * 1_000_000L;
                case "--keys" -> o.keys = Integer.parseInt(value(args, ++i, a));
                case "--fail-at" -> o.failAt = Long.parseLong(value(args, ++i, a));
                default -> throw new IllegalArgumentException("unknown argument " + a + "; usage: ProfiledJob"
                        + " [--tuples N] [--parallelism P] [--rate TUPLES_PER_S] [--chaining]"
                        + " [--buffer-timeout-ms MS] [--counter-period-ms MS] [--keys K] [--fail-at TUPLE_ID]");
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
