package io.cloudprofiler.storm;

import io.cloudprofiler.Marks;
import io.cloudprofiler.TupleIds;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.utils.Utils;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the wrappers ({@link Profiled}) and the hook ({@link MarkingHook})
 * share: the switches, the default id rule, what is never marked, the
 * worker's record of wrapped tasks, and opening and closing marks so that
 * nothing throws into Storm (an exception out of a spout, bolt or hook ends
 * the worker; in a LocalCluster, the JVM).
 */
final class Marking {
    private Marking() {}

    static final Logger LOG = LoggerFactory.getLogger("io.cloudprofiler.storm");
    /** Failures logged (a channel not opened, a close that reported refused marks, a gauge): the tests assert none. */
    static final AtomicLong FAILURES = new AtomicLong();
    /** Instances of this JVM with channels open: the tests wait for 0 after a kill (cleanup runs asynchronously). */
    static final AtomicInteger OPEN = new AtomicInteger();
    /**
     * "stormId/taskId" of the tasks a wrapper marks, so that the hook leaves
     * them alone (one channel per instance and role). A worker JVM runs one
     * topology, a LocalCluster several (task ids restart at 1 in each): hence
     * the storm id.
     */
    private static final Set<String> WRAPPED = ConcurrentHashMap.newKeySet();

    /** A switch in the topology configuration: on unless Boolean.FALSE or the string "false". */
    static boolean flag(Map<String, Object> conf, String key) {
        Object v = conf == null ? null : conf.get(key);
        return v == null || !(Boolean.FALSE.equals(v) || "false".equalsIgnoreCase(v.toString().trim()));
    }

    /**
     * The default id of a tuple: the field {@value Profiled#CP_ID} if the
     * fields have it, else {@code id}, else the first value; null (no usable
     * id) unless that value is a Long or an Integer.
     */
    static Number id(Fields fields, List<Object> values) {
        int i = 0;
        if (fields != null) {
            if (fields.contains(Profiled.CP_ID)) i = fields.fieldIndex(Profiled.CP_ID);
            else if (fields.contains("id")) i = fields.fieldIndex("id");
        }
        Object v = i < values.size() ? values.get(i) : null;
        return v instanceof Long || v instanceof Integer ? (Number) v : null;
    }

    static Number id(Tuple t) {
        return id(t.getFields(), t.getValues());
    }

    /**
     * Whatever comes from a system component or on a system stream ("__...",
     * Utils.isSystemId): never marked. Tick tuples among them (TupleUtils.isTick:
     * __system, __tick).
     */
    static boolean system(Tuple t) {
        return Utils.isSystemId(t.getSourceComponent()) || Utils.isSystemId(t.getSourceStreamId());
    }

    /** A component that declares no stream of its own (only Storm's system streams): a sink. */
    static boolean sink(TopologyContext c) {
        return c.getThisStreams().stream().allMatch(Utils::isSystemId);
    }

    static String instance(String operator, TopologyContext c) {
        return operator + "#" + c.getThisTaskId();
    }

    private static String key(TopologyContext c) {
        return c.getStormId() + "/" + c.getThisTaskId();
    }

    static void wrapped(TopologyContext c, boolean wrapped) {
        if (wrapped) WRAPPED.add(key(c));
        else WRAPPED.remove(key(c));
    }

    static boolean isWrapped(TopologyContext c) {
        return WRAPPED.contains(key(c));
    }

    static void failed(String what, Throwable e) {
        FAILURES.incrementAndGet();
        LOG.error("cloudprofiler: {}", what, e);
    }

    /**
     * A bolt instance's marks by the switches ({@link Marks#off()} when
     * marking is off), with its gauges when the metrics are on. On the
     * executor thread. A failure to open is logged and the instance runs
     * unmarked: throwing would end the worker.
     */
    static Marks marks(String operator, TopologyContext c, Map<String, Object> conf) {
        if (!flag(conf, Profiled.ENABLED)) return Marks.off();
        boolean metrics = flag(conf, Profiled.METRICS);
        Marks m;
        try {
            m = Marks.open(operator, String.valueOf(c.getThisTaskId()), false, metrics);
        } catch (RuntimeException e) {
            failed(instance(operator, c) + ": its channels could not be opened; it runs unmarked", e);
            return Marks.off();
        }
        OPEN.incrementAndGet();
        if (metrics) {
            gauge(c, "tuplesIn", m::tuplesIn);
            gauge(c, "tuplesOut", m::tuplesOut);
            gauge(c, "capacity", m::capacity);
        }
        return m;
    }

    /**
     * A bolt task's marks for the hook (in and out, {@link MarkingHook}
     * says where), by the same switches, with the gauges {@code
     * tuplesIn} and {@code tuplesOut}.
     */
    static Marks hookMarks(String operator, TopologyContext c, Map<String, Object> conf) {
        if (!flag(conf, Profiled.ENABLED)) return Marks.off();
        Marks m;
        try {
            m = Marks.open(operator, String.valueOf(c.getThisTaskId()), false, false);
        } catch (RuntimeException e) {
            failed(instance(operator, c) + ": its channels could not be opened; it runs unmarked", e);
            return Marks.off();
        }
        OPEN.incrementAndGet();
        if (flag(conf, Profiled.METRICS)) {
            gauge(c, "tuplesIn", m::tuplesIn);
            gauge(c, "tuplesOut", m::tuplesOut);
        }
        return m;
    }

    /** An out-only instance's mark (a spout: Marks.openOut), by the same switches. */
    static Marks outMark(String operator, TopologyContext c, Map<String, Object> conf) {
        if (!flag(conf, Profiled.ENABLED)) return Marks.off();
        Marks m;
        try {
            m = Marks.openOut(operator, String.valueOf(c.getThisTaskId()));
        } catch (RuntimeException e) {
            failed(instance(operator, c) + ": its out channel could not be opened; it runs unmarked", e);
            return Marks.off();
        }
        OPEN.incrementAndGet();
        if (flag(conf, Profiled.METRICS)) gauge(c, "tuplesOut", m::tuplesOut);
        return m;
    }

    private static <T> void gauge(TopologyContext c, String name, com.codahale.metrics.Gauge<T> g) {
        try {
            c.registerGauge(Profiled.GAUGE_PREFIX + name, g);
        } catch (RuntimeException e) {
            failed("gauge " + Profiled.GAUGE_PREFIX + name + " of task " + c.getThisTaskId(), e);
        }
    }

    /** Closes marks that were opened (on), logging a failure or refused marks instead of throwing. */
    static void close(AutoCloseable marks, boolean on, String instance) {
        if (!on) return;
        try {
            marks.close();
        } catch (Exception e) {
            failed(instance + ": closing its channels", e);
        } finally {
            OPEN.decrementAndGet();
        }
    }

    /** A spout task's ids: attempt 0, since Storm gives a task no attempt number. */
    static TupleIds ids(TopologyContext c) {
        int task = c.getThisTaskId();
        try {
            return TupleIds.of(task, 0);
        } catch (IllegalArgumentException e) { // task ids of 65,536 and more: no real topology has them, but never throw
            failed("task " + task + ": its ids share TupleIds' instance " + (task & 0xFFFF) + " with another task's", e);
            return TupleIds.of(task & 0xFFFF, 0);
        }
    }
}
