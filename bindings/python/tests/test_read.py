"""read_log on truncated files, read_log_df, read_analysis on a real analysis
(Parquet files, or CSVs), and without pyarrow."""

import os
import re
import shutil
import sys

import numpy as np
import pytest

import cloudprofiler as cp
from conftest import find_log, run_child


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


def _small_log(logdir, uname):
    with cp.open_channel(uname, cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY) as ch:
        ch.log_many(np.arange(10, dtype=np.int64))
    return find_log(logdir, uname)


def test_read_log_refuses_a_nul_in_the_path(logdir, uname):
    """A NUL ends a path in the C API: read_log would read the file before
    it. read_log and read_header refuse it, as open_channel refuses one in
    a channel name."""
    path = _small_log(logdir, uname)
    assert len(cp.read_log(path)[0]) == 10
    for bad in (path + "\0/other", os.fsencode(path) + b"\0/other"):
        with pytest.raises(ValueError, match=r"^read_log: path .* contains a NUL byte \(the C API and the system "
                                             r"take NUL-terminated paths\)$"):
            cp.read_log(bad)
        with pytest.raises(ValueError, match="^read_log: path .* contains a NUL byte"):
            cp.read_log(bad, counters=True)
        with pytest.raises(ValueError, match="^read_header: path .* contains a NUL byte"):
            cp.read_header(bad)


def test_read_log_df_and_read_analysis_refuse_a_nul_in_the_path(tmp_path, logdir, uname):
    pytest.importorskip("pandas")
    path = _small_log(logdir, uname)
    with pytest.raises(ValueError, match="^read_log: path .* contains a NUL byte"):
        cp.read_log_df(path + "\0/other")
    (tmp_path / "durations.csv").write_text("tuple_id\n1\n")
    assert len(cp.read_analysis(tmp_path).durations) == 1
    with pytest.raises(ValueError, match="^read_analysis: out_dir .* contains a NUL byte"):
        cp.read_analysis(str(tmp_path) + "\0/other")


def test_read_analysis_of_a_real_analysis(real_run, real_analysis):
    """read_analysis of what analyze wrote for two nodes a and b (real_run):
    every table from its Parquet file, with the dtypes of before (the CSVs')."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out, n = real_analysis, real_run.n_tuples
    assert not os.path.exists(out / "durations.csv")  # only with --durations-csv
    res = cp.read_analysis(out)
    assert isinstance(res, dict) and isinstance(res, cp.Analysis)
    # "source out", "map in", "map out" follow the marking rule: capacity
    # too, where the latency goes and Mace (CSV files only)
    assert res.files == dict({t: str(out / (t + ".parquet"))
                              for t in ("durations", "summary", "runs", "throughput", "capacity")},
                             critical_path=str(out / "criticalpath.csv"), breakdown=str(out / "breakdown.csv"),
                             mace=str(out / "mace.csv"), mace_costs=str(out / "mace-costs.csv"),
                             model=str(out / "model.json"), summary_text=str(out / "summary.txt"),
                             report=str(out / "report.html"))
    d = res.durations
    assert isinstance(d, pd.DataFrame) and res["durations"] is d
    # a/source out -> b/map in (transfer), b/map in -> b/map out (compute), and end to end
    assert len(d) == 3 * n
    assert d.groupby("kind").size().to_dict() == {"compute": n, "end_to_end": n, "transfer": n}
    for kind, g in d.groupby("kind"):
        assert sorted(g["tuple_id"].tolist()) == list(range(n)), kind
    assert str(d["start_tsc"].dtype) == "uint64" and str(d["end_tsc"].dtype) == "uint64"
    assert str(d["tuple_id"].dtype) == "int64" and str(d["scenario"].dtype) == "int32"
    for c in ("from_node", "from_channel", "to_node", "to_channel", "kind"):
        assert pd.api.types.is_string_dtype(d[c]) and not isinstance(d[c].dtype, pd.CategoricalDtype), c
        assert all(isinstance(v, str) for v in d[c].head()), c
    t = d[d.kind == "transfer"]
    assert (t["from_node"] == "a").all() and (t["to_node"] == "b").all()
    assert set(zip(d["from_channel"], d["to_channel"], d["kind"])) == {
        ("source out", "map in", "transfer"), ("map in", "map out", "compute"), ("source out", "map out", "end_to_end")}
    assert (d["seconds"] > 0).all() and (d["error_seconds"] >= 0).all()
    s = res.summary
    assert sorted(s["kind"]) == ["compute", "end_to_end", "transfer"] and (s["count"] == n).all()
    assert str(s["count"].dtype) == "int64" and str(s["scenario_0"].dtype) == "int64"
    assert (s[["scenario_%d" % i for i in range(4)]].sum(axis=1) == n).all()
    assert s["scenario_counts"].tolist() == ["%d/%d/%d/%d" % tuple(r) for r in
                                             s[["scenario_%d" % i for i in range(4)]].itertuples(index=False)]
    assert res.model["ref"] == "a" and sorted(res.model["nodes"]) == ["a", "b"]
    assert res.report and res.report.endswith("report.html")
    assert "logs: all 6 files complete and undamaged" in res.summary_text
    r = res.runs  # the FIRSTLAST channels, and (all)
    assert r["channel"].tolist() == ["a/source span", "b/map span", "(all)"]
    assert (r["first_tuple_id"] == 0).all() and (r["last_tuple_id"] == n - 1).all()
    assert str(r["first_tuple_id"].dtype) == "int64" and (r["seconds"] > 0).all()
    t = res.throughput  # the counter's periods
    assert set(zip(t["node"], t["channel"])) == {("b", "map count")}
    assert int(t["count"].sum()) == n and str(t["count"].dtype) == "int64"
    assert str(t["tuples_per_s"].dtype) == "float64"


def test_read_analysis_same_frames_from_csv(real_analysis_csv, tmp_path):
    """An analysis directory with CSVs only (an older one) gives the same
    frames as the Parquet files: same columns, dtypes and values."""
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    new = cp.read_analysis(real_analysis_csv)
    assert new.files["durations"].endswith("durations.parquet") and new.files["summary"].endswith("summary.parquet")
    old = tmp_path / "old"
    old.mkdir()
    tables = ("durations", "summary", "runs", "throughput")
    for f in [t + ".csv" for t in tables] + ["summary.txt", "model.json"]:
        shutil.copy(real_analysis_csv / f, old / f)
    res = cp.read_analysis(old)
    assert res.files == dict({t: str(old / (t + ".csv")) for t in tables}, model=str(old / "model.json"),
                             summary_text=str(old / "summary.txt"))
    # Floats in each one's shortest exact form: equal to the bit ...
    for t in ("durations", "summary", "runs"):
        pd.testing.assert_frame_equal(res[t], new[t], check_exact=True, obj=t)
    # ... but throughput.csv's, printed with %.6f and %.1f
    pd.testing.assert_frame_equal(res.throughput, new.throughput, check_exact=False, rtol=0, atol=0.051)
    # durations.csv alone: read as well
    for f in ("summary.csv", "runs.csv", "throughput.csv", "summary.txt", "model.json"):
        os.remove(old / f)
    res = cp.read_analysis(old)
    assert list(res) == ["durations"] and res.files == {"durations": str(old / "durations.csv")}
    pd.testing.assert_frame_equal(res.durations, new.durations, check_exact=True)


def test_read_analysis_errors(tmp_path):
    pytest.importorskip("pandas")
    with pytest.raises(FileNotFoundError, match="not a directory"):
        cp.read_analysis(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="holds none of durations.parquet, durations.csv, summary.parquet"):
        cp.read_analysis(tmp_path)


def test_read_analysis_without_pyarrow(real_analysis, tmp_path, monkeypatch):
    """No pyarrow: a table with only its Parquet file raises ImportError saying
    how to install it; one with a CSV beside it is read from the CSV."""
    pytest.importorskip("pandas")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    with pytest.raises(ImportError, match=r"needs pyarrow to read .*durations\.parquet.*pip install pyarrow.*"
                                          r"cloudprofiler\[parquet\]"):
        cp.read_analysis(real_analysis)
    d = tmp_path / "no-durations"
    d.mkdir()
    for f in ("summary.parquet", "summary.csv", "model.json"):
        shutil.copy(real_analysis / f, d / f)
    res = cp.read_analysis(d)
    assert res.files["summary"] == str(d / "summary.csv") and res.durations is None
    assert len(res.summary) == 3 and str(res.summary["count"].dtype) == "int64"
    os.remove(d / "summary.csv")
    with pytest.raises(ImportError, match="summary.parquet"):
        cp.read_analysis(d)


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
