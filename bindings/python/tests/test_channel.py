"""Opening, logging, parameterizing, closing; errors; log_many's inputs."""

import array
import os

import numpy as np
import pytest

import cloudprofiler as cp
from cloudprofiler._channel import as_int64
from conftest import find_log

LF, H = cp.LogFormat, cp.Handler
TSC_FORMATS = {LF.ASCII_TSC, LF.BINARY_TSC, LF.ZSTD_TSC, LF.S2_TSC}


def read_ids(logdir, name):
    records, header = cp.read_log(find_log(logdir, name))
    return records, header


@pytest.mark.parametrize("handler", [H.IDENTITY, H.BUFFER_IDENTITY, H.BUFFER_IDENTITY_COMP])
@pytest.mark.parametrize("fmt", list(LF))
def test_every_format_round_trips(fmt, handler, logdir, uname):
    if handler == H.IDENTITY and fmt not in (LF.ASCII, LF.ASCII_TSC, LF.BINARY, LF.BINARY_TSC):
        with pytest.raises(cp.CloudprofilerError) as e:
            cp.open_channel(uname, fmt, handler)
        assert e.value.code == cp.ErrorCode.FORMAT_HANDLER
        assert "buffer" in str(e.value).lower()
        return
    rng = np.random.default_rng(int(fmt) * 16 + int(handler))
    one = [0, -1, 2**63 - 1, -2**63, 7]
    n_many = 3000 if handler == H.IDENTITY else 20000
    many = rng.integers(-2**63, 2**63 - 1, size=n_many, dtype=np.int64)
    with cp.open_channel(uname, fmt, handler) as ch:
        for i in one:
            assert ch.log(i) is True
        assert ch.log_many(many) == n_many
        assert ch.log_many(np.arange(100, dtype=np.int64)) == 100
    assert ch.closed
    records, header = read_ids(logdir, uname)
    want = np.concatenate([np.array(one, dtype=np.int64), many, np.arange(100, dtype=np.int64)])
    np.testing.assert_array_equal(records["tuple_id"], want)
    names = records.dtype.names
    assert names[:2] == ("tuple_id", "tsc")
    assert ("mono_ns" in names) == (fmt not in TSC_FORMATS)
    assert records["tsc"].dtype == np.uint64 and records["tuple_id"].dtype == np.int64
    assert np.all(np.diff(records["tsc"].astype(np.int64)) >= 0), "one thread: TSC never goes back"
    assert header.counter is False
    assert isinstance(header, dict) and header
    assert header.summary["records"] == len(want)


def test_read_matches_dump_tool(logdir, uname):
    import subprocess
    from conftest import tool_path
    tool = tool_path()
    if tool is None:
        pytest.skip("no build/cloudprofiler (CP_TOOL)")
    ids = np.arange(5000, dtype=np.int64) * 3
    with cp.open_channel(uname, LF.S2, H.BUFFER_IDENTITY) as ch:
        ch.log_many(ids)
    path = find_log(logdir, uname)
    out = subprocess.run([tool, "dump", "--csv", path], capture_output=True, text=True, check=True).stdout
    lines = out.strip().split("\n")
    assert lines[0] == "tuple_id,tsc,mono_ns"
    rows = np.array([[int(x) for x in l.split(",")] for l in lines[1:]], dtype=np.uint64)
    records, _ = cp.read_log(path)
    np.testing.assert_array_equal(records["tuple_id"], rows[:, 0].astype(np.int64))
    np.testing.assert_array_equal(records["tsc"], rows[:, 1])
    np.testing.assert_array_equal(records["mono_ns"], rows[:, 2])


@pytest.mark.parametrize("handler", list(H))
def test_every_handler_opens(handler, logdir, uname, monkeypatch):
    if handler == H.FOX_END:
        monkeypatch.setenv("CP_RET_START", "127.0.0.1:9")  # read at each FOX open; sends are not waited for
    if handler == H.FOX_START:
        monkeypatch.setenv("CP_RET_LISTEN", "127.0.0.1:0")
    if handler == H.GPIORTT:
        with pytest.raises(cp.CloudprofilerError) as e:
            cp.open_channel(uname, LF.BINARY_TSC, handler)
        assert e.value.code == cp.ErrorCode.UNSUPPORTED_PLATFORM
        assert "aarch64" in str(e.value)
        return
    ch = cp.open_channel(uname, "BINARY_TSC", handler.name)
    assert ch.handler == handler and ch.handle > 0
    if handler == H.LINEAGE:  # pairs through log_lineage; log is refused
        assert ch.log_lineage(1000, 1)
        with pytest.raises(cp.CloudprofilerError) as e:
            ch.log(1)
        assert e.value.code == cp.ErrorCode.BAD_HANDLER
        ch.close()
        assert os.path.exists(find_log(logdir, uname))
        return
    assert ch.log(1) in (True, False)
    assert ch.log_many(np.arange(10, dtype=np.int64)) == 10
    ch.close()
    assert os.path.exists(find_log(logdir, uname))


def test_bad_input_raises_with_message(uname):
    with pytest.raises(cp.CloudprofilerError) as e:
        cp.open_channel("", LF.BINARY, H.IDENTITY)
    assert e.value.code == cp.ErrorCode.BAD_NAME and "name" in str(e.value)
    with pytest.raises(cp.CloudprofilerError, match="name"):
        cp.open_channel("x" * 5000, LF.BINARY, H.IDENTITY)
    with pytest.raises(ValueError, match="NUL"):
        cp.open_channel("a\0b", LF.BINARY, H.IDENTITY)
    with pytest.raises(TypeError):
        cp.open_channel(42, LF.BINARY, H.IDENTITY)
    with pytest.raises(cp.CloudprofilerError) as e:
        cp.open_channel(uname, 99, H.IDENTITY)
    assert e.value.code == cp.ErrorCode.BAD_FORMAT and "format" in str(e.value)
    with pytest.raises(cp.CloudprofilerError) as e:
        cp.open_channel(uname, LF.BINARY, 77)
    assert e.value.code == cp.ErrorCode.BAD_HANDLER and "handler" in str(e.value)
    with pytest.raises(ValueError, match="unknown log format"):
        cp.open_channel(uname, "ZSTD_FAST", H.IDENTITY)
    with pytest.raises(ValueError, match="out of range"):
        cp.open_channel(uname, 2**40, H.IDENTITY)
    with cp.open_channel(uname, LF.BINARY_TSC, H.DOWNSAMPLE) as ch:
        with pytest.raises(cp.CloudprofilerError) as e:
            ch.parameterize(cp.Arg.ARG0, 0)
        assert e.value.code == cp.ErrorCode.BAD_ARG_VALUE
        with pytest.raises(cp.CloudprofilerError) as e:
            ch.parameterize(7, 1)
        assert e.value.code == cp.ErrorCode.BAD_ARG_NUM
        ch.parameterize(cp.Arg.ARG0, 3)
        ch.parameterize("DROP_WHEN_FULL", 1)


def test_use_after_close_raises(uname):
    ch = cp.open_channel(uname, LF.BINARY_TSC, H.BUFFER_IDENTITY)
    ch.log(1)
    ch.close()
    ch.close()  # idempotent
    for call in (lambda: ch.log(2), lambda: ch.log_many([1, 2]), lambda: ch.log_many([]),
                 lambda: ch.parameterize(0, 1)):
        with pytest.raises(cp.ChannelClosedError, match="closed"):
            call()
    with pytest.raises(cp.ChannelClosedError):
        with ch:
            pass
    with cp.open_channel(uname + "b", LF.BINARY_TSC, H.BUFFER_IDENTITY) as c2:
        c2.log(1)
    assert c2.closed
    with pytest.raises(cp.ChannelClosedError):
        c2.log(1)


def test_close_all_closes_every_channel(uname):
    chans = [cp.open_channel("%s%d" % (uname, i), LF.BINARY_TSC, H.BUFFER_IDENTITY) for i in range(3)]
    for c in chans:
        c.log(5)
    cp.close_all()
    cp.close_all()  # idempotent
    for c in chans:
        assert c.closed
        with pytest.raises(cp.ChannelClosedError):
            c.log(1)
    with cp.open_channel(uname + "after", LF.BINARY_TSC, H.BUFFER_IDENTITY) as c:
        assert c.log(1)


def test_bad_handle_raises():
    forged = cp.Channel._new(12345, "forged", LF.BINARY, H.IDENTITY, cp._lib.load())
    with pytest.raises(cp.CloudprofilerError) as e:
        forged.log(1)
    assert e.value.code == cp.ErrorCode.BAD_HANDLE and "handle" in str(e.value)
    with pytest.raises(cp.CloudprofilerError) as e:
        forged.log_many(np.arange(3, dtype=np.int64))
    assert e.value.code == cp.ErrorCode.BAD_HANDLE and e.value.accepted == 0
    with pytest.raises(cp.CloudprofilerError) as e:
        forged.close()
    assert e.value.code == cp.ErrorCode.BAD_HANDLE


def test_log_many_inputs(logdir, uname):
    base = np.arange(40, dtype=np.int64)
    inputs = [
        ("ndarray int64", base[0:10], 10),
        ("strided view", base[10:30:2], 10),
        ("array.array q", array.array("q", range(100, 105)), 5),
        ("bytes", np.arange(200, 203, dtype=np.int64).tobytes(), 3),
        ("bytearray", bytearray(np.arange(300, 302, dtype=np.int64).tobytes()), 2),
        ("memoryview", memoryview(np.arange(400, 404, dtype=np.int64)), 4),
        ("list", [500, -501, 2**63 - 1], 3),
        ("tuple", (600, 601), 2),
        ("generator", lambda: (700 + i for i in range(3)), 3),
        ("range", range(800, 804), 4),
        ("int32", np.arange(900, 905, dtype=np.int32), 5),
        ("uint64", np.arange(1000, 1003, dtype=np.uint64), 3),
        ("big-endian", np.arange(1100, 1102, dtype=">i8"), 2),
        ("2-d", np.arange(1200, 1206, dtype=np.int64).reshape(2, 3), 6),
        ("empty", np.zeros(0, dtype=np.int64), 0),
        ("empty list", [], 0),
    ]
    want = []
    with cp.open_channel(uname, LF.BINARY_TSC, H.BUFFER_IDENTITY) as ch:
        for what, ids, n in inputs:
            got = as_int64(ids() if callable(ids) else ids)
            assert ch.log_many(ids() if callable(ids) else ids) == n, what
            want.extend(got.tolist())
        bad = [
            (np.array([1.0, 2.0]), TypeError, "dtype float64"),
            (np.array([True]), TypeError, "integer"),
            (np.array([2**63], dtype=np.uint64), ValueError, "int64"),
            ([1, 2.5], TypeError, "ints within int64.*float64"),
            ([2**64], ValueError, "tuple id 18446744073709551616 is out of range \\(int64\\)"),
            ([-1, 2**63], ValueError, "tuple id 9223372036854775808 is out of range"),
            ([2**63], ValueError, "tuple id 9223372036854775808 is out of range"),
            ([2**100 + 5], ValueError, "out of range"),
            ([-2**63 - 1], ValueError, "out of range"),
            ([True, False], TypeError, "bool"),
            (b"1234567", ValueError, "multiple of 8"),
            (5, TypeError, "log\\(\\)"),
            ("123", TypeError, "str"),
            (array.array("d", [1.0]), TypeError, "float64"),
        ]
        for ids, exc, msg in bad:
            with pytest.raises(exc, match=msg):
                ch.log_many(ids)
    records, _ = read_ids(logdir, uname)
    assert records["tuple_id"].tolist() == want


def test_log_refuses_what_int64_cannot_hold(logdir, uname):
    """log() refuses, by value, the ids ctypes would wrap (2**64+7 became 7),
    as log_many and log_lineage do; the extremes of int64 and numpy's
    integers go through exactly."""
    with cp.open_channel(uname, LF.BINARY_TSC, H.BUFFER_IDENTITY) as ch:
        for v in (2**64 + 7, 2**63, -2**63 - 1, 2**100 + 5):
            with pytest.raises(ValueError, match="tuple id %d is out of range \\(int64\\)" % v):
                ch.log(v)
            with pytest.raises(ValueError, match="out of range"):
                ch.log_many([v])
        for v in (True, 1.5, "7", None):
            with pytest.raises(TypeError, match="tuple id must be an int"):
                ch.log(v)
        for v in (-2**63, 2**63 - 1, np.int64(-5), np.uint32(9), 0):
            assert ch.log(v)
        with pytest.raises(ValueError, match="out_id .* out of range"):
            ch.log_lineage(2**64, 1)
    records, _ = read_ids(logdir, uname)
    assert records["tuple_id"].tolist() == [-2**63, 2**63 - 1, -5, 9, 0]


def test_log_many_is_zero_copy():
    a = np.arange(10, dtype=np.int64)
    assert as_int64(a) is a
    aa = array.array("q", range(10))
    assert as_int64(aa).__array_interface__["data"][0] == aa.buffer_info()[0]
    b = a.tobytes()
    assert np.shares_memory(as_int64(b), np.frombuffer(b, dtype=np.int64))
    mv = memoryview(a)
    assert as_int64(mv).__array_interface__["data"][0] == a.__array_interface__["data"][0]


def test_counters_read(logdir, uname):
    import time
    for fmt in (LF.BINARY_TSC, LF.ZSTD):
        for h in (H.PERIODICCOUNTER, H.FASTPERIODICCOUNTER):
            name = "%s_%s_%s" % (uname, fmt.name, h.name)
            total = 0
            with cp.open_channel(name, fmt, h) as ch:
                ch.parameterize(cp.Arg.ARG0, 1_000_000)  # 1 ms periods
                t_end = time.monotonic() + 0.03
                while time.monotonic() < t_end:
                    total += ch.log_many(np.arange(1000, dtype=np.int64))
                    ch.log(1)
                    total += 1
            records, header = read_ids(logdir, name)
            assert header.counter is True
            want = ["period_end_tsc", "count", "skipped_periods"] + ([] if fmt in TSC_FORMATS else ["mono_ns"])
            assert list(records.dtype.names) == want
            assert all(records.dtype[c] == np.uint64 for c in want)
            assert len(records) >= 2
            assert int(records["count"].sum()) == total
            assert np.all(np.diff(records["period_end_tsc"].astype(np.int64)) > 0)
