package io.cloudprofiler.storm;

import io.cloudprofiler.Marks;
import java.util.Map;
import org.apache.storm.hooks.BaseTaskHook;
import org.apache.storm.hooks.info.BoltExecuteInfo;
import org.apache.storm.hooks.info.EmitInfo;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.utils.Utils;

/**
 * Marks every task of a topology without changing its code: one line of
 * configuration,
 *
 * <pre>{@code
 * conf.put(Config.TOPOLOGY_AUTO_TASK_HOOKS, List.of(MarkingHook.class.getName()));
 * }</pre>
 *
 * and each spout task writes {@code COMPONENT#TASK out}, each bolt task
 * {@code COMPONENT#TASK in} and {@code out} (the component's id is the
 * operator; a component whose id the convention cannot carry, with '#' or
 * whitespace, is skipped with a warning).
 *
 * <p><b>What a hook sees</b> (Storm 2.8.3, read from its bytecode):
 * <ul>
 * <li>{@code emit(EmitInfo)}: inside the spout's or bolt's emit call
 * ({@code Task.getOutgoingTasks}, before the tuple is transferred), with the
 * output's values, stream and target tasks; not the input it was made
 * from.</li>
 * <li>{@code boltExecute(BoltExecuteInfo)}: in {@code BoltExecutor}, after
 * the bolt's {@code execute} returned (not at all if it threw), with the
 * input tuple.</li>
 * <li>acks and fails; {@code prepare} when the task is built (on the
 * worker's thread, before the bolt's prepare or the spout's open), {@code
 * cleanup} at shutdown (before the bolt's cleanup, on the shutdown
 * thread).</li>
 * </ul>
 * No hook runs before a bolt's execute: a hook cannot see a bolt take a
 * tuple.
 *
 * <p><b>What it marks</b>, on the convention's rule that {@code out} comes
 * right before the hand-off:
 * <ul>
 * <li>at each emit of a spout or a bolt (inside emit, before the transfer):
 * {@code out} with the id the default rule finds in the emitted values
 * (the stream's field {@value Profiled#CP_ID}, else {@code id}, else the
 * first value; a Long or an Integer), the same rule by which the next
 * bolt's task finds it in its input. So each copy is marked once;</li>
 * <li>a bolt's {@code in}: at the first emit of an execute, with that
 * emit's id, right before its {@code out} (the first moment a hook sees
 * the tuple being worked on); an execute that emitted nothing with an id
 * (a tuple dropped, a sink) marks it when execute has returned, with the
 * input's id;</li>
 * <li>a bolt's emit whose values carry no usable id: {@code out} when
 * execute has returned, with the input's id (emits on the executor thread
 * only: another thread's emit belongs to no input);</li>
 * <li>a sink (a bolt that declares no stream): {@code out} with the input's
 * id when execute has returned.</li>
 * </ul>
 * So a bolt's marks cut its time where its work can be seen: between one
 * departure (its last out) and the next in lies the rest of one execute,
 * Storm's hand-over and the start of the next execute, and the library
 * notes whether the executor waited in between (a wait for input, a
 * backpressure wait): {@code analyze} takes that gap as the take of a
 * tuple that was queued, and the capacity, busy share and bottleneck of
 * every bolt come from it. A bolt's own work (in to out) is only what lies
 * between its first and last emits, and the hop into a bolt holds the part
 * of its execute before its first emit. Not at boltExecute alone, which
 * would be simpler: that mark comes after the emits have handed the copies
 * on, so the next bolt can finish its own execute first, and the hop
 * shows negative (in this module's tests, by up to milliseconds on 2
 * vCPUs). Never marked: system components ({@code __acker}, {@code
 * __system}, {@code __eventlogger}, any "__" id), system streams, tick
 * tuples, tuples without a usable id, and the tasks {@link Profiled} wraps
 * (they mark themselves). Marking starts at a task's first event, after
 * the wrapper's prepare or open has said whether the task is wrapped.
 *
 * <p>The switches are the wrappers' ({@value Profiled#ENABLED}, {@value
 * Profiled#METRICS}: the gauges {@code cloudprofiler.tuplesIn} and {@code
 * cloudprofiler.tuplesOut}). Nothing here throws into Storm.
 */
public class MarkingHook extends BaseTaskHook {
    private static final int TO_OPEN = 0, MARKING = 1, SKIP = 2;

    private TopologyContext context;
    private Map<String, Object> conf;
    private String component;
    private boolean spout, sink;
    // Events come on the executor thread, a bolt's emits maybe on its own
    // threads too, cleanup on the shutdown thread: volatile (plain loads on x86).
    private volatile int state = SKIP;
    private volatile Marks out;
    // A bolt's emits without an id, counted on the thread that made them:
    // only the executor thread's belong to the execute that boltExecute ends.
    private final ThreadLocal<int[]> pending = ThreadLocal.withInitial(() -> new int[1]);
    // Whether the current execute marked its in (at its first emit): the
    // executor thread's, read and reset by boltExecute.
    private boolean inMarked;
    // The executor thread (the one boltExecute runs on, known from its first
    // call): a bolt's emits on another thread mark only their out.
    private volatile Thread executor;
    private long unmarked;

    @Override
    public void prepare(Map<String, Object> conf, TopologyContext context) {
        this.conf = conf;
        this.context = context;
        component = context.getThisComponentId();
        if (Utils.isSystemId(component) || !Marking.flag(conf, Profiled.ENABLED)) return;
        try {
            Marks.checkOperator(component);
        } catch (IllegalArgumentException e) {
            Marking.LOG.warn("cloudprofiler: MarkingHook: component \"{}\" is not marked: {}", component, e.getMessage());
            return;
        }
        spout = context.getRawTopology().get_spouts().containsKey(component);
        sink = Marking.sink(context);
        state = TO_OPEN;
    }

    /** Opens at the first event, not in prepare: that runs before the wrapper's prepare, and off the executor thread. */
    private boolean marking() {
        if (state == TO_OPEN) open();
        return state == MARKING;
    }

    private synchronized void open() { // a bolt's first emit may come from one of its threads
        if (state != TO_OPEN) return;
        Marks m = Marking.isWrapped(context) ? Marks.off()
                : spout ? Marking.outMark(component, context, conf) : Marking.hookMarks(component, context, conf);
        out = m;
        state = m.on() ? MARKING : SKIP;
    }

    @Override
    public void emit(EmitInfo info) {
        if (state == SKIP || Utils.isSystemId(info.stream)) return;
        Number id = Marking.id(context.getThisOutputFields(info.stream), info.values);
        if (id != null) {
            if (marking()) {
                Thread t = executor;
                // A bolt's first emit of an execute, on its executor (or
                // before the first execute ended: then it is the executor).
                if (!spout && !inMarked && (t == null || t == Thread.currentThread())) {
                    inMarked = true;
                    out.in(id.longValue());
                }
                out.out(id.longValue());
            }
        } else if (spout) {
            noId("stream " + info.stream);
        } else {
            pending.get()[0]++;
        }
    }

    @Override
    public void boltExecute(BoltExecuteInfo info) {
        if (state == SKIP) return;
        if (executor == null) executor = Thread.currentThread();
        boolean in = !inMarked;
        inMarked = false;
        int[] made = pending.get();
        int n = sink ? 1 : made[0];
        made[0] = 0;
        if (Marking.system(info.tuple)) return;
        // Its in marked at its first emit, and every emit marked with the
        // id it carried: nothing of this tuple's own left to mark (a bolt
        // that gives ids to tuples that came without: no warning).
        if (!in && n == 0) return;
        Number id = Marking.id(info.tuple);
        if (id == null) {
            noId("from " + info.tuple.getSourceComponent() + ", stream " + info.tuple.getSourceStreamId());
        } else if (marking()) { // opened only once there is an id to mark: no empty channel
            Marks m = out;
            long v = id.longValue();
            if (in) m.in(v); // no emit with an id: a dropped tuple, a sink, emits without ids
            for (; n > 0; n--) m.out(v);
        }
    }

    private void noId(String where) {
        if (unmarked++ == 0) {
            Marking.LOG.warn("cloudprofiler: MarkingHook: {}#{}: a tuple ({}) has no usable id ({}, id or a Long or Integer"
                    + " first): such tuples are not marked", component, context.getThisTaskId(), where, Profiled.CP_ID);
        }
    }

    @Override
    public void cleanup() {
        Marks m = out;
        if (m != null) Marking.close(m, m.on(), component + "#" + context.getThisTaskId());
    }
}
