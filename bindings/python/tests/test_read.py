"""read_log on truncated files, read_log_df, read_analysis on a real analysis."""

import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import cloudprofiler as cp
from conftest import find_log, run_child, tool_path


def _logged_file(tmp_path, fmt, n):
    """A file of n random ids written by a child with small blocks (many frames)."""
    r = run_child("""
        import numpy as np, cloudprofiler as cp
        ids = np.random.default_rng(1).integers(0, 2**62, size=%d, dtype=np.int64)
        np.save(%r, ids)
        with cp.open_channel("trunc", cp.LogFormat.%s, cp.Handler.BUFFER_IDENTITY) as ch:
            ch.log_many(ids)
    """ % (n, str(tmp_path / "ids.npy"), fmt), tmp_path, CP_BLOCK_RECORDS=1024)
    assert r.returncode == 0, r.stderr
    files = [f for f in os.listdir(tmp_path) if f.endswith("trunc.cplog")]
    return tmp_path / files[0], np.load(tmp_path / "ids.npy")


@pytest.mark.parametrize("fmt", ["ZSTD_TSC", "S2", "BINARY_TSC"])
def test_truncated_file_reads_whole_frames_and_warns(fmt, tmp_path):
    path, ids = _logged_file(tmp_path, fmt, 50_000)
    records, header = cp.read_log(path)  # whole: no warning
    np.testing.assert_array_equal(records["tuple_id"], ids)
    size = os.path.getsize(path)
    cut = tmp_path / "cut.cplog"
    data = open(path, "rb").read()
    open(cut, "wb").write(data[: size * 2 // 3])
    with pytest.warns(cp.TruncatedLogWarning, match=r"(\d+) bytes cut off") as w:
        records, header = cp.read_log(cut)
    n = len(records)
    assert 0 < n < len(ids)
    np.testing.assert_array_equal(records["tuple_id"], ids[:n])
    lost = int(re.search(r"(\d+) bytes cut off", str(w[0].message)).group(1))
    assert 0 < lost < size // 3 + 1
    assert header.summary["truncated_bytes"] == lost
    assert str(cut) in str(w[0].message)


def test_read_log_df(tmp_path, logdir, uname):
    pd = pytest.importorskip("pandas")
    with cp.open_channel(uname, cp.LogFormat.ZSTD, cp.Handler.BUFFER_IDENTITY) as ch:
        ch.log_many(np.arange(1000, dtype=np.int64))
    path = find_log(logdir, uname)
    df = cp.read_log_df(path)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["tuple_id", "tsc", "mono_ns"]
    assert df["tuple_id"].tolist() == list(range(1000))
    assert str(df["tsc"].dtype) == "uint64"
    assert df.attrs["header"]["name"] == uname
    assert df.attrs["summary"]["records"] == 1000
    assert df.attrs["path"] == path


def test_pandas_missing_gives_clear_import_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match="needs pandas.*pip install pandas"):
        cp.read_log_df(tmp_path / "whatever.cplog")
    with pytest.raises(ImportError, match="needs pandas"):
        cp.read_analysis(tmp_path)


def test_read_log_missing_file_raises(tmp_path):
    with pytest.raises(cp.CloudprofilerError) as e:
        cp.read_log(tmp_path / "nope.cplog")
    assert "nope.cplog" in str(e.value)


def _waitfor(path, pattern, timeout=15):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path):
            m = re.search(pattern, open(path).read())
            if m:
                return m
        time.sleep(0.05)
    raise AssertionError("no %r in %s within %d s: %s" % (pattern, path, timeout,
                                                         open(path).read() if os.path.exists(path) else ""))


def test_read_analysis_of_a_real_analysis(tmp_path):
    """Two Python processes play nodes a and b (different fake TSCs), a TSC
    server and two clients measure them before and after, analyze joins."""
    pd = pytest.importorskip("pandas")
    tool = tool_path()
    if tool is None:
        pytest.skip("no build/cloudprofiler (set CP_TOOL)")
    fake = {"a": "1:0", "b": "1.0003:5000000000"}
    rounds, logs, out = tmp_path / "rounds", tmp_path / "logs", tmp_path / "out"
    procs = []
    env = {k: v for k, v in os.environ.items() if not k.startswith("CP_")}
    try:
        srv_err = tmp_path / "server.err"
        procs.append(subprocess.Popen([tool, "tsc-server", "--listen", "127.0.0.1:0", "--out", str(rounds)],
                                      stderr=open(srv_err, "w"), env=env))
        addr = _waitfor(srv_err, r"listening on ([^,\s]+)").group(1)
        for n in fake:
            procs.append(subprocess.Popen([tool, "tsc-client", "--server", addr, "--node", n],
                                          stderr=open(tmp_path / ("client-%s.err" % n), "w"),
                                          env=dict(env, CP_FAKE_TSC=fake[n])))
        subprocess.run([tool, "tsc-round", "--server", addr, "--label", "before", "--wait-nodes", "2"],
                       check=True, capture_output=True, timeout=60, env=env)
        n_tuples = 500
        for node, chan in (("a", "source out"), ("b", "sink in")):
            r = run_child("""
                import numpy as np, cloudprofiler as cp
                with cp.open_channel(%r, cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY) as ch:
                    for i in range(%d):
                        ch.log(i)
            """ % (chan, n_tuples), logs / node, CP_NODE=node, CP_FAKE_TSC=fake[node])
            assert r.returncode == 0, r.stderr
        subprocess.run([tool, "tsc-round", "--server", addr, "--label", "after"],
                       check=True, capture_output=True, timeout=60, env=env)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(10)
    r = subprocess.run([tool, "analyze", "--rounds", str(rounds), "--logs", str(logs), "--out", str(out),
                        "--ref", "a"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr

    res = cp.read_analysis(out)
    assert isinstance(res, dict) and isinstance(res, cp.Analysis)
    d = res.durations
    assert isinstance(d, pd.DataFrame) and res["durations"] is d
    assert len(d) == n_tuples
    assert sorted(d["tuple_id"].tolist()) == list(range(n_tuples))
    assert set(d["kind"]) == {"transfer"} or set(d["kind"]) == {"end_to_end", "transfer"} or "transfer" in set(d["kind"])
    assert str(d["start_tsc"].dtype) == "uint64" and str(d["tuple_id"].dtype) == "int64"
    assert (d["from_node"] == "a").all() and (d["to_node"] == "b").all()
    assert (d["seconds"] > 0).all() and (d["error_seconds"] >= 0).all()
    assert len(res.summary) >= 1 and res.summary["count"].iloc[0] == n_tuples
    assert res.model["ref"] == "a" and sorted(res.model["nodes"]) == ["a", "b"]
    assert res.report and res.report.endswith("report.html")
    assert res.runs is None or isinstance(res.runs, pd.DataFrame)


def test_read_analysis_errors(tmp_path):
    pytest.importorskip("pandas")
    with pytest.raises(FileNotFoundError, match="not a directory"):
        cp.read_analysis(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="durations.csv"):
        cp.read_analysis(tmp_path)


def test_damaged_and_incomplete_files_warn(tmp_path):
    """A damaged frame warns DamagedLogWarning, a file without its trailer
    IncompleteLogWarning (how many records the ring may have held), a header
    that claims 2^32 records costs nothing: every valid record is returned."""
    path, ids = _logged_file(tmp_path, "BINARY_TSC", 5000)
    data = bytearray(open(path, "rb").read())
    records, header = cp.read_log(path)
    assert header.summary["problems"] == [] and header.summary["version"] == 2
    # A frame's record count set to 2^32-1: not believed, the frame is damage.
    magic = b"CPFR"
    frames = [i for i in range(len(data)) if data[i:i + 4] == magic and data[i + 4] == 1]
    bad = bytearray(data)
    bad[frames[1] + 8:frames[1] + 12] = b"\xff\xff\xff\xff"
    p = tmp_path / "bad.cplog"
    open(p, "wb").write(bad)
    with pytest.warns(cp.DamagedLogWarning, match="1 corrupt frames"):
        records, header = cp.read_log(p)
    assert len(records) >= len(ids) - 1024
    assert set(records["tuple_id"]) <= set(ids)
    # A process killed before it closed its channel: the file says what it knows.
    r = run_child("""
        import os, signal, time, numpy as np, cloudprofiler as cp
        ch = cp.open_channel("killed", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY)
        ch.log_many(np.arange(3000, dtype=np.int64))
        time.sleep(1.5)  # the quiet channel's partial block goes to disk
        ch.log_many(np.arange(3000, 3100, dtype=np.int64))
        os.kill(os.getpid(), signal.SIGKILL)
    """, tmp_path, CP_BLOCK_RECORDS=1024)
    assert r.returncode == -9, r.stderr
    p = tmp_path / [f for f in os.listdir(tmp_path) if f.endswith("killed.cplog")][0]
    with pytest.warns(cp.IncompleteLogWarning, match=r"no trailer.*up to \d+ more records"):
        records, header = cp.read_log(p)
    n = len(records)
    assert n >= 3000
    np.testing.assert_array_equal(records["tuple_id"], np.arange(n))
    assert header.summary["trailer"] is None
