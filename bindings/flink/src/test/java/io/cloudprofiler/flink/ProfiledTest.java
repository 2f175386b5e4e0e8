package io.cloudprofiler.flink;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.cloudprofiler.testkit.Logs;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;
import org.junit.jupiter.api.Test;

/**
 * A job written with the wrappers and nothing else of ours, on a local
 * MiniCluster (parallelism 2): ids 0..N-1 -> 1-double (a rich map whose
 * open must run) -> 2-even (a filter keeping even ids) -> 3-twice (a
 * flatMap emitting each twice) -> keyBy -> 4-count (a keyed process
 * function with keyed state) -> 5-sink (a discarding sink). Its logs, read with the
 * cloudprofiler tool: every channel of the convention, each id at each
 * mark as often as the job's logic says, and {@code analyze --strict}
 * with the selectivity the job has. And the same job with marking off
 * opens no channel.
 */
class ProfiledTest {
    static final long N = 40_000;
    static final int P = 2;

    static DataStream<Long> build(StreamExecutionEnvironment env) {
        env.setParallelism(P);
        env.disableOperatorChaining();
        DataGeneratorSource<Long> src = new DataGeneratorSource<>(i -> i, N, RateLimiterStrategy.perSecond(40_000), Types.LONG);
        DataStream<Long> ids = env.fromSource(src, WatermarkStrategy.noWatermarks(), "ids");
        DataStream<Long> marked = Profiled.mark(ids, "0-ids", x -> x);
        DataStream<Long> doubled = Profiled.map(marked, "1-double", new Opened(), x -> x);
        DataStream<Long> even = Profiled.filter(doubled, "2-even", x -> x % 2 == 0, x -> x);
        DataStream<Long> twice = Profiled.flatMap(even, "3-twice", new Twice(), x -> x);
        DataStream<Long> counted = Profiled.process(twice.keyBy(x -> x % 8, Types.LONG), "4-count", new Count(), x -> x);
        Profiled.sinkTo(counted, "5-sink", new DiscardingSink<>(), x -> x);
        return counted;
    }

    /** A rich map: fails unless the wrapper ran its open (and gave it its runtime context). */
    static final class Opened extends RichMapFunction<Long, Long> {
        private transient int subtask = -1;

        @Override
        public void open(OpenContext ctx) {
            subtask = getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
        }

        @Override
        public Long map(Long x) {
            if (subtask < 0) throw new IllegalStateException("open() did not run");
            return x;
        }
    }

    static final class Twice implements FlatMapFunction<Long, Long> {
        @Override
        public void flatMap(Long x, Collector<Long> out) {
            out.collect(x);
            out.collect(x);
        }
    }

    /** Keyed state through the wrapper's runtime context. */
    static final class Count extends KeyedProcessFunction<Long, Long, Long> {
        private transient ValueState<Long> seen;

        @Override
        public void open(OpenContext ctx) {
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.LONG));
        }

        @Override
        public void processElement(Long x, Context ctx, Collector<Long> out) throws Exception {
            Long n = seen.value();
            seen.update(n == null ? 1 : n + 1);
            out.collect(x);
        }
    }

    static Configuration conf(boolean enabled) {
        Configuration c = new Configuration();
        c.set(PipelineOptions.GENERIC_TYPES, false);
        if (!enabled) c.set(PipelineOptions.GLOBAL_JOB_PARAMETERS, Map.of(Profiled.ENABLED, "false"));
        return c;
    }

    @Test
    void wrappedJobMarksEveryRecord() throws Exception {
        Logs.emptyLogDir();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(P, conf(true));
        build(env);
        env.execute("cloudprofiler-flink-wrappers");

        // Each channel's ids: "OPERATOR ROLE" (subtasks together) -> id -> times.
        Map<String, Map<Long, Integer>> channels = Logs.channels();
        Map<String, Integer> subtasks = new HashMap<>();
        for (String name : channels.keySet()) {
            Matcher n = Pattern.compile("^(\\S+)#(\\d+) (in|out|sent|count)$").matcher(name);
            assertTrue(n.matches(), "a channel of the convention: " + name);
            subtasks.merge(n.group(1) + " " + n.group(3), 1, Integer::sum);
        }
        Map<String, Map<Long, Integer>> seen = Logs.byOperator(channels);
        seen.keySet().removeIf(k -> k.endsWith(" count")); // the live service rate's counters: no ids
        List<String> want = List.of("0-ids in", "0-ids out", "1-double in", "1-double out", "2-even in", "2-even out", "3-twice in", "3-twice out",
                "3-twice sent", "4-count in", "4-count out", "4-count sent", "5-sink in", "5-sink out");
        assertEquals(new TreeSet<>(want), seen.keySet(), "the channels of the convention, and no others");
        for (String k : want) assertEquals(P, subtasks.get(k), k + ": one channel a subtask");
        for (String op : List.of("0-ids", "1-double", "2-even", "3-twice", "4-count", "5-sink")) {
            assertEquals(P, subtasks.get(op + " count"), op + ": one count channel (the live service rate) a subtask");
        }
        for (long id = 0; id < N; id++) {
            boolean even = id % 2 == 0;
            int e2 = even ? 2 : 0;
            int[] times = {1, 1, 1, 1, 1, even ? 1 : 0, even ? 1 : 0, e2, e2, e2, e2, e2, e2, e2, e2};
            for (int i = 0; i < want.size(); i++) {
                assertEquals(times[i], (int) seen.get(want.get(i)).getOrDefault(id, 0), want.get(i) + ": id " + id);
            }
        }

        // The analysis, strict: the logs whole, every record accounted for.
        Path out = Logs.analyze("wrapped");
        Map<String, Double> selectivity = new HashMap<>();
        for (String op : List.of("1-double", "2-even", "3-twice", "4-count", "5-sink")) {
            selectivity.put(op, Double.parseDouble(Logs.wholeRun(out.resolve("capacity.csv"), op, "selectivity")));
        }
        assertEquals(Map.of("1-double", 1.0, "2-even", 0.5, "3-twice", 2.0, "4-count", 1.0, "5-sink", 1.0), selectivity,
                "each operator's out over in, as the job's logic has it");
    }

    /** A record without an id of its own until stampIds gives it one. */
    public static final class Event {
        public long id = -1;
        public long value;

        public Event() {}

        Event(long value) {
            this.value = value;
        }
    }

    @Test
    void stampedIdsAreDistinctAndFollowTheRecords() throws Exception {
        Logs.emptyLogDir();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(P, conf(true));
        env.disableOperatorChaining();
        DataStream<Event> events = env.fromSource(new DataGeneratorSource<>(Event::new, N, Types.POJO(Event.class)),
                WatermarkStrategy.noWatermarks(), "events");
        DataStream<Event> stamped = Profiled.stampIds(events, "0-stamp", (e, id) -> {
            e.id = id;
            return e;
        });
        Profiled.sinkTo(stamped, "9-sink", new DiscardingSink<>(), e -> e.id);
        env.execute("cloudprofiler-flink-stamp");

        Map<String, Map<Long, Integer>> ids = Logs.byOperator(Logs.channels());
        ids.keySet().removeIf(k -> k.endsWith(" count"));
        assertEquals(List.of("0-stamp in", "0-stamp out", "9-sink in", "9-sink out"), List.copyOf(ids.keySet()));
        TreeSet<Long> distinct = new TreeSet<>(ids.get("0-stamp out").keySet());
        assertEquals(N, distinct.size(), "every record a distinct id");
        for (long id : distinct) {
            assertEquals(0, id >>> 56, "attempt 0: " + Long.toHexString(id));
            assertTrue((id >>> 40 & 0xffff) < P, "a subtask's id: " + Long.toHexString(id));
        }
        for (String k : ids.keySet()) {
            assertEquals(distinct, ids.get(k).keySet(), k);
            assertTrue(ids.get(k).values().stream().allMatch(n -> n == 1), k + ": each id once");
        }
    }

    @Test
    void markingOffOpensNoChannel() throws Exception {
        Logs.emptyLogDir();
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(P, conf(false));
        build(env);
        env.execute("cloudprofiler-flink-off");
        assertEquals(List.of(), Logs.logFiles(), "cloudprofiler.enabled=false: no channel opened");
    }

    @Test
    void badOperatorNamesAreRefusedWhenTheJobIsBuilt() {
        for (String bad : new String[] {"", "a#1", "two words", null}) {
            assertThrows(IllegalArgumentException.class, () -> Profiled.map(bad, (Long x) -> x, x -> x), String.valueOf(bad));
        }
    }
}
