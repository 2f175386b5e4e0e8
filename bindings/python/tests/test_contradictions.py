"""Logs that contradict each other are refused by `cloudprofiler analyze`
(exit 4, nothing written), never turned into numbers: two machines under one
node name, two TSC rates for one node, two runs in one directory. Real child
Pythons log through the library; the rounds are real_run's (a real TSC
server and clients)."""

import os
import shutil

import pytest

# 770 s of a ~2-3 GHz counter: another machine's TSC under node b's name.
OTHER_MACHINE = "1.0003:1925000000000"


def combined(real_run, tmp_path, *extra):
    """real_run's logs with the directories in extra beside them."""
    d = tmp_path / "logs"
    shutil.copytree(real_run.logs, d)
    for i, e in enumerate(extra):
        shutil.copytree(e, d / ("extra%d" % i))
    return d


def refused(real_run, logs, out, *want):
    r = real_run.analyze(out, logs=logs, check=False)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "the logs contradict each other; nothing was written" in r.stderr, r.stderr
    for w in want:
        assert w in r.stderr, r.stderr
    assert not any(os.path.exists(out / f) for f in ("summary.txt", "durations.parquet", "report.html"))
    return r.stderr


def test_two_machines_under_one_node_name(real_run, tmp_path):
    impostor = tmp_path / "impostor"
    real_run.log_node("b", impostor, CP_FAKE_TSC=OTHER_MACHINE)
    # Beside node b's own files.
    err = refused(real_run, combined(real_run, tmp_path, impostor), tmp_path / "out",
                  "node b: its TSCs come from 2 clocks", "two machines (or a reboot) under one node name",
                  ":1925000000000", ":5000000000")
    assert str(impostor.name) not in err or "extra0" in err  # the files are named
    # Alone: its files against the clock the rounds measured as node b.
    logs = tmp_path / "alone"
    shutil.copytree(real_run.logs / "a", logs / "a")
    shutil.copytree(impostor, logs / "b")
    refused(real_run, logs, tmp_path / "out2", "node b: its TSCs come from 2 clocks", "tsc-client on host")


def test_two_tsc_rates_for_one_node(real_run, tmp_path):
    fast = tmp_path / "fast"
    real_run.log_node("b", fast, CP_FAKE_TSC="2.0006:5000000000")
    refused(real_run, combined(real_run, tmp_path, fast), tmp_path / "out",
            "node b: its files disagree on the TSC rate")


def test_two_runs_in_one_directory(real_run, tmp_path):
    again = tmp_path / "again"
    for node in real_run.channels:
        real_run.log_node(node, again / node)
    logs = combined(real_run, tmp_path, again)
    refused(real_run, logs, tmp_path / "out", "the logs hold 2 runs", "a/source out", "--one-run")
    # Said to be one run, it is analysed (and its joins span both).
    r = real_run.analyze(tmp_path / "out1", "--one-run", logs=logs)
    assert r.returncode == 0


def test_runs_named_apart(real_run, tmp_path):
    r1, r2 = tmp_path / "r1", tmp_path / "r2"
    real_run.log_node("a", r1, CP_RUN="r1")
    real_run.log_node("a", r2, CP_RUN="r2")
    logs = tmp_path / "logs"
    shutil.copytree(r1, logs / "r1")
    shutil.copytree(r2, logs / "r2")
    refused(real_run, logs, tmp_path / "out", 'files of 2 runs (CP_RUN): "r1"', '"r2"')
