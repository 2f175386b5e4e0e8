package io.cloudprofiler;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Child JVM main for SigtermTest: threads log sequential ids, each on its own
 * buffered channel, until a call is refused. Its own shutdown hook waits for
 * them to stop (the library's hook closes the channels, which refuses the
 * next call) and prints what each accepted. With "exit" it stops by
 * System.exit(0) after N records per thread without closing anything.
 */
public final class SigtermChild {
    public static void main(String[] args) throws Exception {
        String mode = args[0];
        int threads = Integer.parseInt(args[1]);
        long exitAfter = args.length > 2 ? Long.parseLong(args[2]) : Long.MAX_VALUE;
        LogFormat f = LogFormat.valueOf(System.getProperty("format", "ZSTD_TSC"));
        AtomicLong[] accepted = new AtomicLong[threads];
        int[] stop = new int[threads];
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            accepted[t] = new AtomicLong();
            long h = CloudProfiler.openChannel("child-" + mode + "-" + t, f, HandlerType.BUFFER_IDENTITY);
            final int tt = t;
            ts[t] = new Thread(() -> {
                long i = 0;
                int rc = 0;
                while (i < exitAfter) {
                    rc = CloudProfiler.logTS(h, i);
                    if (rc != 0) break;
                    i++;
                    accepted[tt].lazySet(i);
                }
                stop[tt] = rc;
            }, "logger-" + t);
            ts[t].start();
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (int t = 0; t < threads; t++) {
                try {
                    ts[t].join(20_000);
                } catch (InterruptedException e) {
                    return;
                }
                System.out.println("hook: thread " + t + " accepted=" + accepted[t].get() + " stop=" + stop[t]
                        + " alive=" + ts[t].isAlive());
            }
            System.out.flush();
        }));
        System.out.println("logging");
        System.out.flush();
        if (mode.equals("exit")) {
            for (Thread t : ts) t.join();
            System.exit(0);
        }
        Thread.sleep(600_000);
    }
}
