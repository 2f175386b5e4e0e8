package io.cloudprofiler.tests.engines.flink;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.flink.api.common.JobID;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Flink's own view of a task, where a Flink user reads it: the REST API of
 * the cluster ({@code /jobs/:id/vertices/:vid/metrics}), polled while the
 * job runs, one snapshot of every subtask's metrics per request:
 *
 * <ul>
 * <li>{@code numRecordsIn}: records the task took;
 * <li>{@code accumulateBusyTimeMs}: its wall time since it started, less the
 *     time it was idle (waiting for input) and back-pressured (waiting for
 *     an output buffer);
 * <li>{@code busyTimeMsPerSecond}: Flink's own gauge of the same;
 * <li>{@code <operator>.cloudprofiler.capacity}: ours, the gauge the
 *     wrapped operator registers (io.cloudprofiler.Marks#capacity(): the
 *     subtask's capacity over about the last second, from the library's
 *     notes of its marks; NaN until there is one). Its id is looked up in
 *     the vertex's list of metrics, as a user would find it, not assumed.
 * </ul>
 *
 * numRecordsIn over accumulateBusyTimeMs between two snapshots is Flink's
 * records per busy second, what its autoscaler calls the true processing
 * rate.
 *
 * <p>The JobManager answers from its metric store, which it refreshes from
 * the TaskManagers at most every {@code metrics.fetcher.update-interval}
 * and only when asked (the request that finds the store old starts a fetch
 * and is answered with the old values). So a snapshot is older than its
 * answer; the test finds how much older from the truth's counters. The
 * TaskManager reads every metric of a task in one dump, so the gauge's
 * reading is placed at the same time as the numRecordsIn beside it; and a
 * dump is what reads the gauge (Marks#capacity() measures from one read to
 * a later one), so polling here is what makes it report at all.
 */
final class FlinkRest {
    static final String[] METRICS = {"numRecordsIn", "accumulateBusyTimeMs", "busyTimeMsPerSecond",
        "accumulateIdleTimeMs", "accumulateBackPressuredTimeMs"};
    static final long POLL_MS = 100;
    private static final ObjectMapper JSON = new ObjectMapper();

    /** The gauge's name in the operator's metric group (io.cloudprofiler.flink.Profiled.METRIC_GROUP, "capacity"). */
    static final String GAUGE_SUFFIX = ".cloudprofiler.capacity";

    /** One answer: when it came (System.nanoTime()) and each subtask's metrics (NaN: not there). */
    record Snapshot(long answeredNanos, long[] recordsIn, double[] busyMs, double[] busyPerSecond, double[] idleMs,
                    double[] backPressuredMs, double[] gauge) {
        boolean complete() {
            for (int i = 0; i < recordsIn.length; i++) {
                if (recordsIn[i] < 0 || Double.isNaN(busyMs[i])) return false;
            }
            return true;
        }

        /**
         * The same values as o: the store answered again without a fetch in
         * between. Idle time and the gauge too, so that a fetch while a
         * subtask had no records yet counts as one (the gauge measures from
         * its reads, which are these fetches).
         */
        boolean sameValues(Snapshot o) {
            return o != null && Arrays.equals(recordsIn, o.recordsIn) && Arrays.equals(busyMs, o.busyMs)
                    && Arrays.equals(idleMs, o.idleMs) && Arrays.equals(gauge, o.gauge);
        }

        /** Whether subtask i's values differ from o's (o null: they do): a fetch that reached that subtask. */
        boolean freshFor(int i, Snapshot o) {
            return o == null || recordsIn[i] != o.recordsIn[i] || Double.compare(busyMs[i], o.busyMs[i]) != 0
                    || Double.compare(idleMs[i], o.idleMs[i]) != 0 || Double.compare(gauge[i], o.gauge[i]) != 0;
        }
    }

    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private final String job;
    private final String vertexNamePart;
    /** The operator whose gauge is read (a vertex holds several chained operators, each with its own). */
    private final String gaugeOperator;
    /** Per subtask, the gauge's id in the vertex's metrics (null until listed). */
    private final String[] gaugeIds;
    private final int subtasks;
    private final List<Snapshot> snapshots = new ArrayList<>();
    private volatile boolean stop;
    private Thread poller;
    /** The job's vertices, in the order the REST API lists them (how Flink chained the operators). */
    volatile List<String> vertexNames = List.of();
    volatile String vertexName;
    volatile String lastError;
    /** Requests answered; of them, answers without every subtask's numRecordsIn and accumulateBusyTimeMs; requests that failed. */
    volatile int answers, incomplete, errors;
    /** When the hash vertex was first listed, and the first complete answer came (System.nanoTime(); 0: never). */
    volatile long vertexFound, firstComplete;
    /** The ids of our capacity gauges the vertex listed (every chained operator's, every subtask's), as Flink spells them. */
    volatile List<String> gaugeIdsListed = List.of();

    FlinkRest(URI rest, JobID job, String vertexNamePart, String gaugeOperator, int subtasks) {
        this.job = rest.toString().replaceAll("/$", "") + "/jobs/" + job;
        this.vertexNamePart = vertexNamePart;
        this.gaugeOperator = gaugeOperator;
        this.subtasks = subtasks;
        this.gaugeIds = new String[subtasks];
    }

    /** The gauge's id of each subtask as listed (null where it never was). */
    String[] gaugeIds() {
        return gaugeIds.clone();
    }

    /** Starts polling every {@link #POLL_MS} ms, on a thread of its own. */
    void start() {
        poller = new Thread(this::poll, "flink-rest-poller");
        poller.setDaemon(true);
        poller.start();
    }

    /** Stops polling; the snapshots, one per distinct set of values, in the order they were answered. */
    List<Snapshot> stop() throws InterruptedException {
        stop = true;
        poller.join(10_000);
        synchronized (snapshots) {
            return new ArrayList<>(snapshots);
        }
    }

    private void poll() {
        String vid = null;
        while (!stop) {
            try {
                if (vid == null && (vid = findVertex()) != null) vertexFound = System.nanoTime();
                if (vid != null) {
                    if (Arrays.asList(gaugeIds).contains(null)) findGauges(vid);
                    Snapshot s = read(vid);
                    answers++;
                    if (!s.complete()) incomplete++;
                    else if (firstComplete == 0) firstComplete = s.answeredNanos();
                    synchronized (snapshots) {
                        // the store answers the same values until its next fetch:
                        // keep the first answer of each (the closest to that fetch)
                        Snapshot last = snapshots.isEmpty() ? null : snapshots.get(snapshots.size() - 1);
                        if (s.complete() && !s.sameValues(last)) snapshots.add(s);
                    }
                }
            } catch (IOException e) {
                lastError = e.toString(); // the job not listed yet, or ended between two requests
                errors++;
            } catch (InterruptedException e) {
                return;
            }
            try {
                Thread.sleep(POLL_MS);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private String findVertex() throws IOException, InterruptedException {
        List<String> names = new ArrayList<>();
        String id = null;
        for (JsonNode v : JSON.readTree(get(job)).path("vertices")) {
            String name = v.path("name").asText();
            names.add(name);
            if (name.contains(vertexNamePart)) {
                id = v.path("id").asText();
                vertexName = name;
            }
        }
        vertexNames = names;
        return id;
    }

    /**
     * Looks the gauges up in the vertex's list of metric ids: subtask i's is
     * "i.OPERATOR.cloudprofiler.capacity". The list holds what the
     * TaskManager has reported so far, so this is retried until each
     * subtask's is there.
     */
    private void findGauges(String vid) throws IOException, InterruptedException {
        List<String> ours = new ArrayList<>();
        for (JsonNode m : JSON.readTree(get(job + "/vertices/" + vid + "/metrics"))) {
            String id = m.path("id").asText();
            if (id.endsWith(GAUGE_SUFFIX)) ours.add(id);
            for (int i = 0; i < subtasks; i++) {
                if (id.equals(i + "." + gaugeOperator + GAUGE_SUFFIX)) gaugeIds[i] = id;
            }
        }
        if (!ours.isEmpty()) {
            ours.sort(null);
            gaugeIdsListed = ours;
        }
    }

    private Snapshot read(String vid) throws IOException, InterruptedException {
        StringBuilder q = new StringBuilder();
        for (int i = 0; i < subtasks; i++) {
            for (String m : METRICS) q.append(q.length() == 0 ? "" : ",").append(i).append('.').append(m);
            if (gaugeIds[i] != null) q.append(',').append(gaugeIds[i]);
        }
        Map<String, String> values = new HashMap<>();
        for (JsonNode m : JSON.readTree(get(job + "/vertices/" + vid + "/metrics?get=" + q))) {
            values.put(m.path("id").asText(), m.path("value").asText());
        }
        long now = System.nanoTime();
        long[] in = new long[subtasks];
        double[] busy = new double[subtasks], perS = new double[subtasks], idle = new double[subtasks], bp = new double[subtasks],
                gauge = new double[subtasks];
        for (int i = 0; i < subtasks; i++) {
            String r = values.get(i + ".numRecordsIn");
            in[i] = r == null ? -1 : Long.parseLong(r);
            busy[i] = number(values.get(i + ".accumulateBusyTimeMs"));
            perS[i] = number(values.get(i + ".busyTimeMsPerSecond"));
            idle[i] = number(values.get(i + ".accumulateIdleTimeMs"));
            bp[i] = number(values.get(i + ".accumulateBackPressuredTimeMs"));
            gauge[i] = gaugeIds[i] == null ? Double.NaN : number(values.get(gaugeIds[i]));
        }
        return new Snapshot(now, in, busy, perS, idle, bp, gauge);
    }

    private static double number(String s) {
        if (s == null) return Double.NaN;
        try {
            return Double.parseDouble(s);
        } catch (NumberFormatException e) {
            return Double.NaN;
        }
    }

    private String get(String url) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(5)).build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 200) throw new IOException(url + ": HTTP " + r.statusCode());
        return r.body();
    }
}
