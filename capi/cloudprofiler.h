/*
 * cloudprofiler.h — the C ABI of libcloudprofiler.so. This header is the
 * contract: the library's own C sources and its Go exports are compiled
 * against it, so a signature that drifts fails the build.
 *
 * Model. A program opens a *channel* per instrumentation point and logs
 * (timestamp, tuple id) events on it with LogTS. The channel's *handler*
 * decides what is kept (everything, a sample, a count per period, nothing);
 * its *log format* decides how the kept records are written: one file per
 * channel in the log directory ($CP_LOG_DIR, default ./cloudprofiler-logs,
 * created if missing). `cloudprofiler dump FILE` decodes any of them.
 *
 * Marking operators (the capacity analysis, docs/capacity.md). A channel
 * named "OPERATOR ROLE" or "OPERATOR#INSTANCE ROLE" marks one instance of
 * an operator; ROLE is the name's last space-separated word:
 *   in    the instance took the tuple from its input and starts on it (log
 *         it after the dequeue or receive returned: waiting is before it);
 *   out   its own work on the tuple is done: log it right before handing
 *         the tuple downstream (emit, collect, enqueue, send);
 *   sent  (optional) the hand-off returned: out to sent is time blocked by
 *         a full downstream (backpressure), not service;
 *   count a CP_SERVICERATE channel: an operator instrumented with counters;
 *   lineage a CP_LINEAGE channel: which input each of the instance's
 *         outputs was made from (CP_LogLineage), for operators whose
 *         output ids differ from their input ids (windows, joins,
 *         aggregates). For one output, log every input it came from in the
 *         order they arrived; the analysis follows the last one logged (the
 *         input the output waited for): that input's records are joined to
 *         the output's, so one tuple's way runs ... -> OPERATOR in (the
 *         input) -> OPERATOR out (the output) -> ...; the other inputs end
 *         at OPERATOR in. An output id must differ from every input id.
 * OPERATOR is the rest of the name up to its last '#', INSTANCE what
 * follows it (a subtask index, a thread name; may be absent). The instance
 * is (the header's node, pid, OPERATOR, INSTANCE): one channel per instance
 * and role (two are an error of `cloudprofiler analyze` naming both). Own
 * service time of a tuple is out - in, on one TSC. Other names are not
 * marks; they still give durations.
 *
 * Handles. OpenChannel returns an opaque int64 handle > 0. Handles are never
 * pointers: a stale, forged or closed handle given to any function returns a
 * negative code and touches nothing. A closed handle stays invalid: slots are
 * reused only after a quarantine (and with a new generation number).
 *
 * Threads. Every function may be called from any thread at any time, also
 * concurrently with CloseChannel on the same channel. LogTS never enters the
 * Go runtime and never allocates; a LogTS that returned 0 on a buffered
 * channel has its record in the file once the channel is closed, flushed by
 * CloseAllChannels, exit(), or SIGTERM.
 *
 * Errors. Every function returns 0 (or a handle > 0) on success and a
 * negative CP_ERR_* code otherwise; CP_ErrorString turns a code into text,
 * CP_LastError gives the calling thread's detailed message of its last
 * failure (the "details on stderr" below are there too).
 * Nothing is ever dropped silently: see CP_ARG_DROP_WHEN_FULL.
 *
 * Shutdown. At the first OpenChannel the library registers an atexit hook
 * (flush and close everything) and, unless CP_NO_SIGNAL_HANDLER=1 is set or
 * SIGTERM is ignored, a SIGTERM handler that writes every accepted record
 * to disk with async-signal-safe calls and then chains to the handler that
 * was installed before it: a program's own handler still runs, and with the
 * default disposition the process still dies of SIGTERM (exit status 143 in a
 * shell). Install your own SIGTERM handler before the first OpenChannel, or
 * call CloseAllChannels from it. The library never calls Go's signal.Notify.
 * The signal may be handled on any thread that does not block it while other
 * threads go on logging: with the default disposition the handler closes
 * every channel before it writes (later LogTS calls return CP_ERR_CLOSED,
 * LogTSMany stops with it), so every LogTS that returned 0 and every record
 * LogTSMany counted is in the file (a record another thread was still writing
 * is waited for, at most 50 ms in all). With a handler of the program's the
 * channels stay open: what is logged after the flush is written by the
 * program's CloseAllChannels or exit(), not by a handler calling _exit().
 * Signal stacks: the Go runtime inside the library handles a signal that
 * arrives while it runs on a calling thread on that thread's alternate
 * signal stack (sigaltstack), the one the thread had at its first call. A
 * thread must not remove or free that stack while it may still call in; the
 * atexit hook gives the exiting thread a stack of its own when it has none
 * (CPython's faulthandler frees its stack before exit() runs the hook).
 *
 * Configuration comes from the environment at the first OpenChannel
 * (CP_LOG_DIR, CP_BLOCK_RECORDS, CP_RING_BLOCKS, CP_NO_SIGNAL_HANDLER, ...:
 * see docs/configuration.md); a C host may setenv() before that call. A bad value fails
 * that OpenChannel with CP_ERR_CONFIG (the message on stderr names the
 * variable) and the next OpenChannel reads the environment again.
 *   CP_FAKE_TSC=RATE:OFFSET  every TSC the library reads (LogTS of every
 *     handler, counter period ends, sync points, the SIGTERM flush) is
 *     ((unsigned __int128)raw * RateQ32 >> 32) + OFFSET, RateQ32 =
 *     round(RATE * 2^32), RATE in [0.01, 100]: one machine can play several
 *     nodes with exact ground truth. The header's tsc_hz is scaled by RATE.
 *     Unset, LogTS costs what it did (one predicted branch on the owned path).
 *   CP_NODE=NAME  the node this process plays (default: the host name),
 *     1..64 characters of [A-Za-z0-9._-], written as "node" in every header.
 *
 * Not supported (Go runtime limits): logging in a child made by fork()
 * without exec (a buffered channel's records are lost there, an IDENTITY
 * channel's land in the parent's file; a child that never logs exits
 * normally: the atexit hook acts only in the process that loaded the
 * library), dlclose, loading two copies of the library into one process.
 */
#ifndef CLOUDPROFILER_H
#define CLOUDPROFILER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Log formats (values kept from the original Java API).
 * Formats without _TSC record, per event, the TSC and CLOCK_MONOTONIC_RAW
 * nanoseconds read together (24-byte records); _TSC formats record the TSC
 * only (16-byte records). ASCII files are text; the others are binary files
 * of independently decodable frames (a file cut by a crash decodes up to its
 * last whole frame). ZSTD uses zstd level 1 ("fastest"); S2 is klauspost's
 * S2, faster and larger. Compressed formats need a buffered handler. */
enum cp_log_format {
  CP_ASCII = 0,
  CP_ASCII_TSC = 1,
  CP_BINARY = 2,
  CP_BINARY_TSC = 3,
  CP_ZSTD = 4,
  CP_ZSTD_TSC = 5,
  CP_S2 = 6,
  CP_S2_TSC = 7
};

/* Handler types (values kept from the original Java API). Arguments are set
 * with ParameterizeChannel; defaults in brackets.
 *
 * CP_IDENTITY            every record written at once by the logging thread
 *                        (one write(2) per record, under the channel's write
 *                        lock; ASCII or BINARY formats). A write that fails
 *                        (a full disk) leaves the file as it was: LogTS
 *                        returns CP_ERR_IO and the record is not in the file.
 * CP_BUFFER_IDENTITY     every record, into a ring of blocks drained, encoded,
 *                        compressed (per the format) and written in the
 *                        background. The fast path: rdtscp + one atomic add +
 *                        a 16/24-byte store.
 * CP_BUFFER_IDENTITY_COMP  the same handler (the format decides compression);
 *                        kept for compatibility with the original API.
 * CP_MEDIAN              per window of arg0 [1000, 1..100000] events, one
 *                        record: the event with the median TSC of the window.
 * CP_DOWNSAMPLE          every arg0-th [10, >= 1] event is kept, starting with
 *                        the first. The skipped path does no atomic operation;
 *                        with several threads on one channel the sampling rate
 *                        is approximate (kept records are always written).
 * CP_XOY                 keeps events whose tuple id mod arg1 (y) [1024, >= 1]
 *                        is < arg0 (x) [1, 0..y]; mod is floored (ids < 0 work).
 * CP_FIRSTLAST           the first and the last event logged on the channel,
 *                        written at close.
 * CP_PERIODICCOUNTER     counts events, multi-writer exact (atomic add); one
 *                        record per period of arg0 ns [1e9, >= 1e6]: period end
 *                        (TSC), count, skipped periods; the total at close.
 * CP_FASTPERIODICCOUNTER the same for a single writer (plain increment, no
 *                        atomic): several writers may under-count, nothing
 *                        breaks (a writer's stale store can step the count
 *                        back: a period then counts only what it climbs
 *                        above the highest value read, never a wrapped
 *                        difference; the periods add up to the total at
 *                        close). One sampling goroutine keeps every counter
 *                        channel's periods in lock step (aligned to multiples
 *                        of the period on CLOCK_MONOTONIC_RAW).
 * CP_NULLH               discards everything (checks the handle only).
 * CP_NET_CONF            asks the configuration server ($CP_CONF_SERVER=host:port)
 *                        which handler (and optionally format and arguments) the
 *                        channel gets; OpenChannel returns within
 *                        $CP_CONF_TIMEOUT_MS [1000] whatever the server does, with
 *                        the fallback handler $CP_CONF_FALLBACK [NULLH] if it got
 *                        no usable answer (the reason is in the file header).
 *                        While open, the channel follows rule changes within about
 *                        a second, switching handler without being reopened; each
 *                        switch is an event in the file. It can be given every
 *                        handler above but IDENTITY; the file's format is fixed at
 *                        open. Resolved to NULLH it logs as fast as NULLH.
 * CP_FOX_START           the return-trip (ReT) method's start: logs each tuple
 *                        as BUFFER_IDENTITY does (same cost), and listens on UDP
 *                        ($CP_RET_LISTEN=host:port [0.0.0.0:0: any interface, a
 *                        port the kernel picks]; the address bound is in the file
 *                        header, "fox":{"listen":...}) for ReTACKs: a goroutine
 *                        blocked in recvmsg logs (tuple id, TSC when the kernel
 *                        received the ReTACK) into a second file, the return log:
 *                        the channel's file name with ".ret" before ".cplog",
 *                        same format, header "fox":{"role":"return"}. Datagrams
 *                        that are not a ReTACK v1 are dropped and counted (trailer).
 *                        One FOX_START channel per listen address. With
 *                        $CP_CONF_SERVER set, OpenChannel registers the address
 *                        with the configuration server under the channel's name
 *                        (0.0.0.0 or :: replaced by this host's source address
 *                        toward the server), waiting at most CP_CONF_TIMEOUT_MS;
 *                        an unreachable server never fails the open: header
 *                        "fox":{"registered":...} says what was registered or
 *                        why nothing was. CloseChannel removes the entry (best
 *                        effort, same bound); SIGTERM and kill -9 leave it.
 * CP_FOX_END             the ReT method's end: logs each tuple as BUFFER_IDENTITY
 *                        does, then sends a ReTACK (24 bytes, big-endian: magic
 *                        "CPRA", version 1, type 1, length, tuple id, this
 *                        record's TSC) to the start node with one non-blocking
 *                        send(2) from LogTS (about 0.8 us): a send that fails
 *                        (EAGAIN...) is counted, never waited for. The start
 *                        node is $CP_RET_START=host:port when set; else, with
 *                        $CP_CONF_SERVER set, the start point registered there
 *                        under $CP_RET_START_NAME, or the only one registered
 *                        when that is unset (asked within CP_CONF_TIMEOUT_MS).
 *                        Header "fox":{"start_found_via":"CP_RET_START" or
 *                        "confserver ADDR name \"N\""}. No usable start node
 *                        (neither variable set, server unreachable, nothing or
 *                        several registered and no name, an unknown name):
 *                        OpenChannel returns CP_ERR_CONFIG with a message
 *                        naming the server, what it has and what to set.
 *                        CP_RET_LISTEN, CP_RET_START and CP_RET_START_NAME are
 *                        read at each FOX OpenChannel. Not reachable through
 *                        NET_CONF.
 * CP_GPIORTT             aarch64 boards only (CP_ERR_UNSUPPORTED_PLATFORM here).
 * CP_SERVICERATE         an operator's service rate from counters only (Beard
 *                        & Chamberlain, docs/capacity.md): LogTS counts one
 *                        item the operator took (a plain increment, one writer
 *                        per channel as FASTPERIODICCOUNTER; the id is not
 *                        kept), LogTSMany adds n; CP_MarkBlocked says its input
 *                        was empty or its output full. The library samples the
 *                        count every period T (from 1 ms, doubled while periods
 *                        are unblocked and regular up to CP_ARG_SR_MAX_PERIOD_NS,
 *                        halved while they are blocked but busy down to
 *                        CP_ARG_SR_MIN_PERIOD_NS), keeps the periods without a
 *                        blocked mark, and estimates the non-blocking rate
 *                        (Gaussian filter, 95th percentile, running mean,
 *                        convergence test, restart): CP_ServiceRate reads it,
 *                        each converged estimate is a "service_rate" event in
 *                        the file. Counter records every arg0 ns [1e9, >= 1e6]
 *                        as PERIODICCOUNTER writes them. Not through NET_CONF.
 * CP_LINEAGE             an operator's lineage ("OPERATOR[#INSTANCE] lineage",
 *                        see "Marking operators"): CP_LogLineage(ch, out_id,
 *                        in_id) says output out_id was made from input in_id.
 *                        Each call is one record of an ordinary tuple file
 *                        (header handler "LINEAGE") whose id is out_id and
 *                        whose TSC column holds in_id, as uint64 (in_id 0,
 *                        which a TSC of 0, "never written", cannot carry, is
 *                        stored as 2^63: in_id INT64_MIN is refused), written
 *                        through BUFFER_IDENTITY's ring (any format; the
 *                        non-_TSC formats add CLOCK_MONOTONIC_RAW at the
 *                        call): flushed by close, CloseAllChannels, exit()
 *                        and SIGTERM like it, CP_ARG_DROP_WHEN_FULL applies.
 *                        LogTS and LogTSMany on it return CP_ERR_BAD_HANDLER.
 *                        Not through NET_CONF.
 */
enum cp_handler_type {
  CP_IDENTITY = 0,
  CP_BUFFER_IDENTITY = 1,
  CP_BUFFER_IDENTITY_COMP = 2,
  CP_MEDIAN = 3,
  CP_DOWNSAMPLE = 4,
  CP_XOY = 5,
  CP_FIRSTLAST = 6,
  CP_PERIODICCOUNTER = 7,
  CP_FASTPERIODICCOUNTER = 8,
  CP_NULLH = 9,
  CP_NET_CONF = 10,
  CP_FOX_START = 11,
  CP_FOX_END = 12,
  CP_GPIORTT = 13,
  CP_SERVICERATE = 14,
  CP_LINEAGE = 15
};

/* Argument numbers for ParameterizeChannel. 0 and 1 are the handler's own
 * (see above). CP_ARG_DROP_WHEN_FULL (buffered handlers, MEDIAN, DOWNSAMPLE,
 * XOY): 1 makes LogTS return CP_ERR_DROPPED instead of waiting when the ring
 * is full (it takes a position only in a free block, with a compare-and-swap,
 * so it never waits); dropped events are counted and the count is written
 * into the file. The default, 0, never drops: the logging thread waits
 * (sleeping) for space. */
enum cp_arg {
  CP_ARG0 = 0,
  CP_ARG1 = 1,
  CP_ARG_DROP_WHEN_FULL = 100,
  /* CP_SERVICERATE's estimator (the paper leaves these open; docs/capacity.md
   * says why each default):                          [default, range] */
  CP_ARG_SR_MIN_PERIOD_NS = 200,  /* shortest sampling period T    [1e5, 5e4..1e9] */
  CP_ARG_SR_MAX_PERIOD_NS = 201,  /* widest T                      [16e6, min..1e9] */
  CP_ARG_SR_WINDOW = 202,         /* periods in the window S       [64, 8..4096] */
  CP_ARG_SR_WIDEN_AFTER = 203,    /* unblocked, regular periods before T doubles [16, 1..1e6] */
  CP_ARG_SR_STABLE_PPM = 204,     /* "regular": realized periods within this of their mean [100000, 1..1e6] */
  CP_ARG_SR_TOLERANCE_PPM = 205   /* convergence: filtered relative sd of the mean within this [1000, 1..1e6] */
};

/* CP_MarkBlocked's which. */
enum cp_blocked {
  CP_BLOCKED_INPUT = 1,   /* the operator found its input empty (it will wait) */
  CP_BLOCKED_OUTPUT = 2   /* the operator found its output full (it will wait) */
};

/* CP_ServiceRate's answer. Rates are items per second. */
typedef struct {
  double rate;            /* the last converged estimate, else the running one; 0: none yet */
  double running;         /* the running mean of estimates since the last convergence (0: none) */
  double period_s;        /* the sampling period T now */
  int64_t samples;        /* unblocked periods used so far */
  int64_t periods;        /* periods sampled so far */
  int64_t convergences;   /* converged estimates so far (each an event in the file) */
  int32_t converged;      /* 1: rate is a converged estimate; 0: not (yet), or not any more */
  int32_t reserved;
  double mean;            /* the mean rate of the last window of unblocked periods (0: none yet):
                             what the operator did a second while not blocked, preemption and
                             all; rate (their 95th percentile) keeps the periods it ran
                             undisturbed and stands above it on a shared machine */
} cp_service_rate_t;

/* CP_MarkStats's answer: what a marked channel's operator instance did so
 * far (the channels named OPERATOR[#INSTANCE] in, out and sent share it). */
typedef struct {
  int64_t visits;         /* its ins so far */
  double busy_s;          /* seconds its thread worked on its tuples: every in to out, and every
                             out to sent and departure to next in that its thread did not wait
                             in (the analysis's cost model: own work, send, take), but for a gap
                             before an in in which another instance marked on the thread (an
                             upstream operator chained in it: its work). Over an
                             interval it had a backlog in, visits / busy_s is what it takes a
                             second, its capacity, as analyze measures it afterwards (analyze
                             takes only the gaps whose tuple was handed off by the departure:
                             a thread that polls for input instead of waiting reads fast here) */
} cp_mark_stats_t;

/* Error codes. */
enum cp_error {
  CP_OK = 0,
  CP_ERR_BAD_HANDLE = -1,         /* not a handle this process opened (or reused) */
  CP_ERR_CLOSED = -2,             /* the channel was closed */
  CP_ERR_BAD_NAME = -3,           /* NULL, empty, or longer than 4096 bytes */
  CP_ERR_BAD_FORMAT = -4,         /* unknown log format */
  CP_ERR_BAD_HANDLER = -5,        /* unknown handler type, or a call the channel's
                                     handler does not take (CP_MarkBlocked, CP_LogLineage,
                                     LogTS on CP_LINEAGE) */
  CP_ERR_NOT_SUPPORTED = -6,      /* handler known but not implemented (none today) */
  CP_ERR_UNSUPPORTED_PLATFORM = -7,
  CP_ERR_FORMAT_HANDLER = -8,     /* compressed format with a handler that cannot compress */
  CP_ERR_BAD_ARG_NUM = -9,        /* this handler has no such argument */
  CP_ERR_BAD_ARG_VALUE = -10,     /* out of range for this argument */
  CP_ERR_TOO_MANY_CHANNELS = -11, /* 16384 open at once */
  CP_ERR_IO = -12,                /* log directory or file unusable (details on stderr) */
  CP_ERR_DROPPED = -13,           /* ring full and channel set to drop: event not kept */
  CP_ERR_NO_MEMORY = -14,
  CP_ERR_INTERNAL = -15,
  CP_ERR_CONFIG = -16             /* a CP_* environment variable is invalid, or a FOX
                                     channel has no peer (details on stderr) */
};

/* Opens a channel. name: any bytes, NUL-terminated, copied (the caller keeps
 * ownership). The log file is <dir>/<host>-<pid>-<number>-<sanitised name>.cplog
 * (.cplog.txt for ASCII formats); the sanitised name keeps [A-Za-z0-9._-] and
 * replaces the rest, so no file ever leaves the log directory. Writes the file
 * header before returning. Returns a handle > 0 or a negative CP_ERR_*.
 * Never blocks on the network. Thread-safe. */
int64_t OpenChannel(const char *name, int32_t log_format, int32_t handler_type);

/* Sets argument arg_num of the channel's handler (see cp_arg). The change is
 * recorded in the file. Returns 0 or a negative CP_ERR_*. Thread-safe;
 * LogTS calls racing with it see the old or the new value. */
int32_t ParameterizeChannel(int64_t ch, int32_t arg_num, int64_t arg_val);

/* Logs one event: the TSC (rdtscp) read at entry, the tuple id, and for
 * non-_TSC formats CLOCK_MONOTONIC_RAW. Returns 0 when the event was accepted
 * (or deliberately skipped by a sampling handler), or a negative CP_ERR_*:
 * BAD_HANDLE, CLOSED, DROPPED, IO (the channel failed to write earlier).
 * Thread-safe (see FASTPERIODICCOUNTER); never enters Go, never allocates;
 * waits (sleeping) only when a buffered channel's ring is full. CP_ERR_IO
 * from a ring handler means its disk is failing: events are refused (and
 * what was accepted is kept in memory and retried) until it writes again;
 * from IDENTITY, that this record's write(2) failed: the record is not in
 * the file (a part written is cut back) and the file's status counts it as
 * refused; the next record is tried again. */
int32_t LogTS(int64_t ch, int64_t tuple_id);

/* Logs n events, tuple ids ids[0..n-1], in order, one record each, as n
 * LogTS calls would: the batch call for bindings whose own call costs far
 * more than a record (Python's ctypes: ~520 ns a call). The TSC is read per
 * record: with rdtsc on the BUFFER_IDENTITY, BUFFER_IDENTITY_COMP and
 * FOX_START _TSC paths (inside a batch the call itself orders the records
 * against the caller's code; rdtscp would add ~9 ns a record), as LogTS
 * does (rdtscp) for every other handler. Returns the number of events
 * accepted (0..n; skipped by a sampling handler counts as accepted, as
 * LogTS's 0 does). Stops at the first refusal and stores its CP_ERR_* in
 * *err (BAD_HANDLE, CLOSED, IO: ids[returned] is the first id not logged);
 * *err is 0 when all were accepted; err may be NULL. With
 * CP_ARG_DROP_WHEN_FULL set, dropped events are counted (in the file),
 * skipped, and the batch goes on: *err = CP_ERR_DROPPED if any was dropped
 * (then the return value counts the accepted ones only, so if a batch also
 * stops on another refusal, *err is that code and where it stopped is not
 * known). n <= 0 returns 0 (*err = 0); ids NULL with n > 0 returns 0 and
 * CP_ERR_BAD_ARG_VALUE. ids is only read, during the call.
 * Per handler: the sampling handlers (DOWNSAMPLE, XOY, MEDIAN) apply per
 * id; the counters add n at once; NULLH returns n after checking the
 * handle; FOX_END sends one ReTACK per id. The owner-biased BUFFER_IDENTITY
 * _TSC path writes each run of positions left in its current block (at most
 * 4096) with plain stores and publishes it with one store; once several
 * threads log on the channel, each run of up to 512 positions is reserved
 * with one atomic add (a batch's records stay contiguous in runs). Both
 * cost about rdtsc and a 16-byte store per record (docs/performance.md).
 * Thread-safe like LogTS (batches from several threads interleave by run);
 * never enters Go, never allocates; waits (sleeping) only when a buffered
 * channel's ring is full. A close racing with the batch stops it there. */
int64_t LogTSMany(int64_t ch, const int64_t *ids, int64_t n, int32_t *err);

/* CP_SERVICERATE channels: marks that the operator's input was empty or its
 * output full (which: CP_BLOCKED_INPUT, CP_BLOCKED_OUTPUT or both) during
 * the current sampling period, whose count the estimator then leaves out.
 * Call it when the operator is about to wait. Never enters Go, never
 * allocates; a few ns (a load, and a store only when the mark is not set).
 * Returns 0, CP_ERR_BAD_HANDLE, CP_ERR_CLOSED, CP_ERR_BAD_ARG_VALUE (which
 * not 1..3) or CP_ERR_BAD_HANDLER (not a CP_SERVICERATE channel). */
int32_t CP_MarkBlocked(int64_t ch, int32_t which);

/* CP_LINEAGE channels: output out_id was made from input in_id (see
 * CP_LINEAGE and the naming rule's role "lineage"): one record, id out_id,
 * TSC column in_id (0 stored as 2^63). Call it once per input of an output,
 * in the order the inputs arrived; the last one is the one the analysis
 * follows. Thread-safe like LogTS, never enters Go, never allocates; waits
 * (sleeping) only when the ring is full. Returns 0, CP_ERR_BAD_HANDLE,
 * CP_ERR_CLOSED, CP_ERR_DROPPED, CP_ERR_IO (as LogTS),
 * CP_ERR_BAD_ARG_VALUE (in_id INT64_MIN) or CP_ERR_BAD_HANDLER (not a
 * CP_LINEAGE channel). */
int32_t CP_LogLineage(int64_t ch, int64_t out_id, int64_t in_id);

/* CP_SERVICERATE channels: the estimator's state now, into *out. Enters Go
 * (about 0.1 us): not for every event. Returns 0, CP_ERR_BAD_HANDLE,
 * CP_ERR_CLOSED, CP_ERR_BAD_ARG_VALUE (out NULL) or CP_ERR_BAD_HANDLER. */
int32_t CP_ServiceRate(int64_t ch, cp_service_rate_t *out);

/* A marked channel (OPERATOR[#INSTANCE] in|out|sent on CP_BUFFER_IDENTITY
 * or CP_BUFFER_IDENTITY_COMP; docs/capacity.md) notes in each record whether
 * its instance's thread waited since the instance's previous mark (header
 * "waits"; CP_WAITS=off turns it off). CP_MarkStats: what the instance did
 * so far, into *out; two calls an interval apart give its capacity over
 * the interval (delta visits / delta busy_s). Enters Go (a C call into Go:
 * about 0.1 us; FACTS.md): not for every event. Returns 0, CP_ERR_BAD_HANDLE, CP_ERR_CLOSED,
 * CP_ERR_BAD_ARG_VALUE (out NULL) or CP_ERR_BAD_HANDLER (not such a
 * channel). */
int32_t CP_MarkStats(int64_t ch, cp_mark_stats_t *out);

/* Flushes every accepted record, writes the closing sync point and counters,
 * fsyncs and closes the file. Returns 0, CP_ERR_CLOSED for a second close,
 * CP_ERR_BAD_HANDLE, or CP_ERR_IO if some records could not be written (the
 * count goes to stderr and, even when the disk refused the trailer too, into
 * the file's status: state "closed with loss" and the unwritten count, which
 * readers report; CP_LastError says how many). Thread-safe; blocks until the
 * file is complete (a failing disk is retried for 2 s). */
int32_t CloseChannel(int64_t ch);

/* Closes every open channel as CloseChannel does. Idempotent; meant for
 * shutdown hooks and atexit. Returns 0 or the first negative code met. */
int32_t CloseAllChannels(void);

/* Static English text for a code (never NULL, never to be freed). */
const char *CP_ErrorString(int32_t code);

/* The detailed message of the last failure in this thread of OpenChannel,
 * ParameterizeChannel, CloseChannel, CloseAllChannels or a CP_Log* reader
 * function (the file, the variable, the value: what the code cannot say).
 * Copies it into buf, NUL-terminated, truncated to cap - 1 bytes (nothing
 * is written if buf is NULL or cap <= 0), and returns its full length; 0 and
 * "" if this thread has had no such failure. A success does not clear it
 * (like errno: read it right after the negative return). LogTS,
 * LogTSMany and CP_LogLineage never set it (they never enter Go; their
 * codes say it all).
 * Thread-safe: each thread has its own message (freed when it exits). */
int32_t CP_LastError(char *buf, int32_t cap);

/* ---- Reading log files through the library's decoder (the one
 * `cloudprofiler dump` uses). Not a hot path (these enter Go). A reader
 * handle is an opaque int64 > 0, never a channel handle (and the reverse:
 * either given to the other's functions is CP_ERR_BAD_HANDLE); handles are
 * never reused. Each handle may be used from one thread at a time (calls on
 * one handle from several threads are serialised, never torn); handles are
 * independent of each other and of channels. Every failure sets
 * CP_LastError's message.
 *
 * The JSON functions (CP_LogInfo, CP_LogSummary) write their text into buf,
 * NUL-terminated if it fits (len < cap), else the first cap bytes without a
 * NUL; they return the text's full length: call again with a buffer of
 * len + 1 bytes when len >= cap (buf NULL with cap 0 asks the length only).
 * cap < 0, or buf NULL with cap > 0: CP_ERR_BAD_ARG_VALUE. */

/* Opens a log file (any format, any handler; also one still being written:
 * what is in it at open) for reading; path is copied. Returns a reader
 * handle > 0, or CP_ERR_BAD_NAME (path NULL or empty) or CP_ERR_IO (missing,
 * unreadable, not a Cloudprofiler log, an unreadable header: the message
 * says which). The caller owns the handle: release it with CP_LogClose. */
int64_t CP_LogOpen(const char *path);

/* JSON about the file: {"path":..., "header":{...the file header...},
 * "counter":bool (a PERIODICCOUNTER or FASTPERIODICCOUNTER file: CP_LogRead
 * returns counter records), "record_size":16|24|32 (bytes per record in
 * CP_LogRead's output), "columns":[...] (its 8-byte columns in order),
 * "max_records":N (an upper bound of CP_LogRead's count: the sum of the
 * counts of the frames CP_LogOpen verified, one per line for ASCII; size
 * the output with it: a damaged or hostile frame header cannot inflate it)} and, for files
 * that may hold counter records (counter and NET_CONF files),
 * "counter_record_size", "counter_columns" and "max_counter_records" for
 * CP_LogReadCounters. Size buffers from the top-level "record_size": the
 * header's own "record_size" is the file's records' (a counter file's is
 * its columns' since the library of 2026-11; before, its tuple size, 16).
 * Returns the length (see above), CP_ERR_BAD_HANDLE, CP_ERR_IO. */
int64_t CP_LogInfo(int64_t r, char *buf, int64_t cap);

/* Decodes every record into out, packed little-endian at record_size bytes
 * each, up to cap records; returns the number written (0..cap), or a
 * negative CP_ERR_*. Tuple files: tuple_id (int64), tsc[, mono_ns] (uint64);
 * counter files: period_end_tsc, count, skipped_periods[, mono_ns] (uint64);
 * mono_ns for the formats without _TSC. Records are in logged order (ring
 * position), merged and deduplicated as `cloudprofiler dump --csv` prints
 * them; holes (positions never written) are skipped. A log file is untrusted
 * input: a file cut short, with damaged frames or lines, or with headers
 * that claim huge sizes returns every whole, valid frame's records and
 * nothing that was not logged, allocating no more than the file header's
 * block size allows (0 records is not an error: CP_LogSummary's "problems"
 * says what was damaged or lost); a fault inside the decoder returns
 * CP_ERR_INTERNAL, it never takes the calling process down. Each record is written once,
 * straight from the decoded frame; the library keeps no pointer to out
 * after the call. When cap is smaller than the file's count, the first cap
 * records are written and the rest still decoded (the summary's "records"
 * says how many there were). Each call decodes the file from its start
 * again. For a NET_CONF file (tuples and counters) this returns its tuple
 * records; CP_LogReadCounters its counter records. Returns
 * CP_ERR_BAD_HANDLE, CP_ERR_BAD_ARG_VALUE (cap < 0, out NULL with cap > 0),
 * CP_ERR_IO (reading the file failed: what was written before is in out,
 * the count only in the summary's "written"). */
int64_t CP_LogRead(int64_t r, void *out, int64_t cap);

/* As CP_LogRead, for the counter records (period_end_tsc, count,
 * skipped_periods[, mono_ns], uint64 each, counter_record_size bytes) of a
 * counter or NET_CONF file, in file order; 0 for a file that has none. */
int64_t CP_LogReadCounters(int64_t r, void *out, int64_t cap);

/* JSON about the last read (CP_LogRead or CP_LogReadCounters; before any,
 * what indexing the file found): {"read":"none"|"records"|"counters",
 * "records":.. (decoded), "written":.. (into out), "holes":..,
 * "duplicates":.., "missing_positions":.., "frames":.., "signal_frames":..
 * (written by the SIGTERM flusher), "truncated_bytes":.. (after the last
 * whole frame), "corrupt_bytes":.., "corrupt_frames":.., "corrupt_lines":..
 * (ASCII lines that did not parse), "truncated":bool, "damaged":bool
 * (corrupt frames, bytes or lines skipped), "trailer":{...} or null (the
 * file was not closed normally: SIGTERM, a crash, still open),
 * "events":[...] (parameter changes, NET_CONF switches, SIGTERM flushes),
 * "version":1|2 (the file's format), "status":{...} or null (version 2: the
 * writer's in-place counts: seq, accepted, written, unwritten, refused,
 * dropped, errno, state), "ring_bound":N (a file not closed: records its
 * ring may have held, lost with the process), "problems":[...] (after a
 * read: one sentence per thing damaged or known lost; [] when the file
 * holds every record its channel accepted, undamaged)
 * [, "error":"..." if the read failed]}. Returns the length (see above) or
 * CP_ERR_BAD_HANDLE. */
int64_t CP_LogSummary(int64_t r, char *buf, int64_t cap);

/* Releases the reader (closes its file). Returns 0, or CP_ERR_BAD_HANDLE
 * (also for a second close). Thread-safe; waits for a call in progress on
 * the same handle. */
int32_t CP_LogClose(int64_t r);

#ifdef __cplusplus
}
#endif

#endif /* CLOUDPROFILER_H */
