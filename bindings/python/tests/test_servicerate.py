"""SERVICERATE channels from Python: mark_blocked, service_rate, the
Blocked and Arg.SR_* constants against the header, and every function of
the header declared in _lib.PROTOTYPES."""

import ctypes
import os
import re
import time

import numpy as np
import pytest

import cloudprofiler as cp
from cloudprofiler import _lib
from conftest import REPO, find_log

LF, H, E = cp.LogFormat, cp.Handler, cp.ErrorCode
HEADER = os.path.join(REPO, "capi", "cloudprofiler.h")


def header_text():
    with open(HEADER) as f:
        return f.read()


def header_enum(name):
    h = header_text()
    body = h[h.index("enum %s {" % name):]
    body = body[:body.index("};")]
    return {k: int(v) for k, v in re.findall(r"CP_(\w+)\s*=\s*(-?\d+)", body)}


def test_every_header_function_is_declared():
    # Function prototypes: a return type, a name, "(" at the start of a line.
    names = set(re.findall(r"^(?:const\s+)?\w+\s*\*?\s*(\w+)\s*\(", header_text(), re.M))
    assert {"OpenChannel", "LogTS", "CP_MarkBlocked", "CP_ServiceRate"} <= names
    assert names == set(_lib.PROTOTYPES), "declare each in _lib.PROTOTYPES"


def test_constants_match_the_header():
    assert {"BLOCKED_" + m.name: int(m) for m in cp.Blocked} == header_enum("cp_blocked")
    assert {m.name: int(m) for m in H} == header_enum("cp_handler_type")
    args = header_enum("cp_arg")
    assert {("ARG_" + m.name if m.name.startswith("DROP") or m.name.startswith("SR_") else m.name): int(m)
            for m in cp.Arg} == args
    assert cp.Blocked.INPUT | cp.Blocked.OUTPUT == 3


def test_service_rate_struct_is_the_headers():
    # cp_service_rate_t: 3 doubles, 3 int64, 2 int32, a double.
    s = _lib.ServiceRateStruct
    assert s.rate.offset == 0 and s.period_s.offset == 16 and s.samples.offset == 24
    assert s.convergences.offset == 40 and s.converged.offset == 48 and s.reserved.offset == 52
    assert s.mean.offset == 56
    assert ctypes.sizeof(s) == 64


def test_mark_blocked_and_service_rate(logdir, uname):
    with cp.open_channel(uname, LF.BINARY_TSC, H.SERVICERATE) as ch:
        sr = ch.service_rate()
        assert isinstance(sr, cp.ServiceRate)
        assert sr.period_s == pytest.approx(0.001) and sr.rate == 0 and sr.converged is False and sr.mean == 0
        for which in (cp.Blocked.INPUT, cp.Blocked.OUTPUT, cp.Blocked.INPUT | cp.Blocked.OUTPUT, 1, "OUTPUT"):
            assert ch.mark_blocked(which) is None
        for bad in (0, 4, 7, -1):
            with pytest.raises(cp.CloudprofilerError) as e:
                ch.mark_blocked(bad)
            assert e.value.code == E.BAD_ARG_VALUE
        with pytest.raises(ValueError):
            ch.mark_blocked("SIDEWAYS")
        ch.parameterize(cp.Arg.SR_MIN_PERIOD_NS, 2_000_000)
        with pytest.raises(cp.CloudprofilerError) as e:
            ch.parameterize(cp.Arg.SR_MAX_PERIOD_NS, 1_000_000)  # below the min period
        assert e.value.code == E.BAD_ARG_VALUE
        assert ch.service_rate().period_s == pytest.approx(0.002)
        # Items counted in batches, every period with items marked blocked
        # (a mark right before and right after each batch; the periods with
        # neither continue a wait): sampled, none used.
        ch.mark_blocked(cp.Blocked.INPUT)
        total = ch.log_many(np.arange(100, dtype=np.int64))
        ch.mark_blocked(cp.Blocked.INPUT)
        s0 = ch.service_rate()
        t_end = time.monotonic() + 0.2
        while time.monotonic() < t_end:
            ch.mark_blocked(cp.Blocked.INPUT)
            total += ch.log_many(np.arange(100, dtype=np.int64))
            ch.mark_blocked(cp.Blocked.INPUT)
        sr = ch.service_rate()
        assert sr.periods - s0.periods >= 5 and sr.samples == s0.samples and sr.convergences == 0
        assert sr.mean == 0, "no unblocked period: no mean rate"
    with pytest.raises(cp.ChannelClosedError):
        ch.mark_blocked(cp.Blocked.INPUT)
    with pytest.raises(cp.ChannelClosedError):
        ch.service_rate()
    records, header = cp.read_log(find_log(logdir, uname))
    assert header.counter is True
    assert int(records["count"].sum()) == total
    assert header["args"]["sr_min_period_ns"] == 100_000  # at open (the default); the change is an event
    assert any(ev.get("args", {}).get("sr_min_period_ns") == 2_000_000 for ev in header.summary["events"])


def test_other_handlers_and_bad_handles(uname):
    with cp.open_channel(uname, LF.BINARY_TSC, H.FASTPERIODICCOUNTER) as ch:
        with pytest.raises(cp.CloudprofilerError) as e:
            ch.mark_blocked(cp.Blocked.INPUT)
        assert e.value.code == E.BAD_HANDLER
        with pytest.raises(cp.CloudprofilerError) as e:
            ch.service_rate()
        assert e.value.code == E.BAD_HANDLER
    forged = cp.Channel._new(12345, "forged", LF.BINARY, H.SERVICERATE, cp._lib.load())
    for call in (lambda: forged.mark_blocked(1), forged.service_rate):
        with pytest.raises(cp.CloudprofilerError) as e:
            call()
        assert e.value.code == E.BAD_HANDLE
