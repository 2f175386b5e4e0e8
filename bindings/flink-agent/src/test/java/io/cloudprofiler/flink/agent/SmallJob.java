package io.cloudprofiler.flink.agent;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/** A job of three operators on a MiniCluster, for a child JVM: prints "done N" with what its map saw. */
public final class SmallJob {
    static long seen;

    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        env.fromSequence(1, 1000).map(SmallJob::see).returns(Types.LONG).sinkTo(new DiscardingSink<>());
        env.execute("small");
        System.out.println("done " + seen);
    }

    static long see(long x) {
        seen++;
        return x;
    }
}
