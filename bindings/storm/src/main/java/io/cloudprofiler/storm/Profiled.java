package io.cloudprofiler.storm;

import java.io.Serializable;
import java.util.Objects;
import org.apache.storm.topology.BasicBoltExecutor;
import org.apache.storm.topology.IBasicBolt;
import org.apache.storm.topology.IRichBolt;
import org.apache.storm.topology.IRichSpout;
import org.apache.storm.tuple.Tuple;

/**
 * Marks a Storm bolt or spout without changing it, by the marking
 * convention (docs/capacity.md, "Marking an operator"): channels {@code
 * OPERATOR#TASK in} and {@code OPERATOR#TASK out} (a spout: {@code out}
 * only), one per task, with the tuple's id.
 *
 * <pre>{@code
 * builder.setSpout("events", Profiled.spout("0-events", new EventSpout()));   // gives each tuple a cp_id
 * builder.setBolt("enrich", Profiled.bolt("1-enrich", new Enrich()), 2)       // the default id rule finds it
 *        .shuffleGrouping("events");
 * builder.setBolt("keep", Profiled.bolt("2-keep", new Keep(), Profiled.IdOf.field("orderId")))
 *        .shuffleGrouping("enrich");
 * }</pre>
 *
 * <p>A wrapped bolt ({@code MarkedBolt}) marks {@code in} as execute starts
 * and {@code out} right before each emit made inside execute (any stream,
 * anchored or not, direct too) with the input's id: before, not after,
 * since once emit has handed the tuple on the next executor may log its
 * {@code in} first. Emits from other threads, or from the executor thread
 * outside execute, are not marked: no input is theirs. A bolt that declares
 * no stream (a sink) marks {@code out} when execute returns. No {@code sent}
 * mark: Storm 2's emit never waits (a full queue parks the tuple in the
 * executor's overflow, and backpressure shows as time between tuples).
 * Tick tuples and system streams pass through unmarked; so does a tuple
 * in which the default id rule finds no usable id (counted, and logged
 * once). The bolt's own exceptions propagate unchanged, and so, naming the
 * task and the tuple's source, does an exception of the {@link IdOf}; the
 * marking itself never throws into Storm (a failure to open or close is
 * logged; the task then runs unmarked).
 *
 * <p>Switches, in the topology configuration: {@value #ENABLED} {@code
 * false} (a Boolean or the string) opens no channel, each tuple then costs a
 * branch; {@value #METRICS} {@code false} leaves out the live metrics and the
 * {@code OPERATOR#TASK count} channel (every tuple taken counted: its
 * periods are throughput.csv's).
 *
 * <p>Live metrics (Storm's metrics v2: the reporters of {@code
 * topology.metrics.reporters}, CSV, JMX, Graphite, console, report them):
 * each marked bolt task registers the gauges {@code cloudprofiler.tuplesIn},
 * {@code cloudprofiler.tuplesOut} and {@code cloudprofiler.capacity}
 * (tuples a second the task takes while it has a backlog, over the last
 * second or so, from its marks: {@link io.cloudprofiler.Marks#capacity()},
 * the quantity {@code analyze}'s capacity is; NaN until there is one); a
 * marked spout {@code cloudprofiler.tuplesOut}.
 *
 * <p>Without changing any code: {@link MarkingHook} marks every task's
 * {@code out} (and so the hops between them), but a hook never sees a bolt
 * before its execute, so no {@code in}: service times and capacity need
 * these wrappers. The two mix: the hook leaves the wrapped tasks alone.
 */
public final class Profiled {
    private Profiled() {}

    /** The configuration key that turns marking off when {@code false}. */
    public static final String ENABLED = "cloudprofiler.enabled";
    /** The configuration key that leaves the live metrics (and their count channel) out when {@code false}. */
    public static final String METRICS = "cloudprofiler.metrics";
    /** The field {@link #spout} appends to every stream of the spout, and the default id rule looks for first. */
    public static final String CP_ID = "cp_id";
    /** The prefix of the gauges' names. */
    public static final String GAUGE_PREFIX = "cloudprofiler.";

    /**
     * A tuple's id (the id that follows the tuple through the topology). An
     * IdOf that throws (no such field, not a number) fails the bolt's
     * execute with an IllegalArgumentException that names the task and the
     * tuple's source, its exception the cause, before the bolt sees the
     * tuple: Storm then ends the worker, as for an exception of the bolt's
     * own (Flink's wrappers fail the task the same way). A tuple passed on
     * unmarked would be missing from the analysis with nobody told. Where
     * none is given (null), the default rule: the field {@value #CP_ID} if
     * the tuple has it, else {@code id}, else the first value, if that value
     * is a Long or an Integer; a tuple in which it finds none passes through
     * unmarked (counted, and logged once).
     */
    @FunctionalInterface
    public interface IdOf extends Serializable {
        long id(Tuple t);

        /** The named field, a Long ({@link Tuple#getLongByField}). */
        static IdOf field(String name) {
            Objects.requireNonNull(name, "cloudprofiler: IdOf.field: no field name");
            return t -> t.getLongByField(name);
        }

        /** The first value, any Number. */
        static IdOf first() {
            return t -> ((Number) t.getValue(0)).longValue();
        }
    }

    /** Marks a bolt as the operator {@code operator}; idOf null: the default rule. The name is checked here (no '#', no whitespace). */
    public static IRichBolt bolt(String operator, IRichBolt bolt, IdOf idOf) {
        return new MarkedBolt(operator, bolt, idOf);
    }

    /** Marks a basic bolt (run by Storm's BasicBoltExecutor, which acks each input after execute and fails it on a FailedException). */
    public static IRichBolt bolt(String operator, IBasicBolt bolt, IdOf idOf) {
        Objects.requireNonNull(bolt, "cloudprofiler: " + operator + ": no bolt to wrap");
        return new MarkedBolt(operator, new BasicBoltExecutor(bolt), idOf);
    }

    /** {@link #bolt(String, IRichBolt, IdOf)} with the default id rule. */
    public static IRichBolt bolt(String operator, IRichBolt bolt) {
        return bolt(operator, bolt, null);
    }

    /** {@link #bolt(String, IBasicBolt, IdOf)} with the default id rule. */
    public static IRichBolt bolt(String operator, IBasicBolt bolt) {
        return bolt(operator, bolt, null);
    }

    /**
     * Gives a spout's tuples ids and marks them: appends the field {@value
     * #CP_ID} to every stream the spout declares and to every tuple it emits
     * the next id of its task ({@link io.cloudprofiler.TupleIds}, unique
     * across tasks: {@code TupleIds.of(task, 0)}), and marks {@code
     * OPERATOR#TASK out} right before each emit. A spout's tuples start
     * there: no {@code in}. Everything else is delegated unchanged. The
     * spout must emit on its executor thread (from open, nextTuple, ack,
     * fail, activate, deactivate), as Storm's SpoutOutputCollector requires
     * anyway. A restarted worker's spout draws the same ids again (Storm
     * gives a task no attempt number): a replay after a restart shows as a
     * second visit of those ids. Ids are stamped with marking off too: the
     * declared fields include them whatever the switches.
     */
    public static IRichSpout spout(String operator, IRichSpout spout) {
        return new MarkedSpout(operator, spout);
    }
}
