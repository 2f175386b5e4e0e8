"""The analysis of a `cloudprofiler export` on Apache Spark (docs/spark.md).

    spark-submit --master MASTER --files /path/to/cloudprofiler \\
        "$(python -c 'import cloudprofiler.spark as s; print(s.__file__)')" \\
        --export hdfs:///runs/42/export --out hdfs:///runs/42/analysis

or, from a PySpark session, ``analyze_export(spark, export, out)``.

Spark schedules analyze's own join on each partition of the export (the
`cloudprofiler join-part` stage, the Go binary shipped with the job), and
the driver merges the partitions' states (`cloudprofiler merge-parts`): one
definition of every result, the one `analyze` computes on one machine, and
Spark does what it is good at (reading and writing partitioned Parquet on
any Hadoop path, scheduling tasks, retrying them). It writes, under out:

- durations.parquet/  every duration, analyze's columns (a directory of
  Spark's part files: pandas, pyarrow, DuckDB and Spark read it as one
  table; start_tsc and end_tsc are int64 there: Spark has no unsigned type)
- summary.csv, summary.parquet, summary.txt, model.json: as analyze writes
  them, equal to analyze's on the same logs.

As `analyze` does, the channel order comes from the votes of a sample of
the partitions first (about 1/64 of the records), every partition is then
joined with it, and joined again with the order of all votes when that
differs.

The module reads nothing but the standard library at import; pyspark and
pyarrow (pip install pyspark pyarrow) when it runs.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

__all__ = ["analyze_export", "main"]

# The columns of durations.parquet, as analyze writes them (Spark types:
# its LongType is int64; the TSCs' bits are kept).
_DURATIONS = [
    ("tuple_id", "long"), ("from_node", "string"), ("from_channel", "string"), ("to_node", "string"),
    ("to_channel", "string"), ("kind", "string"), ("start_tsc", "long"), ("end_tsc", "long"),
    ("cycles", "double"), ("error_cycles", "double"), ("seconds", "double"), ("error_seconds", "double"),
    ("scenario", "int"), ("paper_error_cycles", "double"), ("baseline_error_cycles", "double"),
]

_META_DIRS = ("channels", "rounds")


class SparkAnalysisError(RuntimeError):
    """A stage of the analysis failed: the message is the binary's."""


def _binary_default():
    for p in (os.environ.get("CP_TOOL"), shutil.which("cloudprofiler")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _read_meta(spark, export):
    """export.json, channels/*.json and rounds/*.json as {relative path: text},
    read through Hadoop's FileSystem (any path Spark reads)."""
    sc = spark.sparkContext
    jvm = sc._jvm
    root = jvm.org.apache.hadoop.fs.Path(export)
    fs = root.getFileSystem(sc._jsc.hadoopConfiguration())
    meta = {}
    for rel in ["export.json"] + [d + "/*.json" for d in _META_DIRS]:
        found = fs.globStatus(jvm.org.apache.hadoop.fs.Path(export.rstrip("/") + "/" + rel)) or []
        for st in found:
            p = st.getPath()
            stream = fs.open(p)
            try:
                data = bytearray()
                buf = jvm.java.io.ByteArrayOutputStream()
                jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, buf, 65536, False)
                data = bytes(buf.toByteArray())
            finally:
                stream.close()
            name = p.getName()
            meta[name if rel == "export.json" else rel.split("/")[0] + "/" + name] = data.decode("utf-8")
    if "export.json" not in meta:
        raise SparkAnalysisError("%s: no export.json: not a cloudprofiler export (cloudprofiler export --out)" % export)
    return meta


def _write_meta(meta, root):
    for rel, text in meta.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def _run(binary, args):
    p = subprocess.run([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SparkAnalysisError("cloudprofiler %s: %s" % (args[0], (p.stderr or p.stdout).strip()))
    return p.stdout


def _join_fn(meta_b, binary_name, rank, schema):
    """The task: one export partition's records (a pyarrow Table) through
    `cloudprofiler join-part`; returns its durations and, in a last row, its
    state."""

    def fn(table):
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark import SparkFiles

        binary = SparkFiles.get(binary_name)
        part = int(table.column("part")[0].as_py())
        tmp = tempfile.mkdtemp(prefix="cp-join-part-")
        try:
            _write_meta(meta_b.value, os.path.join(tmp, "export"))
            recs = os.path.join(tmp, "records.parquet")
            # Spark's columns are nullable; the export's are not (and none is null).
            recs_schema = pa.schema([pa.field("tuple_id", pa.int64(), nullable=False),
                                     pa.field("tsc", pa.int64(), nullable=False),
                                     pa.field("channel_key", pa.string(), nullable=False)])
            pq.write_table(table.select(["tuple_id", "tsc", "channel_key"]).cast(recs_schema), recs)
            args = ["join-part", "--export", os.path.join(tmp, "export"), "--records", recs,
                    "--state", os.path.join(tmp, "state"), "--partition", str(part)]
            if rank is not None:
                args += ["--rank-json", json.dumps(rank), "--durations", os.path.join(tmp, "durations.parquet")]
            _run(binary, args)
            with open(os.path.join(tmp, "state"), "rb") as f:
                state = f.read()
            cols = {}
            if rank is not None:
                d = pq.read_table(os.path.join(tmp, "durations.parquet"))
                for name, _ in _DURATIONS:
                    c = d.column(name)
                    if pa.types.is_uint64(c.type):
                        c = c.cast(pa.int64(), safe=False)  # the bits, as Spark has no uint64
                    cols[name] = c
                n = d.num_rows
            else:
                n = 0
            out = {}
            for f in schema:
                if f.name == "part":
                    out["part"] = pa.array([part] * (n + 1), pa.int32())
                elif f.name == "state":
                    out["state"] = pa.array([None] * n + [state], pa.binary())
                else:
                    c = cols.get(f.name)
                    nulls = pa.nulls(1, f.type)
                    out[f.name] = pa.concat_arrays(
                        ([c.combine_chunks()] if c is not None and n else []) + [nulls])
            return pa.table(out, schema=schema)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    return fn


def _arrow_schema(with_durations):
    import pyarrow as pa
    types = {"long": pa.int64(), "string": pa.string(), "double": pa.float64(), "int": pa.int32()}
    fields = [pa.field("part", pa.int32())]
    if with_durations:
        fields += [pa.field(n, types[t]) for n, t in _DURATIONS]
    fields.append(pa.field("state", pa.binary()))
    return pa.schema(fields)


def _ddl(with_durations):
    cols = ["part int"]
    if with_durations:
        cols += ["%s %s" % (n, t) for n, t in _DURATIONS]
    cols.append("state binary")
    return ", ".join(cols)


def _copy_out(spark, local_dir, out, names):
    """Copies the merge's files to out, through Hadoop's FileSystem (any
    path Spark writes to)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    dst = jvm.org.apache.hadoop.fs.Path(out)
    fs = dst.getFileSystem(conf)
    fs.mkdirs(dst)
    for name in names:
        src = os.path.join(local_dir, name)
        if os.path.exists(src):
            fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path("file://" + os.path.abspath(src)),
                                 jvm.org.apache.hadoop.fs.Path(out.rstrip("/") + "/" + name))


def analyze_export(spark, export, out, binary=None, durations=True, overwrite=False, sample_share=1 / 64, shipped=False):
    """Analyses the export at `export` (any path Spark reads) into `out` (any
    path Spark writes): durations.parquet/ (unless durations=False) and the
    summaries. binary: the `cloudprofiler` executable for this machine and the
    executors' (default: $CP_TOOL, else on PATH); it is shipped with the job.
    shipped: the binary is in the job's files already (spark-submit --files).
    out must not hold an analysis already unless overwrite. Returns the
    merge's figures: {"order": [...], "records", "tuples", "durations"}."""
    from pyspark.sql import functions as F
    from pyspark import StorageLevel

    binary = binary or _binary_default()
    if not binary:
        raise SparkAnalysisError("no cloudprofiler executable: give binary= (or --binary), set CP_TOOL, or put it on PATH")
    sc = spark.sparkContext
    # The tasks' code goes with them, by value: executors need pyspark and
    # pyarrow, not this package.
    if __name__ != "__main__":
        from pyspark import cloudpickle
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if not shipped:
        sc.addFile(os.path.abspath(binary))
    name = os.path.basename(binary)
    meta = _read_meta(spark, export)
    meta_b = sc.broadcast(meta)
    jvm = sc._jvm
    outp = jvm.org.apache.hadoop.fs.Path(out)
    ofs = outp.getFileSystem(sc._jsc.hadoopConfiguration())
    if ofs.exists(jvm.org.apache.hadoop.fs.Path(out.rstrip("/") + "/summary.csv")) and not overwrite:
        raise SparkAnalysisError("%s holds an analysis already: give another --out, or overwrite" % out)

    nparts = json.loads(meta["export.json"])["partitions"]
    recs = spark.read.parquet(export.rstrip("/") + "/records").select("part", "tuple_id", "tsc", "channel_key")
    # A task per export partition (not Spark's 200 shuffle partitions by default).
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(nparts))
    local = tempfile.mkdtemp(prefix="cp-spark-merge-")
    try:
        _write_meta(meta, os.path.join(local, "export"))

        def merge(states, out_dir=None):
            paths = []
            for i, s in enumerate(states):
                p = os.path.join(local, "state-%06d" % i)
                with open(p, "wb") as f:
                    f.write(s)
                paths.append(p)
            args = ["merge-parts", "--export", os.path.join(local, "export")]
            if out_dir:
                args += ["--out", out_dir]
            res = json.loads(_run(binary, args + paths))
            for p in paths:
                os.remove(p)
            return res

        # The order from a sample: the first partitions that hold sample_share
        # of the records, votes only.
        counts = sorted((r["part"], r["count"]) for r in recs.groupBy("part").count().collect())
        if not counts:
            raise SparkAnalysisError("%s/records holds no records" % export)
        total, seen, sample = sum(c for _, c in counts), 0, []
        for p, c in counts:
            if sample and seen >= total * sample_share:
                break
            sample.append(p)
            seen += c
        votes = (recs.where(F.col("part").isin(sample)).groupBy("part")
                 .applyInArrow(_join_fn(meta_b, name, None, _arrow_schema(False)), _ddl(False)))
        rank = merge([r["state"] for r in votes.select("state").collect()])["rank"]

        for attempt in range(2):
            joined = (recs.groupBy("part")
                      .applyInArrow(_join_fn(meta_b, name, rank, _arrow_schema(True)), _ddl(True))
                      .persist(StorageLevel.DISK_ONLY))
            states = [r["state"] for r in joined.where(F.col("state").isNotNull()).select("state").collect()]
            merged_dir = os.path.join(local, "out")
            res = merge(states, merged_dir)
            if not res["rejoin"] or attempt == 1:
                break
            joined.unpersist()
            rank = res["rank"]  # the sample's order was not that of all votes: again
        if res["rejoin"]:
            raise SparkAnalysisError("the channel order did not settle after a second join: %s" % res["order"])
        if durations:
            (joined.where(F.col("state").isNull()).drop("state", "part")
             .write.mode("overwrite" if overwrite else "errorifexists")
             .parquet(out.rstrip("/") + "/durations.parquet"))
        joined.unpersist()
        _copy_out(spark, merged_dir, out, ["summary.csv", "summary.parquet", "summary.txt", "model.json"])
        return res
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", shuffle)
        shutil.rmtree(local, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="cloudprofiler.spark",
                                 description="Analyse a cloudprofiler export on Spark (docs/spark.md).")
    ap.add_argument("--export", required=True, help="the export's directory (cloudprofiler export --out): any Hadoop path")
    ap.add_argument("--out", required=True, help="where the results go: any Hadoop path")
    ap.add_argument("--binary", help="the cloudprofiler executable, shipped to the executors (default: $CP_TOOL, else on PATH; "
                                     "with spark-submit --files, its name in the job's files)")
    ap.add_argument("--no-durations", action="store_true", help="write only the summaries")
    ap.add_argument("--overwrite", action="store_true", help="replace an analysis already in --out")
    a = ap.parse_args(argv)
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.appName("cloudprofiler analyze").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    binary, shipped = a.binary, False
    if binary and not os.path.exists(binary):
        from pyspark import SparkFiles
        if os.path.exists(SparkFiles.get(os.path.basename(binary))):
            binary, shipped = SparkFiles.get(os.path.basename(binary)), True
    try:
        res = analyze_export(spark, a.export, a.out, binary=binary, durations=not a.no_durations, overwrite=a.overwrite,
                             shipped=shipped)
    except SparkAnalysisError as e:
        print("cloudprofiler.spark: %s" % e, file=sys.stderr)
        return 1
    finally:
        spark.stop()
    print("analysed %d records, %d tuples, %d durations; channel order %s; wrote %s" % (
        res["records"], res["tuples"], res["durations"], " -> ".join(res["order"]), a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
