package io.cloudprofiler;

/**
 * A call that is not on the hot path failed: opening a channel, setting an
 * argument, closing, or loading the native library. The message is the
 * library's own detailed one (the file, the variable, the value), and
 * {@link #code()} the C header's CP_ERR_* code (0 when the library could not
 * be loaded at all). Unchecked, so that operator code (Flink's open(), Storm's
 * prepare()) can let it fail the task with its reason.
 */
public class CloudProfilerException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int code;

    public CloudProfilerException(int code, String message) {
        super(message);
        this.code = code;
    }

    public CloudProfilerException(String message, Throwable cause) {
        super(message, cause);
        this.code = 0;
    }

    /** The CP_ERR_* code (negative), or 0 for a library that could not be loaded. */
    public int code() {
        return code;
    }
}
