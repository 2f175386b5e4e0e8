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
            // -Dcloudprofiler.bench.storm=full or =sink: one of the two (both by default)
            String which = System.getProperty("cloudprofiler.bench.storm", "both");
            if (!which.equals("sink")) IngestBench.run("Storm 2.8 (LocalCluster, 2 spouts, keyed count x2, sink; unreliable)", engine(cluster, false));
            if (!which.equals("full")) IngestBench.run("Storm 2.8, the paper's SUT (LocalCluster, 2 spouts, a sink; unreliable)", engine(cluster, true));
        }
    }

    /** IngestTopology on cluster; spoutSink: the spouts and the sink alone (the paper's). */
    static IngestBench.Engine engine(LocalCluster cluster, boolean spoutSink) {
        return new IngestBench.Engine() {
            int n;
            String name;

            @Override
            public int start(boolean plain) throws Exception {
                name = "cloudprofiler-ingest-bench-" + (spoutSink ? "sink-" : "") + (n++);
                cluster.submitTopology(name, IngestTopology.config(), spoutSink ? IngestTopology.buildSpoutSink("127.0.0.1", 0, 64, plain)
                        : IngestTopology.build("127.0.0.1", 0, 64, plain, false));
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
        };
    }
}
