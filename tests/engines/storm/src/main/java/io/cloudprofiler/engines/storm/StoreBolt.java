package io.cloudprofiler.engines.storm;

import java.util.Map;
import org.apache.storm.task.TopologyContext;
import org.apache.storm.topology.BasicOutputCollector;
import org.apache.storm.topology.OutputFieldsDeclarer;
import org.apache.storm.topology.base.BaseBasicBolt;
import org.apache.storm.tuple.Tuple;

/** {@code 3-store}: the sink; counts what arrives, in its task counter (and declares no stream, so the marks take it for a sink). */
public class StoreBolt extends BaseBasicBolt {
    private static final long serialVersionUID = 1L;
    private transient TaskCounter counter;

    @Override
    public void prepare(Map<String, Object> conf, TopologyContext context) {
        counter = TaskCounter.of(context.getThisComponentId(), context.getThisTaskId());
    }

    @Override
    public void execute(Tuple t, BasicOutputCollector out) {
        counter.begin();
        counter.end();
    }

    @Override
    public void declareOutputFields(OutputFieldsDeclarer d) {}
}
