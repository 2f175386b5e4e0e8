package io.cloudprofiler.flink;

import java.io.IOException;
import java.io.Serializable;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import io.cloudprofiler.Marks;
import io.cloudprofiler.TupleIds;

import org.apache.flink.api.common.TaskInfo;
import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.FlatMapFunction;
import org.apache.flink.api.common.functions.Function;
import org.apache.flink.api.common.functions.InvalidTypesException;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichFilterFunction;
import org.apache.flink.api.common.functions.RichFlatMapFunction;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.functions.RuntimeContext;
import org.apache.flink.api.common.functions.util.FunctionUtils;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.api.java.typeutils.MissingTypeInfo;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.api.java.typeutils.TypeExtractor;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSink;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.ProcessFunction;
import org.apache.flink.util.Collector;

/**
 * Marks any DataStream function without changing it: each wrapper opens its
 * instance's channels ({@code OPERATOR#SUBTASK in|out|sent}, {@link Marks})
 * in open(), marks around the user's function with the record's tuple id,
 * and closes them in close(), on every attempt of the task (a restart after
 * a failure opens them again). The user's function keeps its own lifecycle:
 * a rich function gets its runtime context, open and close through the
 * wrapper.
 *
 * <pre>{@code
 * DataStream<Event> enriched = Profiled.map(events, "1-enrich", new Enrich(), Event::id);
 * DataStream<Event> kept     = Profiled.filter(enriched, "2-keep", e -> e.value > 0, Event::id);
 * }</pre>
 *
 * The forms that take the stream name the operator after its marks and
 * find the output type as Flink would for the bare function. The forms that
 * return a function ({@code stream.map(Profiled.map("1-enrich", fn, Event::id))})
 * take the type from the function's class; for a lambda Flink cannot see
 * through, give it with {@code .returns(...)}.
 *
 * <p>What is marked: {@code in} as the record arrives; {@code out} as a map
 * or filter returns (a filter only for the records it keeps), or right
 * before each {@code collect} of a flatMap or process function, and then
 * {@code sent} after that collect returned, with the input's id (a 1-&gt;N
 * function's copies share it; the analysis pairs them in order). Records a
 * process function emits from a timer are not marked: no input is theirs.
 *
 * <p>Marking is on unless the job's global parameter {@value #ENABLED} is
 * {@code false} ({@code pipeline.global-job-parameters: cloudprofiler.enabled:false}):
 * then no channel is opened and each record costs a branch.
 *
 * <p>Live numbers: each marked instance registers gauges in its operator's
 * metric group, under {@value #METRIC_GROUP}: {@code tuplesIn}, {@code
 * tuplesOut} (records marked in and out) and {@code capacity} (records a
 * second the instance takes while it has a backlog, over the last second
 * or so, from its marks: {@link io.cloudprofiler.Marks#capacity()}, the
 * quantity {@code analyze}'s capacity is; NaN until there is one), and a
 * {@code OPERATOR#SUBTASK count} channel counts every record taken (its
 * periods are throughput.csv's). Flink's web UI, its REST API and its
 * metric reporters (Prometheus, OpenTelemetry, JMX) show the gauges like
 * any operator metric. The global job parameter {@value #METRICS} {@code
 * false} leaves the gauges and the count channel out.
 */
public final class Profiled {
    private Profiled() {}

    /** The global job parameter that turns marking off when {@code false}. */
    public static final String ENABLED = "cloudprofiler.enabled";
    /** The global job parameter that leaves the live metrics (and the count channel) out when {@code false}. */
    public static final String METRICS = "cloudprofiler.metrics";
    /** The metric group, under the operator's, that holds the gauges. */
    public static final String METRIC_GROUP = "cloudprofiler";

    /** A record's tuple id (the id that follows the tuple through the job). */
    @FunctionalInterface
    public interface IdOf<T> extends Serializable {
        long id(T record);
    }

    // ---- Forms that take the stream: the operator named, its type found.

    public static <I, O> SingleOutputStreamOperator<O> map(DataStream<I> in, String operator, MapFunction<I, O> fn, IdOf<? super I> idOf) {
        TypeInformation<O> out = TypeExtractor.getMapReturnTypes(fn, in.getType(), operator, true);
        return in.map(new MapWrapper<>(operator, fn, idOf, out), out).name(operator);
    }

    public static <T> SingleOutputStreamOperator<T> filter(DataStream<T> in, String operator, FilterFunction<T> fn, IdOf<? super T> idOf) {
        return in.filter(filter(operator, fn, idOf)).name(operator);
    }

    public static <I, O> SingleOutputStreamOperator<O> flatMap(DataStream<I> in, String operator, FlatMapFunction<I, O> fn, IdOf<? super I> idOf) {
        TypeInformation<O> out = TypeExtractor.getFlatMapReturnTypes(fn, in.getType(), operator, true);
        return in.flatMap(new FlatMapWrapper<>(operator, fn, idOf, out), out).name(operator);
    }

    public static <I, O> SingleOutputStreamOperator<O> process(DataStream<I> in, String operator, ProcessFunction<I, O> fn, IdOf<? super I> idOf) {
        TypeInformation<O> out = TypeExtractor.getUnaryOperatorReturnType(fn, ProcessFunction.class, 0, 1,
                TypeExtractor.NO_INDEX, in.getType(), operator, true);
        return in.process(new ProcessWrapper<>(operator, fn, idOf, out), out).name(operator);
    }

    public static <K, I, O> SingleOutputStreamOperator<O> process(KeyedStream<I, K> in, String operator, KeyedProcessFunction<K, I, O> fn, IdOf<? super I> idOf) {
        TypeInformation<O> out = TypeExtractor.getUnaryOperatorReturnType(fn, KeyedProcessFunction.class, 1, 2,
                TypeExtractor.NO_INDEX, in.getType(), operator, true);
        return in.process(new KeyedProcessWrapper<>(operator, fn, idOf, out), out).name(operator);
    }

    /**
     * A sink marked: {@code in} before each write to its writer, {@code out}
     * after the write returned (the sink's own work, with any wait for the
     * system it writes to). Writer-only sinks: a sink with a committer, writer
     * state or its own topology is refused, since the wrapper would hide
     * them (mark the records before it, with {@link #map}, instead). A
     * writer does not see the job's parameters, so {@value #ENABLED} and
     * {@value #METRICS} are read from the environment when the job is built
     * (set them in its configuration or with {@code -D} at submission).
     */
    public static <T> DataStreamSink<T> sinkTo(DataStream<T> in, String operator, Sink<T> sink, IdOf<? super T> idOf) {
        Map<String, String> params = new HashMap<>(in.getExecutionEnvironment().getConfig().getGlobalJobParameters().toMap());
        return in.sinkTo(new MarkedSink<>(operator, sink, idOf, params)).name(operator);
    }

    /**
     * Marks a stream's records as they pass, with no function of yours:
     * {@code in} and {@code out} around handing the record on unchanged.
     * Right after a source whose records carry their ids, it is the
     * source's mark: chained to the source (as Flink does unless chaining
     * is off for it), its {@code out} is when the source emits the record.
     */
    public static <T> SingleOutputStreamOperator<T> mark(DataStream<T> in, String operator, IdOf<? super T> idOf) {
        return in.map(new MapWrapper<>(operator, new Identity<T>(), idOf, in.getType()), in.getType()).name(operator);
    }

    /** The record itself: what {@link #mark} wraps. */
    static final class Identity<T> implements MapFunction<T, T> {
        private static final long serialVersionUID = 1L;

        @Override
        public T map(T record) {
            return record;
        }
    }

    /** Gives a record its tuple id: returns the record (or a copy) carrying it. */
    @FunctionalInterface
    public interface Stamp<T> extends Serializable {
        T stamp(T record, long id);
    }

    /**
     * Gives records that have no tuple id one, right after their source, and
     * marks each there ({@code in} and {@code out} around the stamp: the
     * tuple's first records). Ids come from {@link TupleIds}: unique across
     * subtasks and across attempts after a restart, with no coordination.
     */
    public static <T> SingleOutputStreamOperator<T> stampIds(DataStream<T> in, String operator, Stamp<T> stamp) {
        return in.map(new StampWrapper<>(operator, stamp, in.getType()), in.getType()).name(operator);
    }

    // ---- Forms that return the wrapped function.

    public static <I, O> RichMapFunction<I, O> map(String operator, MapFunction<I, O> fn, IdOf<? super I> idOf) {
        return new MapWrapper<>(operator, fn, idOf, typeOf(fn, MapFunction.class, 1));
    }

    public static <T> RichFilterFunction<T> filter(String operator, FilterFunction<T> fn, IdOf<? super T> idOf) {
        return new FilterWrapper<>(operator, fn, idOf);
    }

    public static <I, O> RichFlatMapFunction<I, O> flatMap(String operator, FlatMapFunction<I, O> fn, IdOf<? super I> idOf) {
        return new FlatMapWrapper<>(operator, fn, idOf, typeOf(fn, FlatMapFunction.class, 1));
    }

    public static <I, O> ProcessFunction<I, O> process(String operator, ProcessFunction<I, O> fn, IdOf<? super I> idOf) {
        return new ProcessWrapper<>(operator, fn, idOf, typeOf(fn, ProcessFunction.class, 1));
    }

    public static <K, I, O> KeyedProcessFunction<K, I, O> process(String operator, KeyedProcessFunction<K, I, O> fn, IdOf<? super I> idOf) {
        return new KeyedProcessWrapper<>(operator, fn, idOf, typeOf(fn, KeyedProcessFunction.class, 2));
    }

    /**
     * The output type of fn's class (its type parameter at outIndex of base),
     * or Flink's "missing type" that asks for {@code .returns(...)}.
     */
    @SuppressWarnings("unchecked")
    static <O> TypeInformation<O> typeOf(Function fn, Class<?> base, int outIndex) {
        try {
            return (TypeInformation<O>) TypeExtractor.createTypeInfo(base, fn.getClass(), outIndex, null, null);
        } catch (RuntimeException e) {
            return (TypeInformation<O>) new MissingTypeInfo(fn.getClass().getName(),
                    new InvalidTypesException(
                            "cloudprofiler: the output type of " + fn.getClass().getName() + " cannot be found from its class"
                                    + " (a lambda?): give it with .returns(...), or use the form of Profiled that takes the stream", e));
        }
    }

    /**
     * What every wrapper does around the user's function: the instance's
     * marks, opened with the function and closed with it, and the marks
     * around each record.
     */
    static final class Instance<I, O> implements Serializable {
        private static final long serialVersionUID = 1L;
        final String operator;
        final boolean withSent;
        final Function fn;
        final IdOf<? super I> idOf;
        transient Marks marks;
        private transient MarkedCollector<O> marked;

        Instance(String operator, boolean withSent, Function fn, IdOf<? super I> idOf) {
            Marks.checkOperator(operator); // when the job is built, not when a task opens
            if (fn == null) throw new NullPointerException("cloudprofiler: " + operator + ": no function to wrap");
            if (idOf == null) throw new NullPointerException("cloudprofiler: " + operator + ": no IdOf for its records");
            this.operator = operator;
            this.withSent = withSent;
            this.fn = fn;
            this.idOf = idOf;
        }

        void open(RuntimeContext ctx, OpenContext open) throws Exception {
            FunctionUtils.openFunction(fn, open);
            marks = openMarks(operator, withSent, ctx.getGlobalJobParameters(), instance(ctx.getTaskInfo()), ctx.getMetricGroup());
            marked = new MarkedCollector<>(marks);
        }

        /** Marks the record's in; returns its id. */
        long in(I record) {
            long id = idOf.id(record);
            marks.in(id);
            return id;
        }

        /** Marks the record's in; returns the collector that marks out and sent around each collect. */
        Collector<O> in(I record, Collector<O> out) {
            marked.out = out;
            marked.id = in(record);
            return marked;
        }

        void close() throws Exception {
            try {
                FunctionUtils.closeFunction(fn);
            } finally {
                Marks m = marks;
                marks = null;
                if (m != null) m.close();
            }
        }
    }

    /**
     * The instance's name in its channels' names: its subtask index, and
     * after a restart ".ATTEMPT" ({@code 2-score#1.3 in}): a task that runs
     * again in the same TaskManager is an instance of its own, with its own
     * rows, and its channels never mark what the earlier attempt's marked.
     * The agent (bindings/flink-agent) names its instances the same way.
     */
    public static String instance(TaskInfo t) {
        int a = t.getAttemptNumber();
        return a == 0 ? String.valueOf(t.getIndexOfThisSubtask()) : t.getIndexOfThisSubtask() + "." + a;
    }

    /** Whether the global job parameter named is not {@code false}. */
    public static boolean flag(Map<String, String> params, String name) {
        return params == null || !"false".equalsIgnoreCase(params.get(name));
    }

    /**
     * Opens an instance's marks as the job's parameters say, with its gauges
     * registered in the operator's metric group (once per attempt of the
     * task: a restart gets a new group).
     */
    static Marks openMarks(String operator, boolean withSent, Map<String, String> params, String instance, MetricGroup metrics) {
        if (!flag(params, ENABLED)) return Marks.off();
        boolean live = flag(params, METRICS);
        Marks m = Marks.open(operator, instance, withSent, live);
        if (live) {
            MetricGroup g = metrics.addGroup(METRIC_GROUP);
            g.gauge("tuplesIn", (Gauge<Long>) m::tuplesIn);
            g.gauge("tuplesOut", (Gauge<Long>) m::tuplesOut);
            g.gauge("capacity", (Gauge<Double>) m::capacity);
        }
        return m;
    }

    /** A collector that marks out before each collect and sent after it, with the input's id. */
    static final class MarkedCollector<O> implements Collector<O> {
        private final Marks marks;
        Collector<O> out;
        long id;

        MarkedCollector(Marks marks) {
            this.marks = marks;
        }

        @Override
        public void collect(O record) {
            marks.out(id);
            out.collect(record);
            marks.sent(id);
        }

        @Override
        public void close() {
            out.close();
        }
    }

    static final class MapWrapper<I, O> extends RichMapFunction<I, O> implements ResultTypeQueryable<O> {
        private static final long serialVersionUID = 1L;
        private final Instance<I, O> at;
        private final MapFunction<I, O> fn;
        private final transient TypeInformation<O> type;

        MapWrapper(String operator, MapFunction<I, O> fn, IdOf<? super I> idOf, TypeInformation<O> type) {
            this.at = new Instance<>(operator, false, fn, idOf);
            this.fn = fn;
            this.type = type;
        }

        @Override
        public void setRuntimeContext(RuntimeContext ctx) {
            super.setRuntimeContext(ctx);
            FunctionUtils.setFunctionRuntimeContext(fn, ctx);
        }

        @Override
        public void open(OpenContext open) throws Exception {
            at.open(getRuntimeContext(), open);
        }

        @Override
        public O map(I record) throws Exception {
            long id = at.in(record);
            O r = fn.map(record);
            at.marks.out(id);
            return r;
        }

        @Override
        public void close() throws Exception {
            at.close();
        }

        @Override
        public TypeInformation<O> getProducedType() {
            return type;
        }
    }

    static final class FilterWrapper<T> extends RichFilterFunction<T> {
        private static final long serialVersionUID = 1L;
        private final Instance<T, T> at;
        private final FilterFunction<T> fn;

        FilterWrapper(String operator, FilterFunction<T> fn, IdOf<? super T> idOf) {
            this.at = new Instance<>(operator, false, fn, idOf);
            this.fn = fn;
        }

        @Override
        public void setRuntimeContext(RuntimeContext ctx) {
            super.setRuntimeContext(ctx);
            FunctionUtils.setFunctionRuntimeContext(fn, ctx);
        }

        @Override
        public void open(OpenContext open) throws Exception {
            at.open(getRuntimeContext(), open);
        }

        @Override
        public boolean filter(T record) throws Exception {
            long id = at.in(record);
            boolean keep = fn.filter(record);
            if (keep) at.marks.out(id);
            return keep;
        }

        @Override
        public void close() throws Exception {
            at.close();
        }
    }

    static final class FlatMapWrapper<I, O> extends RichFlatMapFunction<I, O> implements ResultTypeQueryable<O> {
        private static final long serialVersionUID = 1L;
        private final Instance<I, O> at;
        private final FlatMapFunction<I, O> fn;
        private final transient TypeInformation<O> type;

        FlatMapWrapper(String operator, FlatMapFunction<I, O> fn, IdOf<? super I> idOf, TypeInformation<O> type) {
            this.at = new Instance<>(operator, true, fn, idOf);
            this.fn = fn;
            this.type = type;
        }

        @Override
        public void setRuntimeContext(RuntimeContext ctx) {
            super.setRuntimeContext(ctx);
            FunctionUtils.setFunctionRuntimeContext(fn, ctx);
        }

        @Override
        public void open(OpenContext open) throws Exception {
            at.open(getRuntimeContext(), open);
        }

        @Override
        public void flatMap(I record, Collector<O> out) throws Exception {
            fn.flatMap(record, at.in(record, out));
        }

        @Override
        public void close() throws Exception {
            at.close();
        }

        @Override
        public TypeInformation<O> getProducedType() {
            return type;
        }
    }

    static final class ProcessWrapper<I, O> extends ProcessFunction<I, O> implements ResultTypeQueryable<O> {
        private static final long serialVersionUID = 1L;
        private final Instance<I, O> at;
        private final ProcessFunction<I, O> fn;
        private final transient TypeInformation<O> type;

        ProcessWrapper(String operator, ProcessFunction<I, O> fn, IdOf<? super I> idOf, TypeInformation<O> type) {
            this.at = new Instance<>(operator, true, fn, idOf);
            this.fn = fn;
            this.type = type;
        }

        @Override
        public void setRuntimeContext(RuntimeContext ctx) {
            super.setRuntimeContext(ctx);
            fn.setRuntimeContext(ctx);
        }

        @Override
        public void open(OpenContext open) throws Exception {
            at.open(getRuntimeContext(), open);
        }

        @Override
        public void processElement(I record, Context ctx, Collector<O> out) throws Exception {
            fn.processElement(record, ctx, at.in(record, out));
        }

        @Override
        public void onTimer(long timestamp, OnTimerContext ctx, Collector<O> out) throws Exception {
            fn.onTimer(timestamp, ctx, out);
        }

        @Override
        public void close() throws Exception {
            at.close();
        }

        @Override
        public TypeInformation<O> getProducedType() {
            return type;
        }
    }

    static final class KeyedProcessWrapper<K, I, O> extends KeyedProcessFunction<K, I, O> implements ResultTypeQueryable<O> {
        private static final long serialVersionUID = 1L;
        private final Instance<I, O> at;
        private final KeyedProcessFunction<K, I, O> fn;
        private final transient TypeInformation<O> type;

        KeyedProcessWrapper(String operator, KeyedProcessFunction<K, I, O> fn, IdOf<? super I> idOf, TypeInformation<O> type) {
            this.at = new Instance<>(operator, true, fn, idOf);
            this.fn = fn;
            this.type = type;
        }

        @Override
        public void setRuntimeContext(RuntimeContext ctx) {
            super.setRuntimeContext(ctx);
            fn.setRuntimeContext(ctx);
        }

        @Override
        public void open(OpenContext open) throws Exception {
            at.open(getRuntimeContext(), open);
        }

        @Override
        public void processElement(I record, Context ctx, Collector<O> out) throws Exception {
            fn.processElement(record, ctx, at.in(record, out));
        }

        @Override
        public void onTimer(long timestamp, OnTimerContext ctx, Collector<O> out) throws Exception {
            fn.onTimer(timestamp, ctx, out);
        }

        @Override
        public void close() throws Exception {
            at.close();
        }

        @Override
        public TypeInformation<O> getProducedType() {
            return type;
        }
    }

    static final class StampWrapper<T> extends RichMapFunction<T, T> implements ResultTypeQueryable<T> {
        private static final long serialVersionUID = 1L;
        private final String operator;
        private final Stamp<T> stamp;
        private final transient TypeInformation<T> type;
        private transient TupleIds ids;
        private transient Marks marks;

        StampWrapper(String operator, Stamp<T> stamp, TypeInformation<T> type) {
            Marks.checkOperator(operator);
            if (stamp == null) throw new NullPointerException("cloudprofiler: " + operator + ": no Stamp for its records");
            this.operator = operator;
            this.stamp = stamp;
            this.type = type;
        }

        @Override
        public void open(OpenContext open) {
            RuntimeContext ctx = getRuntimeContext();
            ids = TupleIds.of(ctx.getTaskInfo().getIndexOfThisSubtask(), ctx.getTaskInfo().getAttemptNumber());
            marks = openMarks(operator, false, ctx.getGlobalJobParameters(), instance(ctx.getTaskInfo()), ctx.getMetricGroup());
        }

        @Override
        public T map(T record) {
            long id = ids.next();
            marks.in(id);
            T r = stamp.stamp(record, id);
            marks.out(id);
            return r;
        }

        @Override
        public void close() {
            Marks m = marks;
            marks = null;
            if (m != null) m.close();
        }

        @Override
        public TypeInformation<T> getProducedType() {
            return type;
        }
    }

    static final class MarkedSink<T> implements Sink<T> {
        private static final long serialVersionUID = 1L;
        /** What a writer-only wrapper would hide: Flink's sink2 mix-ins beyond the writer. */
        private static final String[] HIDDEN = {"SupportsCommitter", "SupportsWriterState", "SupportsPreWriteTopology",
                "SupportsPreCommitTopology", "SupportsPostCommitTopology"};
        private final String operator;
        private final Sink<T> sink;
        private final IdOf<? super T> idOf;
        private final HashMap<String, String> params;

        MarkedSink(String operator, Sink<T> sink, IdOf<? super T> idOf, Map<String, String> params) {
            Marks.checkOperator(operator);
            if (sink == null) throw new NullPointerException("cloudprofiler: " + operator + ": no sink to wrap");
            if (idOf == null) throw new NullPointerException("cloudprofiler: " + operator + ": no IdOf for its records");
            String hidden = hiddenInterface(sink.getClass());
            if (hidden != null) {
                throw new IllegalArgumentException("cloudprofiler: " + operator + ": " + sink.getClass().getName() + " implements "
                        + hidden + ", which a marked writer would hide: mark its records with Profiled.map before it instead");
            }
            this.operator = operator;
            this.sink = sink;
            this.idOf = idOf;
            this.params = new HashMap<>(params);
        }

        static String hiddenInterface(Class<?> c) {
            Deque<Class<?>> todo = new ArrayDeque<>();
            for (; c != null; c = c.getSuperclass()) todo.add(c);
            while (!todo.isEmpty()) {
                Class<?> k = todo.poll();
                for (String h : HIDDEN) if (k.isInterface() && k.getSimpleName().equals(h)) return k.getName();
                todo.addAll(List.of(k.getInterfaces()));
            }
            return null;
        }

        @Override
        public SinkWriter<T> createWriter(WriterInitContext ctx) throws IOException {
            SinkWriter<T> w = sink.createWriter(ctx);
            Marks m;
            try {
                m = openMarks(operator, false, params, instance(ctx.getTaskInfo()), ctx.metricGroup());
            } catch (RuntimeException e) {
                try {
                    w.close();
                } catch (Exception c) {
                    e.addSuppressed(c);
                }
                throw e;
            }
            return new MarkedWriter<>(w, m, idOf);
        }
    }

    static final class MarkedWriter<T> implements SinkWriter<T> {
        private final SinkWriter<T> w;
        private final Marks marks;
        private final IdOf<? super T> idOf;

        MarkedWriter(SinkWriter<T> w, Marks marks, IdOf<? super T> idOf) {
            this.w = w;
            this.marks = marks;
            this.idOf = idOf;
        }

        @Override
        public void write(T record, Context ctx) throws IOException, InterruptedException {
            long id = idOf.id(record);
            marks.in(id);
            w.write(record, ctx);
            marks.out(id);
        }

        @Override
        public void flush(boolean endOfInput) throws IOException, InterruptedException {
            w.flush(endOfInput);
        }

        @Override
        public void writeWatermark(Watermark watermark) throws IOException, InterruptedException {
            w.writeWatermark(watermark);
        }

        @Override
        public void close() throws Exception {
            try {
                w.close();
            } finally {
                marks.close();
            }
        }
    }
}
