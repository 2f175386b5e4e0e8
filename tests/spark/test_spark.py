"""The analysis on Apache Spark (cloudprofiler.spark, docs/spark.md) against
`cloudprofiler analyze` on the same logs, in the same run: Spark in local mode
(pyspark from PyPI, the JDK the build already needs), the binary the build
made. `make test-spark` runs it (CP_TOOL, CP_BUILD set; TMPDIR a directory of
its own)."""

import json
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pyarrow.parquet as pq
import pytest

import cloudprofiler
from cloudprofiler import spark as cps

TOOL = os.environ["CP_TOOL"]
BUILD = os.environ["CP_BUILD"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# What analyze computes that the partitioned analysis does not (yet): the
# comparison runs analyze without them.
ONLY_DURATIONS = ["--no-capacity", "--no-critical-path", "--no-mace", "--no-report", "--quiet"]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession
    os.environ["PYSPARK_PYTHON"] = sys.executable
    tmp = str(tmp_path_factory.mktemp("spark-local"))
    s = (SparkSession.builder.master("local[2]").appName("cloudprofiler test")
         .config("spark.ui.enabled", "false")
         .config("spark.local.dir", tmp)
         .config("spark.driver.extraJavaOptions", "-Djava.io.tmpdir=" + tmp)
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def run(*args, **kw):
    p = subprocess.run([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    assert p.returncode == 0, "%s: %s%s" % (" ".join(map(str, args)), p.stdout, p.stderr)
    return p.stdout


@pytest.fixture(scope="module")
def bench_logs(tmp_path_factory):
    """The bench's logs, smaller: 2 nodes, 4 channels, 1M records."""
    d = tmp_path_factory.mktemp("bench")
    run("bash", os.path.join(REPO, "tests", "analyze-data.sh"), BUILD, d, 250000)
    return d


def analyze(logs, rounds, out):
    run(TOOL, "analyze", "--logs", *logs, *(["--rounds", rounds] if rounds else []), "--out", out, *ONLY_DURATIONS)


def export(logs, rounds, out, partitions=8):
    return run(TOOL, "export", "--logs", *logs, *(["--rounds", rounds] if rounds else []), "--out", out, "--partitions", partitions)


def durations(path):
    """A durations table as a sorted frame (a set of rows), TSCs uint64."""
    df = pq.read_table(str(path)).to_pandas()
    for c in ("start_tsc", "end_tsc"):
        df[c] = df[c].astype("uint64")
    return df.sort_values(list(df.columns)).reset_index(drop=True)


def same_results(ref, out):
    with open(os.path.join(ref, "summary.csv")) as f, open(os.path.join(out, "summary.csv")) as g:
        assert f.read() == g.read()
    want, got = durations(os.path.join(ref, "durations.parquet")), durations(os.path.join(out, "durations.parquet"))
    assert len(want) == len(got)
    pd.testing.assert_frame_equal(want, got)
    return want


def test_bench_logs_match_analyze(spark, bench_logs, tmp_path):
    ref, ex, out = tmp_path / "analyze", tmp_path / "export", tmp_path / "spark"
    analyze([bench_logs / "logs"], bench_logs / "rounds", ref)
    export([bench_logs / "logs"], bench_logs / "rounds", ex)
    res = cps.analyze_export(spark, str(ex), str(out), binary=TOOL)
    assert res["records"] == 1000000 and res["durations"] == 1000000
    rows = same_results(ref, out)
    assert len(rows) == 1000000
    assert (out / "capacity.csv").exists()  # b marks its in and out
    # The summary's text says what analyze's does, but for what it did not run.
    order = [l for l in open(ref / "summary.txt") if l.startswith("channel order:")]
    assert order and order == [l for l in open(out / "summary.txt") if l.startswith("channel order:")]
    assert res["order"] == order[0].split(": ", 1)[1].strip().split(" -> ")
    # read_analysis reads what Spark wrote as it reads analyze's files.
    a = cloudprofiler.read_analysis(str(out))
    assert len(a.durations) == 1000000 and str(a.durations["start_tsc"].dtype) == "uint64"
    assert list(a.summary["count"]) == list(cloudprofiler.read_analysis(str(ref)).summary["count"])
    # An analysis is not written over.
    with pytest.raises(cps.SparkAnalysisError, match="holds an analysis already"):
        cps.analyze_export(spark, str(ex), str(out), binary=TOOL)


# capacity.csv's columns that come from the partitions' sums (not from the
# cost model, which Spark does not have).
SUMMED = ["level", "window", "start_s", "end_s", "operator", "instance", "node", "pid", "tuples_in", "tuples_out",
          "arrivals_per_s", "departures_per_s", "blocked_share", "selectivity"]


def test_multinode_demo_matches_analyze(spark, tmp_path):
    """The demo's three nodes: the durations and summaries as analyze's, and
    capacity's rows per operator and 250 ms window as analyze's full
    analysis has them, but for the cost model (none on partitions): the
    busy share of an instance that notes its thread's waits is the cost
    model's, and Spark leaves it empty and says so."""
    demo = tmp_path / "demo"
    run("bash", os.path.join(REPO, "examples", "multinode", "demo.sh"), BUILD, env=dict(os.environ, CP_DEMO_DIR=str(demo)))
    ref, ex, out, full = tmp_path / "analyze", tmp_path / "export", tmp_path / "spark", tmp_path / "full"
    analyze([demo / "logs"], demo / "rounds", ref)
    run(TOOL, "analyze", "--logs", demo / "logs", "--rounds", demo / "rounds", "--out", full, "--window", "250ms",
        "--no-report", "--quiet", "--no-durations")
    export([demo / "logs"], demo / "rounds", ex, partitions=4)
    cps.analyze_export(spark, str(ex), str(out), binary=TOOL, window="250ms")
    assert len(same_results(ref, out)) > 1000
    want = pd.read_csv(full / "capacity.csv", dtype=str, keep_default_na=False)
    got = pd.read_csv(out / "capacity.csv", dtype=str, keep_default_na=False)
    assert list(want.columns) == list(got.columns)
    assert len(want) >= 8 and (want["level"] == "instance").any()
    pd.testing.assert_frame_equal(want[SUMMED], got[SUMMED])
    other = want["busy_share"] != got["busy_share"]
    assert other.any(), "the demo's marked operators note their waits: analyze's busy share is the cost model's"
    assert (got.loc[other, "busy_share"] == "").all(), "Spark says another busy share than analyze's"
    for op in set(got.loc[other, "operator"]):
        whole = got[(got["operator"] == op) & (got["level"] == "operator") & (got["window"] == "-1")]
        assert "no capacity, no busy share" in whole["note"].iloc[0], whole["note"].iloc[0]
    relay = got[(got["operator"] == "relay") & (got["level"] == "operator") & (got["window"] == "-1")]
    assert len(relay) == 1 and relay["capacity"].iloc[0] in ("", "NaN", "nan")
    assert "analyze a time range for it" in relay["note"].iloc[0]
    assert want[(want["operator"] == "relay") & (want["level"] == "operator") & (want["window"] == "-1")]["capacity"].iloc[0] not in ("", "NaN")


def test_counters_match_analyze(spark, tmp_path):
    """The C demo's logs, one node without rounds: a counter channel beside
    the tuples. Its log goes into the export whole, and Spark's last merge
    writes throughput.csv as analyze does; a stale one goes on overwrite."""
    logs = tmp_path / "logs"
    run(os.path.join(BUILD, "demo"), env=dict(os.environ, CP_LOG_DIR=str(logs)))
    ref, ex, out = tmp_path / "analyze", tmp_path / "export", tmp_path / "spark"
    analyze([logs], None, ref)
    export([logs], None, ex, partitions=2)
    copies = [c["copy"] for f in (ex / "channels").iterdir() for c in json.load(open(f))["channels"] if c.get("copy")]
    assert len(copies) == 1 and (ex / copies[0]).is_file()
    (out).mkdir()
    (out / "runs.csv").write_text("stale\n")
    cps.analyze_export(spark, str(ex), str(out), binary=TOOL, overwrite=True)
    same_results(ref, out)
    tp = (ref / "throughput.csv").read_text()
    assert "demo throughput" in tp and tp == (out / "throughput.csv").read_text()
    assert pq.read_table(str(out / "throughput.parquet")).num_rows == len(tp.splitlines()) - 1
    assert not (out / "runs.csv").exists()


def test_nodes_exported_apart_with_a_damaged_log(spark, bench_logs, tmp_path):
    """Each node exports its own logs into one export; one file is damaged:
    the same results, and the damage said as analyze says it."""
    logs = tmp_path / "logs"
    shutil.copytree(bench_logs / "logs", logs)
    work = next(p for p in (logs / "b").iterdir() if "b_work" in p.name)
    b = bytearray(work.read_bytes())
    for i in range(len(b) // 2, len(b) // 2 + 64):
        b[i] ^= 0x5A
    work.write_bytes(bytes(b))
    ref, ex, out = tmp_path / "analyze", tmp_path / "export", tmp_path / "spark"
    analyze([logs], bench_logs / "rounds", ref)
    for node in ("a", "b"):
        export([logs / node], bench_logs / "rounds", ex)
    cps.analyze_export(spark, str(ex), str(out), binary=TOOL, capacity=False)
    same_results(ref, out)
    assert not (out / "capacity.csv").exists()

    def said(path):
        return [l for l in open(path) if l.startswith("logs:") or "damaged" in l.lower()]
    assert said(ref / "summary.txt") and said(ref / "summary.txt") == said(out / "summary.txt")
    assert any("DAMAGED" in l for l in said(out / "summary.txt"))


def test_not_an_export(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(cps.SparkAnalysisError, match="no export.json"):
        cps.analyze_export(spark, str(tmp_path / "empty"), str(tmp_path / "out"), binary=TOOL)
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def demo_export(tmp_path_factory):
    """The C demo's logs (one node, no rounds) and their export in 2
    partitions: records/part=00000/ and part=00001/."""
    d = tmp_path_factory.mktemp("demo-export")
    run(os.path.join(BUILD, "demo"), env=dict(os.environ, CP_LOG_DIR=str(d / "logs")))
    export([d / "logs"], None, d / "export", partitions=2)
    assert sorted(p.name for p in (d / "export" / "records").iterdir()) == ["part=00000", "part=00001"]
    return d


# What records/ may not hold beside the export's partitions: each of these
# directories holds a copy of partition 1's file (records the glob
# records/part=*/*.parquet finds).
@pytest.mark.parametrize("entry,why", [
    ("part=abc", "not part= and a number"),
    ("part=-1", "not part= and a number"),
    ("part=+1", "not part= and a number"),
    ("part=00002", r"partition 2 is not below 2"),
    ("part=99999", r"partition 99999 is not below 2"),
    ("part=1", r"partition 1 again \(.*records/part=(1|00001) holds it too\)"),
    ("stray.parquet", "not a directory"),
])
def test_records_holds_only_partitions(spark, demo_export, tmp_path, entry, why):
    ex, out = tmp_path / "export", tmp_path / "out"
    shutil.copytree(demo_export / "export", ex)
    one = ex / "records" / "part=00001" / "vm.parquet"
    if entry.endswith(".parquet"):
        shutil.copy(one, ex / "records" / entry)
    else:
        (ex / "records" / entry).mkdir()
        shutil.copy(one, ex / "records" / entry / "vm.parquet")
    with pytest.raises(cps.SparkAnalysisError) as e:
        cps.analyze_export(spark, str(ex), str(out), binary=TOOL)
    msg = str(e.value)
    named = "part=(1|00001)" if entry == "part=1" else re.escape(entry)  # the one listed second
    assert re.match(r"^file:\S*/records/%s: %s; an export's records/ holds records/part=PPPPP/STEM\.parquet, P below "
                    r"export\.json's partitions \(2\): remove it, or give the export as `cloudprofiler export` wrote "
                    r"it$" % (named, why), msg), msg
    assert not out.exists()


def test_records_partition_without_padding(spark, demo_export, tmp_path):
    """part=1 is partition 1 as part=00001 is: the same results as analyze's."""
    ex, ref, out = tmp_path / "export", tmp_path / "analyze", tmp_path / "spark"
    shutil.copytree(demo_export / "export", ex)
    (ex / "records" / "part=00001").rename(ex / "records" / "part=1")
    analyze([demo_export / "logs"], None, ref)
    cps.analyze_export(spark, str(ex), str(out), binary=TOOL, capacity=False)
    same_results(ref, out)


def test_a_nul_in_a_path_is_refused(spark, demo_export, tmp_path, capsys):
    """As open_channel refuses a NUL in a channel name: before anything runs
    or is written."""
    ex, out = str(demo_export / "export"), tmp_path / "out"
    for kw, what in [(dict(export=ex + "\0/other", out=str(out), binary=TOOL), "export"),
                     (dict(export=ex, out=str(out) + "\0/other", binary=TOOL), "out"),
                     (dict(export=ex, out=str(out), binary=TOOL + "\0/other"), "binary")]:
        with pytest.raises(ValueError, match=r"^analyze_export: %s .* contains a NUL byte \(the C API and the system "
                                             r"take NUL-terminated paths\)$" % what):
            cps.analyze_export(spark, **kw)
        assert not out.exists()
    with pytest.raises(SystemExit) as e:
        cps.main(["--export", ex + "\0/other", "--out", str(out), "--binary", TOOL])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and re.search(r"error: --export .* contains a NUL byte \(the C API and the system take "
                                           r"NUL-terminated paths\)$", err), err
    assert not out.exists()
