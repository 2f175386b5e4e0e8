"""The capacity analysis on a real run: a child Python builds a pipeline of
threads joined by queues (a source, an operator "work" with two instances
that drops every fourth tuple, a sink, whose items a CP_SERVICERATE channel
counts too), each marking its operator's entry and exit by the naming rule; `cloudprofiler analyze` reads its logs and
read_analysis(...).capacity gives the rows, from capacity.parquet or, without
it, capacity.csv, with the same dtypes."""

import os
import shutil
import subprocess

import numpy as np
import pytest

import cloudprofiler as cp
from conftest import run_child, tool_path

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

N = 2000

PIPELINE = """
    import queue, threading
    import cloudprofiler as cp
    N = %d
    def ch(name):
        return cp.open_channel(name, cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY)
    src = ch("src out")
    work = [(ch("work#%%d in" %% k), ch("work#%%d out" %% k), ch("work#%%d sent" %% k)) for k in range(2)]
    sink_in, sink_out = ch("sink in"), ch("sink out")
    # the sink's items counted by a CP_SERVICERATE channel too (1 ms periods)
    sink_count = cp.open_channel("sink count", cp.LogFormat.BINARY_TSC, cp.Handler.SERVICERATE)
    sink_count.parameterize(cp.Arg.ARG0, 1_000_000)
    q1, q2 = queue.Queue(64), queue.Queue(64)

    def worker(k):
        cin, cout, csent = work[k]
        while True:
            i = q1.get()
            if i is None:
                return
            cin.log(i)
            x = 0
            for j in range(200 * (k + 1)):  # instance 1 costs twice as much
                x += j
            if i %% 4 == 3:
                continue  # filtered out: no exit
            cout.log(i)
            q2.put(i)
            csent.log(i)

    def sink():
        while True:
            i = q2.get()
            if i is None:
                return
            sink_in.log(i)
            sink_count.log(i)
            sink_out.log(i)

    ws = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    s = threading.Thread(target=sink)
    for t in ws + [s]:
        t.start()
    for i in range(N):
        src.log(i)
        q1.put(i)
    for _ in ws:
        q1.put(None)
    for t in ws:
        t.join()
    q2.put(None)
    s.join()
    cp.close_all()
""" % N

COLUMNS = ["level", "window", "start_s", "end_s", "operator", "instance", "node", "pid", "method", "tuples_in",
           "tuples_out", "arrivals_per_s", "departures_per_s", "busy_share", "blocked_share", "own_us", "handoff_us",
           "cost_us", "cost_low_us", "cost_high_us", "backlogged", "service_rate", "service_rate_low",
           "service_rate_high", "capacity", "capacity_low", "capacity_high", "load", "headroom", "selectivity",
           "instances", "skew", "reach", "lost", "max_source_rate", "bottleneck", "parallelism_needed", "note"]


@pytest.fixture(scope="module")
def marked_run(tmp_path_factory):
    tool = tool_path()
    if tool is None:
        pytest.skip("no build/cloudprofiler (set CP_TOOL)")
    base = tmp_path_factory.mktemp("capacity")
    logs = base / "logs"
    r = run_child(PIPELINE, logs, timeout=120)
    assert r.returncode == 0, r.stderr

    def analyze(out, *args):
        p = subprocess.run([tool, "analyze", "--logs", str(logs), "--out", str(base / out), "--quiet"] + list(args),
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        return base / out, p.stdout

    return analyze


def _whole(cap, level, op):
    rows = cap[(cap.level == level) & (cap.operator == op) & (cap.window == -1) & (cap.method == "in/out")]
    return rows


def test_capacity_of_a_real_pipeline(marked_run):
    # Windows of 20 ms: the run lasts about 60 ms (longer on a busy machine),
    # and an interval needs the tuples of an instance in two or more of its
    # batches (eighths of a window); with 250 ms windows an instance's
    # tuples could all fall in one, and its interval was NaN.
    out, stdout = marked_run("out", "--target-rate", "1M", "--window", "20ms")
    res = cp.read_analysis(out)
    cap = res.capacity
    assert res.files["capacity"] == os.path.join(str(out), "capacity.parquet")
    assert list(cap.columns) == COLUMNS
    for c, t in {"window": "int64", "pid": "int64", "tuples_in": "int64", "instances": "int64",
                 "parallelism_needed": "int64", "service_rate": "float64", "reach": "float64",
                 "bottleneck": "bool"}.items():
        assert str(cap[c].dtype) == t, (c, cap[c].dtype)
    assert set(cap.operator) == {"src", "work", "sink"}
    assert set(cap.level) == {"operator", "instance"}

    work = _whole(cap, "operator", "work").iloc[0]
    assert work.instances == 2
    assert work.tuples_in == N and work.tuples_out == N * 3 // 4
    assert work.selectivity == 0.75
    assert work.reach == 1.0
    assert np.isfinite(work.service_rate) and work.service_rate > 0
    assert work.service_rate_low <= work.service_rate <= work.service_rate_high
    assert 0 < work.busy_share <= 1 and 0 <= work.blocked_share <= 1
    assert work.parallelism_needed >= 1
    assert work["skew"] >= 1  # (Series.skew is a method)
    sink = _whole(cap, "operator", "sink").iloc[0]
    assert sink.reach == 0.75
    assert sink.tuples_in == N * 3 // 4
    src = _whole(cap, "operator", "src").iloc[0]
    assert np.isnan(src.service_rate) and "no in mark" in src.note
    ops = cap[(cap.level == "operator") & (cap.window == -1)]
    assert ops.bottleneck.sum() == 1
    b = ops[ops.bottleneck].iloc[0]
    assert b.max_source_rate == ops.max_source_rate.min()

    inst = _whole(cap, "instance", "work")
    assert sorted(i.rsplit("/", 1)[1] for i in inst.instance) == ["0", "1"]
    assert len(set(inst.pid)) == 1 and inst.pid.iloc[0] > 0
    assert inst.tuples_in.sum() == N
    # windows of 20 ms from t0; the rows of a window say which
    wins = cap[(cap.window >= 0)]
    assert wins.window.max() >= 1
    assert ((wins.end_s - wins.start_s) <= 0.02 + 1e-12).all()
    assert np.allclose(wins.start_s, wins.window * 0.02)
    assert "bottleneck: " + b.operator in res.summary_text
    assert "capacity.csv" in stdout


def test_capacity_csv_reads_as_the_parquet_file(marked_run, tmp_path):
    out, _ = marked_run("out-csv")
    from_parquet = cp.read_analysis(out).capacity
    d = tmp_path / "csv-only"
    shutil.copytree(out, d)
    os.remove(d / "capacity.parquet")
    res = cp.read_analysis(d)
    assert res.files["capacity"] == str(d / "capacity.csv")
    pd.testing.assert_frame_equal(res.capacity, from_parquet)
    assert (res.capacity.note == "").any()  # empty notes are "", as in Parquet


def test_no_capacity(marked_run):
    out, _ = marked_run("out-none", "--no-capacity")
    res = cp.read_analysis(out)
    assert res.capacity is None
    assert "capacity" not in res.files
    assert "--no-capacity" in res.summary_text


def test_beard_chamberlain_rows(marked_run):
    """The sink's CP_SERVICERATE channel ("sink count"): its rows, method
    beard-chamberlain, count the items it took; each converged estimate the
    library wrote (if the short run converged at all) is a row."""
    out, _ = marked_run("out-bc")
    cap = cp.read_analysis(out).capacity
    bc = cap[cap.method == "beard-chamberlain"]
    assert set(bc.operator) == {"sink"}
    whole = bc[(bc.level == "instance") & (bc.window == -1)].iloc[0]
    assert 0 < whole.tuples_out <= N * 3 // 4
    assert whole.instance.endswith("/")  # node/pid/ with no #INSTANCE
    est = bc[(bc.level == "instance") & (bc.window >= 0)]
    assert (est.service_rate > 0).all() and est.note.str.startswith("converged estimate").all()
    if len(est):
        assert whole.service_rate == est.service_rate.median()
    else:
        assert np.isnan(whole.service_rate) and "no converged estimate" in whole.note
    op = bc[bc.level == "operator"].iloc[0]
    assert op.instances == 1 and op.tuples_out == whole.tuples_out
