"""Benchmark of the Python binding: ns per record of Channel.log_many next to
floors measured in the same run, and read_log's time and memory.

    CLOUDPROFILER_LIB=build/libcloudprofiler.so build/pyenv/bin/python bindings/python/bench.py [--bursts 15] [--read 100000000]

Rows (median over bursts of 1M ids; a pause after each burst lets the
background drain work, as `make bench` does; CP_RING_BLOCKS=32 holds a burst):
  log_many(numpy int64)     the binding: conversion check + one ctypes call
  LogTSMany via raw ctypes  the same C call with a prepared pointer: the floor
                            of any Python binding of this library
  log_many(array.array/bytes/list)  other inputs (a list is converted once)
  log() per id              one ctypes call per record
  ctypes call, NULLH n=1    the fixed cost of one call
The library's own C figure (rdtsc + store floor) is in `make bench`.
--read N also writes N records (ZSTD_TSC) and reads them back with
read_log in a fresh process, printing ns/record and peak RSS next to the
array's size: one copy (decoded straight into the array) means peak ~
baseline + array.
"""

import argparse
import array
import ctypes
import os
import resource
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("CP_RING_BLOCKS", "32")
os.environ.setdefault("CP_CONF_SERVER", "")

import numpy as np  # noqa: E402

import cloudprofiler as cp  # noqa: E402
from cloudprofiler import _lib  # noqa: E402

N = 1_000_000


def median_ns_per(fn, n, bursts, pause):
    out = []
    for _ in range(bursts):
        t = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t) / n)
        time.sleep(pause)
    return float(np.median(out)), min(out)


def read_only(path):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t = time.perf_counter()
    records, header = cp.read_log(path)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    n = len(records)
    assert records["tuple_id"][-1] == n - 1 and records["tuple_id"][0] == 0
    print("read_log: %d records in %.2f s, %.1f ns/record; array %.0f MiB, peak RSS %.0f MiB -> %.0f MiB "
          "(+%.0f MiB, %.2fx the array)" % (n, dt, dt * 1e9 / n, records.nbytes / 2**20, before / 2**20,
                                            after / 2**20, (after - before) / 2**20,
                                            (after - before) / records.nbytes))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bursts", type=int, default=15)
    ap.add_argument("--pause", type=float, default=0.15)
    ap.add_argument("--read", type=int, default=0, metavar="N")
    ap.add_argument("--read-only", metavar="FILE")
    a = ap.parse_args()
    if a.read_only:
        return read_only(a.read_only)
    d = tempfile.mkdtemp(prefix="cp-pybench-")
    os.environ["CP_LOG_DIR"] = d
    ids = np.arange(N, dtype=np.int64)
    aa = array.array("q", ids.tobytes())
    by = ids.tobytes()
    lst = ids.tolist()
    lib = _lib.load()
    raw = lib.LogTSMany
    ptr = ids.ctypes.data
    rows = []
    with cp.open_channel("bench", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY) as ch, \
            cp.open_channel("bench-null", cp.LogFormat.ZSTD_TSC, cp.Handler.NULLH) as null:
        ch.log_many(ids)  # warm-up lap: first touch of the ring's pages
        ch.log_many(ids)
        time.sleep(0.5)
        h = ch.handle
        # Interleave the binding and the raw call burst by burst.
        wrap, flo = [], []
        for _ in range(a.bursts):
            t = time.perf_counter_ns(); ch.log_many(ids); wrap.append((time.perf_counter_ns() - t) / N)
            time.sleep(a.pause)
            t = time.perf_counter_ns(); raw(h, ptr, N, None); flo.append((time.perf_counter_ns() - t) / N)
            time.sleep(a.pause)
        w, f = float(np.median(wrap)), float(np.median(flo))
        rows.append(("log_many(numpy int64), 1M ids", w, "%.2fx the raw call" % (w / f)))
        rows.append(("LogTSMany via raw ctypes (floor), 1M ids", f, "min %.1f" % min(flo)))
        for what, x in (("log_many(array.array('q'))", aa), ("log_many(bytes)", by), ("log_many(list of int)", lst)):
            m, _ = median_ns_per(lambda: ch.log_many(x), N, max(3, a.bursts // 3), a.pause)
            rows.append((what + ", 1M ids", m, "%.2fx the raw call" % (m / f)))
        k = 200_000
        m, _ = median_ns_per(lambda: [ch.log(i) for i in range(k)], k, 3, a.pause)
        rows.append(("log() per id", m, "one ctypes call each"))
        one = np.arange(1, dtype=np.int64)
        p1 = one.ctypes.data
        nh = null.handle
        m, _ = median_ns_per(lambda: [raw(nh, p1, 1, None) for _ in range(k)], k, 3, 0)
        rows.append(("ctypes call LogTSMany(NULLH, n=1)", m, "fixed cost of a call"))
        m, _ = median_ns_per(lambda: [null.log_many(one) for _ in range(k)], k, 3, 0)
        rows.append(("log_many(1 id) on NULLH", m, "fixed cost of the binding's call"))
    print("Python %s, numpy %s, %s" % (sys.version.split()[0], np.__version__, _lib.library_path()))
    print("%-44s %12s" % ("what", "ns/record"))
    for what, ns, note in rows:
        print("%-44s %12.1f   %s" % (what, ns, note))
    if a.read:
        path = None
        with cp.open_channel("bench-read", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY) as ch:
            chunk = np.arange(N, dtype=np.int64)
            for i in range(0, a.read, N):
                k = min(N, a.read - i)
                ch.log_many(chunk[:k] + i if i else chunk[:k])
        path = [os.path.join(d, f) for f in os.listdir(d) if f.endswith("bench-read.cplog")][0]
        print("wrote %d records: %s, %.1f MiB" % (a.read, path, os.path.getsize(path) / 2**20))
        subprocess.run([sys.executable, __file__, "--read-only", path], check=True)
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))
    os.rmdir(d)


if __name__ == "__main__":
    main()
