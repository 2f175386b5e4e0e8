"""Marked channels from Python: mark_stats (CP_MarkStats) against the
thread's own clock of the same run, and its errors."""

import ctypes
import time

import pytest

import cloudprofiler as cp
from cloudprofiler import _lib

LF, H, E = cp.LogFormat, cp.Handler, cp.ErrorCode


def test_mark_stats_struct_is_the_headers():
    s = _lib.MarkStatsStruct
    assert s.visits.offset == 0 and s.busy_s.offset == 8 and ctypes.sizeof(s) == 16


def _work(seconds):
    # Real work, not a sleep: the thread stays on its CPU (a preemption on a
    # busy machine is counted as work by the library and by this clock alike).
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def test_mark_stats_counts_work_and_leaves_the_waits_out(logdir, uname):
    op = uname.replace(" ", "_")
    chans = {k: cp.open_channel("%s#1 %s" % (op, k), LF.BINARY_TSC, H.BUFFER_IDENTITY) for k in ("in", "out", "sent")}
    try:
        first = chans["in"].mark_stats()
        assert isinstance(first, cp.MarkStats) and first.visits == 0 and first.busy_s == 0
        lo = hi = 0.0  # the worked time as this thread's clock bounds it
        n = 60
        for i in range(n):
            a = time.perf_counter()
            chans["in"].log(i)
            b = time.perf_counter()
            _work(0.0005)
            chans["out"].log(i)
            c = time.perf_counter()
            chans["sent"].log(i)
            d = time.perf_counter()
            # The instance worked from its in's timestamp to its sent's: at
            # least from after the in call to before the sent call, at most
            # from before the one to after the other.
            lo += c - b
            hi += d - a
            time.sleep(0.002)  # waits for the next tuple: the thread sleeps, a wait the library notes
        mid = chans["out"].mark_stats()  # any of the three: the instance's figures
        assert mid.visits == n
        # in to sent is work; the 2 ms sleeps before each in are waits, left out
        # (counted, busy_s would exceed hi by 0.12 s).
        assert lo * 0.98 - 0.001 <= mid.busy_s <= hi * 1.02 + 0.001, (lo, mid.busy_s, hi)
        for i in range(n, n + 20):
            chans["in"].log(i)
            _work(0.001)
            chans["out"].log(i)
            chans["sent"].log(i)
            time.sleep(0.002)
        last = chans["sent"].mark_stats()
        assert last.visits == n + 20
        cap = last.capacity_since(mid)
        assert 0 < cap <= 1000 * 1.02, "20 tuples of at least 1 ms of work each: at most 1000/s, not " + str(cap)
        assert cap >= 1000 / 3, "the 2 ms sleeps counted as work: " + str(cap)
        assert last.capacity_since(last) != last.capacity_since(last), "no work between: NaN"
    finally:
        for ch in chans.values():
            ch.close()
    with pytest.raises(cp.ChannelClosedError):
        chans["in"].mark_stats()


def test_mark_stats_of_an_unmarked_channel_says_why(uname):
    for name, handler in ((uname, H.BUFFER_IDENTITY), (uname.replace(" ", "_") + " in", H.FASTPERIODICCOUNTER)):
        with cp.open_channel(name, LF.BINARY_TSC, handler) as ch:
            with pytest.raises(cp.CloudprofilerError) as e:
                ch.mark_stats()
            assert e.value.code == E.BAD_HANDLER
            assert "not a marked OPERATOR[#INSTANCE] in, out or sent" in str(e.value)
    forged = cp.Channel._new(12345, "forged", LF.BINARY, H.BUFFER_IDENTITY, cp._lib.load())
    with pytest.raises(cp.CloudprofilerError) as e:
        forged.mark_stats()
    assert e.value.code == E.BAD_HANDLE
