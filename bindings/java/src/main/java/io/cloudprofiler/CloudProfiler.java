package io.cloudprofiler;

import java.nio.charset.StandardCharsets;

/**
 * The Java API of libcloudprofiler.so, one static native per C function of
 * capi/cloudprofiler.h (the contract: what each call returns, its thread
 * safety, each handler's arguments). {@link Channel} wraps a handle for
 * try-with-resources.
 *
 * <p>The native library is loaded once per JVM when this class initialises
 * (see {@link #libraryPath()} for where from); a JVM shutdown hook then
 * closes every channel, when this class is on the JVM's own classpath (a
 * job's classloader, as for a fat jar in Flink, gets none: the hook would
 * keep that classloader for the JVM's life; the library's atexit hook and
 * SIGTERM handler close every channel then). Loading never throws here: a
 * failure is kept and {@link #openChannel} throws it, naming every place it
 * looked.
 *
 * <p>The hot path, {@link #logTS(long, long)}, never allocates and never
 * throws: it returns 0 or a negative {@code ERR_*} code. The batch call
 * {@link #logTS(long, long[], int)} returns an encoded result read with
 * {@link #batchAccepted(long)} and {@link #batchError(long)}.
 */
public final class CloudProfiler {
    // The C header's values. javac -h writes these into
    // libcp/io_cloudprofiler_CloudProfiler.h, and libcp/jni.c checks each
    // against capi/cloudprofiler.h with _Static_assert: a value that drifts
    // fails the native build.
    static final int F_ASCII = 0, F_ASCII_TSC = 1, F_BINARY = 2, F_BINARY_TSC = 3,
            F_ZSTD = 4, F_ZSTD_TSC = 5, F_S2 = 6, F_S2_TSC = 7;
    static final int H_IDENTITY = 0, H_BUFFER_IDENTITY = 1, H_BUFFER_IDENTITY_COMP = 2,
            H_MEDIAN = 3, H_DOWNSAMPLE = 4, H_XOY = 5, H_FIRSTLAST = 6,
            H_PERIODICCOUNTER = 7, H_FASTPERIODICCOUNTER = 8, H_NULLH = 9,
            H_NET_CONF = 10, H_FOX_START = 11, H_FOX_END = 12, H_GPIORTT = 13, H_SERVICERATE = 14,
            H_LINEAGE = 15;

    /** The handler's first argument (see each handler in the C header). */
    public static final int ARG0 = 0;
    /** The handler's second argument (XOY's y). */
    public static final int ARG1 = 1;
    /** 1: a full ring makes logTS return ERR_DROPPED (counted in the file) instead of waiting. */
    public static final int ARG_DROP_WHEN_FULL = 100;
    /** SERVICERATE: the first sampling period T, ns [1e6, 1e6..1e9]. */
    public static final int ARG_SR_MIN_PERIOD_NS = 200;
    /** SERVICERATE: the widest T, ns [16e6, min..1e9]. */
    public static final int ARG_SR_MAX_PERIOD_NS = 201;
    /** SERVICERATE: periods in the estimator's window S [64, 8..4096]. */
    public static final int ARG_SR_WINDOW = 202;
    /** SERVICERATE: unblocked, regular periods before T doubles [16, 1..1e6]. */
    public static final int ARG_SR_WIDEN_AFTER = 203;
    /** SERVICERATE: "regular": realized periods within this many ppm of their mean [100000, 1..1e6]. */
    public static final int ARG_SR_STABLE_PPM = 204;
    /** SERVICERATE: convergence tolerance on the filtered relative sd of the mean, ppm [1000, 1..1e6]. */
    public static final int ARG_SR_TOLERANCE_PPM = 205;

    /** {@link #markBlocked}: the operator found its input empty (it will wait). */
    public static final int BLOCKED_INPUT = 1;
    /** {@link #markBlocked}: the operator found its output full (it will wait). */
    public static final int BLOCKED_OUTPUT = 2;

    public static final int OK = 0;
    public static final int ERR_BAD_HANDLE = -1;
    public static final int ERR_CLOSED = -2;
    public static final int ERR_BAD_NAME = -3;
    public static final int ERR_BAD_FORMAT = -4;
    public static final int ERR_BAD_HANDLER = -5;
    public static final int ERR_NOT_SUPPORTED = -6;
    public static final int ERR_UNSUPPORTED_PLATFORM = -7;
    public static final int ERR_FORMAT_HANDLER = -8;
    public static final int ERR_BAD_ARG_NUM = -9;
    public static final int ERR_BAD_ARG_VALUE = -10;
    public static final int ERR_TOO_MANY_CHANNELS = -11;
    public static final int ERR_IO = -12;
    public static final int ERR_DROPPED = -13;
    public static final int ERR_NO_MEMORY = -14;
    public static final int ERR_INTERNAL = -15;
    public static final int ERR_CONFIG = -16;

    /** The JNI glue's interface version; libcp/jni.c returns the same from abi0(). */
    static final int JNI_ABI = 4;

    private static final int ERR_BUF = 4096;
    /** An err array the glue never writes into (length 0): the natives are never passed null. */
    private static final byte[] NO_ERR = new byte[0];

    // Constant after initialisation: the JIT folds the checks below away.
    private static final boolean LOADED;
    private static final CloudProfilerException LOAD_ERROR;

    static {
        CloudProfilerException err = null;
        try {
            NativeLibrary.load();
            int abi = abi0();
            if (abi != JNI_ABI) {
                err = new CloudProfilerException(0, "cloudprofiler: " + NativeLibrary.path()
                        + " speaks JNI interface " + abi + ", this jar " + JNI_ABI
                        + ": the jar and the library come from different builds");
            }
        } catch (CloudProfilerException e) {
            err = e;
        } catch (UnsatisfiedLinkError e) {
            err = new CloudProfilerException("cloudprofiler: " + NativeLibrary.path()
                    + " has no JNI glue (it was built without a JDK's jni.h: build it with `make`"
                    + " on a machine with a JDK): " + e.getMessage(), e);
        } catch (Throwable e) {
            // Anything else (a SecurityException, an OutOfMemoryError, an
            // Error from the loader): kept like the rest, so that this class
            // still initialises and logTS stays callable (it returns
            // ERR_BAD_HANDLE) instead of every use throwing NoClassDefFoundError.
            err = new CloudProfilerException("cloudprofiler: loading the native library failed: " + e, e);
        }
        LOAD_ERROR = err;
        LOADED = err == null;
        if (LOADED) addShutdownHook();
    }

    /**
     * A JVM shutdown hook that closes every channel, unless this class came
     * from a classloader below the JVM's own (a job's, in Flink or Storm):
     * a hook lives as long as the JVM and would keep that classloader, its
     * classes and the library's binding to it, so that no later job could
     * load the library (one classloader per JNI library). The library's
     * atexit hook and SIGTERM handler close every channel at exit anyway.
     * The hook thread is made so that it holds on to no job's classloader
     * either: its context classloader is this class's, and it is created
     * under doPrivileged, so its inherited access-control context has only
     * this class's protection domain, not those of the job's code on the
     * stack that first used this class.
     */
    @SuppressWarnings("removal") // AccessController: deprecated for removal, still what JDK 17's Thread captures
    private static void addShutdownHook() {
        ClassLoader own = CloudProfiler.class.getClassLoader();
        if (!NativeLibrary.onJvmClasspath(own)) return;
        Thread hook = java.security.AccessController.doPrivileged(
                (java.security.PrivilegedAction<Thread>) () -> new Thread(CloudProfiler::closeAllChannels, "cloudprofiler-close-all"));
        hook.setContextClassLoader(own);
        try {
            Runtime.getRuntime().addShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
            // The JVM is already shutting down: the library's atexit hook flushes.
        }
    }

    private CloudProfiler() {}

    /** True if the native library is loaded and usable in this classloader. */
    public static boolean isAvailable() {
        return LOADED;
    }

    /** Why the native library could not be loaded, or null. */
    public static CloudProfilerException loadError() {
        return LOAD_ERROR;
    }

    /** The file the native library was loaded from, and how it was found. */
    public static String libraryPath() {
        return NativeLibrary.describe();
    }

    /**
     * Opens a channel (the C OpenChannel). The log file goes to $CP_LOG_DIR
     * (default ./cloudprofiler-logs), read from the environment at the first
     * open. Never blocks on the network for longer than CP_CONF_TIMEOUT_MS.
     *
     * @return a handle &gt; 0
     * @throws CloudProfilerException naming the cause: a bad name, a format
     *     the handler cannot write, an unusable log directory, a bad CP_*
     *     variable, a library that could not be loaded
     */
    public static long openChannel(String name, LogFormat format, HandlerType handler) {
        requireLoaded();
        if (name == null) throw new CloudProfilerException(ERR_BAD_NAME, "openChannel: the channel name is null");
        if (format == null) throw new CloudProfilerException(ERR_BAD_FORMAT, "openChannel(\"" + name + "\"): the log format is null");
        if (handler == null) throw new CloudProfilerException(ERR_BAD_HANDLER, "openChannel(\"" + name + "\"): the handler is null");
        if (name.indexOf('\0') >= 0) {
            throw new CloudProfilerException(ERR_BAD_NAME, "openChannel: the channel name contains a NUL character");
        }
        byte[] utf8 = name.getBytes(StandardCharsets.UTF_8);
        byte[] cname = new byte[utf8.length + 1];
        System.arraycopy(utf8, 0, cname, 0, utf8.length);
        byte[] err = new byte[ERR_BUF];
        long h = open0(cname, format.value(), handler.value(), err);
        if (h < 0) {
            throw failure((int) h, "openChannel(\"" + name + "\", " + format + ", " + handler + ")", err);
        }
        return h;
    }

    /**
     * Logs one event: the TSC and the tuple id (the C LogTS, called straight
     * from the JNI glue, which never enters Go). Never allocates, never
     * throws.
     *
     * @return 0 when accepted (or skipped by a sampling handler), or
     *     ERR_BAD_HANDLE, ERR_CLOSED, ERR_DROPPED, ERR_IO
     */
    public static int logTS(long ch, long tupleId) {
        if (!LOADED) return ERR_BAD_HANDLE;  // no channel can exist
        return logTS0(ch, tupleId);
    }

    /**
     * Logs ids[0..n-1] in order, as n logTS calls would (the C LogTSMany):
     * about a store per record on buffered channels. Never allocates, never
     * throws.
     *
     * @return n when all were accepted; otherwise a negative value:
     *     {@link #batchError(long)} is the code that stopped the batch (or
     *     ERR_DROPPED, the batch going on, when the channel drops), and
     *     {@link #batchAccepted(long)} how many were accepted. ids null or n
     *     outside 0..ids.length: ERR_BAD_ARG_VALUE, nothing logged.
     */
    public static long logTS(long ch, long[] ids, int n) {
        return logTS(ch, ids, 0, n);
    }

    /** As {@link #logTS(long, long[], int)} for ids[off..off+n-1]. */
    public static long logTS(long ch, long[] ids, int off, int n) {
        if (ids == null || off < 0 || n < 0 || off > ids.length - n) return batchResult(ERR_BAD_ARG_VALUE, 0);
        if (!LOADED) return batchResult(ERR_BAD_HANDLE, 0);
        if (n == 0) return 0;
        return logMany0(ch, ids, off, n);
    }

    /** How many ids a batch logTS accepted. */
    public static int batchAccepted(long result) {
        return (int) (result & 0x7fffffffL);
    }

    /** The code that stopped a batch logTS (or ERR_DROPPED), 0 when all were accepted. */
    public static int batchError(long result) {
        return result >= 0 ? 0 : (int) (result >> 32);
    }

    static long batchResult(int err, int accepted) {
        return err == 0 ? accepted : ((long) err << 32) | accepted;
    }

    /**
     * Sets a handler argument (ARG0, ARG1, ARG_DROP_WHEN_FULL); recorded in
     * the file. @return 0 or a negative ERR_* code.
     */
    public static int parameterizeChannel(long ch, int arg, long value) {
        if (!LOADED) return ERR_BAD_HANDLE;
        return parameterize0(ch, arg, value, NO_ERR);
    }

    /**
     * Flushes and closes a channel (blocks until its file is complete).
     * @return 0, ERR_CLOSED for a second close, ERR_BAD_HANDLE, or ERR_IO if
     *     records could not be written ({@link Channel#close()} throws with
     *     the library's message instead)
     */
    public static int closeChannel(long ch) {
        if (!LOADED) return ERR_BAD_HANDLE;
        return close0(ch, NO_ERR);
    }

    /** Closes every open channel; idempotent. @return 0 or the first negative code. */
    public static int closeAllChannels() {
        if (!LOADED) return OK;
        return closeAll0(NO_ERR);
    }

    /**
     * SERVICERATE channels: says that the operator's input was empty
     * ({@link #BLOCKED_INPUT}) or its output full ({@link #BLOCKED_OUTPUT},
     * or both ORed) in the current sampling period, which the estimator then
     * leaves out; call it when the operator is about to wait (the C
     * CP_MarkBlocked, called straight from the JNI glue: a load, and a store
     * only when the mark is not set yet). Never allocates, never throws.
     *
     * @return 0, or ERR_BAD_HANDLE, ERR_CLOSED, ERR_BAD_ARG_VALUE (which not
     *     1..3), ERR_BAD_HANDLER (not a SERVICERATE channel)
     */
    public static int markBlocked(long ch, int which) {
        if (!LOADED) return ERR_BAD_HANDLE;
        return markBlocked0(ch, which);
    }

    /**
     * LINEAGE channels: output outId was made from input inId (the C
     * CP_LogLineage, called straight from the JNI glue as logTS is: one
     * record, id outId, TSC column inId). For one output, log every input
     * it came from in the order they arrived: the analysis joins the output
     * to the last one. Never allocates, never throws.
     *
     * @return 0, or ERR_BAD_HANDLE, ERR_CLOSED, ERR_DROPPED, ERR_IO (as
     *     logTS), ERR_BAD_ARG_VALUE (inId Long.MIN_VALUE), ERR_BAD_HANDLER
     *     (not a LINEAGE channel)
     */
    public static int logLineage(long ch, long outId, long inId) {
        if (!LOADED) return ERR_BAD_HANDLE;
        return logLineage0(ch, outId, inId);
    }

    /**
     * SERVICERATE channels: the estimator's state now (the C CP_ServiceRate,
     * which enters Go through JNI: well under a microsecond, but not for every
     * event).
     *
     * @throws CloudProfilerException with the code: ERR_BAD_HANDLE,
     *     ERR_CLOSED, ERR_BAD_HANDLER (not a SERVICERATE channel)
     */
    public static ServiceRate serviceRate(long ch) {
        return serviceRateOrThrow(ch, "serviceRate(" + ch + ")");
    }

    /**
     * A marked channel's operator instance ({@code OPERATOR#INSTANCE in},
     * {@code out}, {@code sent}): what it did so far (the C CP_MarkStats,
     * which enters Go through JNI: well under a microsecond, but not for every
     * event).
     *
     * @throws CloudProfilerException with the code: ERR_BAD_HANDLE,
     *     ERR_CLOSED, ERR_BAD_HANDLER (not a marked channel that notes its
     *     thread's waits)
     */
    public static MarkStats markStats(long ch) {
        return markStatsOrThrow(ch, "markStats(" + ch + ")");
    }

    /** The C header's text for a code (CP_ErrorString). */
    public static String errorString(int code) {
        if (!LOADED) return "error " + code + " (the native library is not loaded)";
        byte[] buf = new byte[256];
        int n = errorString0(code, buf);
        return new String(buf, 0, Math.min(n, buf.length), StandardCharsets.UTF_8);
    }

    // ---- for Channel: the same calls, throwing with the library's message.

    static void parameterizeOrThrow(long ch, String name, int arg, long value) {
        requireLoaded();
        byte[] err = new byte[ERR_BUF];
        int rc = parameterize0(ch, arg, value, err);
        if (rc < 0) throw failure(rc, "parameterizeChannel(\"" + name + "\", " + arg + ", " + value + ")", err);
    }

    static void closeOrThrow(long ch, String name) {
        requireLoaded();
        byte[] err = new byte[ERR_BUF];
        int rc = close0(ch, err);
        if (rc < 0 && rc != ERR_CLOSED) throw failure(rc, "closeChannel(\"" + name + "\")", err);
    }

    static ServiceRate serviceRateOrThrow(long ch, String call) {
        requireLoaded();
        double[] d = new double[4];
        long[] l = new long[4];
        int rc = serviceRate0(ch, d, l);
        if (rc < 0) throw new CloudProfilerException(rc, call + ": " + errorString(rc) + " (" + rc + ")");
        return new ServiceRate(d[0], d[1], d[2], l[0], l[1], l[2], l[3] != 0, d[3]);
    }

    static MarkStats markStatsOrThrow(long ch, String call) {
        requireLoaded();
        double[] d = new double[1];
        long[] l = new long[1];
        int rc = markStats0(ch, d, l);
        if (rc == ERR_BAD_HANDLER) {
            throw new CloudProfilerException(rc, call + ": the channel notes no waits of its thread: it is not a marked"
                    + " OPERATOR[#INSTANCE] in, out or sent of BUFFER_IDENTITY, or CP_WAITS=off, or this machine gives no"
                    + " rseq (the library then says so on stderr) (" + rc + ")");
        }
        if (rc < 0) throw new CloudProfilerException(rc, call + ": " + errorString(rc) + " (" + rc + ")");
        return new MarkStats(l[0], d[0]);
    }

    private static void requireLoaded() {
        if (!LOADED) throw new CloudProfilerException(LOAD_ERROR.getMessage(), LOAD_ERROR);
    }

    private static CloudProfilerException failure(int code, String call, byte[] err) {
        int n = 0;
        while (n < err.length && err[n] != 0) n++;
        String detail = new String(err, 0, n, StandardCharsets.UTF_8);
        String msg = call + ": " + errorString(code) + " (" + code + ")";
        if (!detail.isEmpty()) msg += ": " + detail;
        return new CloudProfilerException(code, msg);
    }

    // ---- the natives (libcp/jni.c). err receives this thread's CP_LastError
    // message, NUL-terminated and cut to its length (nothing when it is
    // empty); the glue clears the message before the call, so a message is
    // always this call's. The Java side never passes a null array.
    private static native int logTS0(long ch, long tupleId);
    private static native long logMany0(long ch, long[] ids, int off, int n);
    private static native long open0(byte[] nameNul, int format, int handler, byte[] err);
    private static native int parameterize0(long ch, int arg, long value, byte[] err);
    private static native int close0(long ch, byte[] err);
    private static native int closeAll0(byte[] err);
    private static native int errorString0(int code, byte[] buf);
    private static native int markBlocked0(long ch, int which);
    private static native int logLineage0(long ch, long outId, long inId);
    /** d: rate, running, period_s; l: samples, periods, convergences, converged (lengths 3 and 4). */
    private static native int serviceRate0(long ch, double[] d, long[] l);
    /** d: busy_s; l: visits (lengths 1). */
    private static native int markStats0(long ch, double[] d, long[] l);
    private static native int abi0();
}
