"""Reading log files through the library's decoder, and analysis results."""

import csv
import ctypes
import json
import os
import warnings

from . import _lib
from ._lib import CloudprofilerError


class TruncatedLogWarning(UserWarning):
    """A compressed/binary log file ends in a partial frame (cut by a crash or
    still being written): read up to its last whole frame."""


class DamagedLogWarning(UserWarning):
    """A log file holds corrupt frames (or ASCII lines) that the decoder skipped."""


class IncompleteLogWarning(UserWarning):
    """A log file misses records its channel accepted: never written (a
    failing disk), or still in memory when the process died (no trailer).
    The message says how many where the file knows."""


class Header(dict):
    """The file header (a dict, as the library decoded it), with:
    .summary  the decoder's summary (records, holes, duplicates,
              truncated_bytes, corrupt_bytes, corrupt_frames, corrupt_lines,
              damaged, trailer, events, status, problems: one sentence
              per thing found damaged or known lost, [] for a whole file)
    .counter  True for counter files (PERIODICCOUNTER...)
    .columns  the record's column names
    .record_size  bytes per record (16, 24 or 32)
    .path     the file read
    """

    def __init__(self, header, info, summary, path):
        super().__init__(header)
        self.summary = summary
        self.counter = bool(info.get("counter"))
        self.columns = list(info.get("columns") or [])
        self.record_size = info.get("record_size")
        self.path = path


def _json_call(fn, name, r, path):
    cap = 1 << 16
    for _ in range(3):
        buf = ctypes.create_string_buffer(cap)
        n = fn(r, buf, cap)
        if n < 0:
            raise _lib.error("%s(%r)" % (name, path), n)
        if n < cap:
            return json.loads(buf.raw[:n].decode("utf-8"))
        cap = n + 1
    raise CloudprofilerError("%s(%r)" % (name, path), -15, "length kept growing")


def dtype_of(columns, record_size=None):
    """The numpy structured dtype of packed little-endian records with these
    columns: tuple_id int64, every other column uint64."""
    import numpy as np
    dt = np.dtype([(c, "<i8" if c == "tuple_id" else "<u8") for c in columns])
    if record_size is not None and dt.itemsize != record_size:
        raise CloudprofilerError("CP_LogInfo", -15, "columns %s do not make %d-byte records"
                                 % (columns, record_size))
    return dt


def read_header(path):
    """The header of a log file (a dict, as the library decoded it: node,
    pid, name, handler, open_sync...), without reading its records."""
    path = _lib.fspath(path, "read_header: path")
    op, info_f, close_f = (_lib.func(n) for n in ("CP_LogOpen", "CP_LogInfo", "CP_LogClose"))
    r = op(os.fsencode(path))
    if r <= 0:
        raise _lib.error("CP_LogOpen(%r)" % path, r)
    try:
        return _json_call(info_f, "CP_LogInfo", r, path).get("header") or {}
    finally:
        close_f(r)


def read_log(path, counters=False):
    """Reads a log file of any format with the library's decoder.

    Returns (records, header): records is a numpy structured array,
    (tuple_id int64, tsc uint64[, mono_ns uint64]) for tuple files and
    (period_end_tsc, count, skipped_periods[, mono_ns]) uint64 for counter
    files (PERIODICCOUNTER, FASTPERIODICCOUNTER); header is a Header (the
    file header as a dict, plus .summary, .counter, .columns). counters=True
    reads the counter records of a NET_CONF file (CP_LogReadCounters).
    The library decodes straight into the array's memory (allocated once for
    the file's largest possible count, found from its frame headers); the
    result is a view of what was read, never a second copy. A file cut after
    its last whole frame warns (TruncatedLogWarning) with the number of
    bytes ignored; damaged frames or lines warn (DamagedLogWarning); records
    the channel accepted that are not in the file (never written, or lost
    with a process that did not close the channel) warn
    (IncompleteLogWarning). header.summary["problems"] lists them all.
    A path holding a NUL raises ValueError (as read_header, read_log_df
    and read_analysis do).
    """
    import numpy as np
    path = _lib.fspath(path, "read_log: path")
    fn = "CP_LogReadCounters" if counters else "CP_LogRead"
    op, info_f, read_f, summ_f, close_f = (_lib.func(n) for n in (
        "CP_LogOpen", "CP_LogInfo", fn, "CP_LogSummary", "CP_LogClose"))
    r = op(os.fsencode(path))
    if r <= 0:
        raise _lib.error("CP_LogOpen(%r)" % path, r)
    try:
        info = _json_call(info_f, "CP_LogInfo", r, path)
        if counters:
            if not info.get("counter_columns"):
                raise ValueError("%s: a %s file has no counter records (counters=True is for "
                                 "counter and NET_CONF files)" % (path, (info.get("header") or {}).get("handler")))
            info = dict(info, record_size=info["counter_record_size"], columns=info["counter_columns"],
                        max_records=info["max_counter_records"], counter=True)
        rs = int(info["record_size"])
        dt = dtype_of(info["columns"], rs)
        cap = max(int(info.get("max_records") or 0), 0)
        out = np.empty(cap, dtype=dt)
        # One call decodes the whole file straight into out (cap in records).
        got = read_f(r, out.__array_interface__["data"][0] if cap else None, cap)
        if got < 0:
            raise _lib.error("%s(%r)" % (fn, path), got)
        summary = _json_call(summ_f, "CP_LogSummary", r, path)
    finally:
        close_f(r)
    if int(summary.get("records") or 0) > got:
        raise CloudprofilerError("%s(%r)" % (fn, path), -15, "decoded %s records but max_records was %d"
                                 % (summary.get("records"), cap))
    header = Header(info.get("header") or {}, info, summary, path)
    records = out if got == cap else out[:got]
    _warn(path, got, summary)
    return records, header


def _warn(path, got, s):
    cut = int(s.get("truncated_bytes") or 0)
    if cut:
        warnings.warn("%s: %d bytes cut off after the last whole frame (a crash or a file still "
                      "being written); read the %d records before them" % (path, cut, got),
                      TruncatedLogWarning, stacklevel=3)
    if s.get("damaged"):
        warnings.warn("%s: %d corrupt frames (%d bytes) and %d corrupt lines skipped; read %d records"
                      % (path, int(s.get("corrupt_frames") or 0), int(s.get("corrupt_bytes") or 0),
                         int(s.get("corrupt_lines") or 0), got), DamagedLogWarning, stacklevel=3)
    # The rest of the library's problems: records known to be missing.
    rest = [p for p in s.get("problems") or [] if not p.startswith("cut short") and " damaged " not in p]
    if rest:
        warnings.warn("%s: %s; read %d records" % (path, "; ".join(rest), got), IncompleteLogWarning, stacklevel=3)


def _pandas(what):
    try:
        import pandas
    except ImportError as e:
        raise ImportError("cloudprofiler.%s needs pandas, which is not installed (%s): "
                          "pip install pandas, or pip install 'cloudprofiler[pandas]'. "
                          "read_log() gives the same data as a numpy array without it." % (what, e)) from None
    return pandas


def read_log_df(path):
    """read_log as a pandas DataFrame, one column per record column; the
    header dict in df.attrs["header"], the decoder summary in
    df.attrs["summary"], the path in df.attrs["path"]."""
    pd = _pandas("read_log_df")
    records, header = read_log(path)
    df = pd.DataFrame({c: records[c] for c in records.dtype.names}, copy=False)
    df.attrs["header"] = dict(header)
    df.attrs["summary"] = header.summary
    df.attrs["path"] = header.path
    return df


class Analysis(dict):
    """Results of `cloudprofiler analyze --out DIR`: DataFrames durations,
    summary, runs, throughput, capacity, critical_path, breakdown, mace,
    mace_costs and the model dict, as keys (only those whose file exists) and attributes (None
    when absent); .dir, .report (path of
    report.html or None), .summary_text (summary.txt or None), and .files:
    name -> the path each key was read from (DIR/durations.parquet, or
    DIR/durations.csv when there was no Parquet file; critical_path from
    DIR/criticalpath.csv; model.json; also summary_text and report when
    present)."""

    def __getattr__(self, k):
        if k in _TABLES or k == "model":
            return self.get(k)
        raise AttributeError(k)


# Each table's columns and dtypes: those of its .parquet file (the
# analysis's row structs, internal/analyze/tables.go and write.go); a .csv
# (older analyses, or durations.csv written alone) is read with the same
# dtypes, so a frame is the same whichever file it came from. Strings are
# pandas' strings (str, or object before pandas 3), never categoricals.
_F, _S = "float64", str
_TABLES = {
    "durations": {"tuple_id": "int64", "from_node": _S, "from_channel": _S, "to_node": _S, "to_channel": _S,
                  "kind": _S, "start_tsc": "uint64", "end_tsc": "uint64", "cycles": _F, "error_cycles": _F,
                  "seconds": _F, "error_seconds": _F, "scenario": "int32", "paper_error_cycles": _F,
                  "baseline_error_cycles": _F},
    "summary": dict({"kind": _S, "from": _S, "to": _S, "count": "int64"},
                    **{c: _F for c in ("min_s", "p25_s", "median_s", "p75_s", "p99_s", "max_s", "error_min_s",
                                       "error_median_s", "error_max_s", "paper_error_median_s",
                                       "baseline_error_median_s", "ret_minus_ours_median_s",
                                       "ret_minus_ours_max_s")},
                    **{"scenario_%d" % i: "int64" for i in range(4)},
                    scenario_counts=_S, quantiles=_S),
    "runs": {"channel": _S, "first_tuple_id": "int64", "last_tuple_id": "int64", "cycles": _F,
             "error_cycles": _F, "seconds": _F, "error_seconds": _F, "scenario": "int32"},
    "throughput": {"node": _S, "channel": _S, "period_end_s": _F, "period_s": _F, "count": "int64",
                   "tuples_per_s": _F},
    # internal/capacity's Row: per operator and instance, per window (-1:
    # the whole run); NaN where a value is not measured (an empty field in
    # capacity.csv).
    "capacity": dict({"level": _S, "window": "int64", "start_s": _F, "end_s": _F, "operator": _S, "instance": _S,
                      "node": _S, "pid": "int64", "method": _S, "tuples_in": "int64", "tuples_out": "int64"},
                     **{c: _F for c in ("arrivals_per_s", "departures_per_s", "busy_share", "blocked_share",
                                        "service_rate", "service_rate_low", "service_rate_high", "headroom",
                                        "selectivity")},
                     instances="int64", skew=_F, reach=_F, capacity=_F, max_source_rate=_F, bottleneck="bool",
                     parallelism_needed="int64", note=_S),
    # internal/critpath's PathRow (criticalpath.csv): per slice (-1: the
    # run) and category, its share of the critical path and its critical
    # participation; BreakdownRow (breakdown.csv): per group of journeys
    # (p99, median, all) each part of the end-to-end latency.
    "critical_path": {"level": _S, "slice": "int64", "start_s": _F, "end_s": _F, "kind": _S, "name": _S, "share": _F,
                      "participation": _F, "consistent": "bool", "note": _S},
    "breakdown": {"group": _S, "tuples": "int64", "e2e_mean_us": _F, "e2e_bound_us": _F, "part": _S, "where": _S,
                  "mean_us": _F, "share": _F, "bound_us": _F, "total_cycles": "int64"},
    # internal/mace's Row (mace.csv): per scenario ("measured", or a
    # --what-if as given) and window, Mace, its bound, the predicted and
    # (measured) the largest latency; within: NA in a window without
    # tuples. Cost (mace-costs.csv): per instance, its cost per tuple.
    "mace": {"scenario": _S, "window": "int64", "start_s": _F, "end_s": _F, "events": "int64", "mace_s": _F,
             "bound_s": _F, "predicted_s": _F, "node": _S, "tuples": "int64", "measured_max_s": _F,
             "measured_min_s": _F, "within": "boolean"},
    "mace_costs": {"operator": _S, "instance": _S, "cost_s": _F, "service_s": _F, "overhead_s": _F, "tuples": "int64",
                   "from": _S},
}
# A table's file is DIR/<name>.parquet or .csv, but for these.
_FILES = {"critical_path": "criticalpath", "mace_costs": "mace-costs"}
_SCENARIOS = ["scenario_%d" % i for i in range(4)]


def _pyarrow(path):
    try:
        import pyarrow  # noqa: F401  (pandas' Parquet engine)
    except ImportError as e:
        tip = (" (or have `cloudprofiler analyze --durations-csv` write durations.csv too: read without it)"
               if os.path.basename(path) == "durations.parquet" else "")
        raise ImportError("cloudprofiler.read_analysis needs pyarrow to read %s, which is not installed (%s): "
                          "pip install pyarrow, or pip install 'cloudprofiler[parquet]'%s" % (path, e, tip)) from None


def _read_parquet(pd, path, dtypes):
    df = pd.read_parquet(path, engine="pyarrow")
    # The file's types are these already; cast only a numeric column that is not.
    for c, t in dtypes.items():
        if t is not str and c in df.columns and str(df[c].dtype) != t:
            df[c] = df[c].astype(t)
    return df


def _read_csv(pd, path, dtypes):
    with open(path, newline="") as f:
        cols = next(csv.reader(f), [])
    df = pd.read_csv(path, dtype={c: t for c, t in dtypes.items() if c in cols},
                     keep_default_na=False, na_values=[""])
    # An empty field is NaN in a number column (as in the Parquet file) and
    # "" in a string column (the Parquet file has no missing strings).
    for c, t in dtypes.items():
        if t is str and c in df.columns and df[c].isna().any():
            df[c] = df[c].fillna("")
    return df


def _summary_scenarios(pd, df):
    """summary.parquet has scenario_0..scenario_3, summary.csv scenario_counts
    ("0/0/500/0"): the frame gets both, in that order, before quantiles (a
    row a pair: small)."""
    have = [c in df.columns for c in _SCENARIOS]
    if all(have) and "scenario_counts" not in df.columns:
        counts = ["/".join(str(int(v)) for v in row) for row in df[_SCENARIOS].itertuples(index=False)]
        df.insert(df.columns.get_loc(_SCENARIOS[-1]) + 1, "scenario_counts",
                  pd.Series(counts, index=df.index, dtype=str))
    elif not any(have) and "scenario_counts" in df.columns:
        parts = [str(v).split("/") for v in df["scenario_counts"]]
        at = df.columns.get_loc("scenario_counts")
        for i, c in enumerate(_SCENARIOS):
            df.insert(at + i, c, pd.Series([int(p[i]) for p in parts], index=df.index, dtype="int64"))
    return df


def read_analysis(out_dir):
    """Loads what `cloudprofiler analyze --out out_dir` wrote, as an Analysis:
    durations, summary, runs, throughput, capacity, critical_path
    (criticalpath.csv), breakdown (breakdown.csv), mace (mace.csv) and
    mace_costs (mace-costs.csv) as DataFrames (those
    present) and model.json as a dict. Each table is read from its Parquet file
    (X.parquet, with pandas through pyarrow) when there is one, else from
    its CSV (X.csv: an older analysis, or durations.csv written alone);
    res.files says which file each came from. The dtypes are the Parquet
    files' whichever was read: ids and counts int64, TSCs uint64, seconds
    and cycles float64, scenario int32, names strings (capacity: rates and
    shares float64, NaN where not measured, bottleneck bool, note "" when
    there is none; docs/capacity.md; critical_path: slice int64 (-1: the
    whole run), share and participation float64, consistent bool, name and
    note "" when there is none; breakdown: tuples and total_cycles int64,
    the means and bounds in microseconds float64, where "" for end-to-end;
    docs/critical-path.md; mace: window, events and tuples
    int64, seconds float64 (NaN where not measured), within a nullable
    boolean (NA without tuples); docs/mace.md). summary has both
    scenario_0..scenario_3 (int64) and scenario_counts ("a/b/c/d", as in
    summary.csv).

    Needs pandas, and pyarrow for a table that only has a Parquet file
    (ImportError saying how to install it otherwise). A directory with none
    of these files raises FileNotFoundError."""
    pd = _pandas("read_analysis")
    out_dir = _lib.fspath(out_dir, "read_analysis: out_dir")
    if not os.path.isdir(out_dir):
        raise FileNotFoundError("read_analysis: %r is not a directory" % out_dir)
    res = Analysis()
    files = {}
    for name, dtypes in _TABLES.items():
        pq, csvp = (os.path.join(out_dir, _FILES.get(name, name) + ext) for ext in (".parquet", ".csv"))
        if os.path.exists(pq):
            try:
                _pyarrow(pq)
            except ImportError:
                if not os.path.exists(csvp):
                    raise
            else:
                res[name], files[name] = _read_parquet(pd, pq, dtypes), pq
                continue
        if os.path.exists(csvp):
            res[name], files[name] = _read_csv(pd, csvp, dtypes), csvp
    if "summary" in res:
        _summary_scenarios(pd, res["summary"])
    p = os.path.join(out_dir, "model.json")
    if os.path.exists(p):
        with open(p) as f:
            res["model"] = json.load(f)
        files["model"] = p
    if not res:
        raise FileNotFoundError("read_analysis: %r holds none of %s, model.json (not an `analyze --out` "
                                "directory?)" % (out_dir, ", ".join("%s.parquet, %s.csv" % (f, f) for f in
                                                         (_FILES.get(n, n) for n in _TABLES))))
    res.dir = out_dir
    rep = os.path.join(out_dir, "report.html")
    res.report = rep if os.path.exists(rep) else None
    txt = os.path.join(out_dir, "summary.txt")
    res.summary_text = None
    if os.path.exists(txt):
        with open(txt) as f:
            res.summary_text = f.read()
        files["summary_text"] = txt
    if res.report:
        files["report"] = rep
    res.files = files
    return res
