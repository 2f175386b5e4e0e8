package io.cloudprofiler.examples.storm;

import io.cloudprofiler.Channel;
import java.util.Map;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.base.BaseRichBolt;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

/**
 * A bolt with two channels per task, named by the marking convention
 * ({@code OPERATOR#INSTANCE ROLE}, the top-level README's "Capacity"):
 * {@code <component>#<task> in} and {@code <component>#<task> out}, opened in
 * prepare() and closed in cleanup(). execute() logs the tuple id in
 * {@code in}, runs the bolt's own work ({@link #process}), logs it in
 * {@code out}, then hands the result to Storm: emit (anchored to the input)
 * and ack.
 *
 * <p>The out record is taken before emit(), not after it: once emit() has
 * put the tuple on the next executor's queue, that executor may log its
 * {@code in} before this thread gets to log anything, so a record after
 * emit() would race with the next bolt's. Before emit(), in -> out is the
 * bolt's own work and out -> next in is Storm's part (emit, queues, the next
 * executor picking the tuple up), and the second never starts before the
 * first ends.
 *
 * <p>No {@code sent} mark: Storm 2's emit never waits. When the next
 * executor's queue is full, emit puts the tuple in this executor's overflow
 * ({@code pendingEmits}) and returns, and the executor takes no new input
 * until the overflow has drained: backpressure shows as time between a
 * task's tuples (outside in -> out), never as time in emit.
 *
 * <p>Nothing here throws into Storm (see {@link Probes}): a failure of the
 * bolt's own work is recorded and the tuple failed.
 */
public abstract class ProfiledBolt extends BaseRichBolt {
    private static final long serialVersionUID = 1L;

    protected transient OutputCollector collector;
    protected transient String component;
    protected transient int task;
    private boolean marked = true;
    private transient Channel in, out;

    /** Opens no channels: the same bolt without its marks; returns this. */
    public ProfiledBolt unmarked() {
        marked = false;
        return this;
    }

    @Override
    public final void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
        this.collector = collector;
        this.component = context.getThisComponentId();
        this.task = context.getThisTaskId();
        String instance = component + "#" + task;
        if (marked) {
            in = Probes.openBuffered(instance + " in");
            out = Probes.openBuffered(instance + " out");
        }
        try {
            open(instance);
        } catch (RuntimeException e) {
            Probes.error(instance + " prepare: " + e);
        }
        Probes.started(component);
    }

    /** The bolt's own setup, after its channels are open; instance is "component#task". */
    protected void open(String instance) {}

    /** The bolt's own work on one tuple: the values to emit, or null. */
    protected abstract Values process(Tuple input, long id);

    /** The bolt's own teardown, before its channels are closed. */
    protected void close() {}

    @Override
    public final void execute(Tuple input) {
        long id;
        try {
            id = input.getLong(0);
        } catch (RuntimeException e) {
            Probes.error(component + "#" + task + ": not a tuple with a long id first: " + input);
            collector.fail(input);
            return;
        }
        Probes.log(in, id);
        Values result;
        try {
            result = process(input, id);
        } catch (RuntimeException e) {
            Probes.error(component + "#" + task + " id " + id + ": " + e);
            collector.fail(input);
            return;
        }
        Probes.log(out, id);
        if (result != null) collector.emit(input, result);
        collector.ack(input);
    }

    /**
     * Called when the topology is killed; in a LocalCluster always, on another
     * thread than execute() (Storm's supervisor thread, after the executor
     * has stopped). On a real cluster it is best effort: the binding's
     * shutdown hook closes every channel when the worker gets SIGTERM.
     */
    @Override
    public final void cleanup() {
        try {
            close();
        } catch (RuntimeException e) {
            Probes.error(component + "#" + task + " cleanup: " + e);
        }
        Probes.close(in);
        Probes.close(out);
        in = out = null;
        Probes.stopped(component);
    }
}
