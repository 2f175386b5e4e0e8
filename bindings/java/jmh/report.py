#!/usr/bin/env python3
"""Prints the table of `make bench-java` from JMH's JSON result (-rf json).

usage: report.py build/jmh.json [build/jmh-pairs.tsv]

Each JMH iteration is one shot of batchSize calls (SingleShotTime); its score
is the shot's time divided by @OperationsPerInvocation, so ns per record is
score / batchSize. The table gives the median over every shot of every fork
(as tests/c/bench.c reports medians of bursts), and the ratios and
differences the issue sets targets for, against the floor benchmarks of the
same run (same JVM flags, same mode): "x tscStore" and "- empty" are ratios
and differences of those medians.

With the pairs file (LogTSBench writes one line per iteration when
CP_JMH_PAIRS is set: a burst of each floor timed just before the shot), the
"paired" columns are the medians of each shot's ratio to, or difference
from, its neighbouring floor burst: what tests/c/bench.c reports, and far
less sensitive to another load coming and going on a shared machine. The
targets are judged on the paired values when there are some.
"""
import collections
import json
import statistics
import sys

UNIT_NS = {"s/op": 1e9, "ms/op": 1e6, "us/op": 1e3, "ns/op": 1.0}

ROWS = [
    # (method, label, kind, target) kind: floor | ratio (to tscStore) | diff (to emptyCall)
    ("floorEmptyCall", "floor: empty JNI static native", "diff", None),
    ("floorTscStore", "floor: JNI rdtscp + 16-byte store", "ratio", None),
    ("bufferedBinaryTsc", "logTS BUFFER_IDENTITY BINARY_TSC", "ratio", 1.3),
    ("bufferedZstdTsc", "logTS BUFFER_IDENTITY ZSTD_TSC", "ratio", 1.3),
    ("channelZstdTsc", "Channel.logTS BUF_ID ZSTD_TSC", "ratio", 1.3),
    ("batch1024ZstdTsc", "logTS(ch,ids,1024) ZSTD_TSC, /rec", "ratio", None),
    ("plainPairZstdTsc", "a tuple: logTS in + out, no notes", "ratio", None),
    ("pairZstdTsc", "a tuple: logTS in + out, notes", "ratio", None),
    ("marksInOut", "a tuple: Marks.in + out", "ratio", None),
    ("marksInOutMetrics", "  same, with live metrics (wrappers)", "ratio", None),
    ("nullh", "logTS NULLH", "diff", 2.0),
    ("fastPeriodicCounter", "logTS FASTPERIODICCOUNTER", "diff", 2.0),
]


def load(path):
    with open(path) as f:
        runs = json.load(f)
    out = {}
    for r in runs:
        name = r["benchmark"].rsplit(".", 1)[1]
        pm = r["primaryMetric"]
        scale = UNIT_NS[pm["scoreUnit"]] / r["measurementBatchSize"]
        out[name] = {
            "forks": [[x * scale for x in fork] for fork in pm["rawData"]],
            "jvm": " ".join(r.get("jvmArgs", [])),
        }
    return out


def load_pairs(path):
    """{benchmark: [[(empty_ns, store_ns) per measured iteration] per fork]}"""
    forks = collections.defaultdict(dict)  # benchmark -> pid -> list, in file order
    with open(path) as f:
        for line in f:
            bench, pid, kind, empty, store = line.split()
            if kind != "MEASUREMENT":
                continue
            forks[bench].setdefault(pid, []).append((float(empty), float(store)))
    return {b: list(p.values()) for b, p in forks.items()}


def attach_pairs(res, pairs):
    """Per shot: (shot_ns, empty_ns, store_ns); None if the counts differ."""
    for name, r in res.items():
        p = pairs.get(name)
        if p is None or [len(f) for f in p] != [len(f) for f in r["forks"]]:
            r["paired"] = None
            continue
        r["paired"] = [(x, e, s) for shots, fp in zip(r["forks"], p) for x, (e, s) in zip(shots, fp)]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/jmh.json"
    res = load(path)
    if len(sys.argv) > 2:
        try:
            attach_pairs(res, load_pairs(sys.argv[2]))
        except OSError as e:
            print(f"(no paired floors: {e})")
    med = {n: statistics.median([x for f in r["forks"] for x in f]) for n, r in res.items()}
    empty, store = med.get("floorEmptyCall"), med.get("floorTscStore")
    any_row = next(iter(res.values()))
    n = sum(len(f) for f in any_row["forks"])
    print(f"\nJMH SingleShotTime: shots of ~1M records into an emptied ring (CP_RING_BLOCKS=32), "
          f"{n} shots per benchmark in {len(any_row['forks'])} forks; JVM args: {any_row['jvm']}")
    print("ns per record: median of all shots, min, max, median per fork; against the floor benchmarks'")
    print("medians; paired: median over shots of the ratio to / difference from the floor burst just before it\n")
    print(f"{'benchmark':35} {'ns/op':>6} {'min':>6} {'max':>7}  {'per fork':12} "
          f"{'vs floors':>10} {'paired':>7}  target")
    missed = 0
    for method, label, kind, target in ROWS:
        r = res.get(method)
        if r is None:
            continue
        shots = [x for f in r["forks"] for x in f]
        forks = " ".join(f"{statistics.median(f):.1f}" for f in r["forks"])
        paired = r.get("paired")
        rel = pv = tgt = ""
        v = None
        if kind == "ratio" and store:
            v = med[method] / store
            rel = f"{v:.2f}x"
            if paired:
                v = statistics.median(x / s for x, e, s in paired)
                pv = f"{v:.2f}x"
            if target is not None:
                tgt = f"<= {target:.1f}x tscStore" + ("  MISSED" if v > target else "  ok")
        elif kind == "diff" and empty:
            v = med[method] - empty
            rel = f"{v:+.2f}"
            if paired:
                v = statistics.median(x - e for x, e, s in paired)
                pv = f"{v:+.2f}"
            if target is not None:
                tgt = f"<= emptyCall + {target:.0f} ns" + ("  MISSED" if v > target else "  ok")
        if target is not None and v is not None and tgt.endswith("MISSED"):
            missed += 1
        print(f"{label:35} {med[method]:6.2f} {min(shots):6.2f} {max(shots):7.2f}  {forks:12} "
              f"{rel:>10} {pv:>7}  {tgt}")
    pair, plain = med.get("pairZstdTsc"), med.get("plainPairZstdTsc")
    if pair and plain and "marksInOut" in med and "marksInOutMetrics" in med:
        m, mm = med["marksInOut"], med["marksInOutMetrics"]
        print(f"\na marked tuple (in + out): the notes of the thread's waits {pair / plain:.2f}x the same pair without them "
              f"({(pair - plain) / 2:+.2f} ns a record); Marks {m / pair:.2f}x the bare pair ({m - pair:+.2f} ns); "
              f"with live metrics {mm / pair:.2f}x ({mm - m:+.2f} ns for the metrics)")
    print("\nratios are to tscStore, differences (ns) to emptyCall; the batch row's own floor would be")
    print("rdtsc + store (LogTSMany reads rdtsc), which Baselines does not have")
    print(f"{missed} target(s) missed" if missed else "every target met")


if __name__ == "__main__":
    main()
