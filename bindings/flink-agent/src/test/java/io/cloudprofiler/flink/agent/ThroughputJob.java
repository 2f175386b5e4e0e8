package io.cloudprofiler.flink.agent;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

/**
 * make bench-flink-agent's job, run in a JVM of its own with the agent and
 * without: N records as fast as Flink takes them through map, filter,
 * keyBy, a keyed process function and a sink, in Flink's default settings
 * (chaining on), parallelism 1; args[1], when given, is work in
 * microseconds the keyed process function spins a record (0: none, the
 * agent's worst case). Prints "records/s R": the keyed process
 * function's records from its tenth to its ninetieth percent over the time
 * between them, the job's steady pace (the MiniCluster's start and the
 * agent's own, changing Flink's classes as they load, left out).
 */
public final class ThroughputJob {
    /** When the keyed process function took its n/10-th and 9n/10-th record (one subtask, this JVM's MiniCluster). */
    static volatile long t10, t90;

    public static void main(String[] args) throws Exception {
        long n = Long.parseLong(args[0]);
        long workNs = args.length > 1 ? (long) (Double.parseDouble(args[1]) * 1000) : 0;
        long kept = n - n / 5; // the filter drops x*31+7 divisible by 5: every fifth
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        env.fromSequence(1, n)
                .map(x -> x * 31 + 7).returns(Types.LONG)
                .filter(x -> x % 5 != 0)
                .keyBy(x -> x % 64, Types.LONG)
                .process(new KeyedProcessFunction<Long, Long, Long>() {
                    long seen;

                    @Override
                    public void processElement(Long x, Context ctx, Collector<Long> out) {
                        if (++seen == kept / 10) t10 = System.nanoTime();
                        else if (seen == kept * 9 / 10) t90 = System.nanoTime();
                        if (workNs > 0) {
                            long end = System.nanoTime() + workNs;
                            while (System.nanoTime() < end) Thread.onSpinWait();
                        }
                        out.collect(x + 1);
                    }
                }).returns(Types.LONG)
                .sinkTo(new DiscardingSink<>());
        long t0 = System.nanoTime();
        env.execute("throughput");
        double all = (System.nanoTime() - t0) / 1e9, steady = (t90 - t10) / 1e9;
        System.out.printf("records/s %.0f (%d records, the middle 80%% in %.2f s; the job %.2f s from submission)%n",
                0.8 * kept / steady, n, steady, all);
    }
}
