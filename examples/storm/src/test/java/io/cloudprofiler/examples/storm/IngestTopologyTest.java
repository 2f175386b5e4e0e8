package io.cloudprofiler.examples.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.cloudprofiler.datagen.ObjectFactory;
import io.cloudprofiler.datagen.StreamReport;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.tuple.Values;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link IngestTopology} on a LocalCluster, fed by the real {@code
 * cloudprofiler gen send} through the object factory, with the factory's
 * threads deserializing and with the spouts deserializing (plain, the
 * paper's baseline): the factory's report says nothing was lost, and the
 * sink sees every id exactly once. No rate is asserted: {@code make
 * bench-ingest} measures them.
 */
class IngestTopologyTest {
    static final long RATE = 50_000, SECONDS = 2, N = RATE * SECONDS;
    static final int THREADS = 2;
    static final String TOPOLOGY = "cloudprofiler-storm-ingest";

    @ParameterizedTest(name = "plain={0}")
    @ValueSource(booleans = {false, true})
    @Timeout(180)
    @SuppressWarnings("try") // LocalCluster.close() throws Exception
    void everyTupleSentReachesTheSink(boolean plain) throws Exception {
        String tool = System.getProperty("cloudprofiler.tool");
        assertNotNull(tool, "the pom passes -Dcloudprofiler.tool");
        assertTrue(Files.isExecutable(Path.of(tool)), tool + " is not executable: run `make build` first");
        IngestTopology.SinkBolt.reset();
        long t0 = System.nanoTime();
        LocalCluster.Builder builder = new LocalCluster.Builder()
                .withDaemonConf(Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS, 1);
        try (LocalCluster cluster = builder.build()) {
            FactorySpout.PLAIN_DROPPED.reset();
            cluster.submitTopology(TOPOLOGY, IngestTopology.config(), IngestTopology.build("127.0.0.1", 0, 64, plain, true));
            ObjectFactory<?> f = plain ? FactorySpout.awaitPlainFactory(IngestTopology.SPOUTS, 60, TimeUnit.SECONDS)
                    : FactorySpout.awaitFactory(IngestTopology.SPOUTS, 60, TimeUnit.SECONDS);
            assertNotNull(f, "the spouts did not open");
            long tUp = System.nanoTime();
            Path err = Files.createTempFile(PrivateTmpDir.DIR, "gen-send", ".err");  // deleted at exit if not here
            Process p = new ProcessBuilder(tool, "gen", "send", "--to", "127.0.0.1:" + f.port(), "--synthetic", "--rate",
                    "" + RATE, "--duration", SECONDS + "s", "--threads", "" + THREADS).redirectError(err.toFile()).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(p.waitFor(60, TimeUnit.SECONDS));
            String stderr = Files.readString(err);
            Files.deleteIfExists(err);
            System.out.print(out);
            // 0, or 3 when a busy machine kept gen send from its rate (make bench-gen measures rates):
            // every tuple sent and received is what this test asserts.
            assertTrue(p.exitValue() == 0 || p.exitValue() == 3, "gen send:\n" + out + stderr);
            assertTrue(out.contains("sent " + N + " of " + N + " tuples"), out);
            assertTrue(out.contains("receiver: received " + N + ", lost 0 (dropped by it 0), out of order 0"), out);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (IngestTopology.SinkBolt.SEEN.sum() < N && System.nanoTime() < deadline) Thread.sleep(5);
            long tDone = System.nanoTime();
            assertEquals(N, IngestTopology.SinkBolt.SEEN.sum(), "tuples at the sink");
            assertEquals(0, IngestTopology.SinkBolt.DUPLICATES.sum());
            assertEquals(0, FactorySpout.PLAIN_DROPPED.sum(), "payloads a plain spout could not parse");
            for (int t = 0; t < THREADS; t++) {
                BitSet s = IngestTopology.SinkBolt.IDS.get(t);
                assertNotNull(s, "sender thread " + t);
                assertEquals(N / THREADS, s.cardinality(), "sender thread " + t);
                assertEquals(N / THREADS, s.nextClearBit(0), "sender thread " + t);
            }
            List<StreamReport> reps = f.reports();
            assertEquals(THREADS, reps.size(), reps.toString());
            for (StreamReport r : reps) {
                assertNull(r.error(), r.toString());
                assertEquals(0, r.lost());
            }
            assertEquals(1, f.completedRuns());
            KillOptions kill = new KillOptions();
            kill.set_wait_secs(0);
            cluster.killTopologyWithOpts(TOPOLOGY, kill);
            System.out.printf("[storm ingest%s] LocalCluster and spouts up %.1f s, gen send to the sink's last tuple %.1f s%n",
                    plain ? ", plain" : "", (tUp - t0) / 1e9, (tDone - tUp) / 1e9);
        }
    }

    @Test
    void theDeserializerMakesTheTuple() {
        AdEventValues d = new AdEventValues();
        String js = "{\"user_id\":\"u\",\"page_id\":\"p\",\"ad_id\":\"a\\\"\\u00e9\u00e9\",\"ad_type\":\"banner\","
                + "\"event_type\":\"view\",\"event_time\":\"1700000000123\",\"ip_address\":\"1.2.3.4\",\"extra\":null}";
        byte[] b = js.getBytes(StandardCharsets.UTF_8);
        Values v = d.deserialize(9, b, 0, b.length);
        assertEquals(List.of(9L, "u", "p", "a\"\u00e9\u00e9", "banner", "view", 1700000000123L, "1.2.3.4"), v);
        assertEquals(AdEventValues.FIELDS.size(), v.size());
        for (String bad : new String[] {"", "{", "{\"a\":}", "{\"a\":[1]}", "{\"a\":\"b\"} x", "{\"event_time\":\"x\"}"}) {
            byte[] x = bad.getBytes(StandardCharsets.UTF_8);
            assertThrows(IllegalArgumentException.class, () -> d.deserialize(0, x, 0, x.length), bad);
        }
    }
}
