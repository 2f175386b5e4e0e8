package io.cloudprofiler.examples.flink;

/**
 * The tuple. A Flink POJO (public no-arg constructor, public fields), so Flink
 * serializes it with its PojoSerializer and never falls back to Kryo.
 */
public class Event {
    /** The tuple id, assigned once at the source: what every channel logs. */
    public long id;
    /** The key the stream is partitioned by (set by the enrich operator). */
    public int key;
    /** Some derived value (enrich). */
    public long value;
    /** How many tuples of this key the count operator had seen, this one included. */
    public long seq;

    public Event() {}

    public Event(long id) {
        this.id = id;
    }

    @Override
    public String toString() {
        return "Event{id=" + id + ", key=" + key + ", value=" + value + ", seq=" + seq + "}";
    }
}
