package io.cloudprofiler.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.cloudprofiler.testkit.Logs;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import org.apache.storm.Config;
import org.apache.storm.LocalCluster;
import org.apache.storm.generated.KillOptions;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.IRichBolt;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.topology.base.BaseRichBolt;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Topologies of plain, unmodified spouts and bolts on one LocalCluster
 * (started once for the class: a start takes 10-20 s here): ids -&gt;
 * double (emits each) -&gt; even (a basic bolt emitting even ids only) -&gt;
 * sink (declares nothing, counts), marked by the wrappers, by the hook
 * alone, and not at all; a spout without ids stamped by Profiled.spout; the
 * live metrics read back from Storm's CSV reporter. Their logs are read
 * with the cloudprofiler tool.
 */
@Timeout(300)
class TopologyTest {
    static final long N = 20_000;
    static final long FIRST_ID = 1L << 36; // beyond 32 bits: tuple ids are 64-bit
    static final int P = 2; // tasks of double and even

    private static LocalCluster cluster;

    @BeforeAll
    static void startCluster() throws Exception {
        // The supervisor sleeps supervisor.worker.shutdown.sleep.secs (3) after a kill: 1 s is enough here.
        cluster = new LocalCluster.Builder()
                .withDaemonConf(Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, true)
                .withDaemonConf(Config.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS, 1)
                .build();
    }

    @AfterAll
    static void stopCluster() throws Exception {
        if (cluster != null) cluster.close();
    }

    @BeforeEach
    void reset() throws IOException {
        Logs.emptyLogDir();
        IdSpout.ACKED.set(0);
        IdSpout.FAILED.set(0);
        Sink.SEEN.set(0);
        Sink.FIELDS.clear();
        Marking.FAILURES.set(0);
    }

    // ---- the topology's parts: plain Storm, nothing of ours

    /** Emits (id, value) for ids first .. first+N-1 (FIRST_ID by default), reliably (the id the message id), then idles. */
    public static class IdSpout extends BaseRichSpout {
        static final AtomicLong ACKED = new AtomicLong(), FAILED = new AtomicLong();
        private final long first;
        private transient SpoutOutputCollector collector;
        private transient long next;

        IdSpout() {
            this(FIRST_ID);
        }

        IdSpout(long first) {
            this.first = first;
        }

        @Override
        public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void nextTuple() {
            if (next == N) return; // done: Storm's wait strategy backs off
            long id = first + next++;
            collector.emit(new Values(id, next), id);
        }

        @Override
        public void ack(Object msgId) {
            ACKED.incrementAndGet();
        }

        @Override
        public void fail(Object msgId) {
            FAILED.incrementAndGet(); // a replay would log its id twice: the tests assert none
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("id", "value"));
        }
    }

    /** Words and no id: what Profiled.spout gives ids to. */
    public static class WordSpout extends BaseRichSpout {
        private transient SpoutOutputCollector collector;
        private transient long next;

        @Override
        public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void nextTuple() {
            if (next == N) return;
            next++;
            collector.emit(new Values("w" + next % 100), next);
        }

        @Override
        public void ack(Object msgId) {
            IdSpout.ACKED.incrementAndGet();
        }

        @Override
        public void fail(Object msgId) {
            IdSpout.FAILED.incrementAndGet();
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("word"));
        }
    }

    /** Emits each input once, anchored (value doubled), and acks. */
    public static class DoubleValue extends BaseRichBolt {
        private transient OutputCollector collector;

        @Override
        public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void execute(Tuple t) {
            collector.emit(t, new Values(t.getLong(0), 2 * t.getLong(1)));
            collector.ack(t);
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("id", "value"));
        }
    }

    /** A basic bolt (Storm anchors and acks for it): emits the even ids only. */
    public static class Even extends BaseBasicBolt {
        @Override
        public void execute(Tuple t, BasicOutputCollector out) {
            if (t.getLong(0) % 2 == 0) out.emit(new Values(t.getLong(0), t.getLong(1)));
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("id", "value"));
        }
    }

    /** Declares no stream (a sink): counts its inputs, keeps their fields, acks. */
    public static class Sink extends BaseRichBolt {
        static final AtomicLong SEEN = new AtomicLong();
        static final Set<List<String>> FIELDS = ConcurrentHashMap.newKeySet();
        private transient OutputCollector collector;

        @Override
        public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
            this.collector = collector;
        }

        @Override
        public void execute(Tuple t) {
            FIELDS.add(t.getFields().toList());
            SEEN.incrementAndGet();
            collector.ack(t);
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {}
    }

    /** ids -> double -> even -> sink; wrap: the bolts marked by Profiled.bolt (each with another way to its id). */
    static TopologyBuilder plain(boolean wrap) {
        IRichBolt dbl = wrap ? Profiled.bolt("double", new DoubleValue(), Profiled.IdOf.field("id")) : new DoubleValue();
        IRichBolt even = wrap ? Profiled.bolt("even", new Even(), Profiled.IdOf.first()) : new org.apache.storm.topology.BasicBoltExecutor(new Even());
        IRichBolt sink = wrap ? Profiled.bolt("sink", new Sink()) : new Sink(); // the default rule: the field "id"
        TopologyBuilder b = new TopologyBuilder();
        b.setSpout("ids", new IdSpout(), 1);
        b.setBolt("double", dbl, P).shuffleGrouping("ids");
        b.setBolt("even", even, P).shuffleGrouping("double");
        b.setBolt("sink", sink, 1).shuffleGrouping("even");
        return b;
    }

    static Config conf(boolean hook) {
        Config conf = new Config();
        conf.setNumWorkers(1);
        conf.setNumAckers(1);
        conf.setMaxSpoutPending(1_000);
        conf.setMessageTimeoutSecs(120); // generous: a slow machine must not replay
        if (hook) conf.put(Config.TOPOLOGY_AUTO_TASK_HOOKS, List.of(MarkingHook.class.getName()));
        return conf;
    }

    /**
     * Runs a topology until the spouts have their acks and the sinks have seen
     * sinkSees tuples, kills it and waits until every marked task has closed
     * its channels (cleanup runs after the kill, asynchronously); then
     * Storm failed no tuple and the marking logged no failure.
     */
    static void run(String name, Config conf, StormTopology topology, long acks, long sinkSees) throws Exception {
        cluster.submitTopology(name, conf, topology);
        waitFor("the spouts' acks", () -> IdSpout.ACKED.get() >= acks, 180_000);
        waitFor("the sink's tuples", () -> Sink.SEEN.get() >= sinkSees, 10_000);
        KillOptions kill = new KillOptions();
        kill.set_wait_secs(0);
        cluster.killTopologyWithOpts(name, kill);
        waitFor("every task's cleanup", () -> Marking.OPEN.get() == 0, 60_000);
        waitFor("the topology gone", () -> {
            try {
                return cluster.getClusterInfo().get_topologies().stream().noneMatch(t -> t.get_name().equals(name));
            } catch (Exception e) {
                return false;
            }
        }, 60_000);
        assertEquals(0, IdSpout.FAILED.get(), "failed tuples (each would be replayed and logged twice)");
        assertEquals(sinkSees, Sink.SEEN.get(), "tuples at the sink");
        assertEquals(0, Marking.FAILURES.get(), "marking failures (logged)");
    }

    static void waitFor(String what, BooleanSupplier done, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                fail("timed out waiting for " + what + ": acks " + IdSpout.ACKED.get() + ", failed " + IdSpout.FAILED.get()
                        + ", at the sink " + Sink.SEEN.get() + ", open " + Marking.OPEN.get());
            }
            Thread.sleep(20);
        }
    }

    /** Checks that each id first .. first+N-1 was logged as often as want says at each "OP ROLE", and no other id. */
    static void assertTimes(Map<String, Map<Long, Integer>> ops, long first, Map<String, java.util.function.LongToIntFunction> want) {
        for (var w : want.entrySet()) {
            Map<Long, Integer> got = ops.get(w.getKey());
            long expected = 0;
            for (long id = first; id < first + N; id++) {
                int times = w.getValue().applyAsInt(id);
                expected += times;
                int n = got.getOrDefault(id, 0);
                if (n != times) fail(w.getKey() + ": id " + id + " logged " + n + " times, not " + times);
            }
            assertEquals(expected, got.values().stream().mapToLong(Integer::longValue).sum(), w.getKey() + ": records (no other ids)");
        }
    }

    static int even(long id) {
        return id % 2 == 0 ? 1 : 0;
    }

    // ---- the tests

    /**
     * (a) The bolts wrapped, the plain spout marked by the hook (which
     * leaves the wrapped tasks alone): in and out of every bolt task, each
     * id as often as the logic says, and analyze --strict with each
     * operator's selectivity.
     */
    @Test
    void wrappedBoltsMarkEveryTuple() throws Exception {
        run("wrapped", conf(true), plain(true).createTopology(), N, N / 2);
        Map<String, Map<Long, Integer>> channels = Logs.channels();
        Set<String> kinds = new TreeSet<>();
        Map<String, Integer> tasks = new TreeMap<>();
        for (String c : channels.keySet()) {
            assertTrue(c.matches("(ids|double|even|sink)#\\d+ (in|out|count)"), "a channel of the convention: " + c);
            kinds.add(c.replaceFirst("#\\d+ ", " "));
            tasks.merge(c.replaceFirst("#\\d+ ", " "), 1, Integer::sum);
        }
        assertEquals(new TreeSet<>(List.of("ids out", "double in", "double out", "double count", "even in", "even out",
                "even count", "sink in", "sink out", "sink count")), kinds, "the spout's out (the hook), the bolts' in, out and count");
        assertEquals(Map.of("ids out", 1, "double in", P, "double out", P, "double count", P, "even in", P, "even out", P,
                "even count", P, "sink in", 1, "sink out", 1, "sink count", 1), tasks, "one channel a task");
        assertTimes(Logs.byOperator(channels), FIRST_ID, Map.of("ids out", id -> 1, "double in", id -> 1, "double out", id -> 1,
                "even in", id -> 1, "even out", TopologyTest::even, "sink in", TopologyTest::even, "sink out", TopologyTest::even));

        Path out = Logs.analyze("wrapped");
        Logs.assertNoNegativeHop(out);
        Map<String, Double> selectivity = new TreeMap<>();
        for (String op : List.of("double", "even", "sink")) {
            selectivity.put(op, Double.parseDouble(Logs.wholeRun(out.resolve("capacity.csv"), op, "selectivity")));
        }
        assertEquals(Map.of("double", 1.0, "even", 0.5, "sink", 1.0), selectivity, "each operator's out over in");
    }

    /**
     * (b) The same plain topology with only the hook: every spout task's
     * out, every bolt task's in and out, each id as the logic says (even
     * takes every tuple in and hands half on), analyze --strict, no hop
     * negative, and each bolt's selectivity. Beside it a bolt whose outputs
     * carry no id (label: its in and out are marked when execute returns,
     * with the input's id) and a sink of those (no id: no channel), fed by a
     * spout of other ids (analyze follows an id along one chain: the same
     * ids on two branches would make one path of both).
     */
    @Test
    void hookAloneMarksEveryTask() throws Exception {
        TopologyBuilder b = plain(false);
        b.setSpout("more", new IdSpout(FIRST_ID + N), 1);
        b.setBolt("label", new Label(), 1).shuffleGrouping("more");
        b.setBolt("labels", new Sink(), 1).shuffleGrouping("label");
        run("hooked", conf(true), b.createTopology(), 2 * N, N / 2 + N);
        Map<String, Map<Long, Integer>> channels = Logs.channels();
        Map<String, Integer> tasks = new TreeMap<>();
        for (String c : channels.keySet()) {
            assertTrue(c.matches("(ids|more)#\\d+ out|(double|even|sink|label)#\\d+ (in|out)"),
                    "a spout's out, a bolt's in and out, nothing else (no system component): " + c);
            tasks.merge(c.replaceFirst("#\\d+ ", " "), 1, Integer::sum);
        }
        assertEquals(Map.of("ids out", 1, "double in", P, "double out", P, "even in", P, "even out", P, "sink in", 1, "sink out", 1,
                "more out", 1, "label in", 1, "label out", 1), tasks, "one channel a task and role");
        Map<String, Map<Long, Integer>> ops = Logs.byOperator(channels);
        assertTimes(ops, FIRST_ID, Map.of("ids out", id -> 1, "double in", id -> 1, "double out", id -> 1, "even in", id -> 1,
                "even out", TopologyTest::even, "sink in", TopologyTest::even, "sink out", TopologyTest::even));
        assertTimes(ops, FIRST_ID + N, Map.of("more out", id -> 1, "label in", id -> 1, "label out", id -> 1));
        Path out = Logs.analyze("hooked");
        Logs.assertNoNegativeHop(out);
        Map<String, Double> selectivity = new TreeMap<>();
        for (String op : List.of("double", "even", "sink", "label")) {
            selectivity.put(op, Double.parseDouble(Logs.wholeRun(out.resolve("capacity.csv"), op, "selectivity")));
        }
        assertEquals(Map.of("double", 1.0, "even", 0.5, "sink", 1.0, "label", 1.0), selectivity, "each bolt's out over in");
    }

    /** Emits a label and no id. */
    public static class Label extends BaseBasicBolt {
        @Override
        public void execute(Tuple t, BasicOutputCollector out) {
            out.emit(new Values("L" + t.getLong(1)));
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("label"));
        }
    }

    /** (c) Profiled.spout gives a spout without ids a distinct cp_id a tuple, its task's, and marks them; the sink finds them. */
    @Test
    void stampedSpoutIdsAreDistinct() throws Exception {
        TopologyBuilder b = new TopologyBuilder();
        b.setSpout("words", Profiled.spout("stamp", new WordSpout()), 1);
        b.setBolt("sink", Profiled.bolt("sink", new Sink()), 1).shuffleGrouping("words");
        run("stamped", conf(false), b.createTopology(), N, N);
        assertEquals(Set.of(List.of("word", Profiled.CP_ID)), Sink.FIELDS, "the tuples' fields at the sink");

        Map<String, Map<Long, Integer>> channels = Logs.channels();
        List<String> names = new ArrayList<>(channels.keySet());
        assertEquals(4, names.size(), "stamp out, sink in, out, count: " + names);
        String stampOut = names.stream().filter(c -> c.matches("stamp#\\d+ out")).findFirst().orElseThrow();
        int task = Integer.parseInt(stampOut.replaceAll("\\D", ""));
        Map<Long, Integer> ids = channels.get(stampOut);
        assertEquals(N, ids.size(), "distinct ids");
        assertTrue(ids.values().stream().allMatch(n -> n == 1), "each id once");
        for (long id : ids.keySet()) {
            assertEquals(task, (int) (id >>> 40 & 0xFFFF), "the spout task's ids (TupleIds.of(task, 0)): " + Long.toHexString(id));
            assertEquals(0, id >>> 56, "attempt 0");
        }
        Map<String, Map<Long, Integer>> ops = Logs.byOperator(channels);
        assertEquals(ids, ops.get("sink in"), "the sink took each stamped id once");
        assertEquals(ids, ops.get("sink out"), "the sink marked each out once");
        assertTrue(ops.containsKey("sink count"));
    }

    /**
     * (d) cloudprofiler.enabled=false: the wrappers, the stamping spout and
     * the hook open no channel; the topology runs as before.
     */
    @Test
    void markingOffOpensNoChannel() throws Exception {
        Config conf = conf(true);
        conf.put(Profiled.ENABLED, false);
        TopologyBuilder b = plain(true); // and beside it: a stamping spout, a plain bolt the hook would mark
        b.setSpout("words", Profiled.spout("stamp", new WordSpout()), 1);
        b.setBolt("plain", new Sink(), 1).shuffleGrouping("words");
        run("off", conf, b.createTopology(), 2 * N, N / 2 + N);
        assertEquals(List.of(), Logs.logFiles(), "cloudprofiler.enabled=false: no channel opened");
    }

    /**
     * (f) The live metrics: Storm's CsvStormReporter writes every metric v2
     * of the worker each second; the sink task's gauges are there, and
     * tuplesIn and tuplesOut reach the ids it took.
     */
    @Test
    void gaugesReachStormsReporters() throws Exception {
        Path csv = Logs.LOG_DIR.resolveSibling("storm-metrics");
        if (Files.exists(csv)) {
            try (Stream<Path> s = Files.list(csv)) {
                for (Path p : s.toList()) Files.delete(p);
            }
        }
        Config conf = conf(false);
        conf.put(Config.TOPOLOGY_METRICS_REPORTERS, List.of(Map.of("class", "org.apache.storm.metrics2.reporters.CsvStormReporter",
                "report.period", 1, "report.period.units", "SECONDS", "csv.log.dir", csv.toString())));
        TopologyBuilder b = new TopologyBuilder();
        b.setSpout("ids", new IdSpout(), 1);
        b.setBolt("sink", Profiled.bolt("sink", new Sink()), 1).shuffleGrouping("ids");
        cluster.submitTopology("metrics", conf, b.createTopology());
        try {
            waitFor("the spout's acks", () -> IdSpout.ACKED.get() >= N, 180_000);
            // Each gauge a file "storm.topology.<id>.<host>.sink.<task>.<port>-cloudprofiler.<name>.csv", a row "t,value" a report.
            Map<String, String> last = new HashMap<>();
            waitFor("the reporter's tuplesIn and tuplesOut at N", () -> {
                last.clear();
                last.putAll(gauges(csv));
                return String.valueOf(N).equals(last.get("tuplesIn")) && String.valueOf(N).equals(last.get("tuplesOut"))
                        && last.containsKey("capacity");
            }, 30_000);
            // The capacity over the last second or so: NaN once the sink
            // has idled that long, else a rate (MarksTest holds its value).
            double capacity = Double.parseDouble(last.get("capacity"));
            assertTrue(Double.isNaN(capacity) || capacity > 0, "capacity " + capacity);
        } finally {
            KillOptions kill = new KillOptions();
            kill.set_wait_secs(0);
            cluster.killTopologyWithOpts("metrics", kill);
            waitFor("every task's cleanup", () -> Marking.OPEN.get() == 0, 60_000);
        }
        assertEquals(0, Marking.FAILURES.get(), "marking failures (logged)");
    }

    /** The sink's cloudprofiler gauges' last reported values by name. */
    private static Map<String, String> gauges(Path dir) {
        Map<String, String> last = new HashMap<>();
        if (!Files.isDirectory(dir)) return last;
        try (Stream<Path> s = Files.list(dir)) {
            for (Path f : s.toList()) {
                String n = f.getFileName().toString();
                int at = n.indexOf("-" + Profiled.GAUGE_PREFIX);
                if (at < 0 || !n.contains(".sink.") || !n.endsWith(".csv")) continue;
                List<String> lines = Files.readAllLines(f);
                if (lines.size() < 2) continue;
                String row = lines.get(lines.size() - 1);
                last.put(n.substring(at + 1 + Profiled.GAUGE_PREFIX.length(), n.length() - 4), row.substring(row.indexOf(',') + 1));
            }
        } catch (IOException e) {
            // a file being written: read again at the next poll
        }
        return last;
    }
}
