package io.cloudprofiler.datagen;

/**
 * One BUCKET of a stream, deserialized: {@code size()} tuples, each an id
 * (from the framing) and an object (from the {@link Deserializer}), in the
 * order sent. Tuples whose deserialization failed are not in it. A bucket
 * belongs to the consumer that polled it.
 */
public final class Bucket<T> {
    private final StreamInfo stream;
    private final long[] ids;
    private final Object[] items;
    private final int size;
    /** Bytes it holds of the factory's budget (its tuples' wire bytes), released when a consumer takes it. */
    final long charge;

    Bucket(StreamInfo stream, long[] ids, Object[] items, int size, long charge) {
        this.stream = stream;
        this.ids = ids;
        this.items = items;
        this.size = size;
        this.charge = charge;
    }

    /** The stream (connection) it came on. */
    public StreamInfo stream() {
        return stream;
    }

    /** Tuples in the bucket (at least 1). */
    public int size() {
        return size;
    }

    /** Tuple i's id, 0 &lt;= i &lt; size(). */
    public long id(int i) {
        if (i >= size) throw new IndexOutOfBoundsException(i + " of " + size);
        return ids[i];
    }

    /** Tuple i's object, 0 &lt;= i &lt; size(). */
    @SuppressWarnings("unchecked")
    public T get(int i) {
        if (i >= size) throw new IndexOutOfBoundsException(i + " of " + size);
        return (T) items[i];
    }

    @Override
    public String toString() {
        return "Bucket[" + size + " tuples, ids " + Long.toUnsignedString(ids[0]) + ".. of run "
                + Long.toUnsignedString(stream.runId()) + " thread " + stream.thread() + "]";
    }
}
