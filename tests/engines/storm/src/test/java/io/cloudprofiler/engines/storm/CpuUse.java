package io.cloudprofiler.engines.storm;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * What the machine's CPUs did over a range, beside what this JVM took of
 * them: the capacities here are what a task does on this shared 2-vCPU VM,
 * and they move with what else runs (another JVM, analyze, the hypervisor's
 * other guests: steal). /proc/stat's first line (USER_HZ ticks, 100 a
 * second) and the JVM's process CPU time, read at both ends.
 */
record CpuUse(long nanos, long[] ticks, long processCpuNs) {
    /** USER_HZ: /proc/stat's tick. */
    private static final double TICK_S = 0.01;

    static CpuUse now() {
        long[] t = new long[0];
        try {
            String[] f = Files.readAllLines(Path.of("/proc/stat")).get(0).trim().split("\\s+");
            t = new long[f.length - 1];
            for (int i = 1; i < f.length; i++) t[i - 1] = Long.parseLong(f[i]);
        } catch (IOException | RuntimeException e) {
            // not Linux, or unreadable: the line then says so
        }
        long cpu = ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os ? os.getProcessCpuTime() : -1;
        return new CpuUse(System.nanoTime(), t, cpu);
    }

    /** One line: CPUs busy (of how many), this JVM's share, the rest's, steal and idle, as CPUs over the range. */
    static String between(CpuUse a, CpuUse b) {
        double s = (b.nanos - a.nanos) * 1e-9;
        int cpus = Runtime.getRuntime().availableProcessors();
        double jvm = a.processCpuNs < 0 ? Double.NaN : (b.processCpuNs - a.processCpuNs) * 1e-9 / s;
        if (a.ticks.length < 8 || b.ticks.length < 8) {
            return String.format(Locale.ROOT, "this JVM used %.2f CPUs (of %d); /proc/stat unreadable", jvm, cpus);
        }
        // user nice system idle iowait irq softirq steal
        double[] d = new double[8];
        for (int i = 0; i < 8; i++) d[i] = (b.ticks[i] - a.ticks[i]) * TICK_S / s;
        double busy = d[0] + d[1] + d[2] + d[5] + d[6], accounted = 0;
        for (double x : d) accounted += x;
        // The ticks fall short of the CPUs x the range when this VM was not
        // given its CPUs (no steal accounted here, measured: 1.8 of 2 over
        // some light runs): "the rest" is then only a rough figure.
        return String.format(Locale.ROOT, "the machine's CPUs busy %.2f of %d (this JVM %.2f, the rest %.2f), steal %.2f, idle %.2f, iowait %.2f"
                + " (/proc/stat accounts for %.2f CPUs)", busy, cpus, jvm, busy - jvm, d[7], d[3], d[4], accounted);
    }
}
