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
 * agent's worst case). Prints "records/s R" over the job's run.
 */
public final class ThroughputJob {
    public static void main(String[] args) throws Exception {
        long n = Long.parseLong(args[0]);
        long workNs = args.length > 1 ? (long) (Double.parseDouble(args[1]) * 1000) : 0;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        env.fromSequence(1, n)
                .map(x -> x * 31 + 7).returns(Types.LONG)
                .filter(x -> x % 5 != 0)
                .keyBy(x -> x % 64, Types.LONG)
                .process(new KeyedProcessFunction<Long, Long, Long>() {
                    @Override
                    public void processElement(Long x, Context ctx, Collector<Long> out) {
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
        double s = (System.nanoTime() - t0) / 1e9;
        System.out.printf("records/s %.0f (%d in %.2f s)%n", n / s, n, s);
    }
}
