package io.cloudprofiler.storm;

import io.cloudprofiler.Marks;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.storm.task.IOutputCollector;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.IRichBolt;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.tuple.Tuple;

/** {@link Profiled#bolt}: the user's bolt, marked in and out around execute (see Profiled for what is marked). */
final class MarkedBolt implements IRichBolt {
    private static final long serialVersionUID = 1L;

    private final String operator;
    private final IRichBolt bolt;
    private final Profiled.IdOf idOf; // null: Marking.id, the default rule
    // Written in prepare on the executor thread, read in cleanup, which a
    // LocalCluster runs on another thread: volatile (a plain load on x86).
    private transient volatile Marks marks;
    private transient MarkingCollector collector;
    private transient boolean sink;
    private transient TopologyContext context;
    private transient long unmarked;

    MarkedBolt(String operator, IRichBolt bolt, Profiled.IdOf idOf) {
        Marks.checkOperator(operator); // when the topology is built, not in the worker
        this.operator = operator;
        this.bolt = Objects.requireNonNull(bolt, "cloudprofiler: " + operator + ": no bolt to wrap");
        this.idOf = idOf;
    }

    @Override
    public void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector out) {
        this.context = context;
        Marking.wrapped(context, true);
        Marks m = Marking.marks(operator, context, conf);
        marks = m;
        sink = Marking.sink(context);
        if (m.on()) {
            collector = new MarkingCollector(out, m);
            out = new OutputCollector(collector);
        }
        bolt.prepare(conf, context, out);
    }

    @Override
    public void execute(Tuple t) {
        Marks m = marks;
        if (!m.on() || Marking.system(t)) {
            bolt.execute(t);
            return;
        }
        long id;
        if (idOf != null) {
            try {
                id = idOf.id(t);
            } catch (RuntimeException e) {
                // Thrown into Storm, as the bolt's own exceptions are, and as
                // Flink's wrappers let an IdOf's fail the task: the worker
                // ends, loudly. Passed on unmarked, the tuple would be missing
                // from every number of the analysis with nobody told, and an
                // IdOf given for this bolt that cannot read its tuples is a
                // bug to fix, not tuples to skip.
                throw new IllegalArgumentException("cloudprofiler: " + Marking.instance(operator, context) + ": its IdOf threw on a tuple from "
                        + t.getSourceComponent() + " (stream " + t.getSourceStreamId() + ", fields " + t.getFields() + "): " + e, e);
            }
        } else {
            Number n = Marking.id(t);
            if (n == null) {
                unmarked(t);
                bolt.execute(t);
                return;
            }
            id = n.longValue();
        }
        m.in(id);
        collector.begin(id);
        try {
            bolt.execute(t);
        } finally {
            collector.end();
        }
        if (sink) m.out(id);
    }

    private void unmarked(Tuple t) {
        if (unmarked++ == 0) {
            Marking.LOG.warn("cloudprofiler: {}: a tuple from {} (stream {}, fields {}) has no usable id: such tuples pass through"
                            + " unmarked (give Profiled.bolt an IdOf)", Marking.instance(operator, context), t.getSourceComponent(),
                    t.getSourceStreamId(), t.getFields());
        }
    }

    @Override
    public void cleanup() {
        try {
            bolt.cleanup();
        } finally {
            Marks m = marks;
            if (m != null) Marking.close(m, m.on(), Marking.instance(operator, context));
            if (context != null) Marking.wrapped(context, false);
            if (unmarked > 0) {
                Marking.LOG.warn("cloudprofiler: {}: {} tuples without a usable id passed through unmarked",
                        Marking.instance(operator, context), unmarked);
            }
        }
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        bolt.declareOutputFields(declarer);
    }

    @Override
    public Map<String, Object> getComponentConfiguration() {
        return bolt.getComponentConfiguration();
    }

    /**
     * The bolt's collector: marks out with the input's id right before each
     * emit made by the thread running execute while it runs. {@code
     * executing} is that thread or null, written only by it: another thread
     * may read a stale value but never finds itself there, so no fence is
     * needed.
     */
    static final class MarkingCollector implements IOutputCollector {
        private final IOutputCollector out;
        private final Marks marks;
        private Thread executing;
        private long id;

        MarkingCollector(IOutputCollector out, Marks marks) {
            this.out = out;
            this.marks = marks;
        }

        void begin(long id) {
            this.id = id;
            executing = Thread.currentThread();
        }

        void end() {
            executing = null;
        }

        @Override
        public List<Integer> emit(String stream, Collection<Tuple> anchors, List<Object> values) {
            if (executing == Thread.currentThread()) marks.out(id);
            return out.emit(stream, anchors, values);
        }

        @Override
        public void emitDirect(int task, String stream, Collection<Tuple> anchors, List<Object> values) {
            if (executing == Thread.currentThread()) marks.out(id);
            out.emitDirect(task, stream, anchors, values);
        }

        @Override
        public void ack(Tuple t) {
            out.ack(t);
        }

        @Override
        public void fail(Tuple t) {
            out.fail(t);
        }

        @Override
        public void resetTimeout(Tuple t) {
            out.resetTimeout(t);
        }

        @Override
        public void flush() {
            out.flush();
        }

        @Override
        public void reportError(Throwable error) {
            out.reportError(error);
        }
    }
}
