package io.cloudprofiler.engines.storm;

import java.util.Arrays;
import java.util.Map;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

/**
 * {@code 1-decode}: a record becomes (id, key, payload), the payload its own
 * copy. The id travels on as docs/storm.md asks: the wrapper's {@code
 * cp_id} where the spout is wrapped, else the spout's {@code id}. A basic
 * bolt: Storm anchors the emit and acks the input.
 */
public class DecodeBolt extends BaseBasicBolt {
    private static final long serialVersionUID = 1L;
    private transient TaskCounter counter;

    @Override
    public void prepare(Map<String, Object> conf, TopologyContext context) {
        // The departure log, the truth's raw material: its array allocated here, once.
        counter = TaskCounter.of(context.getThisComponentId(), context.getThisTaskId(), DigestTopology.DEPARTURE_LOG);
    }

    @Override
    public void execute(Tuple t, BasicOutputCollector out) {
        counter.begin();
        long id = t.getFields().contains("cp_id") ? t.getLongByField("cp_id") : t.getLongByField("id");
        byte[] payload = (byte[]) t.getValueByField("payload");
        out.emit(new Values(id, t.getStringByField("key"), Arrays.copyOf(payload, payload.length)));
        counter.end(); // the last thing execute does: the departure's time is taken here
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer d) {
        d.declare(new Fields("id", "key", "payload"));
    }
}
