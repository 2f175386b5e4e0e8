package io.cloudprofiler.tests.engines.flink;

import io.cloudprofiler.flink.Profiled;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.concurrent.atomic.LongAdder;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * The job issue 43 was measured on, written as a Flink user would write it
 * and instrumented only as docs/flink.md says (the {@link Profiled}
 * wrappers, nothing else of ours):
 *
 * <pre>
 * lines (DataGeneratorSource: "seq,key,payload", optionally rate-limited)
 *   -> 0-source (Profiled.stampIds: each record gets its tuple id)
 *   -> 1-parse  (map: the line -> a POJO)
 *   -> keyBy(key)
 *   -> 2-hash   (KeyedProcessFunction: SHA-256 rounds over the payload, ~70 us a record; a count per key in keyed state)
 *   -> 3-keep   (filter: about half, the digest's first byte even)
 *   -> 4-sink   (Profiled.sinkTo: a writer-only sink that counts)
 * </pre>
 *
 * Everything else is Flink's default: the 100 ms output-buffer timeout,
 * operator chaining (so 0-source and 1-parse run on the source's thread,
 * and 3-keep and 4-sink on 2-hash's), the default network buffers.
 *
 * <p>The truth ({@link Truth}): 1-parse and 2-hash count the records they
 * finished, and say which thread they run on, so that a sampler apart from
 * the marks can tell when each subtask worked; 2-hash also logs when each
 * record's processing ended (its departures). The counters beside them
 * ({@link #KEPT}, {@link #SUNK}) let the test check that every record got
 * through.
 */
public final class HashJob {
    public static final String PARSE = "1-parse", HASH = "2-hash", KEEP = "3-keep", SINK = "4-sink";
    /** Distinct keys of the keyBy. */
    public static final int KEYS = 1000;
    /** Characters of a line's payload. */
    public static final int PAYLOAD_CHARS = 64;
    /** What 2-hash's work is calibrated to take a record, on an idle CPU. */
    public static final long HASH_WORK_NS = 70_000;

    /** Records 3-keep let through, in this JVM, since the last {@link #resetCounters}. */
    public static final LongAdder KEPT = new LongAdder();
    /** Records 4-sink's writer took, likewise. */
    public static final LongAdder SUNK = new LongAdder();

    private HashJob() {}

    /** Zeroes {@link #KEPT} and {@link #SUNK}: call between jobs, never while one runs. */
    public static void resetCounters() {
        KEPT.reset();
        SUNK.reset();
    }

    /**
     * What the job needs that is not about performance: Flink's POJO
     * serializer for every type, never Kryo (the job fails when built if
     * a type would fall back to it).
     */
    public static Configuration configuration() {
        Configuration conf = new Configuration();
        conf.set(PipelineOptions.GENERIC_TYPES, false);
        return conf;
    }

    /**
     * Adds the job to env.
     *
     * @param records lines the source makes (it then ends, and the job with it)
     * @param rate    lines a second, all source subtasks together; 0: as fast as the job takes them
     * @param wrapped marked as docs/flink.md says (the wrappers, a tuple id in
     *                every record); false: the same functions with no code of
     *                ours around them, named as a user names operators
     *                ({@code .name(...)}), for the agent (docs/flink-agent.md)
     *                to mark: the records' id fields then stay 0
     */
    public static void build(StreamExecutionEnvironment env, int parallelism, long records, double rate, boolean wrapped) {
        env.setParallelism(parallelism);
        DataGeneratorSource<Line> source = new DataGeneratorSource<>(Line::of, records,
                rate > 0 ? RateLimiterStrategy.perSecond(rate) : RateLimiterStrategy.noOp(), TypeInformation.of(Line.class));
        DataStream<Line> lines = env.fromSource(source, WatermarkStrategy.noWatermarks(), "lines");
        if (!wrapped) {
            DataStream<Parsed> parsed = lines.map(new Parse()).name(PARSE);
            DataStream<Hashed> hashed = parsed.keyBy(p -> p.key, Types.INT).process(new Hash()).name(HASH);
            hashed.filter(new Keep()).name(KEEP).sinkTo(new CountingSink()).name(SINK);
            return;
        }
        DataStream<Line> stamped = Profiled.stampIds(lines, "0-source", (l, id) -> {
            l.id = id;
            return l;
        });
        DataStream<Parsed> parsed = Profiled.map(stamped, PARSE, new Parse(), l -> l.id);
        DataStream<Hashed> hashed = Profiled.process(parsed.keyBy(p -> p.key, Types.INT), HASH, new Hash(), p -> p.id);
        DataStream<Hashed> kept = Profiled.filter(hashed, KEEP, new Keep(), h -> h.id);
        Profiled.sinkTo(kept, SINK, new CountingSink(), h -> h.id);
    }

    // ---- the records (Flink POJOs: public fields, a public no-arg constructor)

    /** A line as the source makes it, and the tuple id stampIds gives it. */
    public static class Line {
        public long id;
        public String text;

        public Line() {}

        /** The line of sequence number seq: "seq,key,payload". */
        static Line of(long seq) {
            Line l = new Line();
            int key = (int) Long.remainderUnsigned(mix(seq), KEYS);
            // a payload of its own (so that digests, and what 3-keep keeps,
            // vary from line to line): a scrambled seq in hex, then a fixed
            // alphabet to 64 characters, at the cost of a copy, not of a formatter
            String tag = Long.toHexString(mix(seq ^ 0x5DEECE66DL));
            l.text = seq + "," + key + "," + tag + ALPHABET.substring(tag.length());
            return l;
        }
    }

    private static final String ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

    /** A parsed line. */
    public static class Parsed {
        public long id;
        public long seq;
        public int key;
        public String payload;

        public Parsed() {}
    }

    /** A record with its digest, and how many records of its key 2-hash had seen. */
    public static class Hashed {
        public long id;
        public int key;
        public long seen;
        public byte[] digest;

        public Hashed() {}
    }

    // ---- the functions

    /** 1-parse: splits the line; counts each record it finished for the truth. */
    public static final class Parse extends RichMapFunction<Line, Parsed> {
        private static final long serialVersionUID = 1L;
        private transient Truth.Probe probe;

        @Override
        public void open(OpenContext ctx) {
            probe = Truth.register(PARSE, getRuntimeContext().getTaskInfo().getIndexOfThisSubtask());
        }

        @Override
        public Parsed map(Line l) {
            String t = l.text;
            int a = t.indexOf(','), b = t.indexOf(',', a + 1);
            Parsed p = new Parsed();
            p.id = l.id;
            p.seq = Long.parseLong(t, 0, a, 10);
            p.key = Integer.parseInt(t, a + 1, b, 10);
            p.payload = t.substring(b + 1);
            probe.done();
            return p;
        }
    }

    /**
     * 2-hash: real CPU work, a fixed number of SHA-256 rounds over the
     * payload ({@link #ROUNDS}, calibrated once when the class loads so
     * that they take about {@link #HASH_WORK_NS} here, then fixed), and a
     * little keyed state. The record's processing ends when collect
     * returned (with chaining, 3-keep and 4-sink ran inside it): that is
     * when the truth counts it, and the time its departure log keeps.
     */
    public static final class Hash extends KeyedProcessFunction<Integer, Parsed, Hashed> {
        private static final long serialVersionUID = 1L;
        /** SHA-256 rounds a record: the first over the payload, each next one over the previous digest. */
        public static final int ROUNDS;
        /** What one round took when calibrated, ns (the fastest of several batches). */
        public static final double NS_PER_ROUND;

        static {
            double ns = nsPerRound();
            NS_PER_ROUND = ns;
            ROUNDS = (int) Math.max(1, Math.round(HASH_WORK_NS / ns));
        }

        private transient ValueState<Long> seen;
        private transient MessageDigest sha;
        private transient Truth.Probe probe;

        @Override
        public void open(OpenContext ctx) {
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.LONG));
            sha = sha256();
            probe = Truth.register(HASH, getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), Truth.DEPARTURE_SLOTS);
        }

        @Override
        public void processElement(Parsed p, Context ctx, Collector<Hashed> out) throws Exception {
            Hashed h = new Hashed();
            h.id = p.id;
            h.key = p.key;
            h.digest = rounds(sha, p.payload.getBytes(StandardCharsets.UTF_8), ROUNDS);
            Long n = seen.value();
            h.seen = n == null ? 1 : n + 1;
            seen.update(h.seen);
            out.collect(h);
            // the departure, timed here in the user function (never from the
            // marks): once collect returned, the record's work is all done,
            // 3-keep's and 4-sink's included
            probe.departed(System.nanoTime());
            probe.done();
        }

        /**
         * The time of one round: the fastest of batches of 1000, run until
         * the fastest has not improved by 1% for half a second (at least 1 s,
         * at most 5 s). The fastest batch is the one the machine did not
         * interrupt, which is what "takes 70 us on this machine" means when
         * the machine is shared; and waiting for it to settle waits for the
         * JIT's compiled digest, with its SHA intrinsics, which a busy
         * machine can keep from the compiler threads for a while (a fixed
         * warm-up of 400 ms once gave 194 ns a round for 67, and a third of
         * the work).
         */
        private static double nsPerRound() {
            MessageDigest sha = sha256();
            byte[] payload = ALPHABET.getBytes(StandardCharsets.UTF_8);
            long start = System.nanoTime(), gained = start;
            double best = Double.MAX_VALUE;
            while (true) {
                long t = System.nanoTime();
                rounds(sha, payload, 1000);
                long now = System.nanoTime();
                double ns = (now - t) / 1000.0;
                if (ns < 0.99 * best) gained = now;
                best = Math.min(best, ns);
                if (now - start > 5_000_000_000L || (now - start > 1_000_000_000L && now - gained > 500_000_000L)) return best;
            }
        }

        /** One record's work as the job does it now, the fastest of 50, ns: the calibration checked after the runs. */
        public static double workNs() {
            MessageDigest sha = sha256();
            byte[] payload = ALPHABET.getBytes(StandardCharsets.UTF_8);
            double best = Double.MAX_VALUE;
            for (int i = 0; i < 50; i++) {
                long t = System.nanoTime();
                rounds(sha, payload, ROUNDS);
                best = Math.min(best, System.nanoTime() - t);
            }
            return best;
        }

        static byte[] rounds(MessageDigest sha, byte[] payload, int rounds) {
            byte[] d = sha.digest(payload);
            for (int i = 1; i < rounds; i++) d = sha.digest(d);
            return d;
        }

        private static MessageDigest sha256() {
            try {
                return MessageDigest.getInstance("SHA-256");
            } catch (NoSuchAlgorithmException e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /** 3-keep: about half, by the digest's first byte. */
    public static final class Keep implements FilterFunction<Hashed> {
        private static final long serialVersionUID = 1L;

        @Override
        public boolean filter(Hashed h) {
            boolean keep = (h.digest[0] & 1) == 0;
            if (keep) KEPT.increment();
            return keep;
        }
    }

    /** 4-sink: a writer-only Sink V2 that counts what it gets (on the task's thread). */
    public static final class CountingSink implements Sink<Hashed> {
        private static final long serialVersionUID = 1L;

        @Override
        public SinkWriter<Hashed> createWriter(WriterInitContext ctx) {
            return new SinkWriter<>() {
                @Override
                public void write(Hashed h, Context c) {
                    SUNK.increment();
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }

    /** splitmix64's finalizer: spreads consecutive sequence numbers over the keys. */
    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }
}
