package io.cloudprofiler.storm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.cloudprofiler.Marks;
import io.cloudprofiler.testkit.Logs;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.storm.generated.StormTopology;
import org.apache.storm.task.IOutputCollector;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.IRichBolt;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.TopologyBuilder;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.topology.base.BaseRichBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.TupleImpl;
import org.junit.jupiter.api.Test;

/** What needs no cluster: names refused when wrapping, the switches, the default id rule, the bolt's marking collector, an IdOf that throws. */
class ProfiledTest {
    /** (e) A name the convention cannot parse back is refused when the topology is built, not in the worker. */
    @Test
    void badOperatorNamesAreRefusedWhenWrapping() {
        for (String bad : new String[] {"", "a#1", "two words", "tab\there", null}) {
            assertThrows(IllegalArgumentException.class, () -> Profiled.bolt(bad, new TopologyTest.Sink()), "bolt " + bad);
            assertThrows(IllegalArgumentException.class, () -> Profiled.bolt(bad, new TopologyTest.Even(), null), "basic bolt " + bad);
            assertThrows(IllegalArgumentException.class, () -> Profiled.spout(bad, new TopologyTest.WordSpout()), "spout " + bad);
        }
        assertThrows(NullPointerException.class, () -> Profiled.bolt("x", (BaseBasicBolt) null));
    }

    @Test
    void spoutThatDeclaresCpIdIsRefusedWhenBuilt() {
        TopologyBuilder b = new TopologyBuilder();
        b.setSpout("s", Profiled.spout("s", new TopologyTest.WordSpout() {
            @Override
            public void declareOutputFields(OutputFieldsDeclarer d) {
                d.declare(new Fields("word", Profiled.CP_ID));
            }
        }));
        assertThrows(IllegalArgumentException.class, b::createTopology);
    }

    @Test
    void switches() {
        Map<String, Object> conf = new HashMap<>();
        assertTrue(Marking.flag(conf, Profiled.ENABLED), "on by default");
        assertTrue(Marking.flag(null, Profiled.ENABLED));
        for (Object off : List.of(false, "false", "FALSE", " false ")) {
            conf.put(Profiled.ENABLED, off);
            assertFalse(Marking.flag(conf, Profiled.ENABLED), "off: " + off);
        }
        for (Object on : List.of(true, "true", "yes")) {
            conf.put(Profiled.ENABLED, on);
            assertTrue(Marking.flag(conf, Profiled.ENABLED), "on: " + on);
        }
    }

    /** Storm's side of a bolt's collector: keeps the values of every emit in passed. */
    static IOutputCollector storm(List<List<Object>> passed) {
        return new IOutputCollector() {
            @Override
            public List<Integer> emit(String stream, Collection<Tuple> anchors, List<Object> v) {
                passed.add(v);
                return List.of();
            }

            @Override
            public void emitDirect(int task, String stream, Collection<Tuple> anchors, List<Object> v) {
                passed.add(v);
            }

            @Override
            public void ack(Tuple t) {}

            @Override
            public void fail(Tuple t) {}

            @Override
            public void resetTimeout(Tuple t) {}

            @Override
            public void flush() {}

            @Override
            public void reportError(Throwable error) {}
        };
    }

    /** The bolt's collector marks out only for emits of the thread running execute, while it runs; it passes every emit on. */
    @Test
    void collectorMarksOnlyTheExecutingThreadsEmits() throws Exception {
        List<List<Object>> passed = new CopyOnWriteArrayList<>();
        IOutputCollector storm = storm(passed);
        Marks marks = Marks.open("unit-collector", "0", false, false);
        try {
            MarkedBolt.MarkingCollector c = new MarkedBolt.MarkingCollector(storm, marks);
            OutputCollector out = new OutputCollector(c);
            out.emit(List.of(1L)); // before execute: not marked
            c.begin(42);
            out.emit(List.of(2L));
            out.emitDirect(3, List.of(3L));
            Thread other = new Thread(() -> out.emit(List.of(4L))); // another thread, during execute: not marked
            other.start();
            other.join();
            c.end();
            out.emit(List.of(5L)); // after execute: not marked
            assertEquals(2, marks.tuplesOut(), "out marked for the executing thread's two emits");
            assertEquals(5, passed.size(), "every emit passed on");
        } finally {
            marks.close();
            for (Path f : Logs.logFiles()) {
                if (f.getFileName().toString().contains("unit-collector")) Files.delete(f);
            }
        }
    }

    /** A bolt that keeps the tuples it is given and emits each one's id. */
    static final class Keep extends BaseRichBolt {
        private static final long serialVersionUID = 1L;
        final List<Tuple> seen = new ArrayList<>();
        private transient OutputCollector out;

        @Override
        public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector out) {
            this.out = out;
        }

        @Override
        public void execute(Tuple t) {
            seen.add(t);
            out.emit(List.of(t.getValue(0)));
        }

        @Override
        public void declareOutputFields(OutputFieldsDeclarer d) {
            d.declare(new Fields("id"));
        }
    }

    /**
     * An IdOf that throws fails the bolt's execute, as in Flink (its
     * wrappers let an IdOf's exception fail the task), naming the task and
     * the tuple's source, its exception the cause, before the bolt sees the
     * tuple: never a tuple passed on unmarked, missing from the analysis
     * with nobody told. (It passed such tuples on, unmarked, and logged once.)
     */
    @Test
    void idOfThatThrowsFailsTheBolt() throws Exception {
        // Task 2 runs "keep", fed by "ids" (task 1: id, value) and "words" (task 3: word).
        Keep keep = new Keep();
        TopologyBuilder b = new TopologyBuilder();
        b.setSpout("ids", new TopologyTest.IdSpout());
        b.setSpout("words", new TopologyTest.WordSpout());
        b.setBolt("keep", keep).shuffleGrouping("ids").shuffleGrouping("words");
        Map<String, Map<String, Fields>> streams = Map.of(
                "ids", Map.of("default", new Fields("id", "value")),
                "words", Map.of("default", new Fields("word")),
                "keep", Map.of("default", new Fields("id")));
        TopologyContext context = new TopologyContext(b.createTopology(), new HashMap<>(), Map.of(1, "ids", 2, "keep", 3, "words"),
                null, streams, null, "unit-idof-1", null, null, 2, null, null, new HashMap<>(), new HashMap<>(), new HashMap<>(),
                new HashMap<>(), new AtomicBoolean(false), null);
        IRichBolt bolt = Profiled.bolt("unit-idof", keep, Profiled.IdOf.field("id"));
        List<List<Object>> passed = new ArrayList<>();
        long failures = Marking.FAILURES.get();
        Map<String, Object> conf = new HashMap<>(Map.of(Profiled.METRICS, false)); // no gauges: no metrics registry here
        bolt.prepare(conf, context, new OutputCollector(storm(passed)));
        try {
            bolt.execute(new TupleImpl(context, List.of(7L, 1L), "ids", 1, "default"));
            Tuple word = new TupleImpl(context, List.of("w1"), "words", 3, "default");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> bolt.execute(word));
            assertTrue(e.getMessage().startsWith("cloudprofiler: unit-idof#2: its IdOf threw on a tuple from words (stream default,"
                    + " fields [word]): "), e.getMessage());
            assertTrue(e.getCause() instanceof IllegalArgumentException, "the IdOf's own exception: " + e.getCause());
            assertEquals(1, keep.seen.size(), "the bolt never saw the tuple");
            assertEquals(List.of(List.of(7L)), passed, "only the marked tuple's emit passed on");
        } finally {
            bolt.cleanup();
            for (Path f : Logs.logFiles()) {
                if (f.getFileName().toString().contains("unit-idof")) Files.delete(f);
            }
        }
        assertEquals(failures, Marking.FAILURES.get(), "marking failures (logged)");
    }

    @Test
    void defaultIdRule() {
        assertEquals(7L, Marking.id(new Fields("a", "cp_id", "id"), Arrays.asList("x", 7L, 9L)), "cp_id first");
        assertEquals(9L, Marking.id(new Fields("a", "id"), Arrays.asList("x", 9L)), "then id");
        assertEquals(5, Marking.id(new Fields("n", "a"), Arrays.asList(5, "x")), "then the first value, an Integer too");
        assertNull(Marking.id(new Fields("a", "b"), Arrays.asList("x", 1L)), "a first value that is no Long or Integer: none");
        assertNull(Marking.id(new Fields("a", "id"), Arrays.asList(1L, "x")), "an id field that is no number: none");
        assertNull(Marking.id(new Fields("a", "cp_id"), Arrays.asList(1L, null)), "a null cp_id: none");
        assertNull(Marking.id(new Fields(), List.of()), "no values: none");
    }
}
