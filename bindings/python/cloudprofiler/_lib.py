"""Loading libcloudprofiler.so and declaring every C prototype (ctypes).

The library is loaded once per process, on first use (not at import), from
$CLOUDPROFILER_LIB, else from this package's directory. Every function gets
argtypes and restype from capi/cloudprofiler.h: handles are int64 both ways
(ctypes would otherwise truncate an int64 return to a C int).
"""

import ctypes
import enum
import os
import threading

ENV_LIB = "CLOUDPROFILER_LIB"
LIB_NAME = "libcloudprofiler.so"

_i32, _i64, _p, _cp = ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p


class ServiceRateStruct(ctypes.Structure):
    """cp_service_rate_t (CP_ServiceRate's answer)."""
    _fields_ = [("rate", ctypes.c_double), ("running", ctypes.c_double), ("period_s", ctypes.c_double),
                ("samples", _i64), ("periods", _i64), ("convergences", _i64),
                ("converged", _i32), ("reserved", _i32), ("mean", ctypes.c_double)]


class MarkStatsStruct(ctypes.Structure):
    """cp_mark_stats_t (CP_MarkStats's answer)."""
    _fields_ = [("visits", _i64), ("busy_s", ctypes.c_double)]


# name: (restype, argtypes). Every function of capi/cloudprofiler.h.
PROTOTYPES = {
    "OpenChannel": (_i64, [_cp, _i32, _i32]),
    "ParameterizeChannel": (_i32, [_i64, _i32, _i64]),
    "LogTS": (_i32, [_i64, _i64]),
    "LogTSMany": (_i64, [_i64, _p, _i64, ctypes.POINTER(_i32)]),
    "CP_LogLineage": (_i32, [_i64, _i64, _i64]),
    "CP_MarkBlocked": (_i32, [_i64, _i32]),
    "CP_ServiceRate": (_i32, [_i64, ctypes.POINTER(ServiceRateStruct)]),
    "CP_MarkStats": (_i32, [_i64, ctypes.POINTER(MarkStatsStruct)]),
    "CloseChannel": (_i32, [_i64]),
    "CloseAllChannels": (_i32, []),
    "CP_ErrorString": (_cp, [_i32]),
    "CP_LastError": (_i32, [ctypes.c_char_p, _i32]),
    "CP_LogOpen": (_i64, [_cp]),
    "CP_LogInfo": (_i64, [_i64, ctypes.c_char_p, _i64]),
    "CP_LogRead": (_i64, [_i64, _p, _i64]),
    "CP_LogReadCounters": (_i64, [_i64, _p, _i64]),
    "CP_LogSummary": (_i64, [_i64, ctypes.c_char_p, _i64]),
    "CP_LogClose": (_i32, [_i64]),
}
# Functions whose absence makes the library unusable (the others raise
# LibraryError naming the function when called).
REQUIRED = ("OpenChannel", "ParameterizeChannel", "LogTS", "CloseChannel",
            "CloseAllChannels", "CP_ErrorString")


class LogFormat(enum.IntEnum):
    """enum cp_log_format. _TSC formats keep (tuple_id, tsc); the others add
    CLOCK_MONOTONIC_RAW nanoseconds (mono_ns)."""
    ASCII = 0
    ASCII_TSC = 1
    BINARY = 2
    BINARY_TSC = 3
    ZSTD = 4
    ZSTD_TSC = 5
    S2 = 6
    S2_TSC = 7


class Handler(enum.IntEnum):
    """enum cp_handler_type (see capi/cloudprofiler.h for each one's arguments)."""
    IDENTITY = 0
    BUFFER_IDENTITY = 1
    BUFFER_IDENTITY_COMP = 2
    MEDIAN = 3
    DOWNSAMPLE = 4
    XOY = 5
    FIRSTLAST = 6
    PERIODICCOUNTER = 7
    FASTPERIODICCOUNTER = 8
    NULLH = 9
    NET_CONF = 10
    FOX_START = 11
    FOX_END = 12
    GPIORTT = 13
    SERVICERATE = 14
    LINEAGE = 15


class Arg(enum.IntEnum):
    """enum cp_arg: argument numbers for Channel.parameterize."""
    ARG0 = 0
    ARG1 = 1
    DROP_WHEN_FULL = 100
    SR_MIN_PERIOD_NS = 200   # SERVICERATE: shortest sampling period T [1e5, 5e4..1e9]
    SR_MAX_PERIOD_NS = 201   # widest T [16e6, min..1e9]
    SR_WINDOW = 202          # periods in the window S [64, 8..4096]
    SR_WIDEN_AFTER = 203     # unblocked, regular periods before T doubles [16, 1..1e6]
    SR_STABLE_PPM = 204      # "regular": realized periods within this of their mean [100000, 1..1e6]
    SR_TOLERANCE_PPM = 205   # convergence tolerance, ppm [1000, 1..1e6]


class Blocked(enum.IntEnum):
    """enum cp_blocked: Channel.mark_blocked's which (INPUT | OUTPUT, the int 3, for both)."""
    INPUT = 1    # the operator found its input empty (it will wait)
    OUTPUT = 2   # the operator found its output full (it will wait)


class ErrorCode(enum.IntEnum):
    """enum cp_error."""
    OK = 0
    BAD_HANDLE = -1
    CLOSED = -2
    BAD_NAME = -3
    BAD_FORMAT = -4
    BAD_HANDLER = -5
    NOT_SUPPORTED = -6
    UNSUPPORTED_PLATFORM = -7
    FORMAT_HANDLER = -8
    BAD_ARG_NUM = -9
    BAD_ARG_VALUE = -10
    TOO_MANY_CHANNELS = -11
    IO = -12
    DROPPED = -13
    NO_MEMORY = -14
    INTERNAL = -15
    CONFIG = -16


class CloudprofilerError(Exception):
    """A library call failed. .code is the CP_ERR_* code (an ErrorCode when
    known), .function the C function, .detail the library's message."""

    def __init__(self, function, code, detail):
        self.function = function
        try:
            self.code = ErrorCode(code)
        except ValueError:
            self.code = code
        self.detail = detail
        name = self.code.name if isinstance(self.code, ErrorCode) else "unknown code"
        super().__init__("%s: %s (CP_ERR_%s, %d)" % (function, detail, name, code))


class ChannelClosedError(CloudprofilerError):
    """The channel was closed (by close(), close_all() or atexit)."""


class LibraryError(OSError):
    """libcloudprofiler.so could not be found or loaded, lacks a function,
    or may not be used in this process (forked child)."""


_lock = threading.Lock()
_lib = None
_lib_path = None
_forked = False


def _candidates():
    """(where it came from, path) in the order they are tried."""
    out = []
    env = os.environ.get(ENV_LIB, "")
    if env:
        out.append(("$" + ENV_LIB, env))
    out.append(("the package directory", os.path.join(os.path.dirname(os.path.abspath(__file__)), LIB_NAME)))
    return out


def _after_fork_in_child():
    global _forked
    _forked = True


def load():
    """Returns the loaded library (loading it on the first call)."""
    global _lib, _lib_path
    if _lib is not None:
        if _forked:
            raise LibraryError(
                "cloudprofiler: this process was forked (without exec) after the library was "
                "loaded in its parent; the Go runtime inside libcloudprofiler.so does not "
                "survive fork. Use multiprocessing's 'spawn' or 'forkserver' start method, or "
                "subprocess, and open channels in the new process.")
        return _lib
    with _lock:
        if _lib is not None:
            return load()
        tried = []
        for where, path in _candidates():
            if not os.path.exists(path):
                tried.append("%s: %s (no such file)" % (where, path))
                continue
            try:
                lib = ctypes.CDLL(os.path.abspath(path))
            except OSError as e:
                tried.append("%s: %s (%s)" % (where, path, e))
                continue
            missing = [f for f in REQUIRED if not hasattr(lib, f)]
            if missing:
                tried.append("%s: %s (not libcloudprofiler: no %s)" % (where, path, ", ".join(missing)))
                continue
            for name, (res, args) in PROTOTYPES.items():
                f = getattr(lib, name, None)
                if f is not None:
                    f.restype, f.argtypes = res, args
            _lib, _lib_path = lib, os.path.abspath(path)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_after_fork_in_child)
            return lib
        if ENV_LIB not in os.environ:
            tried.insert(0, "$%s: not set" % ENV_LIB)
        raise LibraryError(
            "cloudprofiler: cannot load %s. Looked at, in order:\n  %s\n"
            "Build it with `make build` (build/%s) and set %s to its path, or copy it "
            "next to %s." % (LIB_NAME, "\n  ".join(tried), LIB_NAME, ENV_LIB,
                             os.path.abspath(__file__).replace("_lib.py", "__init__.py")))


def library_path():
    """The path of the loaded library (loads it)."""
    load()
    return _lib_path


def func(name):
    """The bound C function, or LibraryError if this build lacks it."""
    f = getattr(load(), name, None)
    if f is None:
        raise LibraryError("cloudprofiler: %s has no %s (built from an older source? "
                           "rebuild with `make build`)" % (_lib_path, name))
    return f


def message(code, detailed=True):
    """The library's text for a failure just seen on this thread:
    CP_LastError's detailed message when there is one, else CP_ErrorString."""
    lib = load()
    text = ""
    last = getattr(lib, "CP_LastError", None) if detailed else None
    if last is not None:
        buf = ctypes.create_string_buffer(512)
        n = last(buf, len(buf))
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            n = last(buf, len(buf))
        if n > 0:
            text = buf.value.decode("utf-8", "replace")
    if not text:
        s = lib.CP_ErrorString(code)
        text = s.decode("utf-8", "replace") if s else "error %d" % code
    return text


def error(function, code, cls=None, detailed=True):
    if cls is None:
        cls = ChannelClosedError if code == ErrorCode.CLOSED else CloudprofilerError
    return cls(function, code, message(code, detailed))


def fspath(path, what):
    """os.fspath(path), refused (ValueError) when it holds a NUL: the C API
    and the system take NUL-terminated paths, and would silently use the
    part before it. what names the argument ("read_log: path")."""
    p = os.fspath(path)
    if ("\0" if isinstance(p, str) else b"\0") in p:
        raise ValueError("%s %r contains a NUL byte (the C API and the system take NUL-terminated paths)"
                         % (what, path))
    return p
