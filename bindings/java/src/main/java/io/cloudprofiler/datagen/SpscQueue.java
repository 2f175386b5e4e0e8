package io.cloudprofiler.datagen;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * A bounded single-producer single-consumer queue: an array ring whose two
 * indexes are published with release stores and read with acquire loads
 * ({@link VarHandle}), no locks and no CAS. Exactly one thread may call
 * the producer methods ({@link #offer}, {@link #put}) and exactly one (maybe
 * another) the consumer methods ({@link #poll}, {@link #peek}); {@link
 * #size} and {@link #isEmpty} may be called from any thread (a snapshot).
 *
 * <p>Each side caches the other's index and reads it again only when the
 * ring looks full (producer) or empty (consumer), so an element costs one
 * plain store and one release store on each side. The indexes sit on their
 * own cache lines.
 *
 * <p>{@link #poll} returns {@code null} at once when the queue is empty; a
 * consumer that wants to wait parks itself (see {@link ObjectFactory#take}).
 * {@link #put} waits while the queue is full by parking with a growing
 * back-off (from 20 µs to 1 ms): it never spins without parking.
 */
public final class SpscQueue<E> extends SpscQueueFields {
    private static final VarHandle HEAD, TAIL, SLOT;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            HEAD = l.findVarHandle(SpscQueueHead.class, "head", long.class);
            TAIL = l.findVarHandle(SpscQueueTail.class, "tail", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
        SLOT = MethodHandles.arrayElementVarHandle(Object[].class);
    }

    private final Object[] ring;
    private final int mask;
    private final int capacity;

    /** A queue of at least {@code capacity} elements (rounded up to a power of two, at most 2^30). */
    public SpscQueue(int capacity) {
        if (capacity < 1 || capacity > (1 << 30)) {
            throw new IllegalArgumentException("SpscQueue capacity must be 1 .. 2^30, not " + capacity);
        }
        int c = Integer.highestOneBit(capacity);
        if (c < capacity) c <<= 1;
        this.capacity = c;
        this.ring = new Object[c];
        this.mask = c - 1;
    }

    /** How many elements it holds at most. */
    public int capacity() {
        return capacity;
    }

    /** Producer: adds e if there is room; false if the queue is full. */
    public boolean offer(E e) {
        if (e == null) throw new NullPointerException("SpscQueue holds no nulls");
        long t = tail; // only the producer writes tail
        if (t - headCache >= capacity) {
            headCache = (long) HEAD.getAcquire(this);
            if (t - headCache >= capacity) return false;
        }
        SLOT.set(ring, (int) t & mask, e);
        TAIL.setRelease(this, t + 1); // publishes the slot (and what e points to)
        return true;
    }

    /**
     * Producer: adds e, waiting (parking with back-off) while the queue is
     * full. Returns false, without adding e, if {@code stop} says so while it
     * waits (checked at every wake-up).
     */
    public boolean put(E e, BooleanSupplier stop) {
        long backoff = 20_000;
        while (!offer(e)) {
            if (stop.getAsBoolean()) return false;
            LockSupport.parkNanos(backoff);
            backoff = Math.min(backoff * 2, 1_000_000);
        }
        return true;
    }

    /** Consumer: takes the oldest element, or returns null at once if there is none. */
    @SuppressWarnings("unchecked")
    public E poll() {
        long h = head; // only the consumer writes head
        if (h >= tailCache) {
            tailCache = (long) TAIL.getAcquire(this);
            if (h >= tailCache) return null;
        }
        int i = (int) h & mask;
        E e = (E) SLOT.get(ring, i);
        SLOT.set(ring, i, null); // before the release below: the producer reuses the slot only after it
        HEAD.setRelease(this, h + 1);
        return e;
    }

    /** Consumer: the oldest element without taking it, or null. */
    @SuppressWarnings("unchecked")
    public E peek() {
        long h = head;
        if (h >= tailCache) {
            tailCache = (long) TAIL.getAcquire(this);
            if (h >= tailCache) return null;
        }
        return (E) SLOT.get(ring, (int) h & mask);
    }

    /** Elements in the queue now (any thread; a snapshot). */
    public int size() {
        long h = (long) HEAD.getAcquire(this);
        long t = (long) TAIL.getAcquire(this);
        return (int) Math.max(0, Math.min(capacity, t - h));
    }

    /** True if the consumer has taken everything the producer added (any thread; a snapshot). */
    public boolean isEmpty() {
        long t = (long) TAIL.getAcquire(this);
        long h = (long) HEAD.getAcquire(this);
        return h >= t;
    }
}

// The fields, each side's on its own cache lines (padding by inheritance: the
// JVM lays out a superclass's fields before a subclass's).

abstract class SpscQueuePad0 {
    long p00, p01, p02, p03, p04, p05, p06, p07, p08, p09, p0a, p0b, p0c, p0d, p0e, p0f;
}

abstract class SpscQueueHead extends SpscQueuePad0 {
    /** Consumer's index: elements taken. Written by the consumer only (release). */
    long head;
    /** The consumer's last look at tail. */
    long tailCache;
}

abstract class SpscQueuePad1 extends SpscQueueHead {
    long p10, p11, p12, p13, p14, p15, p16, p17, p18, p19, p1a, p1b, p1c, p1d, p1e, p1f;
}

abstract class SpscQueueTail extends SpscQueuePad1 {
    /** Producer's index: elements added. Written by the producer only (release). */
    long tail;
    /** The producer's last look at head. */
    long headCache;
}

abstract class SpscQueueFields extends SpscQueueTail {
    long p20, p21, p22, p23, p24, p25, p26, p27, p28, p29, p2a, p2b, p2c, p2d, p2e, p2f;
}
