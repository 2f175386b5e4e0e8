package io.cloudprofiler;

/**
 * How a channel's kept records are written (capi/cloudprofiler.h, enum
 * cp_log_format; values kept from the original Java API). Formats without
 * {@code _TSC} also record CLOCK_MONOTONIC_RAW nanoseconds per event; ASCII
 * files are text, the others binary frames; ZSTD and S2 compress and need a
 * buffered handler.
 */
public enum LogFormat {
    ASCII(CloudProfiler.F_ASCII),
    ASCII_TSC(CloudProfiler.F_ASCII_TSC),
    BINARY(CloudProfiler.F_BINARY),
    BINARY_TSC(CloudProfiler.F_BINARY_TSC),
    ZSTD(CloudProfiler.F_ZSTD),
    ZSTD_TSC(CloudProfiler.F_ZSTD_TSC),
    S2(CloudProfiler.F_S2),
    S2_TSC(CloudProfiler.F_S2_TSC);

    private final int value;

    LogFormat(int value) {
        this.value = value;
    }

    /** The value of the C enum constant of the same name. */
    public int value() {
        return value;
    }
}
