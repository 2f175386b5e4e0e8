"""Cloudprofiler from Python: log (TSC, tuple id) events through
libcloudprofiler.so, read its log files and `cloudprofiler analyze` results.

    import cloudprofiler as cp
    with cp.open_channel("map in", cp.LogFormat.ZSTD_TSC, cp.Handler.BUFFER_IDENTITY) as ch:
        ch.log(42)                       # one event, ~0.5 us (a ctypes call)
        ch.log_many(numpy_int64_ids)     # a batch: one call, tens of ns per id
    records, header = cp.read_log(path)  # numpy structured array + header dict

The library is found through $CLOUDPROFILER_LIB (a path), else next to this
file, and loaded at first use. Channels still open at interpreter exit are
closed (atexit); a SIGTERM writes every accepted record before the process
dies (the library's handler, installed at the first open).

Not supported: fork() without exec after the library is loaded (the Go
runtime inside it does not survive fork): use multiprocessing's "spawn" or
"forkserver" start method, or subprocess. A forked child that touches the
binding gets LibraryError. The CP_* environment (CP_LOG_DIR...) is read at
the first open_channel of the process: set os.environ before it.
"""

from ._lib import (Arg, Blocked, ChannelClosedError, CloudprofilerError, ErrorCode, Handler,
                   LibraryError, LogFormat, library_path)
from ._channel import Channel, MarkStats, ServiceRate, close_all, current_run, open_channel
from ._read import (Analysis, DamagedLogWarning, Header, IncompleteLogWarning, TruncatedLogWarning, read_analysis,
                    read_header, read_log, read_log_df)
from ._tool import AnalyzeError, analyze, run_logs, tool_path

__version__ = "0.1.0"

__all__ = [
    "Arg", "Analysis", "AnalyzeError", "Blocked", "Channel", "ChannelClosedError", "CloudprofilerError", "DamagedLogWarning",
    "ErrorCode", "Handler", "Header", "IncompleteLogWarning", "LibraryError", "LogFormat", "MarkStats", "ServiceRate",
    "TruncatedLogWarning", "analyze", "close_all", "current_run", "library_path", "open_channel", "read_analysis",
    "read_header", "read_log", "read_log_df", "run_logs", "tool_path",
]
