"""The Parquet files of `cloudprofiler analyze --out` (real_analysis: the
real tool on the logs of two real nodes, conftest.real_run), read by pyarrow,
pandas and DuckDB, against read_analysis and against durations.csv; a damaged
or cut log; and the README's queries, run as written."""

import ast
import glob
import os
import re
import shutil
import textwrap

import numpy as np
import pytest

import cloudprofiler as cp
from conftest import REPO

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

NAMES = ["from_node", "from_channel", "to_node", "to_channel", "kind"]
DURATION_TYPES = dict(
    [("tuple_id", pa.int64())] + [(c, pa.string()) for c in NAMES] +
    [("start_tsc", pa.uint64()), ("end_tsc", pa.uint64())] +
    [(c, pa.float64()) for c in ("cycles", "error_cycles", "seconds", "error_seconds")] +
    [("scenario", pa.int32()), ("paper_error_cycles", pa.float64()), ("baseline_error_cycles", pa.float64())])
# A duration is one (tuple, kind, hop): the rows' key, to compare tables whatever their order.
KEY = ["kind", "from_node", "from_channel", "to_node", "to_channel", "tuple_id"]


def _sorted(df):
    return df.sort_values(KEY, kind="stable").reset_index(drop=True)


def _is_string(t):
    return pa.types.is_string(t) or (pa.types.is_dictionary(t) and pa.types.is_string(t.value_type))


def test_parquet_types_in_pyarrow(real_run, real_analysis):
    """The schema: ids int64, TSCs uint64, names strings (dictionary-encoded
    in the file, so read_dictionary gives dictionary<string>), floats double,
    every column required; the other tables likewise."""
    path = real_analysis / "durations.parquet"
    f = pq.ParquetFile(path)
    schema = f.schema_arrow
    assert schema.names == list(DURATION_TYPES)
    for name, t in DURATION_TYPES.items():
        field = schema.field(name)
        assert field.type == t or (_is_string(t) and _is_string(field.type)), (name, field.type)
        assert not field.nullable, name
    md = f.metadata
    assert md.num_rows == 3 * real_run.n_tuples
    for rg in range(md.num_row_groups):
        for name in NAMES:
            assert "RLE_DICTIONARY" in md.row_group(rg).column(schema.get_field_index(name)).encodings, name
    t = pq.read_table(path, read_dictionary=NAMES)
    for name in NAMES:
        assert pa.types.is_dictionary(t.schema.field(name).type) and _is_string(t.schema.field(name).type), name
    assert set(t.column("kind").to_pylist()) == {"compute", "transfer", "end_to_end"}
    # TSCs as uint64 all the way: node b's fake counter starts at 5e9 cycles
    start = t.column("start_tsc").to_numpy()
    assert start.dtype == np.uint64 and int(start.max()) > 5_000_000_000

    summary = pq.read_table(real_analysis / "summary.parquet").schema
    for name in ("kind", "from", "to", "quantiles"):
        assert _is_string(summary.field(name).type), name
    assert summary.field("count").type == pa.int64()
    assert [summary.field("scenario_%d" % i).type for i in range(4)] == [pa.int64()] * 4
    assert all(summary.field(n).type == pa.float64() for n in summary.names if n.endswith("_s"))
    runs = pq.read_table(real_analysis / "runs.parquet").schema
    assert (runs.field("first_tuple_id").type, runs.field("scenario").type) == (pa.int64(), pa.int32())
    tp = pq.read_table(real_analysis / "throughput.parquet").schema
    assert (tp.field("count").type, tp.field("tuples_per_s").type) == (pa.int64(), pa.float64())


def test_pyarrow_pandas_and_read_analysis_agree(real_run, real_analysis):
    res = cp.read_analysis(real_analysis)
    by_pyarrow = pq.read_table(real_analysis / "durations.parquet").to_pandas()
    by_pandas = pd.read_parquet(real_analysis / "durations.parquet", engine="pyarrow")
    pd.testing.assert_frame_equal(by_pandas, res.durations, check_exact=True)
    pd.testing.assert_frame_equal(by_pyarrow, res.durations, check_exact=True)
    assert str(by_pandas["start_tsc"].dtype) == "uint64" and str(by_pandas["tuple_id"].dtype) == "int64"
    for t in ("summary", "runs", "throughput"):
        df = pd.read_parquet(real_analysis / (t + ".parquet"), engine="pyarrow")
        pd.testing.assert_frame_equal(df, res[t][list(df.columns)], check_exact=True, obj=t)


def test_duckdb_reads_the_same_numbers(real_run, real_analysis):
    """SQL over the files: DuckDB's types, counts, sums of TSCs (exact, as
    HUGEINT), every row, and the summary's figures recomputed."""
    duckdb = pytest.importorskip("duckdb")
    res = cp.read_analysis(real_analysis)
    d = res.durations
    path = str(real_analysis / "durations.parquet")
    types = dict(duckdb.sql("select column_name, column_type from (describe select * from '%s')" % path).fetchall())
    assert types["tuple_id"] == "BIGINT" and types["start_tsc"] == types["end_tsc"] == "UBIGINT"
    assert all(types[c] == "VARCHAR" for c in NAMES) and types["scenario"] == "INTEGER"
    assert types["seconds"] == "DOUBLE"
    rows = duckdb.sql("""select kind, count(*), sum(start_tsc), sum(end_tsc), min(tuple_id), max(tuple_id),
                                max(error_seconds), sum(scenario)
                         from '%s' group by kind order by kind""" % path).fetchall()
    want = []
    for kind, g in sorted(d.groupby("kind")):
        want.append((kind, len(g), sum(int(v) for v in g["start_tsc"]), sum(int(v) for v in g["end_tsc"]),
                     int(g["tuple_id"].min()), int(g["tuple_id"].max()), float(g["error_seconds"].max()),
                     int(g["scenario"].sum())))
    assert [tuple(int(v) if isinstance(v, (int, np.integer)) else v for v in r) for r in rows] == want
    assert [r[1] for r in rows] == [real_run.n_tuples] * 3
    # Every row, every column, to the bit.
    every = duckdb.sql("select * from '%s'" % path).df()
    pd.testing.assert_frame_equal(_sorted(every), _sorted(d), check_exact=True, check_dtype=False)
    assert [str(every[c].dtype) for c in ("tuple_id", "start_tsc", "scenario")] == ["int64", "uint64", "int32"]
    # The summary's count, min, max and bound max per pair, from the rows.
    s = duckdb.sql("""select kind, from_node || '/' || from_channel as "from", to_node || '/' || to_channel as "to",
                             count(*) as count, min(seconds) as min_s, max(seconds) as max_s,
                             max(error_seconds) as error_max_s
                      from '%s' group by all order by all""" % path).df()
    summ = res.summary.set_index(["kind", "from", "to"]).loc[list(zip(s["kind"], s["from"], s["to"]))]
    assert summ["count"].tolist() == s["count"].tolist()
    for c in ("min_s", "max_s", "error_max_s"):
        np.testing.assert_array_equal(summ[c].to_numpy(), s[c].to_numpy(), err_msg=c)


def test_durations_csv_has_the_same_rows(real_run, real_analysis_csv):
    """--durations-csv: durations.csv beside durations.parquet, the same rows
    (as sorted rows, and merged on the key), floats equal to the bit."""
    csv_path, pq_path = real_analysis_csv / "durations.csv", real_analysis_csv / "durations.parquet"
    assert csv_path.exists() and pq_path.exists()
    c = pd.read_csv(csv_path, dtype={"start_tsc": "uint64", "end_tsc": "uint64", **{n: str for n in NAMES}},
                    keep_default_na=False)
    p = pq.read_table(pq_path).to_pandas()
    assert list(c.columns) == list(p.columns) == list(DURATION_TYPES)
    assert len(c) == len(p) == 3 * real_run.n_tuples
    c["scenario"] = c["scenario"].astype("int32")
    pd.testing.assert_frame_equal(_sorted(c), _sorted(p), check_exact=True, check_dtype=False)
    m = c.merge(p, on=KEY, how="outer", suffixes=("_csv", "_pq"), indicator=True, validate="one_to_one")
    assert (m["_merge"] == "both").all()
    for col in set(DURATION_TYPES) - set(KEY):
        assert (m[col + "_csv"].to_numpy() == m[col + "_pq"].to_numpy()).all(), col


def test_no_durations_writes_neither(real_run, tmp_path):
    out = tmp_path / "out"
    real_run.analyze(out, "--no-durations")
    assert not (out / "durations.parquet").exists() and not (out / "durations.csv").exists()
    res = cp.read_analysis(out)
    assert res.durations is None and "durations" not in res.files
    assert res.files["summary"] == str(out / "summary.parquet") and (res.summary["count"] == real_run.n_tuples).all()


def _damage(path, how):
    data = bytearray(open(path, "rb").read())
    if how == "cut":  # a crash: the tail (and trailer) never written
        del data[len(data) * 2 // 3:]
    else:  # one byte flipped inside a frame in the middle of the file
        frames = [m.start() for m in re.finditer(b"CPFR", bytes(data))]
        assert len(frames) >= 4, frames
        k = len(frames) // 2
        data[(frames[k] + frames[k + 1]) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))


@pytest.mark.parametrize("how", ["cut", "flip"])
def test_damaged_log_still_gives_results(real_run, tmp_path, how):
    """A log cut short or with a corrupt frame: analyze warns on stderr, its
    summary.txt says which file and what, and read_analysis reads the rest."""
    logs = tmp_path / "logs"
    shutil.copytree(real_run.logs, logs)
    bad = glob.glob(str(logs / "b" / "*map_out.cplog"))
    assert len(bad) == 1, bad
    _damage(bad[0], how)
    out = tmp_path / "out"
    r = real_run.analyze(out, logs=logs)
    warned = [l for l in r.stderr.splitlines() if "WARNING" in l]
    assert warned and all(bad[0] in l for l in warned), r.stderr
    assert any(("cut short" if how == "cut" else "damaged frames skipped") in l for l in warned), r.stderr
    res = cp.read_analysis(out)
    text = res.summary_text
    assert "logs: 1 of 6 files DAMAGED OR INCOMPLETE" in text, text
    assert "b/map out (%s)" % bad[0] in text and "accepted records are not in the file" in text, text
    n = real_run.n_tuples
    d = res.durations
    counts = d.groupby("kind").size().to_dict()
    assert counts["transfer"] == n  # source out -> map in: untouched
    assert 0 < counts["compute"] == counts["end_to_end"] < n  # the records of map out that were lost
    assert res.summary.set_index("kind")["count"].to_dict() == counts
    assert str(d["start_tsc"].dtype) == "uint64" and (d["seconds"] > 0).all()


def _readme_blocks(name):
    """The code blocks README.md and the pages under docs/ mark with
    <!-- tested: name --> on the line before their opening fence (indented
    in a list item or not), with where each starts."""
    blocks = []
    for page in ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md")):
        lines = open(os.path.join(REPO, page), encoding="utf-8").read().split("\n")
        for i, line in enumerate(lines):
            if line.strip() != "<!-- tested: %s -->" % name:
                continue
            fence = lines[i + 1]
            assert fence.strip().startswith("```"), "%s:%d: no code block after the marker" % (page, i + 1)
            indent = fence[:len(fence) - len(fence.lstrip())]
            end = next(j for j in range(i + 2, len(lines)) if lines[j].strip() == "```")
            code = "\n".join(l[len(indent):] if l.startswith(indent) else l for l in lines[i + 2:end])
            blocks.append(("%s:%d" % (page, i + 3), textwrap.dedent(code)))
    return blocks


def _run(code, where):
    """Runs code as a notebook cell would: the value of its last expression."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    ns = {"__name__": "__readme__"}
    exec(compile(tree, where, "exec"), ns)
    return eval(compile(ast.Expression(last.value), where, "eval"), ns) if last else None


def test_readme_queries(real_analysis):
    """README.md's query, with pandas and with DuckDB's SQL, run as written on
    a real analysis (results/ replaced by its directory): the same hops and
    the same numbers, each hop's worst bound the summary's error_max_s."""
    duckdb = pytest.importorskip("duckdb")
    blocks = _readme_blocks("test_readme_queries")
    assert len(blocks) == 2, "README.md and docs/: want two marked blocks (pandas, DuckDB), found %d" % len(blocks)
    got = {}
    for where, code in blocks:
        assert "results/" in code, code
        value = _run(code.replace("results/", str(real_analysis) + "/"), where)
        got["duckdb" if "import duckdb" in code else "pandas"] = value
    assert set(got) == {"pandas", "duckdb"}
    assert isinstance(got["duckdb"], duckdb.DuckDBPyRelation)
    by_sql = got["duckdb"].df()
    by_pandas = got["pandas"].reset_index()
    assert list(by_pandas.columns) == list(by_sql.columns) == ["from_channel", "to_channel", "p99_us", "worst_bound_us"]
    hops = [("map in", "map out"), ("source out", "map in")]
    assert list(zip(by_pandas["from_channel"], by_pandas["to_channel"])) == hops
    assert list(zip(by_sql["from_channel"], by_sql["to_channel"])) == hops
    # Both interpolate quantiles linearly; the same doubles, up to summation order.
    np.testing.assert_allclose(by_pandas["p99_us"], by_sql["p99_us"], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(by_pandas["worst_bound_us"], by_sql["worst_bound_us"])
    res = cp.read_analysis(real_analysis)
    d = res.durations
    for (a, b), p99 in zip(hops, by_sql["p99_us"]):
        s = d.loc[(d.from_channel == a) & (d.to_channel == b), "seconds"].to_numpy()
        assert p99 == pytest.approx(np.quantile(s, 0.99) * 1e6, rel=1e-12)
    summ = res.summary[res.summary.kind != "end_to_end"].set_index(["from", "to"])
    for (a, b), bound in zip(hops, by_sql["worst_bound_us"]):
        nodes = dict(zip(d.from_channel, d.from_node)), dict(zip(d.to_channel, d.to_node))
        row = summ.loc[("%s/%s" % (nodes[0][a], a), "%s/%s" % (nodes[1][b], b))]
        assert bound == row["error_max_s"] * 1e6
