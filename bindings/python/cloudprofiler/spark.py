"""The analysis of a `cloudprofiler export` on Apache Spark (docs/spark.md).

    spark-submit --master MASTER --files /path/to/cloudprofiler \\
        "$(python -c 'import cloudprofiler.spark as s; print(s.__file__)')" \\
        --export hdfs:///runs/42/export --out hdfs:///runs/42/analysis

or, from a PySpark session, ``analyze_export(spark, export, out)``.

Spark schedules analyze's own join on each partition of the export (the
`cloudprofiler join-part` stage, the Go binary shipped with the job), and
the driver merges the partitions' states (`cloudprofiler merge-parts`): one
definition of every result, the one `analyze` computes on one machine.
Spark reads the export's files (any Hadoop path) and hands each task the
files of its partitions whole, so that no record goes through Spark's
shuffle one at a time. It writes, under out:

- durations.parquet/  every duration, analyze's file a partition
  (part-PPPPP.parquet, analyze's columns and types): each task writes its
  own through pyarrow's filesystem for out (local, HDFS through libhdfs,
  S3, GCS: pyarrow.fs.FileSystem.from_uri), aside and then moved
- summary.csv, summary.parquet, summary.txt, model.json: as analyze writes
  them (equal to analyze's on the same logs), through Hadoop's FileSystem.

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


def _join_fn(meta_b, binary_name, rank, dur_out):
    """The task: the files of export partitions (rows of Spark's binaryFile
    source: part, content), each partition's files through `cloudprofiler
    join-part`; yields a row (part, state) a partition. With dur_out (a URI),
    the partition's durations.parquet goes there as part-PPPPP.parquet,
    through pyarrow's filesystem for the URI (written aside, then moved: a
    task run again writes the same file)."""

    def fn(batches):
        import uuid
        import pyarrow as pa
        import pyarrow.fs as pafs
        from pyspark import SparkFiles

        binary = SparkFiles.get(binary_name)
        files = {}
        for batch in batches:
            parts, contents = batch.column("part").to_pylist(), batch.column("content")
            for i, part in enumerate(parts):
                files.setdefault(part, []).append(contents[i].as_buffer())
        for part in sorted(files):
            tmp = tempfile.mkdtemp(prefix="cp-join-part-")
            try:
                _write_meta(meta_b.value, os.path.join(tmp, "export"))
                args = ["join-part", "--export", os.path.join(tmp, "export"), "--state", os.path.join(tmp, "state"),
                        "--partition", str(part)]
                for i, content in enumerate(files.pop(part)):
                    path = os.path.join(tmp, "records-%d.parquet" % i)
                    with open(path, "wb") as f:
                        f.write(content)
                    args += ["--records", path]
                local = os.path.join(tmp, "durations.parquet")
                if rank is not None:
                    args += ["--rank-json", json.dumps(rank)]
                    if dur_out:
                        args += ["--durations", local]
                _run(binary, args)
                if rank is not None and dur_out:
                    fs, base = pafs.FileSystem.from_uri(dur_out)
                    fs.create_dir(base, recursive=True)
                    final = "%s/part-%05d.parquet" % (base.rstrip("/"), part)
                    aside = "%s/.part-%05d.parquet.%s" % (base.rstrip("/"), part, uuid.uuid4().hex)
                    pafs.copy_files(local, aside, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
                    fs.move(aside, final)
                with open(os.path.join(tmp, "state"), "rb") as f:
                    state = f.read()
                yield pa.RecordBatch.from_arrays([pa.array([part], pa.int32()), pa.array([state], pa.binary())],
                                                 names=["part", "state"])
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

    return fn


def _uri(path):
    """path as a URI pyarrow's filesystems take (a local path made absolute)."""
    return path if "://" in path else "file://" + os.path.abspath(path)


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
    for held in ("summary.csv", "durations.parquet"):
        p = jvm.org.apache.hadoop.fs.Path(out.rstrip("/") + "/" + held)
        if ofs.exists(p):
            if not overwrite:
                raise SparkAnalysisError("%s holds an analysis already (%s): give another --out, or overwrite" % (out, held))
            if held == "durations.parquet" and durations:
                ofs.delete(p, True)  # its part files would stay beside the new ones

    nparts = json.loads(meta["export.json"])["partitions"]
    # Whole files, not rows: a partition's files (one per exporter) go to one
    # task as they are, and the binary reads them; Spark moves files, not
    # records (a shuffle of every record cost more than the join).
    files = (spark.read.format("binaryFile").option("pathGlobFilter", "*.parquet")
             .load(export.rstrip("/") + "/records").select("part", "content"))
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

        def join(parts, rank, dur_out=None):
            sel = files.where(F.col("part").isin(parts)) if parts is not None else files
            n = len(parts) if parts is not None else nparts
            return [r["state"] for r in sel.repartition(max(n, 1), "part")
                    .mapInArrow(_join_fn(meta_b, name, rank, dur_out), "part int, state binary").collect()]

        # The order from a sample: the first partitions that hold sample_share
        # of the records (by their files' sizes), votes only.
        sizes = sorted((r["part"], r["size"]) for r in
                       spark.read.format("binaryFile").option("pathGlobFilter", "*.parquet")
                       .load(export.rstrip("/") + "/records").groupBy("part").agg(F.sum("length").alias("size")).collect())
        if not sizes:
            raise SparkAnalysisError("%s/records holds no records" % export)
        total, seen, sample = sum(c for _, c in sizes), 0, []
        for p, c in sizes:
            if sample and seen >= total * sample_share:
                break
            sample.append(p)
            seen += c
        rank = merge(join(sample, None))["rank"]

        dur_out = _uri(out.rstrip("/") + "/durations.parquet") if durations else None
        merged_dir = os.path.join(local, "out")
        for attempt in range(2):
            res = merge(join(None, rank, dur_out), merged_dir)
            if not res["rejoin"] or attempt == 1:
                break
            rank = res["rank"]  # the sample's order was not that of all votes: again (the durations are rewritten)
        if res["rejoin"]:
            raise SparkAnalysisError("the channel order did not settle after a second join: %s" % res["order"])
        _copy_out(spark, merged_dir, out, ["summary.csv", "summary.parquet", "summary.txt", "model.json"])
        return res
    finally:
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
