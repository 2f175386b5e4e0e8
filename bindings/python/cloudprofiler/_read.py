"""Reading log files through the library's decoder, and analysis results."""

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
    """
    import numpy as np
    path = os.fspath(path)
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
    summary, runs, throughput and the model dict, as keys (only those whose
    file exists) and attributes (None when absent); .dir, .report (path of
    report.html or None), .summary_text (summary.txt or None)."""

    def __getattr__(self, k):
        if k in ("durations", "summary", "runs", "throughput", "model"):
            return self.get(k)
        raise AttributeError(k)


_CSV_DTYPES = {
    "durations": {"tuple_id": "int64", "start_tsc": "uint64", "end_tsc": "uint64",
                  "from_node": str, "from_channel": str, "to_node": str, "to_channel": str, "kind": str},
    "summary": {"kind": str, "from": str, "to": str, "count": "int64", "scenario_counts": str, "quantiles": str},
    "runs": {"channel": str, "first_tuple_id": "int64", "last_tuple_id": "int64"},
    "throughput": {"node": str, "channel": str, "count": "int64"},
}


def read_analysis(out_dir):
    """Loads what `cloudprofiler analyze --out out_dir` wrote: durations.csv,
    summary.csv, runs.csv, throughput.csv as DataFrames (those present) and
    model.json as a dict. Needs pandas."""
    pd = _pandas("read_analysis")
    out_dir = os.fspath(out_dir)
    if not os.path.isdir(out_dir):
        raise FileNotFoundError("read_analysis: %r is not a directory" % out_dir)
    res = Analysis()
    for name, dtypes in _CSV_DTYPES.items():
        p = os.path.join(out_dir, name + ".csv")
        if os.path.exists(p):
            res[name] = pd.read_csv(p, dtype=dtypes, keep_default_na=False, na_values=[""])
    p = os.path.join(out_dir, "model.json")
    if os.path.exists(p):
        with open(p) as f:
            res["model"] = json.load(f)
    if not res:
        raise FileNotFoundError("read_analysis: %r holds none of durations.csv, summary.csv, runs.csv, "
                                "throughput.csv, model.json (not an `analyze --out` directory?)" % out_dir)
    res.dir = out_dir
    rep = os.path.join(out_dir, "report.html")
    res.report = rep if os.path.exists(rep) else None
    txt = os.path.join(out_dir, "summary.txt")
    res.summary_text = open(txt).read() if os.path.exists(txt) else None
    return res
