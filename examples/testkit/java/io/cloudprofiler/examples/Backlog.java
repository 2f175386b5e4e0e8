package io.cloudprofiler.examples;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Test code the Flink and Storm examples' tests share (compiled into each
 * one's tests, pom.xml's build-helper): a truth worked out of the raw
 * records, independent of the analysis it checks.
 */
public final class Backlog {
    private Backlog() {}

    /**
     * An instance's departures per second while backlogged: its visits by
     * their in (tuple id to TSC), each departing at dep; a visit taken while
     * backlogged when its hand-off (the upstream's record of the tuple)
     * came no later than the previous visit's departure. Returns the rate,
     * the backlogged visits and all visits with a departure.
     */
    public static double[] departures(Map<Long, Long> in, Map<Long, Long> dep, Map<Long, Long> hand, double hz) {
        List<long[]> visits = new ArrayList<>();
        for (Map.Entry<Long, Long> t : in.entrySet()) {
            Long d = dep.get(t.getKey()), h = hand.get(t.getKey());
            if (d != null) visits.add(new long[] {t.getValue(), d, h == null ? Long.MAX_VALUE : h});
        }
        visits.sort((a, b) -> Long.compare(a[0], b[0]));
        long n = 0, cycles = 0;
        for (int k = 1; k < visits.size(); k++) {
            long[] v = visits.get(k), prev = visits.get(k - 1);
            if (v[2] <= prev[1] && v[1] >= prev[1]) {
                n++;
                cycles += v[1] - prev[1];
            }
        }
        return new double[] {n / (cycles / hz), n, visits.size()};
    }
}
