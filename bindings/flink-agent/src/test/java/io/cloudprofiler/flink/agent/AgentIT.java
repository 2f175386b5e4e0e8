package io.cloudprofiler.flink.agent;

import static org.apache.flink.table.api.Expressions.$;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.cloudprofiler.testkit.Logs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.table.api.Table;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;
import org.apache.flink.types.Row;
import org.apache.flink.util.Collector;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A job with no Cloudprofiler code, run on a MiniCluster in a JVM started
 * with the agent (the pom's failsafe argLine), in Flink's default settings
 * (chaining on, 100 ms buffer timeout), parallelism 2: ids -> Map ->
 * Filter -> keyBy -> KeyedProcess (a count in keyed state) -> a SQL query
 * (a WHERE and a projection: the planner's generated operator) -> a sink.
 * The truth is what the user's functions counted, per subtask: every
 * operator instance has its channels, each marks as many visits as its
 * function saw, and analyze reads the run.
 */
class AgentIT {
    static final long N = 30_000;
    static final int P = 2;

    /** What the user's functions saw: "function#subtask" -> records. */
    static final Map<String, AtomicLong> SEEN = new ConcurrentHashMap<>();

    static void saw(String fn, int subtask) {
        SEEN.computeIfAbsent(fn + "#" + subtask, k -> new AtomicLong()).incrementAndGet();
    }

    static long seen(String fn) {
        return SEEN.entrySet().stream().filter(e -> e.getKey().startsWith(fn + "#")).mapToLong(e -> e.getValue().get()).sum();
    }

    static final class Count extends KeyedProcessFunction<Long, Long, Long> {
        @Override
        public void processElement(Long x, Context ctx, Collector<Long> out) {
            saw("count", getRuntimeContext().getTaskInfo().getIndexOfThisSubtask());
            out.collect(x);
        }
    }

    static final class Counted implements Sink<Row> {
        @Override
        public SinkWriter<Row> createWriter(WriterInitContext ctx) {
            int subtask = ctx.getTaskInfo().getIndexOfThisSubtask();
            return new SinkWriter<>() {
                @Override
                public void write(Row r, Context c) {
                    saw("sink", subtask);
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }

    @Test
    void anUnmodifiedJobHasEveryInstanceMarked() throws Exception {
        Logs.emptyLogDir();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(P);
        DataGeneratorSource<Long> src = new DataGeneratorSource<>(i -> i, N, RateLimiterStrategy.perSecond(20_000), Types.LONG);
        DataStream<Long> ids = env.fromSource(src, WatermarkStrategy.noWatermarks(), "ids");
        DataStream<Long> kept = ids.map(x -> x * 2).returns(Types.LONG).filter(x -> x % 3 != 0);
        DataStream<Long> counted = kept.keyBy(x -> x % 16, Types.LONG).process(new Count()).returns(Types.LONG);
        StreamTableEnvironment tEnv = StreamTableEnvironment.create(env);
        tEnv.createTemporaryView("counted", tEnv.fromDataStream(counted).as("v"));
        Table q = tEnv.sqlQuery("SELECT v, v * 3 AS w FROM counted WHERE MOD(v, 5) <> 0");
        tEnv.toDataStream(q).sinkTo(new Counted());
        env.execute("no cloudprofiler code");

        long kept3 = 0, sunk = 0; // what the job's logic keeps, worked out here
        for (long i = 0; i < N; i++) {
            long v = i * 2;
            if (v % 3 == 0) continue;
            kept3++;
            if (v % 5 != 0) sunk++;
        }
        assertEquals(kept3, seen("count"), "the keyed process function's count");
        assertEquals(sunk, seen("sink"), "the sink's count");

        Map<String, Map<Long, Integer>> channels = Logs.channels();
        Map<String, Long> ins = new TreeMap<>();
        channels.forEach((name, recs) -> {
            if (name.endsWith(" in")) {
                long n = recs.values().stream().mapToLong(Integer::longValue).sum();
                ins.merge(name.substring(0, name.indexOf('#')), n, Long::sum);
            }
        });
        String chans = String.join("\n", channels.keySet());
        assertEquals(N, in(ins, "Map-"), "Map's in records, against the source's " + N + ":\n" + chans);
        assertEquals(N, in(ins, "Filter-"), "Filter's in records:\n" + chans);
        assertEquals(kept3, in(ins, "KeyedProcess-"), "KeyedProcess's in records, against its function's count:\n" + chans);
        long sql = ins.entrySet().stream().filter(e -> e.getKey().startsWith("Calc")).mapToLong(Map.Entry::getValue).sum();
        assertEquals(kept3, sql, "the SQL query's Calc in records:\n" + chans);
        long sink = ins.entrySet().stream().filter(e -> e.getKey().contains("Sink") || e.getKey().contains("Writer"))
                .mapToLong(Map.Entry::getValue).sum();
        assertEquals(sunk, sink, "the sink's in records, against its writer's count:\n" + chans);
        for (String op : ins.keySet()) {
            for (int i = 0; i < P; i++) {
                String inst = op + "#" + i;
                assertTrue(channels.keySet().stream().anyMatch(c -> c.startsWith(inst + " out")), inst + " has no out channel:\n" + chans);
            }
        }

        Path out = Logs.analyze("agent");
        List<String> cap = Files.readAllLines(out.resolve("capacity.csv"));
        for (String op : ins.keySet()) {
            assertTrue(cap.stream().anyMatch(l -> l.contains("," + op + ",")), "capacity.csv has no row of " + op + ":\n" + String.join("\n", cap));
        }
        assertFalse(ins.isEmpty());
    }

    /**
     * A window's firing is a visit of its own: an event-time tumbling window
     * (100 ms of timestamps, 4 keys) over 2,000 records whose timestamps
     * are their values, one sum a window and key. The window operator's ins
     * are its records and its firings (one timer a window and key), its
     * outs the firings' results, each as many as the sink took.
     */
    @Test
    void aWindowsFiringIsAVisit() throws Exception {
        Logs.emptyLogDir();
        SEEN.clear();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        DataGeneratorSource<Long> src = new DataGeneratorSource<>(i -> i, 2000, RateLimiterStrategy.noOp(), Types.LONG);
        env.fromSource(src, WatermarkStrategy.<Long>forMonotonousTimestamps().withTimestampAssigner((v, ts) -> v), "ids")
                .keyBy(x -> x % 4, Types.LONG)
                .window(TumblingEventTimeWindows.of(Duration.ofMillis(100)))
                .reduce(Long::sum).name("win")
                .sinkTo(new CountedLongs());
        env.execute("a window");
        long firings = 20 * 4; // windows of 100 over 0..1999, each with records of every key
        assertEquals(firings, seen("longs"), "the sink's count");
        Map<String, Map<Long, Integer>> channels = Logs.channels();
        String chans = String.join("\n", channels.keySet());
        assertEquals(2000 + firings, count(channels, "win-", " in"), "the window's ins: its records and its firings:\n" + chans);
        assertEquals(firings, count(channels, "win-", " out"), "the window's outs: its firings' results:\n" + chans);
        assertEquals(firings, count(channels, "win-", " sent"), "the window's sents:\n" + chans);
    }

    static final class CountedLongs implements Sink<Long> {
        @Override
        public SinkWriter<Long> createWriter(WriterInitContext ctx) {
            return new SinkWriter<>() {
                @Override
                public void write(Long r, Context c) {
                    saw("longs", 0);
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }

    /** Records of the channels of operator prefix's instances whose names end with role (" in", " out", " sent"). */
    static long count(Map<String, Map<Long, Integer>> channels, String prefix, String role) {
        return channels.entrySet().stream().filter(e -> e.getKey().startsWith(prefix) && e.getKey().endsWith(role))
                .mapToLong(e -> e.getValue().values().stream().mapToLong(Integer::longValue).sum()).sum();
    }

    /**
     * A TaskManager whose Flink is not a version the agent knows (a
     * .flink-runtime.version.properties saying 1.20.0 ahead of the real
     * one on the class path): the agent says so, marks nothing, and the job
     * runs to its end.
     */
    @Test
    void anUnknownFlinkVersionRunsUnprofiled(@TempDir Path dir) throws Exception {
        Path fake = Files.createDirectories(dir.resolve("fake"));
        Files.writeString(fake.resolve(".flink-runtime.version.properties"), "project.version=1.20.0\n");
        Path logs = dir.resolve("logs");
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-javaagent:" + System.getProperty("cloudprofiler.agent.jar"), "-Djava.io.tmpdir=" + dir,
                "-cp", fake + java.io.File.pathSeparator + System.getProperty("java.class.path"), SmallJob.class.getName());
        pb.environment().put("CP_LOG_DIR", logs.toString());
        Path err = dir.resolve("err");
        Process p = pb.redirectError(err.toFile()).start();
        String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, java.util.concurrent.TimeUnit.SECONDS), "the job did not end in 120 s");
        String stderr = Files.readString(err);
        assertEquals(0, p.exitValue(), "the job failed:\n" + out + stderr);
        assertTrue(out.contains("done 1000"), "the job's map did not see its 1000 records:\n" + out);
        assertTrue(stderr.contains("cloudprofiler agent: Flink 1.20.0 is not a version this agent knows (2.3): nothing marked, the job runs unprofiled"),
                "no word from the agent on the version:\n" + stderr);
        assertFalse(Files.exists(logs) && Files.list(logs).findAny().isPresent(), "the agent marked a Flink it does not know: " + logs);
    }

    /**
     * Operator classes the agent changes keep their serialVersionUID: the
     * JobManager, which runs without the agent, serializes a job's
     * operators, and a TaskManager with it deserializes them. Many declare
     * none (OutputConversionOperator, a user's operator), and Java derives
     * it from the class's members: an agent that adds one fails the job
     * ("local class incompatible", seen on the standalone cluster before
     * the agent left its subclasses' shape alone). Here, in a JVM with the
     * agent, against a child JVM without it.
     */
    @Test
    void operatorClassesKeepTheirSerialVersionUids(@TempDir Path dir) throws Exception {
        List<String> classes = List.of(Agent.OPERATOR, "org.apache.flink.streaming.api.operators.StreamMap",
                "org.apache.flink.streaming.api.operators.StreamFilter", "org.apache.flink.streaming.api.operators.StreamFlatMap",
                "org.apache.flink.streaming.api.operators.ProcessOperator", "org.apache.flink.streaming.api.operators.KeyedProcessOperator",
                "org.apache.flink.streaming.runtime.operators.sink.SinkWriterOperator",
                "org.apache.flink.table.runtime.operators.source.InputConversionOperator",
                "org.apache.flink.table.runtime.operators.sink.OutputConversionOperator");
        assertTrue(Marked.class.isAssignableFrom(Class.forName(Agent.OPERATOR)), "this JVM's AbstractStreamOperator is not the agent's");
        StringBuilder here = new StringBuilder();
        for (String c : classes) here.append(c).append(' ').append(java.io.ObjectStreamClass.lookup(Class.forName(c)).getSerialVersionUID()).append('\n');
        List<String> cmd = new java.util.ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Djava.io.tmpdir=" + dir, "-cp", System.getProperty("java.class.path"), SerialUids.class.getName()));
        cmd.addAll(classes);
        Process p = new ProcessBuilder(cmd).redirectError(dir.resolve("err").toFile()).start();
        String without = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), Files.readString(dir.resolve("err")));
        assertEquals(without, here.toString(), "serialVersionUIDs without the agent (expected) and with it");
    }

    static long in(Map<String, Long> ins, String prefix) {
        return ins.entrySet().stream().filter(e -> e.getKey().startsWith(prefix)).mapToLong(Map.Entry::getValue).sum();
    }
}
