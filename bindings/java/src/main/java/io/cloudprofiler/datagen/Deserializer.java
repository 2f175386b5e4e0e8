package io.cloudprofiler.datagen;

/**
 * Turns one tuple's payload (the bytes {@code gen send} put in a BUCKET,
 * opaque to the framing: datagen/FRAMING.md) into an object. Called on the
 * object factory's threads, one per connection, so an implementation used
 * by one factory is called from several threads at once: keep it stateless
 * (or per-thread).
 *
 * <p>{@code buf} is the factory's read buffer and is reused for the next
 * frame: copy what the object keeps. An exception, or a null result, drops
 * the tuple: it is counted as {@code dropped} in the stream's report and its
 * id comes out as lost, as a receiver that sheds a tuple reports it.
 */
@FunctionalInterface
public interface Deserializer<T> {
    /**
     * @param tupleId the tuple's 64-bit id, from the framing
     * @param buf     the frame's bytes
     * @param off     where the payload starts in buf
     * @param len     the payload's length
     */
    T deserialize(long tupleId, byte[] buf, int off, int len) throws Exception;
}
