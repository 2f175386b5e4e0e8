package io.cloudprofiler.datagen;

import java.io.IOException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One {@link ObjectFactory} shared, with a reference count, by the consumers
 * of a JVM: what an engine's source needs when several of its tasks (a
 * Flink source's subtasks, a Storm spout's tasks) run in one worker JVM and
 * should drain one factory, each its share of the streams ({@link
 * ObjectFactory#poll(int, int) consumer c of n}).
 *
 * <p>Each instance holds at most one factory at a time; a source keeps one
 * instance in a static field, so that the JVM has one factory per source
 * class:
 *
 * <pre>{@code
 * static final SharedFactory<Event> SHARED = new SharedFactory<>();
 *
 * void open() throws IOException {           // each task
 *     factory = SHARED.acquire(() -> ObjectFactory.builder(Event::parse).host(host).port(port).start());
 * }
 * void close() {
 *     SHARED.release(factory);
 * }
 * }</pre>
 *
 * <ul>
 * <li>{@link #acquire} starts a factory with the caller's {@link Starter}
 * when there is none, or the one there was has been closed, and counts one
 * user more. <b>The first acquirer's settings win</b>: the tasks that
 * acquire while the factory is open get it as it is, whatever host, port,
 * queue capacity or byte budget their own starter would have given.
 * <li>{@link #release} counts one user less and closes the factory when the
 * last user has released it; the next {@link #acquire} starts a new one. A
 * factory released after it was replaced (it was closed and another one
 * started, as when a task restarts) is just closed: it is no longer
 * shared.
 * <li>{@link #consumerStarted()} and {@link #consumerStopped()} mark a
 * consumer entering and leaving its loop, and {@link #await} waits until
 * a factory is open and that many consumers are in their loops: how a test,
 * or a program running its engine in-process, learns the ephemeral port
 * ({@link ObjectFactory#port()}) to send to once every task is draining.
 * </ul>
 *
 * <p>Thread-safe. A factory is started under the instance's lock (a
 * concurrent acquirer waits for it and gets the same one) and closed
 * outside it (closing joins the factory's threads, up to a few seconds).
 */
public final class SharedFactory<T> {
    /** Starts a factory, e.g. {@code () -> ObjectFactory.builder(d).host(h).port(p).start()}, or {@code builder::start}. */
    @FunctionalInterface
    public interface Starter<T> {
        ObjectFactory<T> start() throws IOException;
    }

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private ObjectFactory<T> factory;
    private int users;
    private int running;

    /**
     * The shared factory, started with {@code starter} if there is none or it
     * was closed (then this caller's settings are the factory's); one user
     * more. Every acquire is to be paired with one {@link #release}.
     *
     * @throws IOException what the starter threw (no factory then, no user counted)
     */
    public ObjectFactory<T> acquire(Starter<T> starter) throws IOException {
        if (starter == null) throw new NullPointerException("starter");
        lock.lock();
        try {
            if (factory == null || factory.isClosed()) {
                ObjectFactory<T> f = starter.start();
                if (f == null) throw new NullPointerException("starter returned null");
                factory = f;
                users = 0;
            }
            users++;
            changed.signalAll();
            return factory;
        } finally {
            lock.unlock();
        }
    }

    /**
     * One user less of {@code f} (what {@link #acquire} returned): the last
     * one closes it. A factory that is no longer the shared one is closed at
     * once. Null is ignored.
     */
    public void release(ObjectFactory<T> f) {
        if (f == null) return;
        boolean close = true;
        lock.lock();
        try {
            if (f == factory) {
                close = --users == 0;
                if (close) factory = null;
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
        if (close) f.close();
    }

    /** A consumer entered its loop (counted by {@link #await}); pair it with {@link #consumerStopped()}. */
    public void consumerStarted() {
        lock.lock();
        try {
            running++;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** A consumer left its loop. */
    public void consumerStopped() {
        lock.lock();
        try {
            if (running == 0) throw new IllegalStateException("consumerStopped without consumerStarted");
            running--;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /**
     * The shared factory once there is one and at least {@code consumers}
     * consumers are in their loops ({@link #consumerStarted()}), or null if
     * that does not happen within the timeout.
     */
    public ObjectFactory<T> await(int consumers, long timeout, TimeUnit unit) throws InterruptedException {
        long left = unit.toNanos(timeout);
        lock.lockInterruptibly();
        try {
            while (factory == null || running < consumers) {
                if (left <= 0) return null;
                left = changed.awaitNanos(left);
            }
            return factory;
        } finally {
            lock.unlock();
        }
    }

    /** The shared factory, or null when there is none (never acquired, or released by its last user). */
    public ObjectFactory<T> current() {
        lock.lock();
        try {
            return factory;
        } finally {
            lock.unlock();
        }
    }

    /** How many users hold the current factory (0 when there is none). */
    public int users() {
        lock.lock();
        try {
            return factory == null ? 0 : users;
        } finally {
            lock.unlock();
        }
    }

    /** How many consumers are in their loops. */
    public int runningConsumers() {
        lock.lock();
        try {
            return running;
        } finally {
            lock.unlock();
        }
    }
}
