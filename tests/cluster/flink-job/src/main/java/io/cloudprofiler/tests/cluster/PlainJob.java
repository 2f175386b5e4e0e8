package io.cloudprofiler.tests.cluster;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import org.apache.flink.api.common.accumulators.LongCounter;
import org.apache.flink.api.common.accumulators.LongMaximum;
import org.apache.flink.api.common.accumulators.LongMinimum;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFilterFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.apache.flink.util.ParameterTool;

/**
 * A Flink job as a user writes it, with no Cloudprofiler code (issue 45's
 * test on the standalone cluster: the agent marks it):
 *
 * <pre>
 * numbers 0..N-1 (DataGeneratorSource, as fast as the job takes them)
 *   -> twice (map: 2i) -> not-threes (filter: v % 3 != 0)
 *   -> keyBy(v % 1024)
 *   -> work (keyed process: SHA-256 rounds over v, passes v on)
 *   -> a SQL query: SELECT v, v * 3 AS w FROM worked WHERE MOD(v, 5) <> 0
 *   -> tally (map: counts and sums w) -> sunk (a sink that discards)
 * </pre>
 *
 * Flink's defaults (chaining, the 100 ms buffer timeout). The truth is in
 * the user's functions, as accumulators the REST API shows once the job
 * ended: per work subtask, the records it finished, the System.nanoTime()
 * of its first and last departure (when collect returned: the SQL query,
 * tally and the sink run inside it, chained), and the time it spent in
 * processElement; tally's count and sum of w, which the test works out
 * from the job's logic.
 */
public final class PlainJob {
    private PlainJob() {}

    public static void main(String[] args) throws Exception {
        ParameterTool p = ParameterTool.fromArgs(args);
        long records = p.getLong("records", 200_000);
        int rounds = p.getInt("rounds", 400);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(p.getInt("parallelism", 2));
        DataGeneratorSource<Long> src = new DataGeneratorSource<>(i -> i, records, RateLimiterStrategy.noOp(), Types.LONG);
        DataStream<Long> kept = env.fromSource(src, WatermarkStrategy.noWatermarks(), "numbers")
                .map(new Twice()).name("twice").filter(new NotThrees()).name("not-threes");
        DataStream<Long> worked = kept.keyBy(v -> v % 1024, Types.LONG).process(new Work(rounds)).name("work").returns(Types.LONG);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        tEnv.createTemporaryView("worked", tEnv.fromDataStream(worked).as("v"));
        Table q = tEnv.sqlQuery("SELECT v, v * 3 AS w FROM worked WHERE MOD(v, 5) <> 0");
        tEnv.toDataStream(q).map(new Tally()).name("tally").returns(Types.LONG).sinkTo(new DiscardingSink<>()).name("sunk");
        env.execute(p.get("name", "plain"));
    }

    static final class Twice extends RichMapFunction<Long, Long> {
        @Override
        public Long map(Long i) {
            return 2 * i;
        }
    }

    static final class NotThrees extends RichFilterFunction<Long> {
        @Override
        public boolean filter(Long v) {
            return v % 3 != 0;
        }
    }

    /** Real work a record (SHA-256 rounds), and the subtask's counters for the truth. */
    static final class Work extends KeyedProcessFunction<Long, Long, Long> {
        private final int rounds;
        private transient MessageDigest sha;
        private transient LongCounter done, busyNs;
        private transient LongMinimum first;
        private transient LongMaximum last;

        Work(int rounds) {
            this.rounds = rounds;
        }

        @Override
        public void open(OpenContext ctx) throws NoSuchAlgorithmException {
            sha = MessageDigest.getInstance("SHA-256");
            String me = "work#" + getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            done = getRuntimeContext().getLongCounter(me + " records");
            busyNs = getRuntimeContext().getLongCounter(me + " busy ns");
            first = new LongMinimum();
            last = new LongMaximum();
            getRuntimeContext().addAccumulator(me + " first ns", first);
            getRuntimeContext().addAccumulator(me + " last ns", last);
        }

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) {
            long t0 = System.nanoTime();
            byte[] d = sha.digest(ByteBuffer.allocate(8).putLong(v).array());
            for (int i = 1; i < rounds; i++) d = sha.digest(d);
            if (d[0] == 0 && d[1] == 0 && d[2] == 0 && d[3] == 0) last.add(t0); // the digest is used: never true for these inputs (checked: 2^-32)
            out.collect(v);
            long t1 = System.nanoTime();
            busyNs.add(t1 - t0);
            done.add(1);
            first.add(t1);
            last.add(t1);
        }
    }

    /** Counts what the query gives, and sums w, before the sink. */
    static final class Tally extends RichMapFunction<Row, Long> {
        private transient LongCounter count, sum;

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getLongCounter("tallied");
            sum = getRuntimeContext().getLongCounter("tallied w");
        }

        @Override
        public Long map(Row r) {
            long w = (Long) r.getField("w");
            count.add(1);
            sum.add(w);
            return w;
        }
    }
}
