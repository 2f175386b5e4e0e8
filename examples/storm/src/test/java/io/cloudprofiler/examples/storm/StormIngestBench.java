package io.cloudprofiler.examples.storm;

import io.cloudprofiler.datagen.ObjectFactory;
import io.cloudprofiler.examples.IngestBench;
import java.util.concurrent.TimeUnit;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.KillOptions;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * {@code make bench-ingest}'s Storm half ({@link IngestBench}): {@link
 * IngestTopology} on a LocalCluster, its spouts plain (deserializing on
 * their own threads, the paper's "StormIR") and fed by the object factory
 * (its "CPIR"). A benchmark: it runs only with {@code
 * -Dcloudprofiler.bench=true} and asserts nothing.
 */
class StormIngestBench {
    @Test
    @SuppressWarnings("try") // LocalCluster.close() throws Exception
    void plainAgainstTheFactory() throws Exception {
        Assumptions.assumeTrue(Boolean.getBoolean("cloudprofiler.bench"), "a benchmark: make bench-ingest");
        try (LocalCluster cluster = new LocalCluster.Builder().withDaemonConf(Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS, 1).build()) {
            IngestBench.run("Storm 2.8 (LocalCluster, 2 spouts, keyed count x2, sink; unreliable)", new IngestBench.Engine() {
                int n;
                String name;

                @Override
                public int start(boolean plain) throws Exception {
                    name = "cloudprofiler-ingest-bench-" + (n++);
                    cluster.submitTopology(name, IngestTopology.config(), IngestTopology.build("127.0.0.1", 0, 64, plain, false));
                    ObjectFactory<?> f = plain ? FactorySpout.awaitPlainFactory(IngestTopology.SPOUTS, 120, TimeUnit.SECONDS)
                            : FactorySpout.awaitFactory(IngestTopology.SPOUTS, 120, TimeUnit.SECONDS);
                    if (f == null) throw new IllegalStateException("the spouts did not open within 120 s");
                    return f.port();
                }

                @Override
                public long sink() {
                    return IngestTopology.SinkBolt.SEEN.sum();
                }

                @Override
                public void stop() throws Exception {
                    KillOptions kill = new KillOptions();
                    kill.set_wait_secs(0);
                    cluster.killTopologyWithOpts(name, kill);
                    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                    while (FactorySpout.openTasks() > 0 && System.nanoTime() < deadline) Thread.sleep(50);
                    if (FactorySpout.openTasks() > 0) throw new IllegalStateException("the spouts did not close within 60 s");
                }
            });
        }
    }
}
