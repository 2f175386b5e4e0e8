"""LINEAGE channels from Python: log_lineage, its errors, and the file as
`cloudprofiler dump` and read_log decode it."""

import random
import subprocess

import numpy as np
import pytest

import cloudprofiler as cp
from conftest import find_log, tool_path

LF, H, E = cp.LogFormat, cp.Handler, cp.ErrorCode


def lineage_input(tsc):
    """The input id a LINEAGE record's TSC column holds (0 is stored as 2**63)."""
    tsc = int(tsc)
    if tsc == 1 << 63:
        return 0
    return tsc - (1 << 64) if tsc >= 1 << 63 else tsc


def test_log_lineage_pairs_decode(logdir, uname):
    tool = tool_path()
    if tool is None:
        pytest.skip("no build/cloudprofiler (CP_TOOL)")
    r = random.Random(18)
    pairs = []
    for i in range(3000):
        k = i % 5
        inp = 0 if k == 0 else -r.randrange(1000) if k == 1 else (1 << 63) - 1 - i if k == 2 else r.randrange(-(1 << 63) + 1, 1 << 63)
        pairs.append((1_000_000 + i // 4, inp))
    with cp.open_channel(uname + " lineage", LF.ZSTD_TSC, H.LINEAGE) as ch:
        for o, i in pairs:
            assert ch.log_lineage(o, i) is True
    path = find_log(logdir, uname + " lineage")
    out = subprocess.run([tool, "dump", "--csv", path], capture_output=True, text=True, check=True).stdout
    lines = out.strip().split("\n")
    assert lines[0] == "tuple_id,tsc"
    got = [(int(a), lineage_input(b)) for a, b in (l.split(",") for l in lines[1:])]
    assert got == pairs
    records, header = cp.read_log(path)
    assert header["handler"] == "LINEAGE"
    np.testing.assert_array_equal(records["tuple_id"], np.array([o for o, _ in pairs], dtype=np.int64))
    assert [lineage_input(t) for t in records["tsc"]] == [i for _, i in pairs]
    text = subprocess.run([tool, "dump", path], capture_output=True, text=True, check=True).stdout
    assert "handler:    LINEAGE" in text


def test_log_lineage_errors(uname):
    with cp.open_channel(uname + " lineage", LF.BINARY_TSC, H.LINEAGE) as ch:
        with pytest.raises(cp.CloudprofilerError) as e:
            ch.log(1)
        assert e.value.code == E.BAD_HANDLER
        with pytest.raises(cp.CloudprofilerError) as e:
            ch.log_lineage(5, -(1 << 63))
        assert e.value.code == E.BAD_ARG_VALUE
        with pytest.raises(ValueError):
            ch.log_lineage(1 << 63, 1)
        with pytest.raises(TypeError):
            ch.log_lineage(1.5, 1)
        with pytest.raises(TypeError):
            ch.log_lineage(1, True)
        assert ch.log_lineage(np.int64(7), 3) is True
    with pytest.raises(cp.ChannelClosedError):
        ch.log_lineage(7, 3)
    with cp.open_channel(uname, LF.BINARY_TSC, H.BUFFER_IDENTITY) as bi:
        with pytest.raises(cp.CloudprofilerError) as e:
            bi.log_lineage(7, 3)
        assert e.value.code == E.BAD_HANDLER
