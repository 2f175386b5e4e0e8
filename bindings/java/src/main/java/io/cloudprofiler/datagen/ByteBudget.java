package io.cloudprofiler.datagen;

import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * The bytes an {@link ObjectFactory} holds for its buckets, across all its
 * connections, bounded by a limit: a connection's thread {@link #acquire
 * acquires} a BUCKET frame's bytes after its header and before its body is
 * read, and the consumer that takes the bucket {@link #release releases}
 * them. A thread that finds no room parks until a release makes some (it
 * never spins); meanwhile it reads nothing, so TCP's flow control holds its
 * sender back.
 *
 * <p>Room is granted first come, first served: while a thread waits, one
 * arriving later waits behind it even if its (smaller) frame would fit, so
 * that a large frame is not starved by a stream of small ones. This cannot
 * deadlock as long as no request exceeds the limit (the factory refuses
 * such frames before asking): whatever is held is a bucket in a queue,
 * which its consumer frees, or a frame being read, which becomes one.
 *
 * <p>{@link #release} costs an atomic add, and takes the lock only when a
 * thread is waiting: the consumers' side stays lock-free while there is
 * room.
 */
final class ByteBudget {
    /** A waiter re-checks its stop condition this often even if no release wakes it (a safety net). */
    private static final long RECHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final long limit;
    private final AtomicLong used = new AtomicLong();
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition room = lock.newCondition();
    /** The waiting threads' tokens, oldest first (under lock). */
    private final ArrayDeque<Object> line = new ArrayDeque<>();
    /**
     * line's size, readable without the lock: a releaser that reads 0 here
     * needs not signal. A waiter raises it before its last check of {@code
     * used}, a releaser lowers {@code used} before reading it (both
     * volatile), so one of the two always sees the other.
     */
    private volatile int waiting;

    ByteBudget(long limit) {
        if (limit < 1) throw new IllegalArgumentException("byte budget " + limit);
        this.limit = limit;
    }

    long limit() {
        return limit;
    }

    /** Threads waiting for room now (a snapshot; for tests). */
    int waiters() {
        return waiting;
    }

    /** Bytes held now (a snapshot). */
    long used() {
        return used.get();
    }

    /**
     * Takes n bytes (0 &lt;= n &lt;= limit), waiting as long as they would
     * take the total past the limit. False, without taking them, if {@code
     * stop} says so while it waits (checked at every wake-up: {@link
     * #wakeAll} wakes every waiter at once).
     */
    boolean acquire(long n, BooleanSupplier stop) {
        if (n < 0 || n > limit) throw new IllegalArgumentException(n + " bytes of a budget of " + limit);
        if (waiting == 0 && tryTake(n)) return true; // nobody in line: no lock
        Object me = new Object();
        lock.lock();
        try {
            line.addLast(me);
            waiting = line.size();
            try {
                while (true) {
                    if (line.peekFirst() == me && tryTake(n)) {
                        line.removeFirst();
                        room.signalAll(); // the next in line may fit in what is left
                        return true;
                    }
                    if (stop.getAsBoolean()) {
                        line.remove(me);
                        room.signalAll(); // if it was first, the next one is now
                        return false;
                    }
                    room.awaitNanos(RECHECK_NANOS);
                }
            } finally {
                waiting = line.size();
            }
        } catch (InterruptedException e) {
            // A factory thread is not interrupted by the factory; if someone else does, give up as if stopped.
            line.remove(me);
            waiting = line.size();
            room.signalAll();
            Thread.currentThread().interrupt();
            return false;
        } finally {
            lock.unlock();
        }
    }

    private boolean tryTake(long n) {
        while (true) {
            long u = used.get();
            if (u + n > limit) return false;
            if (used.compareAndSet(u, u + n)) return true;
        }
    }

    /** Gives back n bytes taken by {@link #acquire}; wakes the waiters if there are any. */
    void release(long n) {
        if (n == 0) return;
        used.addAndGet(-n);
        if (waiting > 0) wakeAll();
    }

    /** Wakes every waiter to look again (at room, and at its stop condition: the factory closing). */
    void wakeAll() {
        lock.lock();
        try {
            room.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
