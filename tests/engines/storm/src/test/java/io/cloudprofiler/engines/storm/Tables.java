package io.cloudprofiler.engines.storm;

import io.cloudprofiler.engines.storm.StormDefaultsTest.Run;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The printed comparison of one run, for each 1-decode and 2-digest task
 * and operator: capacity (ours, the split truth, the secondary truths, the
 * live gauge, Storm UI, and the ratios to the split truth), busy share (the
 * same sources), then what the departure logs and the live gauge saw per
 * task, what the sampler saw each executor thread do, and the checks'
 * outcomes ({@link Checks}).
 *
 * <p>An operator's capacity: ours is capacity.csv's operator row, the rate
 * its tasks sustain given how the grouping shares the tuples (the smallest
 * capacity over share), set against the same figure of the split truth
 * (skew-aware); the truths', the gauge's and Storm UI's sums over the tasks
 * are beside it. An operator's busy shares are its tasks' mean (ours too).
 *
 * <p>The truths, never from the marks:
 * <ul>
 * <li><b>TRUE CAPACITY (split)</b> ({@link SplitTruth}), the headline: the
 * gaps between a task's departures (the times its execute ended), each
 * service unless the sampler saw the thread parked in it; "service": the
 * share of its gaps counted; "GC s": the JVM's pauses inside them (counted
 * as service: a stopped thread stays RUNNABLE);</li>
 * <li><b>G = 20, 5, 50 ms</b> ({@link Departures}, secondary): the same
 * gaps, those below G counted;</li>
 * <li><b>thread states</b> ({@link TruthSampler}, secondary): departures a
 * second in the sample pairs (about 1 ms apart) where the executor thread
 * was RUNNABLE at both ends. "rests on": the share of the departures that
 * fell in those pairs.</li>
 * </ul>
 */
final class Tables {
    private Tables() {}

    static final int[] G_MS = {Departures.HEADLINE_MS, Departures.LOW_MS, Departures.HIGH_MS};
    /** "Back to back": a gap below this. */
    static final long B2B_NS = Departures.MS;

    record Ours(double capacity, double load, double busy, String backlogged, String note) {}

    /**
     * The split truth: capacity (a task's; an operator's skew-aware, as
     * capacity.csv's operator row), the tasks' sum, busy share, the share
     * of the gaps counted as service, the GC time inside them (s); and, a
     * diagnostic, the capacity (a task's, an operator's skew-aware) and busy
     * share with that GC time taken out.
     */
    record SplitNums(double capacity, double sum, double busy, double service, double gcS, double capacityWithoutGc,
                     double busyWithoutGc) {}

    /** The secondary departure truth: capacity at G = 20, 5, 50 ms; busy share at 20 ms; the share of its busy time back to back. */
    record DepNums(double[] capacity, double busy, double b2bTime) {}

    record TruthNums(double capacity, double busy, double restsOn) {}

    record StormNums(double busyShare, double rate) {}

    /** gauge: the median of the live gauge's reads in the range; gaugeTruth: the split truth's median over the same spans (Checks.Gauge). */
    record Line(String key, Ours ours, SplitNums split, DepNums dep, TruthNums states, StormNums storm, double gauge, double gaugeTruth) {}

    static Line line(Run r, String key) {
        Analysis a = r.analysis;
        String backlogged = a.text(key, "backlogged");
        Ours ours = new Ours(a.num(key, "capacity"), a.num(key, "load"), a.num(key, "busy_share"),
                backlogged == null || backlogged.isEmpty() ? "-" : backlogged, a.row(key) == null ? "(no row)" : a.text(key, "note"));
        boolean operator = !key.contains("#");
        List<String> tasks = operator ? r.tasks(key) : List.of(key);
        double cap = 0, busy = 0, stormBusy = 0, stormRate = 0, gauge = 0, gaugeTruth = 0;
        double splitSum = 0, splitBusy = 0, gcS = 0, splitSumWithoutGc = 0, splitBusyWithoutGc = 0;
        long serviceGaps = 0, gaps = 0;
        double[] depCap = new double[G_MS.length];
        double depBusy = 0, b2bTime = 0, busyNs = 0;
        long departures = 0, busyDepartures = 0;
        for (String t : tasks) {
            SplitTruth.Split sp = r.split(t);
            splitSum += sp.capacity();
            splitBusy += sp.busyShare() / tasks.size();
            splitSumWithoutGc += sp.capacityWithoutGc();
            splitBusyWithoutGc += sp.busyShareWithoutGc() / tasks.size();
            serviceGaps += sp.serviceGaps();
            gaps += sp.serviceGaps() + sp.parkedGaps();
            gcS += sp.gcNs() * 1e-9;
            TruthSampler.Truth tt = r.truth.get(t);
            cap += tt.capacity();
            busy += tt.busyShare() / tasks.size();
            departures += tt.departures();
            busyDepartures += tt.busyDepartures();
            Departures d = r.departures.get(t);
            for (int i = 0; i < G_MS.length; i++) depCap[i] += d.capacity(G_MS[i]);
            depBusy += d.busyShare(Departures.HEADLINE_MS) / tasks.size();
            // the time share back to back: the tasks' weighted by their busy time
            double taskBusyNs = d.gaps(Departures.HEADLINE_MS * Departures.MS).belowNs();
            b2bTime += d.timeShareBelow(Departures.HEADLINE_MS * Departures.MS, 2 * r.saturationMedianGapNs(t)) * taskBusyNs;
            busyNs += taskBusyNs;
            Checks.Gauge g = Checks.Gauge.of(r, t);
            gauge += g == null ? Double.NaN : g.median();
            gaugeTruth += g == null ? Double.NaN : g.truthMedian();
            StormUi.Ui u = r.ui(t);
            stormBusy += u.busyShare() / tasks.size();
            stormRate += u.rate();
        }
        double splitCap = operator ? r.splitSkewAware(key) : splitSum;
        double withoutGc = operator ? r.splitSkewAwareWithoutGc(key) : splitSumWithoutGc;
        return new Line(key, ours, new SplitNums(splitCap, splitSum, splitBusy, serviceGaps / (double) gaps, gcS, withoutGc,
                splitBusyWithoutGc), new DepNums(depCap, depBusy, b2bTime / busyNs), new TruthNums(cap, busy, busyDepartures / (double) departures),
                new StormNums(stormBusy, stormRate), gauge, gaugeTruth);
    }

    /** The gauge's reads of a task; empty for H (or when it was not read). */
    static List<CapacityGauges.Read> reads(Run r, String task) {
        return r.gauges == null ? List.of() : r.gauges.getOrDefault(task, List.of());
    }

    /**
     * The last read that had a value. The very last one, after the drain,
     * has none for a task that was done more than a second before the range
     * ended (fewer than 10 tuples in the gauge's span).
     */
    static CapacityGauges.Read lastValued(Run r, String task) {
        List<CapacityGauges.Read> l = reads(r, task);
        for (int i = l.size() - 1; i >= 0; i--) {
            if (!Double.isNaN(l.get(i).value())) return l.get(i);
        }
        return null;
    }

    /** The split truth over a read's span; NaN when the span is unknown. */
    static double truthOverSpan(Run r, String task, CapacityGauges.Read x) {
        return x.spanFrom() == 0 ? Double.NaN : r.split(task, x.spanFrom(), x.at()).capacity();
    }

    /** The JVM's collections in the range: they stop every task at once (GcPauses). */
    static String gcLine(Run r) {
        long n = r.gc.size(), total = 0, longest = 0, over20 = 0;
        for (GcPauses.Pause p : r.gc) {
            total += p.durationNs();
            longest = Math.max(longest, p.durationNs());
            if (p.durationNs() >= Departures.HEADLINE_MS * Departures.MS) over20++;
        }
        StringBuilder l = new StringBuilder();
        for (GcPauses.Pause p : r.gc) {
            if (p.durationNs() >= Departures.HEADLINE_MS * Departures.MS) {
                l.append(String.format(Locale.ROOT, " %.2f s +%d ms;", (p.startNs() - r.openNs) * 1e-9, p.durationNs() / Departures.MS));
            }
        }
        return String.format(Locale.ROOT, "  GC: the JVM's collections in the range: %d, %.3f s in all (%.1f%% of the range), the longest %d ms;"
                + " the split truth counts them as service (CAPACITY's \"GC s\"); %d of 20 ms or more (from the gate's opening):%s%n",
                n, total * 1e-9, 100 * total * 1e-9 / r.rangeS, longest / Departures.MS, over20, l.length() == 0 ? " none" : l.toString());
    }

    /** The bolt whose tasks the split truth has busy the largest share of the range (the harness's design: 2-digest). */
    static String trueBottleneck(Run r) {
        String best = null;
        double most = -1;
        for (String c : StormDefaultsTest.MEASURED) {
            List<String> tasks = r.tasks(c);
            if (tasks.isEmpty()) continue;
            double busy = 0;
            for (String t : tasks) busy += r.split(t).busyShare() / tasks.size();
            if (busy > most) {
                most = busy;
                best = c;
            }
        }
        return best;
    }

    /** The 1-decode and 2-digest tasks and operators, in the tables' order. */
    static List<String> keys(Run r) {
        List<String> keys = new ArrayList<>();
        for (String c : StormDefaultsTest.MEASURED) {
            keys.addAll(r.tasks(c));
            keys.add(c);
        }
        return keys;
    }

    static String run(Run r) {
        StringBuilder b = new StringBuilder();
        boolean wrapped = r.variant == DigestTopology.Variant.WRAPPED;
        String variant = wrapped ? "wrapped bolts (Profiled.spout, Profiled.bolt)" : "task hook alone (MarkingHook)";
        String offered = r.rate == 0 ? "unthrottled"
                : String.format(Locale.ROOT, "offered %,.0f tuples/s in bursts of %,.0f every %.0f ms", r.rate, r.rate * r.burstMs / 1e3, r.burstMs);
        b.append(String.format(Locale.ROOT, "%n==== run %s: %s, %s%n", r.name, variant, offered));
        b.append(String.format(Locale.ROOT,
                "  range %.2f s (gate open %.2f s, then drain %.2f s%s); emitted %,d (%,.0f/s while open), carried %,.0f/s over the range;"
                        + " acked %,d, failed %,d; 2-digest kept %,d (%.4f), 3-store took %,d; the warm-up drained in %.2f s%s%n",
                r.rangeS, r.emitS, r.drainS, r.drained ? "" : ", NOT DRAINED", r.emitted, r.emitted / r.emitS, r.carried(), r.acked, r.failed,
                r.kept, r.kept / (double) r.emitted, r.stored, r.warmUpDrainS, r.warmUpDrained ? "" : " (NOT DRAINED)"));
        b.append(String.format(Locale.ROOT, "  Storm stats: heartbeats at worker uptime %d s (start) and %d s (end)%s; marking failures %d; %d log files%n",
                r.uiStart.uptime(), r.uiEnd.uptime(), r.uiFinal ? "" : ", END NOT CONFIRMED FINAL", r.markingFailures, r.logFiles.size()));
        b.append(String.format(Locale.ROOT, "  analyze exit %d; bottleneck named in capacity.csv: %s; the split truth's busiest bolt: %s%n",
                r.analysis.exitCode, r.analysis.bottleneck() == null ? "none" : r.analysis.bottleneck(), trueBottleneck(r)));
        b.append("  over the range, ").append(r.cpu).append('\n');
        b.append(gcLine(r));
        b.append(String.format(Locale.ROOT, "  the truth's sampler: a sweep every %.2f ms (median), %.2f ms (99th percentile), %.1f ms at the longest%n",
                r.samplerGaps[0] / 1e6, r.samplerGaps[1] / 1e6, r.samplerGaps[2] / 1e6));
        for (String l : r.analysis.summaryLines("Bottleneck", "Where the p99 goes")) b.append("  summary.txt: ").append(l).append('\n');
        List<Line> lines = keys(r).stream().map(k -> line(r, k)).toList();

        // ---- capacity
        b.append("  CAPACITY, tuples/s (a task's while it has a backlog; ratios: x / the split truth)\n");
        b.append(String.format(Locale.ROOT, "  %-12s | %-24s | %-45s | %-26s | %-17s | %9s | %9s | %-20s | %s%n", "",
                "ours (capacity.csv)", "TRUE CAPACITY (split)", "departures, G =", "thread states", "live", "Storm UI",
                "/ split truth", ""));
        b.append(String.format(Locale.ROOT, "  %-12s | %9s %5s %8s | %9s %9s %7s %6s %9s | %8s %8s %8s | %9s %7s | %9s | %9s | %6s %6s %6s | %s%n", "row",
                "capacity", "load", "backlog", "capacity", "tasks' sum", "service", "GC s", "w/o GC", "20 ms", "5 ms", "50 ms", "capacity", "rests",
                "gauge", "rate/s", "ours", "gauge", "storm", "ours' note"));
        for (Line l : lines) {
            double t = l.split.capacity(), sum = l.split.sum();
            b.append(String.format(Locale.ROOT, "  %-12s | %9s %5s %8s | %9s %9s %7s %6s %9s | %8s %8s %8s | %9s %7s | %9s | %9s | %6s %6s %6s | %s%n", l.key,
                    rate(l.ours.capacity()), num(l.ours.load(), 2), l.ours.backlogged(),
                    rate(t), rate(sum), num(l.split.service(), 3), num(l.split.gcS(), 3), rate(l.split.capacityWithoutGc()),
                    rate(l.dep.capacity()[0]), rate(l.dep.capacity()[1]), rate(l.dep.capacity()[2]),
                    rate(l.states.capacity()), num(l.states.restsOn(), 3), rate(l.gauge), rate(l.storm.rate()),
                    num(l.ours.capacity() / t, 2), num(l.gauge / l.gaugeTruth, 2), num(l.storm.rate() / sum, 2),
                    l.ours.note() == null ? "" : l.ours.note()));
        }
        b.append("  (an operator row: ours, TRUE CAPACITY and w/o GC are the source rate its tasks sustain given how the grouping shares the\n"
                + "   tuples, the smallest capacity over share (2-digest: about 2 x the slower task); the truths' other columns, the gauge and Storm UI\n"
                + "   are the tasks' sums, Storm UI's ratio is to the split truth's sum. service: the share of the departure gaps counted as service;\n"
                + "   GC s: the JVM's pauses inside them; w/o GC: the capacity with them taken out (a diagnostic). live gauge (W): the median of its\n"
                + "   reads in the range, its ratio to the split truth's median over the same reads' spans, as the check takes it)\n");

        // ---- busy share
        b.append("  BUSY SHARE of the range (an operator's: its tasks' mean)\n");
        b.append(String.format(Locale.ROOT, "  %-12s | %10s | %-20s | %9s %14s | %9s | %-17s | %s%n", "row", "ours", "SPLIT TRUTH", "G=20ms",
                "thread states", "Storm UI", "minus the truth", "minus the truth w/o GC"));
        b.append(String.format(Locale.ROOT, "  %-12s | %10s | %10s %9s | %9s %14s | %9s | %8s %8s | %8s %8s%n", "", "busy_share", "service", "w/o GC",
                "gaps<20ms", "RUNNABLE pairs", "exec.lat.", "ours", "storm", "ours", "storm"));
        for (Line l : lines) {
            b.append(String.format(Locale.ROOT, "  %-12s | %10s | %10s %9s | %9s %14s | %9s | %8s %8s | %8s %8s%n", l.key, num(l.ours.busy(), 3),
                    num(l.split.busy(), 3), num(l.split.busyWithoutGc(), 3), num(l.dep.busy(), 3), num(l.states.busy(), 3),
                    num(l.storm.busyShare(), 3), signed(l.ours.busy() - l.split.busy()), signed(l.storm.busyShare() - l.split.busy()),
                    signed(l.ours.busy() - l.split.busyWithoutGc()), signed(l.storm.busyShare() - l.split.busyWithoutGc())));
        }

        // ---- the departure logs
        b.append("  departures as the bolts logged them (System.nanoTime() as execute ends): the gaps the split truth left out (the thread parked in them:\n"
                + "  n, s; of them seen only by the JVM's count of waits); the gaps of G or more (n, s) the G truths leave out, those of 20 ms or more\n"
                + "  that hold a GC; back to back: the share of departures whose gap to the previous is below 1 ms, and below 2x the task's median gap at\n"
                + "  saturation (the unthrottled run's); b2b time: the share of the G=20 truth's busy time in gaps below 2x that median\n");
        b.append(String.format(Locale.ROOT, "  %-12s %9s %8s %10s %8s | %14s %7s | %14s %14s %14s | %14s | %8s %9s %8s %8s%n", "task", "logged", "overflow",
                "throughput", "median", "parked", "unseen", ">= 5 ms", ">= 20 ms", ">= 50 ms", ">= 20 ms with", "b2b", "2x sat.", "b2b", "b2b time"));
        b.append(String.format(Locale.ROOT, "  %-12s %9s %8s %10s %8s | %14s %7s | %14s %14s %14s | %14s | %8s %9s %8s %8s%n", "", "", "", "/s", "gap us",
                "n, s", "n", "n, s", "n, s", "n, s", "a GC: n, s", "< 1 ms", "median us", "< 2x sat", "< 2x sat"));
        long[] gcStarts = r.gc.stream().mapToLong(GcPauses.Pause::startNs).toArray();
        long[] gcEnds = r.gc.stream().mapToLong(GcPauses.Pause::endNs).toArray();
        for (Departures d : r.departures.values()) {
            long sat = r.saturationMedianGapNs(d.task);
            SplitTruth.Split sp = r.split(d.task);
            StringBuilder gaps = new StringBuilder();
            for (int g : new int[] {Departures.LOW_MS, Departures.HEADLINE_MS, Departures.HIGH_MS}) {
                Departures.Gaps x = d.gaps(g * Departures.MS);
                gaps.append(String.format(Locale.ROOT, " %14s", String.format(Locale.ROOT, "%,d, %.3f", x.above(), x.aboveNs() * 1e-9)));
            }
            long[] inGc = d.aboveOverlapping(Departures.HEADLINE_MS * Departures.MS, gcStarts, gcEnds);
            b.append(String.format(Locale.ROOT, "  %-12s %9s %8s %10s %8s | %14s %7d |%s | %14s | %8s %9s %8s %8s%n", d.task,
                    String.format(Locale.ROOT, "%,d", d.departures()),
                    d.overflow == 0 ? "0" : String.format(Locale.ROOT, "%,d !", d.overflow), rate(d.throughput()), num(d.medianGapNs() / 1e3, 1),
                    String.format(Locale.ROOT, "%,d, %.3f", sp.parkedGaps(), sp.parkedNs() * 1e-9), sp.unseenGaps(),
                    gaps, String.format(Locale.ROOT, "%,d, %.3f", inGc[0], inGc[1] * 1e-9), num(d.shareBelow(B2B_NS), 3),
                    num(sat / 1e3, 1), num(d.shareBelow(2 * sat), 3), num(d.timeShareBelow(Departures.HEADLINE_MS * Departures.MS, 2 * sat), 3)));
        }
        long overflow = r.departures.values().stream().mapToLong(d -> d.overflow).sum();
        if (overflow > 0) {
            b.append(String.format(Locale.ROOT, "  ! %,d departures did not fit the logs (%,d a task): the truths are of the first ones only%n",
                    overflow, DigestTopology.DEPARTURE_LOG));
        }

        // ---- the live gauge
        if (wrapped) gauges(b, r);

        // ---- the executor threads
        b.append("  executor threads as the sampler saw them (share of samples in each state; busy = RUNNABLE at both ends of a pair):\n");
        b.append(String.format(Locale.ROOT, "  %-12s %7s %8s %7s %7s %7s | %6s %6s %8s %17s | %10s %9s%n", "task", "samples", "RUNNABLE",
                "TIMED_W", "WAITING", "BLOCKED", "busy", "busy", "busy s,", "departures in", "user code", "Storm UI"));
        b.append(String.format(Locale.ROOT, "  %-12s %7s %8s %7s %7s %7s | %6s %6s %8s %17s | %10s %9s%n", "", "", "", "", "", "", "pairs",
                "s", "no dep.", "pairs not busy", "alone /s", "executed"));
        for (TruthSampler.Truth t : r.truth.values()) {
            StormUi.Ui u = DigestTopology.BOLTS.contains(t.task().substring(0, t.task().indexOf('#'))) ? r.ui(t.task()) : null;
            b.append(String.format(Locale.ROOT, "  %-12s %7d %8.3f %7.3f %7.3f %7.3f | %6d %6.3f %8.3f %17s | %10s %9s%n", t.task(), t.samples(),
                    t.stateShare(Thread.State.RUNNABLE), t.stateShare(Thread.State.TIMED_WAITING), t.stateShare(Thread.State.WAITING),
                    t.stateShare(Thread.State.BLOCKED), t.busyPairs(), t.busyS(), t.runnableNoProgressS(),
                    String.format(Locale.ROOT, "%,d/%,d", t.departuresWhileNotBusy(), t.departures()), rate(t.userRate()),
                    u == null ? "-" : String.format(Locale.ROOT, "%,d", u.executed())));
        }

        // ---- the checks
        List<Checks.Outcome> checks = Checks.of(r);
        long failed = checks.stream().filter(c -> !c.ok()).count();
        b.append(String.format(Locale.ROOT, "  CHECKS (issue 43): %d of %d passed%n", checks.size() - failed, checks.size()));
        for (Checks.Outcome c : checks) b.append("    ").append(c).append('\n');
        b.append(String.format(Locale.ROOT, "  run took %.1f s (warm-up, logged range, stats, kills, analyze); raw outputs in %s%n", r.seconds, r.dir));
        return b.toString();
    }

    /**
     * The live gauge per task: what the check takes (the median of its
     * reads in the range, against the split truth's median over the same
     * reads' spans: {@link Checks.Gauge}), every read against the split
     * truth over its own span (the median of the ratios, their range), the
     * split truth over all the span the reads cover (printed, not checked),
     * and its last read with a value against the truth over that read's
     * span.
     */
    static void gauges(StringBuilder b, Run r) {
        if (r.gauges == null) {
            b.append("  live gauge cloudprofiler.capacity: NOT READ (Storm never prepared the reporter CapacityGauges for this topology)\n");
            return;
        }
        b.append(String.format(Locale.ROOT, "  live gauge %s, read every %d ms through Storm's metrics v2 registry (each value: the last second or so)%n",
                CapacityGauges.GAUGE, CapacityGauges.PERIOD_MS));
        b.append(String.format(Locale.ROOT, "  %-12s %5s %6s | %9s %9s %6s | %6s %13s | %13s %9s %6s | %9s %13s %9s %6s%n", "task", "reads", "judged",
                "median", "split", "gauge/", "each /", "", "their span, s", "split", "median", "last", "its span, s", "split", "gauge/"));
        b.append(String.format(Locale.ROOT, "  %-12s %5s %6s | %9s %9s %6s | %6s %13s | %13s %9s %6s | %9s %13s %9s %6s%n", "", "", "",
                "of reads", "median", "split", "median", "min .. max", "(gate open 0)", "over it", "/ it", "value", "", "truth", "truth"));
        for (String task : r.split.keySet()) gaugeLine(b, r, task);
    }

    private static void gaugeLine(StringBuilder b, Run r, String task) {
        List<CapacityGauges.Read> all = reads(r, task);
        Checks.Gauge g = Checks.Gauge.of(r, task);
        CapacityGauges.Read last = lastValued(r, task);
        if (g == null || last == null) {
            b.append(String.format(Locale.ROOT, "  %-12s %5d | no read with a value and a known span in the range%n", task, all.size()));
            return;
        }
        double lastTruth = truthOverSpan(r, task, last);
        String lastSpan = last.spanFrom() == 0 ? "-"
                : String.format(Locale.ROOT, "%.2f..%.2f", (last.spanFrom() - r.openNs) * 1e-9, (last.at() - r.openNs) * 1e-9);
        b.append(String.format(Locale.ROOT, "  %-12s %5d %6d | %9s %9s %6s | %6s %13s | %13s %9s %6s | %9s %13s %9s %6s%n", task, all.size(), g.reads(),
                rate(g.median()), rate(g.truthMedian()), num(g.median() / g.truthMedian(), 2), num(g.ratioMedian(), 2),
                num(g.ratioMin(), 2) + " .. " + num(g.ratioMax(), 2),
                String.format(Locale.ROOT, "%.2f..%.2f", (g.from() - r.openNs) * 1e-9, (g.to() - r.openNs) * 1e-9), rate(g.truthWhole()),
                num(g.median() / g.truthWhole(), 2), rate(last.value()), lastSpan, rate(lastTruth), num(last.value() / lastTruth, 2)));
    }

    static String rate(double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? "-" : String.format(Locale.ROOT, "%,.0f", v);
    }

    static String num(double v, int digits) {
        return Double.isNaN(v) || Double.isInfinite(v) ? "-" : String.format(Locale.ROOT, "%." + digits + "f", v);
    }

    /** A difference of shares, signed: "+0.012". */
    static String signed(double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? "-" : String.format(Locale.ROOT, "%+.3f", v);
    }

    /** A ratio's distance from 1 as a signed percentage: "+2.3%"; "none" without a number. */
    static String signedPct(double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? "none" : String.format(Locale.ROOT, "%+.1f%%", 100 * v);
    }
}
