package io.cloudprofiler.engines.storm;

import java.util.Map;
import java.util.SplittableRandom;
import org.apache.storm.spout.SpoutOutputCollector;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseRichSpout;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Values;

/**
 * {@code 0-spout}: records (seq, key, payload), seq from 1, a key among
 * {@value DigestTopology#KEYS}, {@value DigestTopology#PAYLOAD} random
 * bytes. Emitted reliably (the message id is seq), as a user who wants
 * Storm's guarantee writes a spout; a failed tuple is counted, not replayed
 * (a replay would be a second visit of the same id in the marks; runs last
 * seconds, far below the 30 s message timeout, and none is expected).
 *
 * <p>Emits only while the run's gate is open ({@link RunControl}): at the
 * given rate, in bursts, or, rate 0, one tuple per call as fast as Storm
 * calls it.
 *
 * <p>At a rate: every burstMs from the gate's opening, a burst of rate x
 * burstMs tuples, one per nextTuple call as fast as Storm calls it. Why
 * bursts, and not the tuples spread evenly: the capacity we measure is what
 * a task departs a second while it has a backlog, and a truth made of
 * departures ({@link SplitTruth}) can only see that where departures come
 * back to back. Spread evenly at a light load, every tuple finds its task
 * idle and each gap holds a wait: the split truth leaves out nearly every
 * gap (it is left with almost nothing to judge by), the gap-threshold
 * truth ({@link Departures}) counts them and reads the arrival rate. A
 * burst leaves a backlog that the task works off back to back, then a
 * pause until the next one, which the thread spends parked (the test's
 * default burstMs, 200, leaves 2-digest about 130 ms of pause at 0.35 of
 * its capacity; the pause also exceeds the secondary truth's largest gap
 * threshold, 50 ms, so that it does not take it for work).
 */
public class RecordSpout extends BaseRichSpout {
    private static final long serialVersionUID = 1L;

    private final double rate, burstMs;
    private final String idField;
    private transient SpoutOutputCollector collector;
    private transient SplittableRandom random;
    private transient String[] keys;
    private transient TaskCounter counter;
    private transient RunControl.Counts counts;
    private transient long seq, scheduleFrom, emittedSince;

    /**
     * rate: tuples a second, 0 unthrottled; burstMs: at a rate, the time
     * between bursts; idField: the name of the first field (seq or id).
     */
    public RecordSpout(double rate, double burstMs, String idField) {
        this.rate = rate;
        this.burstMs = burstMs;
        this.idField = idField;
    }

    @Override
    public void open(Map<String, Object> conf, TopologyContext context, SpoutOutputCollector collector) {
        this.collector = collector;
        random = new SplittableRandom(context.getThisTaskId());
        keys = new String[DigestTopology.KEYS];
        for (int i = 0; i < keys.length; i++) keys[i] = "k" + i;
        counter = TaskCounter.of(context.getThisComponentId(), context.getThisTaskId());
        counts = RunControl.current();
    }

    @Override
    public void nextTuple() {
        counter.begin();
        long opened = counts.openedAt;
        if (opened == 0) return; // Storm's spout wait strategy sleeps 1 ms
        if (rate > 0) {
            if (opened != scheduleFrom) { // a new opening: its own schedule
                scheduleFrom = opened;
                emittedSince = 0;
            }
            // Every burst that has begun is due in full: the (k+1)-th from
            // k x burstMs on, so the mean rate over the bursts is the rate.
            double periodS = burstMs * 1e-3;
            long begun = (long) ((System.nanoTime() - opened) * 1e-9 / periodS) + 1;
            double due = begun * periodS * rate;
            if (emittedSince >= due) return;
            emittedSince++;
        }
        byte[] payload = new byte[DigestTopology.PAYLOAD];
        for (int i = 0; i < payload.length; i += 8) {
            long r = random.nextLong();
            for (int j = 0; j < 8; j++) payload[i + j] = (byte) (r >>> (8 * j));
        }
        long id = ++seq;
        collector.emit(new Values(id, keys[random.nextInt(keys.length)], payload), id);
        counts.emitted.increment();
        counter.end();
    }

    @Override
    public void ack(Object msgId) {
        counts.acked.increment();
    }

    @Override
    public void fail(Object msgId) {
        counts.failed.increment();
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer declarer) {
        declarer.declare(new Fields(idField, "key", "payload"));
    }
}
