package io.cloudprofiler.examples.storm;

import java.util.HashMap;
import java.util.Map;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Tuple;
import org.apache.storm.tuple.Values;

/**
 * Counts tuples per value of a key field (its tuples partitioned by that
 * field, fieldsGrouping): emits (id, key, count so far), the id carried on
 * first, field {@code id}. PlainTopology's keyed bolt (key "key"),
 * IngestTopology's and CapacityTopology's count bolts (key "ad_type").
 */
public class CountBolt extends BaseBasicBolt {
    private static final long serialVersionUID = 1L;
    private final String key;
    private transient Map<String, Long> seen;

    public CountBolt(String key) {
        this.key = key;
    }

    @Override
    public void prepare(Map<String, Object> conf, TopologyContext context) {
        seen = new HashMap<>();
    }

    @Override
    public void execute(Tuple t, BasicOutputCollector out) {
        String k = t.getStringByField(key);
        out.emit(new Values(t.getLongByField("id"), k, seen.merge(k, 1L, Long::sum)));
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer d) {
        d.declare(new Fields("id", key, "seen"));
    }
}
