package io.cloudprofiler.engines.storm;

import com.sun.management.GarbageCollectionNotificationInfo;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import javax.management.ListenerNotFoundException;
import javax.management.Notification;
import javax.management.NotificationEmitter;
import javax.management.NotificationListener;
import javax.management.openmbean.CompositeData;

/**
 * The JVM's garbage collections, as the JVM notifies them: the LocalCluster
 * runs every task in the test's JVM, so a stop-the-world pause stops every
 * executor at once, and shows in every task's departures as the same gap.
 * The tables use them to tell such gaps from a task waiting for input.
 *
 * <p>A notification's start is in milliseconds of JVM uptime; it is put on
 * System.nanoTime()'s scale from one reading of both, so a pause's place is
 * known to about a millisecond. With G1 (JDK 17) each collection of "G1
 * Young Generation" or "G1 Old Generation" is a pause; its duration is the
 * pause's.
 */
final class GcPauses implements NotificationListener {
    /** One collection: start (System.nanoTime() scale), duration, which collector, why. */
    record Pause(long startNs, long durationNs, String gc, String cause) {
        long endNs() {
            return startNs + durationNs;
        }
    }

    private final long uptimeMs0, nanos0;
    private final List<Pause> pauses = new ArrayList<>();
    private final List<NotificationEmitter> emitters = new ArrayList<>();

    private GcPauses() {
        uptimeMs0 = ManagementFactory.getRuntimeMXBean().getUptime();
        nanos0 = System.nanoTime();
    }

    /** Starts listening to every collector. */
    static GcPauses start() {
        GcPauses p = new GcPauses();
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            if (gc instanceof NotificationEmitter e) {
                e.addNotificationListener(p, null, null);
                p.emitters.add(e);
            }
        }
        return p;
    }

    /** Stops listening; the collections seen, in order. */
    synchronized List<Pause> stop() {
        for (NotificationEmitter e : emitters) {
            try {
                e.removeNotificationListener(this);
            } catch (ListenerNotFoundException ignored) {
                // never added: nothing to remove
            }
        }
        return List.copyOf(pauses);
    }

    @Override
    public synchronized void handleNotification(Notification n, Object handback) {
        if (!GarbageCollectionNotificationInfo.GARBAGE_COLLECTION_NOTIFICATION.equals(n.getType())) return;
        GarbageCollectionNotificationInfo info = GarbageCollectionNotificationInfo.from((CompositeData) n.getUserData());
        long start = nanos0 + (info.getGcInfo().getStartTime() - uptimeMs0) * 1_000_000L;
        pauses.add(new Pause(start, info.getGcInfo().getDuration() * 1_000_000L, info.getGcName(), info.getGcCause()));
    }
}
