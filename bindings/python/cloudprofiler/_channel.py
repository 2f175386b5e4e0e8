"""Channels: open, log, log_many, parameterize, close; close_all; atexit."""

import atexit
import collections
import ctypes
import os
import signal
import sys
import threading
import time
import weakref

from . import _lib
from ._lib import (Arg, Blocked, ChannelClosedError, CloudprofilerError, ErrorCode, Handler,
                   LogFormat)

ServiceRate = collections.namedtuple(
    "ServiceRate", ["rate", "running", "period_s", "samples", "periods", "convergences", "converged", "mean"])
ServiceRate.__doc__ = """A SERVICERATE channel's estimate (cp_service_rate_t), items per second:
rate: the last converged estimate, else the running one (0: none yet); running:
the running mean since the last convergence; period_s: the sampling period T
now; samples: unblocked periods used; periods: periods sampled; convergences:
converged estimates so far (each a "service_rate" event in the file);
converged: True when rate is a converged estimate; mean: the mean rate of the
last window of unblocked periods (0: none yet), what the operator did a second
while not blocked, preemption and all (rate, their 95th percentile, keeps the
periods it ran undisturbed and stands above it on a shared machine)."""


class MarkStats(collections.namedtuple("MarkStats", ["visits", "busy_s"])):
    """What a marked channel's operator instance did so far (cp_mark_stats_t):
    visits, its ins; busy_s, the seconds its thread worked on its tuples
    (every in to out, and every out to sent and departure to next in that
    the thread did not wait in: the analysis's cost model). Two of them an
    interval apart give its capacity over the interval, capacity_since."""
    __slots__ = ()

    def capacity_since(self, earlier):
        """Tuples a second the instance took while it worked since earlier:
        what it takes a second while it has a backlog, its capacity, as
        `cloudprofiler analyze` measures it afterwards; NaN without work in
        between."""
        busy = self.busy_s - earlier.busy_s
        return (self.visits - earlier.visits) / busy if busy > 0 else float("nan")


_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64_MAX = (1 << 63) - 1

# Every channel opened here and not yet closed, so that close_all() and the
# atexit hook can mark them closed (the library closes them).
_channels = weakref.WeakSet()
_channels_lock = threading.Lock()


def _enum(value, cls, what):
    if isinstance(value, str):
        key = value.upper()
        for prefix in ("CP_",):
            if key.startswith(prefix):
                key = key[len(prefix):]
        try:
            return cls[key]
        except KeyError:
            raise ValueError("unknown %s %r; one of %s" % (what, value, ", ".join(m.name for m in cls))) from None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError("%s must be a cloudprofiler.%s, its name or an int, not %s"
                        % (what, cls.__name__, type(value).__name__))
    v = value.__index__()
    if not _INT32[0] <= v <= _INT32[1]:
        # Out of int32: the library would see a truncated value; refuse here.
        raise ValueError("%s %d is out of range (int32)" % (what, v))
    try:
        return cls(v)
    except ValueError:
        return v  # unknown: the library refuses it with its own message


# This process's run, for analyze()'s default logs: its log directory (as
# the library took it at the process's first open: it reads CP_LOG_DIR
# once) and when the run began: at an open while none of the binding's
# channels was open (a notebook cell run again starts a new run).
_run = {"dir": None, "start_ns": None}


def _note_run():
    with _channels_lock:
        if _run["dir"] is None:
            _run["dir"] = os.path.abspath(os.environ.get("CP_LOG_DIR") or "cloudprofiler-logs")
        if _run["start_ns"] is None or all(c._closed for c in _channels):
            _run["start_ns"] = time.time_ns()


def current_run():
    """(log directory, start in ns since the epoch) of this process's
    latest run: from its first open_channel while none was open; (None,
    None) before any."""
    return _run["dir"], _run["start_ns"]


def open_channel(name, log_format=LogFormat.ZSTD_TSC, handler=Handler.BUFFER_IDENTITY):
    """Opens a channel (OpenChannel) and returns a Channel.

    name: str (UTF-8) or bytes, 1..4096 bytes, no NUL. log_format: a
    LogFormat, its name ("ZSTD_TSC") or int; handler: a Handler likewise.
    Raises CloudprofilerError (with the library's message) when the library
    refuses, e.g. bad name, unknown format or handler, CP_ERR_CONFIG.
    The first open in a process reads the CP_* environment (CP_LOG_DIR...):
    set os.environ before it.
    """
    if isinstance(name, str):
        raw = name.encode("utf-8")
    elif isinstance(name, (bytes, bytearray)):
        raw = bytes(name)
    else:
        raise TypeError("channel name must be str or bytes, not %s" % type(name).__name__)
    if b"\0" in raw:
        raise ValueError("channel name %r contains a NUL byte (the C API takes a NUL-terminated name)" % (name,))
    fmt = _enum(log_format, LogFormat, "log format")
    hnd = _enum(handler, Handler, "handler")
    lib = _lib.load()
    _install_sigterm()
    _note_run()
    h = lib.OpenChannel(raw, int(fmt), int(hnd))
    if h <= 0:
        raise _lib.error("OpenChannel(%r, %s, %s)" % (name, _nm(fmt), _nm(hnd)), h)
    ch = Channel._new(h, name, fmt, hnd, lib)
    with _channels_lock:
        _channels.add(ch)
    return ch


def _nm(v):
    return v.name if isinstance(v, (LogFormat, Handler)) else str(v)


class Channel:
    """An open channel. Use as a context manager, or close() it; close_all()
    and the exit of the interpreter close every channel still open.

    log(tuple_id)        one event (LogTS): ~0.5 us through ctypes
    log_many(ids)        a batch (LogTSMany): tens of ns per id, zero-copy
    parameterize(a, v)   ParameterizeChannel
    log_lineage(o, i)    CP_LogLineage (LINEAGE): output o was made from input i
    mark_blocked(which)  CP_MarkBlocked (SERVICERATE)
    service_rate()       CP_ServiceRate (SERVICERATE): a ServiceRate
    mark_stats()         CP_MarkStats (a marked OPERATOR in/out/sent): a MarkStats
    close()              CloseChannel (idempotent)
    """

    __slots__ = ("name", "log_format", "handler", "handle", "_logts", "_many", "_lib", "_closed", "__weakref__")

    @classmethod
    def _new(cls, h, name, fmt, hnd, lib):
        self = cls.__new__(cls)
        self.handle, self.name, self.log_format, self.handler = h, name, fmt, hnd
        self._lib, self._logts, self._closed = lib, lib.LogTS, False
        self._many = getattr(lib, "LogTSMany", None)
        return self

    def __init__(self, *a, **k):
        raise TypeError("use cloudprofiler.open_channel(name, log_format, handler)")

    @property
    def closed(self):
        return self._closed

    def __repr__(self):
        return "<cloudprofiler.Channel %r %s %s handle=%#x%s>" % (
            self.name, _nm(self.log_format), _nm(self.handler), self.handle, " closed" if self._closed else "")

    def __enter__(self):
        self._check_open("with")
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _check_open(self, what):
        if self._closed:
            raise ChannelClosedError("%s on channel %r" % (what, self.name), ErrorCode.CLOSED,
                                     "the channel was closed (close(), close_all() or interpreter exit)")
        if _lib._forked:
            _lib.load()  # raises LibraryError: forked child

    def _failed(self, function, code, detailed=True):
        self._check_open(function)  # closed here, or a forked child: say so
        raise _lib.error("%s on channel %r" % (function, self.name), code, detailed=detailed)

    def log(self, tuple_id):
        """Logs one event (LogTS). Returns True when accepted, False when the
        ring was full and the channel drops (Arg.DROP_WHEN_FULL=1); raises
        CloudprofilerError otherwise (ChannelClosedError after close).
        tuple_id: an int (or an integer such as numpy.int64) within int64;
        ValueError beyond it, TypeError for a bool, float or non-number, as
        log_many and log_lineage do (ctypes alone would wrap 2**64+7 to 7)."""
        if tuple_id.__class__ is not int or not -0x8000000000000000 <= tuple_id <= 0x7FFFFFFFFFFFFFFF:
            tuple_id = _int64("tuple id", tuple_id)
        rc = self._logts(self.handle, tuple_id)
        if rc == 0:
            return True
        if rc == ErrorCode.DROPPED:
            return False
        self._failed("LogTS", rc, detailed=False)

    def log_many(self, ids):
        """Logs a batch of tuple ids, one event each, in order (LogTSMany).

        ids: a numpy array (int64 C-contiguous: passed by pointer, no copy),
        any buffer of int64 (array.array('q'), memoryview; bytes-like buffers
        are read as raw native int64, 8 bytes per id), or a list/iterable of
        ints (converted once). Other integer dtypes are converted to int64 (a
        copy) when every value fits; floats, bools and objects raise TypeError.

        Returns how many ids were accepted: len(ids), or fewer when the
        channel drops (Arg.DROP_WHEN_FULL=1: the difference was dropped and
        counted in the file). Any other refusal raises CloudprofilerError
        with .accepted set to the ids accepted before it.
        """
        if type(ids) is _ndarray and ids.dtype is _I64 and ids.ndim == 1 and ids.flags.c_contiguous:
            a = ids  # the common case, checked cheaply
        else:
            a = as_int64(ids)
        n = a.shape[0]
        if n == 0:
            self._check_open("log_many")
            return 0
        many = self._many
        if many is None:
            many = self._many = _lib.func("LogTSMany")
        if a.flags.writeable:
            ptr = ctypes.addressof(ctypes.c_char.from_buffer(a))  # ~4x cheaper than __array_interface__
        else:
            ptr = a.__array_interface__["data"][0]
        err = ctypes.c_int32(0)
        got = many(self.handle, ptr, n, ctypes.byref(err))
        code = err.value
        if got < 0:
            code, got = got, 0
        if code == 0 or code == ErrorCode.DROPPED:
            if got < n and code == 0:
                raise CloudprofilerError("LogTSMany on channel %r" % self.name, ErrorCode.INTERNAL,
                                         "accepted %d of %d ids without an error code" % (got, n))
            return got
        try:
            self._failed("LogTSMany", code, detailed=False)  # LogTSMany never sets CP_LastError
        except CloudprofilerError as e:
            e.accepted = got
            e.args = ("%s; %d of %d ids accepted" % (e.args[0], got, n),)
            raise

    def parameterize(self, arg, value):
        """Sets argument arg (an Arg or int: 0, 1, Arg.DROP_WHEN_FULL) of the
        channel's handler to value (int64)."""
        self._check_open("parameterize")
        a = _enum(arg, Arg, "argument number")
        v = _int64("argument value", value)
        rc = self._lib.ParameterizeChannel(self.handle, int(a), v)
        if rc != 0:
            self._failed("ParameterizeChannel(%s, %d)" % (_nm(a) if isinstance(a, Arg) else a, v), rc)

    def log_lineage(self, out_id, in_id):
        """LINEAGE channels: output out_id was made from input in_id
        (CP_LogLineage: one record, id out_id, its TSC column in_id; 0 is
        stored as 2**63). For one output, log every input it came from in
        the order they arrived: the analysis joins the output to the last.
        Returns True when accepted, False when dropped (Arg.DROP_WHEN_FULL=1);
        raises CloudprofilerError otherwise (BAD_HANDLER on another handler,
        BAD_ARG_VALUE for in_id -2**63; ChannelClosedError after close)."""
        out_id, in_id = _int64("out_id", out_id), _int64("in_id", in_id)
        rc = _lib.func("CP_LogLineage")(self.handle, out_id, in_id)
        if rc == 0:
            return True
        if rc == ErrorCode.DROPPED:
            return False
        self._failed("CP_LogLineage(%d, %d)" % (out_id, in_id), rc, detailed=False)  # never sets CP_LastError

    def mark_blocked(self, which):
        """SERVICERATE channels: the operator's input was empty (Blocked.INPUT)
        or its output full (Blocked.OUTPUT, or both ORed) in the current
        sampling period, which the estimator then leaves out (CP_MarkBlocked).
        Call it when the operator is about to wait. Raises CloudprofilerError
        (BAD_ARG_VALUE for which not 1..3, BAD_HANDLER on another handler;
        ChannelClosedError after close)."""
        w = _enum(which, Blocked, "which")
        rc = self._lib.CP_MarkBlocked(self.handle, int(w))
        if rc != 0:
            self._failed("CP_MarkBlocked(%d)" % int(w), rc, detailed=False)  # never sets CP_LastError

    def service_rate(self):
        """SERVICERATE channels: the estimator's state now (CP_ServiceRate), a
        ServiceRate. Raises CloudprofilerError (BAD_HANDLER on another
        handler; ChannelClosedError after close)."""
        self._check_open("service_rate")
        out = _lib.ServiceRateStruct()
        rc = _lib.func("CP_ServiceRate")(self.handle, ctypes.byref(out))
        if rc != 0:
            self._failed("CP_ServiceRate", rc, detailed=False)  # never sets CP_LastError
        return ServiceRate(out.rate, out.running, out.period_s, out.samples, out.periods, out.convergences,
                           bool(out.converged), out.mean)

    def mark_stats(self):
        """Marked channels (OPERATOR[#INSTANCE] in, out or sent, of
        BUFFER_IDENTITY or BUFFER_IDENTITY_COMP; docs/capacity.md): what the
        instance did so far (CP_MarkStats), a MarkStats. Enters Go (about
        0.1 us, more through ctypes): once a second, not every tuple. Raises
        CloudprofilerError (BAD_HANDLER when the channel notes no waits of
        its thread; ChannelClosedError after close)."""
        self._check_open("mark_stats")
        out = _lib.MarkStatsStruct()
        rc = _lib.func("CP_MarkStats")(self.handle, ctypes.byref(out))
        if rc == ErrorCode.BAD_HANDLER:
            raise _lib.CloudprofilerError(
                "CP_MarkStats(%r)" % self.name, rc, "the channel notes no waits of its thread: it is not a "
                "marked OPERATOR[#INSTANCE] in, out or sent of BUFFER_IDENTITY, or CP_WAITS=off, or this "
                "machine gives no rseq (the library then says so on stderr)")
        if rc != 0:
            self._failed("CP_MarkStats", rc, detailed=False)  # never sets CP_LastError
        return MarkStats(out.visits, out.busy_s)

    def close(self):
        """Flushes and closes the channel (CloseChannel); blocks until its
        file is complete. A second close does nothing. Raises
        CloudprofilerError if records could not be written (CP_ERR_IO)."""
        if self._closed:
            return
        if _lib._forked:
            _lib.load()
        self._closed = True
        with _channels_lock:
            _channels.discard(self)
        rc = self._lib.CloseChannel(self.handle)
        if rc != 0 and rc != ErrorCode.CLOSED:  # CLOSED: close_all closed it already
            raise _lib.error("CloseChannel on channel %r" % self.name, rc)


def _after_fork_in_child():
    # The child's copy of the library has no Go runtime: its records would
    # never reach a file. Every channel gets handle 0 (never valid), so the
    # next log()/log_many() fails in C and _failed raises LibraryError, at no
    # cost on the hot path.
    if _lib._lib is None:
        return
    for ch in list(_channels):
        ch.handle = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _mark_all_closed():
    with _channels_lock:
        chans = list(_channels)
        _channels.clear()
    for ch in chans:
        ch._closed = True


def close_all():
    """Closes every open channel of the process (CloseAllChannels), also
    those opened by other code through the C API. Idempotent."""
    if _lib._lib is None:
        return  # nothing was ever opened here
    lib = _lib.load()
    _mark_all_closed()
    rc = lib.CloseAllChannels()
    if rc != 0:
        raise _lib.error("CloseAllChannels", rc)


# SIGTERM. The library's C handler (installed at the first OpenChannel,
# chained to the handler that was there) writes every record accepted up to
# that moment, on whichever thread the kernel gave the signal: often not the
# one logging (numpy's and the Go runtime's threads take signals too), and
# that thread may go on logging while the flush runs. So, before the first
# open, the binding installs a Python handler beneath the library's: it runs
# on the main thread once the flush is done, closes every channel (writing
# what was accepted since), and lets the process die of SIGTERM as it would
# have. Only when SIGTERM still has its default action and we are on the
# main thread: a program's own handler is left alone.
_sigterm_checked = False


def _install_sigterm():
    global _sigterm_checked
    if _sigterm_checked:
        return
    _sigterm_checked = True
    if os.environ.get("CP_NO_SIGNAL_HANDLER") == "1":
        return
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        pass  # not allowed here: the library's flush alone stands


def _on_sigterm(signum, frame):
    try:
        if _lib._lib is not None and not _lib._forked:
            _mark_all_closed()
            _lib._lib.CloseAllChannels()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


@atexit.register
def _close_all_at_exit():
    # Registered at import, so it runs after atexit hooks registered later
    # (which may still log). Not in a forked child: its Go runtime is gone.
    if _lib._lib is None or _lib._forked:
        return
    _mark_all_closed()
    rc = _lib._lib.CloseAllChannels()
    if rc != 0:
        print("cloudprofiler: closing channels at exit: %s" % _lib.message(rc), file=sys.stderr)


def _int64(what, v):
    """v as an int the C ABI's int64 holds: TypeError for a bool or a
    non-integer, ValueError beyond int64 (every call refuses the same way)."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError("%s must be an int, not %s" % (what, type(v).__name__))
    i = v.__index__()
    if not -(1 << 63) <= i <= _INT64_MAX:
        raise ValueError("%s %d is out of range (int64)" % (what, i))
    return i


_ndarray = _I64 = None  # numpy.ndarray and dtype int64, once numpy is imported


def as_int64(ids):
    """ids as a 1-d C-contiguous native int64 numpy array, without a copy
    when it already is one (or a buffer of int64). See Channel.log_many."""
    global _ndarray, _I64
    import numpy as np
    if _ndarray is None:
        _ndarray, _I64 = np.ndarray, np.dtype(np.int64)
    if isinstance(ids, np.ndarray):
        a = ids
    elif isinstance(ids, (str,)) or isinstance(ids, int) or not hasattr(ids, "__iter__") and not _has_buffer(ids):
        raise TypeError("log_many takes an array, buffer or iterable of int ids, not %s%s"
                        % (type(ids).__name__, " (use log() for one id)" if isinstance(ids, int) else ""))
    elif _has_buffer(ids):
        mv = memoryview(ids)
        if mv.format in ("B", "b", "c") and mv.itemsize == 1:
            if mv.nbytes % 8:
                raise ValueError("a byte buffer given to log_many is read as raw int64 ids: its "
                                 "length (%d bytes) must be a multiple of 8" % mv.nbytes)
            a = np.frombuffer(mv if mv.c_contiguous else mv.tobytes(), dtype=np.int64)
        else:
            a = np.asarray(mv)
    else:
        seq = ids if isinstance(ids, (list, tuple)) else list(ids)
        # Let numpy infer the type (never a silent float->int cast), once.
        a = np.array(seq) if len(seq) else np.zeros(0, dtype=np.int64)
        if a.dtype.kind not in "iu" and all(hasattr(v, "__index__") and not isinstance(v, bool) for v in seq):
            # ints beyond int64 (numpy keeps them as objects, or, beside
            # negative ones, makes floats of them): refused by value, as
            # log() refuses them
            for v in seq:
                _int64("tuple id", v)
        if a.dtype.kind not in "iu":
            raise TypeError("log_many: ids must be ints within int64; from this %s numpy inferred %s "
                            "(a float, bool, non-number, or ints beyond int64 in it)"
                            % (type(ids).__name__, a.dtype))
    dt = a.dtype
    if dt != np.int64 or not dt.isnative:
        if dt.kind == "i" or dt.kind == "u" and dt.itemsize < 8:
            a = a.astype(np.int64)
        elif dt.kind == "u":
            if a.size and a.max() > _INT64_MAX:
                raise ValueError("log_many: tuple id %d is out of range (int64): uint64 ids above "
                                 "2**63-1 do not fit the library's int64 tuple ids" % int(a.max()))
            a = a.astype(np.int64)
        else:
            raise TypeError("log_many needs integer tuple ids (int64); got dtype %s. Convert "
                            "explicitly, e.g. ids.astype(numpy.int64)" % dt)
    if a.ndim != 1:
        a = a.reshape(-1)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


def _has_buffer(obj):
    try:
        memoryview(obj)
        return True
    except TypeError:
        return False
