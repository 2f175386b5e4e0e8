package io.cloudprofiler.examples.storm;

import io.cloudprofiler.Channel;
import java.util.Map;
import org.apache.storm.task.OutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.base.BaseRichBolt;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

/**
 * A bolt with two channels per task, {@code <component>-<task>-entry} and
 * {@code <component>-<task>-exit}, opened in prepare() and closed in
 * cleanup(). execute() logs the tuple id on entry, runs the bolt's own work
 * ({@link #process}), logs it on exit, then hands the result to Storm: emit
 * (anchored to the input) and ack.
 *
 * <p>The exit record is taken before emit(), not after it: once emit() has
 * put the tuple on the next executor's queue, that executor may log its
 * entry before this thread gets to log anything, so a record after emit()
 * would race with the next bolt's entry record. Before emit(), entry -> exit
 * is the bolt's own work and exit -> next entry is Storm's part (emit,
 * queues, the next executor picking the tuple up), and the second never
 * starts before the first ends.
 *
 * <p>Nothing here throws into Storm (see {@link Probes}): a failure of the
 * bolt's own work is recorded and the tuple failed.
 */
public abstract class ProfiledBolt extends BaseRichBolt {
    private static final long serialVersionUID = 1L;

    protected transient OutputCollector collector;
    protected transient String component;
    protected transient int task;
    private transient Channel entry, exit;

    @Override
    public final void prepare(Map<String, Object> conf, TopologyContext context, OutputCollector collector) {
        this.collector = collector;
        this.component = context.getThisComponentId();
        this.task = context.getThisTaskId();
        String prefix = component + "-" + task;
        entry = Probes.openBuffered(prefix + "-entry");
        exit = Probes.openBuffered(prefix + "-exit");
        try {
            open(prefix);
        } catch (RuntimeException e) {
            Probes.error(prefix + " prepare: " + e);
        }
        Probes.started(component);
    }

    /** The bolt's own setup, after its channels are open. */
    protected void open(String channelPrefix) {}

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
            Probes.error(component + "-" + task + ": not a tuple with a long id first: " + input);
            collector.fail(input);
            return;
        }
        Probes.log(entry, id);
        Values out;
        try {
            out = process(input, id);
        } catch (RuntimeException e) {
            Probes.error(component + "-" + task + " id " + id + ": " + e);
            collector.fail(input);
            return;
        }
        Probes.log(exit, id);
        if (out != null) collector.emit(input, out);
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
            Probes.error(component + "-" + task + " cleanup: " + e);
        }
        Probes.close(entry);
        Probes.close(exit);
        entry = exit = null;
        Probes.stopped(component);
    }
}
