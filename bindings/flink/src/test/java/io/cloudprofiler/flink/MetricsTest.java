package io.cloudprofiler.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.cloudprofiler.testkit.Logs;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MetricOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.core.execution.JobClient;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.junit.jupiter.api.Test;

/**
 * The live numbers where a Flink user looks: a job whose 1-spin operator
 * is its bottleneck (an unthrottled source feeding 20 us of spinning a
 * record), run on a MiniCluster with its REST API and Flink's Prometheus
 * reporter. While it runs, the test reads the operator's gauges from
 * {@code /jobs/:id/vertices/:vid/metrics} and from the reporter's
 * endpoint; afterwards it analyses the run's logs and compares the live
 * capacity with the capacity {@code analyze} finds for the same operator
 * (its departures per second while backlogged).
 */
class MetricsTest {
    static final long N = 400_000;
    static final long SPIN_NS = 20_000;
    static final ObjectMapper JSON = new ObjectMapper();
    final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    /** Work that takes SPIN_NS of wall time a record (a wait the machine cannot shorten). */
    static final class Spin implements MapFunction<Long, Long> {
        @Override
        public Long map(Long x) {
            long end = System.nanoTime() + SPIN_NS;
            while (System.nanoTime() < end) Thread.onSpinWait();
            return x;
        }
    }

    /** One reading of the operator's gauges, from the REST API. */
    record Reading(double capacity, long in, long out, long nanos) {}

    @Test
    void liveCapacityInRestAndPrometheusAgreesWithTheRun() throws Exception {
        Logs.emptyLogDir();
        int rest = freePort(), prom = freePort();
        Configuration c = Configuration.fromMap(Map.of(
                "metrics.reporter.prom.factory.class", "org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
                "metrics.reporter.prom.port", String.valueOf(prom)));
        c.set(RestOptions.PORT, rest);
        c.set(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL, Duration.ofMillis(500));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, c);
        env.disableOperatorChaining();
        DataStream<Long> ids = env.fromSource(new DataGeneratorSource<>(i -> i, N, Types.LONG),
                WatermarkStrategy.noWatermarks(), "ids");
        Profiled.map(ids, "1-spin", new Spin(), x -> x).sinkTo(new DiscardingSink<>());
        JobClient job = env.executeAsync("cloudprofiler-flink-metrics");

        String base = "http://localhost:" + rest + "/jobs/" + job.getJobID();
        List<Reading> readings = new ArrayList<>();
        String promLine = null;
        // The local environment's MiniCluster goes when the job ends: poll until then.
        CompletableFuture<?> done = job.getJobExecutionResult();
        while (!done.isDone()) {
            Thread.sleep(300);
            try {
                Reading r = readRest(base);
                if (r != null) readings.add(r);
                String line = readPrometheus(prom);
                if (line != null) promLine = line;
            } catch (IOException e) {
                // not up yet, or the job ended between the check and the reads
            }
        }
        done.get();
        System.out.println("[metrics] " + readings.size() + " REST readings; Prometheus: " + promLine);

        assertFalse(readings.isEmpty(), "no cloudprofiler gauges in the REST API while the job ran");
        assertTrue(promLine != null, "no cloudprofiler_capacity in the Prometheus reporter's endpoint");
        // No check that tuplesIn never goes back: the gauge reads a counter
        // that only grows, but the JobManager's metric store may answer
        // with an older fetch after a newer one (seen: 216,611 then 216,526
        // with the other vCPU busy).
        Reading first = readings.get(0), last = readings.get(readings.size() - 1);
        assertTrue(last.in <= N, "tuplesIn: " + last);
        System.out.printf("[metrics] tuplesIn gauge: %.0f/s from the first reading to the last%n",
                (last.in - first.in) / ((last.nanos - first.nanos) / 1e9));

        // The run's truth: analyze's capacity for 1-spin, its departures a
        // second while backlogged, from the same run's marks. The live
        // capacity is the same quantity over the last second or so, from the
        // library's notes of the same marks as they were made (the source is
        // not throttled: 1-spin is backlogged until the source ends): the
        // mean of the readings while it was (from a tenth of the records in
        // to nine tenths; they come at a steady pace, so the mean weighs the
        // run's stretches by their length, as the capacity does) within 10%
        // of analyze's.
        Path out = Logs.analyze("metrics");
        double capacity = Double.parseDouble(Logs.wholeRun(out.resolve("capacity.csv"), "1-spin", "capacity"));
        double[] live = readings.stream().filter(r -> r.in >= N / 10 && r.in <= N * 9 / 10 && r.capacity > 0)
                .mapToDouble(Reading::capacity).toArray();
        assertTrue(live.length > 0, "no capacity reading while 1-spin was backlogged: " + readings);
        double mean = Arrays.stream(live).average().orElseThrow();
        System.out.printf("[metrics] 1-spin live capacity %.0f/s (the mean of %d readings; the last %.0f/s), analyze's capacity %.0f/s: %+.1f%%%n",
                mean, live.length, last.capacity, capacity, 100 * (mean / capacity - 1));
        assertTrue(Math.abs(mean / capacity - 1) <= 0.1,
                "the live capacity " + mean + " is not within 10% of analyze's capacity " + capacity);
    }

    /** The 1-spin vertex's cloudprofiler gauges, or null while they are not there yet. */
    Reading readRest(String base) throws IOException, InterruptedException {
        String vid = null;
        for (JsonNode v : JSON.readTree(get(base)).path("vertices")) {
            if (v.path("name").asText().equals("1-spin")) vid = v.path("id").asText();
        }
        if (vid == null) return null;
        String metrics = base + "/vertices/" + vid + "/metrics";
        List<String> names = new ArrayList<>();
        for (JsonNode m : JSON.readTree(get(metrics))) {
            String id = m.path("id").asText();
            if (id.contains(".cloudprofiler.")) names.add(id);
        }
        if (names.size() < 3) return null;
        Map<String, Double> values = new HashMap<>();
        for (JsonNode m : JSON.readTree(get(metrics + "?get=" + String.join(",", names)))) {
            String id = m.path("id").asText();
            values.put(id.substring(id.lastIndexOf('.') + 1), Double.parseDouble(m.path("value").asText()));
        }
        assertEquals(3, values.size(), "gauges: " + values);
        return new Reading(values.get("capacity"), values.get("tuplesIn").longValue(), values.get("tuplesOut").longValue(), System.nanoTime());
    }

    /** The reporter's capacity line for 1-spin (its label values have '_' for '-'), or null. */
    String readPrometheus(int port) throws IOException, InterruptedException {
        Matcher m = Pattern.compile("(?m)^flink_taskmanager_job_task_operator_cloudprofiler_capacity\\{[^}]*operator_name=\"1_spin\"[^}]*\\} (\\S+)$")
                .matcher(get("http://localhost:" + port + "/metrics"));
        return m.find() ? m.group() : null;
    }

    String get(String url) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) throw new IOException(url + ": HTTP " + r.statusCode());
        return r.body();
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
