"""The analysis of a `cloudprofiler export` on Apache Spark (docs/spark.md).

    spark-submit --master MASTER --files /path/to/cloudprofiler \\
        "$(python -c 'import cloudprofiler.spark as s; print(s.__file__)')" \\
        --export hdfs:///runs/42/export --out hdfs:///runs/42/analysis

or, from a PySpark session, ``analyze_export(spark, export, out)``.

Spark schedules analyze's own join on each partition of the export (the
`cloudprofiler join-part` stage, the Go binary shipped with the job), and
the driver merges the partitions' states (`cloudprofiler merge-parts`): one
definition of every result, the one `analyze` computes on one machine.
The driver lists the export's files through Hadoop's FileSystem; each task
gets the paths of a few partitions' files (about four tasks a core), and
for each partition copies them to local disk through pyarrow's filesystem
for the path and runs the binary on them: no record
goes through Spark's shuffle or the JVM's heap. It writes, under out:

- durations.parquet/  every duration, analyze's file a partition
  (part-PPPPP.parquet, analyze's columns and types): each task writes its
  own through pyarrow's filesystem for out (local, HDFS through libhdfs,
  S3, GCS: pyarrow.fs.FileSystem.from_uri), aside and then moved
- summary.csv, summary.parquet, summary.txt, model.json: as analyze writes
  them (equal to analyze's on the same logs), through Hadoop's FileSystem;
- throughput.csv/.parquet and runs.csv/.parquet, when the logs had counter
  or FIRSTLAST channels (the export copies their logs: a record a period),
  written by the last merge as analyze writes them;
- capacity.csv/.parquet, when channels mark operators: analyze's rows per
  operator, instance and window (tuples, arrival and departure rates, busy
  share, selectivity, skew...) from the partitions' sums merged, without
  the cost model (each instance's visits walked in time order), so without
  the capacity itself: for that, analyze a time range (export --format
  logs).

As `analyze` does, the channel order comes from the votes of a sample of
the partitions first (about 1/64 of the records), every partition is then
joined with it, and joined again with the order of all votes when that
differs.

The module reads nothing but the standard library at import; pyspark and
pyarrow (pip install pyspark pyarrow) when it runs.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

__all__ = ["analyze_export", "main"]

_META_DIRS = ("channels", "rounds")
# What the last merge writes (throughput and runs: when the export copied
# counter or FIRSTLAST channels' logs; capacity: when channels mark
# operators).
_OUTPUTS = ["summary.csv", "summary.parquet", "summary.txt", "model.json",
            "throughput.csv", "throughput.parquet", "runs.csv", "runs.parquet", "capacity.csv", "capacity.parquet"]


class SparkAnalysisError(RuntimeError):
    """A stage of the analysis failed: the message is the binary's."""


def _path(path, what):
    """os.fspath(path), refused (ValueError) when it holds a NUL: the
    system and Hadoop would take the part before it, or none of it."""
    p = os.fspath(path)
    if ("\0" if isinstance(p, str) else b"\0") in p:
        raise ValueError("%s %r contains a NUL byte (the C API and the system take NUL-terminated paths)"
                         % (what, path))
    return p


def _stray(path, why, partitions):
    return ("%s: %s; an export's records/ holds records/part=PPPPP/STEM.parquet, P below export.json's partitions "
            "(%d): remove it, or give the export as `cloudprofiler export` wrote it" % (path, why, partitions))


def _binary_default():
    for p in (os.environ.get("CP_TOOL"), shutil.which("cloudprofiler")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _read_files(spark, export, patterns):
    """The export's files matching patterns (relative globs) as
    {relative path: bytes}, read through Hadoop's FileSystem (any path
    Spark reads)."""
    sc = spark.sparkContext
    jvm = sc._jvm
    root = jvm.org.apache.hadoop.fs.Path(export)
    fs = root.getFileSystem(sc._jsc.hadoopConfiguration())
    files = {}
    for rel in patterns:
        path = jvm.org.apache.hadoop.fs.Path(export.rstrip("/") + "/" + rel)
        if "*" in rel:
            found = [st.getPath() for st in fs.globStatus(path) or []]
        else:  # a file's own name, which may hold a glob's characters
            found = [path] if fs.exists(path) else []
        for p in found:
            stream = fs.open(p)
            try:
                buf = jvm.java.io.ByteArrayOutputStream()
                jvm.org.apache.hadoop.io.IOUtils.copyBytes(stream, buf, 65536, False)
                data = bytes(buf.toByteArray())
            finally:
                stream.close()
            # rel's directories, then the file's name: the same relative path
            files["/".join(rel.split("/")[:-1] + [p.getName()]) if "*" in rel.split("/")[-1] else rel] = data
    return files


def _read_meta(spark, export):
    """export.json, channels/*.json and rounds/*.json as {relative path: text}."""
    meta = {rel: data.decode("utf-8") for rel, data in
            _read_files(spark, export, ["export.json"] + [d + "/*.json" for d in _META_DIRS]).items()}
    if "export.json" not in meta:
        raise SparkAnalysisError("%s: no export.json: not a cloudprofiler export (cloudprofiler export --out)" % export)
    return meta


def _read_logs(spark, export, meta):
    """The logs the export copied (counter and FIRSTLAST channels: their
    "copy" in channels/*.json) as {relative path: bytes}: small (a record a
    period), read by the last merge only, on the driver."""
    want = []
    for rel, text in meta.items():
        if rel.startswith("channels/"):
            want += [c["copy"] for c in json.loads(text)["channels"] if c.get("copy")]
    return _read_files(spark, export, want)


def _write_meta(meta, root):
    for rel, text in meta.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8"))


def _run(binary, args):
    p = subprocess.run([binary] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SparkAnalysisError("cloudprofiler %s: %s" % (args[0], (p.stderr or p.stdout).strip()))
    return p.stdout


def _join_fn(meta_b, binary_name, rank, dur_out, extra=()):
    """The task: export partitions given as (part, [file URIs]); each
    partition's files are copied to local disk through pyarrow's filesystem
    for their URIs and go through `cloudprofiler join-part`; yields (part,
    state) a partition. With dur_out (a URI), the partition's
    durations.parquet goes there as part-PPPPP.parquet the same way
    (written aside, then moved: a task run again writes the same file)."""

    def fn(items):
        import uuid
        import pyarrow.fs as pafs
        from pyspark import SparkFiles

        binary = SparkFiles.get(binary_name)
        here = pafs.LocalFileSystem()
        for part, uris in items:
            tmp = tempfile.mkdtemp(prefix="cp-join-part-")
            try:
                _write_meta(meta_b.value, os.path.join(tmp, "export"))
                args = ["join-part", "--export", os.path.join(tmp, "export"), "--state", os.path.join(tmp, "state"),
                        "--partition", str(part)] + list(extra)
                for i, uri in enumerate(uris):
                    path = os.path.join(tmp, "records-%d.parquet" % i)
                    fs, src = pafs.FileSystem.from_uri(uri)
                    pafs.copy_files(src, path, source_filesystem=fs, destination_filesystem=here)
                    args += ["--records", path]
                local = os.path.join(tmp, "durations.parquet")
                if rank is not None:
                    args += ["--rank-json", json.dumps(rank)]
                    if dur_out:
                        args += ["--durations", local]
                _run(binary, args)
                for i in range(len(uris)):
                    os.remove(os.path.join(tmp, "records-%d.parquet" % i))
                if rank is not None and dur_out:
                    fs, base = pafs.FileSystem.from_uri(dur_out)
                    fs.create_dir(base, recursive=True)
                    final = "%s/part-%05d.parquet" % (base.rstrip("/"), part)
                    aside = "%s/.part-%05d.parquet.%s" % (base.rstrip("/"), part, uuid.uuid4().hex)
                    pafs.copy_files(local, aside, source_filesystem=here, destination_filesystem=fs)
                    fs.move(aside, final)
                with open(os.path.join(tmp, "state"), "rb") as f:
                    yield part, f.read()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)

    return fn


def _merge_fn(meta_b, binary_name):
    """The states of one Spark partition merged into one by a single
    `cloudprofiler merge-parts --state` (a partition with one state yields
    it as it is; none, nothing). One call for all of them, not one for each
    two: a merge of two states wrote both to disk and read the result back,
    and merging 64 states two at a time took 14 s of a 100M-record run's
    66 s on local[1]."""

    def merge(states):
        from pyspark import SparkFiles

        states = list(states)
        if len(states) <= 1:
            yield from states
            return
        tmp = tempfile.mkdtemp(prefix="cp-merge-")
        try:
            _write_meta(meta_b.value, os.path.join(tmp, "export"))
            paths = []
            for st in states:
                paths.append(os.path.join(tmp, "in-%d" % len(paths)))
                with open(paths[-1], "wb") as f:
                    f.write(st)
            del states
            out = os.path.join(tmp, "out")
            _run(SparkFiles.get(binary_name), ["merge-parts", "--export", os.path.join(tmp, "export"), "--state", out] + paths)
            with open(out, "rb") as f:
                merged = f.read()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        yield merged

    return merge


def _uri(path):
    """path (local, or a Hadoop path's string) as a URI pyarrow's
    filesystems take: a local path made absolute, file:/x as file:///x,
    s3a:// and s3n:// as s3:// (the same objects)."""
    if path.startswith("file:") and not path.startswith("file://"):
        path = "file://" + path[len("file:"):]
    for scheme in ("s3a://", "s3n://"):
        if path.startswith(scheme):
            path = "s3://" + path[len(scheme):]
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
        path = jvm.org.apache.hadoop.fs.Path(out.rstrip("/") + "/" + name)
        if os.path.exists(src):
            fs.copyFromLocalFile(False, True, jvm.org.apache.hadoop.fs.Path("file://" + os.path.abspath(src)), path)
        elif fs.exists(path):
            fs.delete(path, False)  # an earlier analysis's (overwrite): not this one's


def analyze_export(spark, export, out, binary=None, durations=True, overwrite=False, sample_share=1 / 64, shipped=False,
                   window=None, min_tuples=None, target_rate=None, capacity=True):
    """Analyses the export at `export` into `out`: durations.parquet/ (unless
    durations=False) and the summaries. The export's files are listed, and
    the summaries written, through Hadoop's FileSystem (any path Spark
    takes); the tasks read the records and write the durations through
    pyarrow's filesystems (local, HDFS, S3 (s3a:// read as s3://), GCS).
    binary: the `cloudprofiler` executable for this machine and the
    executors' (default: $CP_TOOL, else on PATH); it is shipped with the job.
    shipped: the binary is in the job's files already (spark-submit --files).
    out must not hold an analysis already unless overwrite. window,
    min_tuples and target_rate are analyze's --window ("250ms"),
    --min-tuples and --target-rate ("1.5M") for capacity; capacity=False
    is its --no-capacity. Returns the
    merge's figures: {"order": [...], "records", "tuples", "durations"}.
    A path holding a NUL raises ValueError; anything in the export's
    records/ but its partitions' directories (part=PPPPP, P below
    export.json's partitions) raises SparkAnalysisError."""
    export, out = _path(export, "analyze_export: export"), _path(out, "analyze_export: out")
    if binary is not None:
        binary = _path(binary, "analyze_export: binary")

    join_args = ["--window", str(window)] if window is not None else []
    merge_args = (["--min-tuples", str(min_tuples)] if min_tuples is not None else []) + \
                 (["--target-rate", str(target_rate)] if target_rate is not None else [])
    if not capacity:
        join_args, merge_args = join_args + ["--no-capacity"], merge_args + ["--no-capacity"]
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
            if held == "durations.parquet":
                # Its part files would stay beside the new ones (or, with
                # durations=False, beside summaries they do not match).
                ofs.delete(p, True)

    # The export's files, listed through Hadoop's FileSystem, by partition:
    # the tasks get their paths (not their bytes, which a shuffle
    # would hold in the JVM's heap: 200 MB a file at 10^9 records).
    # Every entry of records/ is a partition's directory, each partition
    # once (part=1 and part=00001 would give its records twice).
    try:
        partitions = json.loads(meta["export.json"]).get("partitions")
    except (ValueError, AttributeError):
        partitions = None
    if type(partitions) is not int or partitions < 1:
        raise SparkAnalysisError("%s/export.json: no partitions (a positive number): not an export as "
                                 "`cloudprofiler export` writes it" % export)
    parts, seen = {}, {}
    records = jvm.org.apache.hadoop.fs.Path(export.rstrip("/") + "/records")
    rfs = records.getFileSystem(sc._jsc.hadoopConfiguration())
    for st in (rfs.listStatus(records) if rfs.exists(records) else []):
        d, digits = st.getPath(), st.getPath().getName()[len("part="):]
        if not st.isDirectory():
            raise SparkAnalysisError(_stray(d.toString(), "not a directory", partitions))
        if not (d.getName().startswith("part=") and digits.isascii() and digits.isdigit()):
            raise SparkAnalysisError(_stray(d.toString(), "not part= and a number", partitions))
        part = int(digits)
        if part >= partitions:
            raise SparkAnalysisError(_stray(d.toString(), "partition %d is not below %d" % (part, partitions),
                                            partitions))
        if part in seen:
            raise SparkAnalysisError(_stray(d.toString(), "partition %d again (%s holds it too)" % (part, seen[part]),
                                            partitions))
        seen[part] = d.toString()
        for f in rfs.globStatus(jvm.org.apache.hadoop.fs.Path(d, "*.parquet")) or []:
            files_sizes = parts.setdefault(part, [[], 0])
            files_sizes[0].append(_uri(f.getPath().toString()))
            files_sizes[1] += f.getLen()
    if not parts:
        raise SparkAnalysisError("%s/records holds no records (records/part=P/*.parquet)" % export)
    local = tempfile.mkdtemp(prefix="cp-spark-merge-")
    try:
        _write_meta(meta, os.path.join(local, "export"))
        _write_meta(_read_logs(spark, export, meta), os.path.join(local, "export"))

        def join(which, rank, dur_out=None, out_dir=None):
            """Joins the partitions in which and merges their states on the
            executors, in about sqrt(n) groups of about sqrt(n) states each
            (merge-parts --state: a state can be 8 MB a pair while exact),
            then the groups' states on the driver."""
            items = [(p, parts[p][0]) for p in which]
            n = max(len(items), 1)
            # A task joins several partitions one after the other, about
            # four tasks a core: with a task a partition, Spark's own cost
            # a task (about 0.3 s: scheduling, the Python worker's round
            # trip) was half of a 100M-record run of 64 partitions on
            # local[1] (49 s against 25 s).
            tasks = max(1, min(n, 4 * sc.defaultParallelism))
            groups = (sc.parallelize(items, tasks)
                      .mapPartitions(_join_fn(meta_b, name, rank, dur_out, join_args))
                      .map(lambda kv: kv[1])
                      .repartition(max(1, int(math.ceil(math.sqrt(n)))))
                      .mapPartitions(_merge_fn(meta_b, name))
                      .collect())
            paths = []
            try:
                for st in groups:
                    paths.append(os.path.join(local, "state-%d" % len(paths)))
                    with open(paths[-1], "wb") as f:
                        f.write(st)
                args = ["merge-parts", "--export", os.path.join(local, "export")] + merge_args
                if out_dir:
                    args += ["--out", out_dir]
                return json.loads(_run(binary, args + paths))
            finally:
                for p in paths:
                    os.remove(p)

        # The order from a sample: the first partitions that hold sample_share
        # of the records (by their files' sizes), votes only.
        total, seen, sample = sum(v[1] for v in parts.values()), 0, []
        for p in sorted(parts):
            if sample and seen >= total * sample_share:
                break
            sample.append(p)
            seen += parts[p][1]
        rank = join(sample, None)["rank"]

        dur_out = _uri(out.rstrip("/") + "/durations.parquet") if durations else None
        merged_dir = os.path.join(local, "out")
        for attempt in range(2):
            res = join(sorted(parts), rank, dur_out, merged_dir)
            if not res["rejoin"] or attempt == 1:
                break
            rank = res["rank"]  # the sample's order was not that of all votes: again (the durations are rewritten)
        if res["rejoin"]:
            raise SparkAnalysisError("the channel order did not settle after a second join: %s" % res["order"])
        _copy_out(spark, merged_dir, out, _OUTPUTS)
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
    ap.add_argument("--window", help="capacity: the windows' length, as analyze's --window (1s, 250ms)")
    ap.add_argument("--min-tuples", type=int, help="capacity: as analyze's --min-tuples")
    ap.add_argument("--target-rate", help="capacity: as analyze's --target-rate (250k, 1.5M)")
    ap.add_argument("--no-capacity", action="store_true", help="no capacity.csv, as analyze's --no-capacity")
    a = ap.parse_args(argv)
    for flag in ("export", "out", "binary"):
        if getattr(a, flag) is not None:
            try:
                _path(getattr(a, flag), "--" + flag)
            except ValueError as e:
                ap.error(str(e))
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
                             shipped=shipped, window=a.window, min_tuples=a.min_tuples, target_rate=a.target_rate,
                             capacity=not a.no_capacity)
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
