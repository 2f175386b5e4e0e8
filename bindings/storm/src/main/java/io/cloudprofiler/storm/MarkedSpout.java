package io.cloudprofiler.storm;

import io.cloudprofiler.Marks;
import io.cloudprofiler.TupleIds;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.storm.spout.ISpoutOutputCollector;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.IRichSpout;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.tuple.Fields;

/** {@link Profiled#spout}: the user's spout, its tuples given ids and marked out. */
final class MarkedSpout implements IRichSpout {
    private static final long serialVersionUID = 1L;

    private final String operator;
    private final IRichSpout spout;
    private transient volatile Marks out; // opened in open (executor thread), closed in close (maybe another)
    private transient TopologyContext context;

    MarkedSpout(String operator, IRichSpout spout) {
        Marks.checkOperator(operator);
        this.operator = operator;
        this.spout = Objects.requireNonNull(spout, "cloudprofiler: " + operator + ": no spout to wrap");
    }

    @Override
    public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
        this.context = context;
        Marking.wrapped(context, true);
        Marks m = Marking.outMark(operator, context, conf);
        out = m;
        spout.open(conf, context, new SpoutOutputCollector(new Stamping(collector, Marking.ids(context), m)));
    }

    @Override
    public void close() {
        try {
            spout.close();
        } finally {
            Marks m = out;
            if (m != null) Marking.close(m, m.on(), Marking.instance(operator, context));
            if (context != null) Marking.wrapped(context, false);
        }
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        spout.declareOutputFields(new OutputFieldsDeclarer() {
            @Override
            public void declare(Fields fields) {
                declarer.declare(withId(fields));
            }

            @Override
            public void declare(boolean direct, Fields fields) {
                declarer.declare(direct, withId(fields));
            }

            @Override
            public void declareStream(String stream, Fields fields) {
                declarer.declareStream(stream, withId(fields));
            }

            @Override
            public void declareStream(String stream, boolean direct, Fields fields) {
                declarer.declareStream(stream, direct, withId(fields));
            }
        });
    }

    /** The spout's fields and {@value Profiled#CP_ID} last; when the topology is built, so a clash is an error there. */
    private Fields withId(Fields fields) {
        if (fields.contains(Profiled.CP_ID)) {
            throw new IllegalArgumentException("cloudprofiler: " + operator + ": the spout already declares a field "
                    + Profiled.CP_ID + " " + fields + "; Profiled.spout appends it");
        }
        List<String> names = new ArrayList<>(fields.toList());
        names.add(Profiled.CP_ID);
        return new Fields(names);
    }

    @Override
    public void activate() {
        spout.activate();
    }

    @Override
    public void deactivate() {
        spout.deactivate();
    }

    @Override
    public void nextTuple() {
        spout.nextTuple();
    }

    @Override
    public void ack(Object msgId) {
        spout.ack(msgId);
    }

    @Override
    public void fail(Object msgId) {
        spout.fail(msgId);
    }

    @Override
    public Map<String, Object> getComponentConfiguration() {
        return spout.getComponentConfiguration();
    }

    /** Appends the next id to each emitted tuple and marks out right before handing it to Storm. */
    private static final class Stamping implements ISpoutOutputCollector {
        private final ISpoutOutputCollector out;
        private final TupleIds ids;
        private final Marks mark;

        Stamping(ISpoutOutputCollector out, TupleIds ids, Marks mark) {
            this.out = out;
            this.ids = ids;
            this.mark = mark;
        }

        private List<Object> stamp(List<Object> values) {
            long id = ids.next();
            List<Object> v = new ArrayList<>(values.size() + 1); // a copy: the spout may reuse its list
            v.addAll(values);
            v.add(id);
            mark.out(id);
            return v;
        }

        @Override
        public List<Integer> emit(String stream, List<Object> values, Object messageId) {
            return out.emit(stream, stamp(values), messageId);
        }

        @Override
        public void emitDirect(int task, String stream, List<Object> values, Object messageId) {
            out.emitDirect(task, stream, stamp(values), messageId);
        }

        @Override
        public long getPendingCount() {
            return out.getPendingCount();
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
