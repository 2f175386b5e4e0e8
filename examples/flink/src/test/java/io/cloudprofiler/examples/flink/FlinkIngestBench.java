package io.cloudprofiler.examples.flink;

import io.cloudprofiler.datagen.ObjectFactory;
import io.cloudprofiler.examples.IngestBench;
import java.util.concurrent.TimeUnit;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * {@code make bench-ingest}'s Flink half ({@link IngestBench}): {@link
 * IngestJob} on a MiniCluster, its source plain (deserializing on the
 * task's thread, as the paper's "StormIR" does in Storm) and fed by the
 * object factory (its "CPIR"). A benchmark: it runs only with {@code
 * -Dcloudprofiler.bench=true} and asserts nothing.
 */
class FlinkIngestBench {
    static final int P = 2;

    @Test
    void plainAgainstTheFactory() throws Exception {
        Assumptions.assumeTrue(Boolean.getBoolean("cloudprofiler.bench"), "a benchmark: make bench-ingest");
        IngestBench.run("Flink 2.3 (MiniCluster, parallelism 2: source, map, keyBy, keyed count, sink)", new IngestBench.Engine() {
            JobClient job;

            @Override
            public int start(boolean plain) throws Exception {
                IngestJob.Options opt = new IngestJob.Options();
                opt.port = 0;
                opt.parallelism = P;
                opt.runs = 0; // until cancelled: maxrate sends many runs
                opt.trackIds = false;
                opt.plain = plain;
                StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(IngestJob.configuration());
                IngestJob.build(env, opt);
                job = env.executeAsync("cloudprofiler-ingest-bench");
                ObjectFactory<?> f = plain ? FactorySource.awaitPlainFactory(P, 120, TimeUnit.SECONDS)
                        : FactorySource.awaitFactory(P, 120, TimeUnit.SECONDS);
                if (f == null) throw new IllegalStateException("the source did not start within 120 s");
                return f.port();
            }

            @Override
            public long sink() {
                return IngestJob.Counts.EVENTS.sum();
            }

            @Override
            public void stop() throws Exception {
                job.cancel().get(60, TimeUnit.SECONDS);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (FactorySource.openReaders() > 0 && System.nanoTime() < deadline) Thread.sleep(50);
                if (FactorySource.openReaders() > 0) throw new IllegalStateException("the source did not close within 60 s");
            }
        });
    }
}
