package io.cloudprofiler;

/**
 * What a channel keeps of the events logged on it (capi/cloudprofiler.h,
 * enum cp_handler_type, where each handler's arguments and defaults are
 * documented; values kept from the original Java API).
 */
public enum HandlerType {
    /** Every record written at once by the logging thread (ASCII or BINARY formats). */
    IDENTITY(CloudProfiler.H_IDENTITY),
    /** Every record, into a ring drained, encoded, compressed and written in the background. */
    BUFFER_IDENTITY(CloudProfiler.H_BUFFER_IDENTITY),
    /** The same handler as BUFFER_IDENTITY (the format decides compression). */
    BUFFER_IDENTITY_COMP(CloudProfiler.H_BUFFER_IDENTITY_COMP),
    /** One record per window of arg0 events: the one with the median TSC. */
    MEDIAN(CloudProfiler.H_MEDIAN),
    /** Every arg0-th event. */
    DOWNSAMPLE(CloudProfiler.H_DOWNSAMPLE),
    /** Events whose tuple id mod arg1 is below arg0. */
    XOY(CloudProfiler.H_XOY),
    /** The first and the last event, written at close. */
    FIRSTLAST(CloudProfiler.H_FIRSTLAST),
    /** Counts events (exact with several threads), one record per period of arg0 ns. */
    PERIODICCOUNTER(CloudProfiler.H_PERIODICCOUNTER),
    /** Counts events from one thread (plain increment), one record per period. */
    FASTPERIODICCOUNTER(CloudProfiler.H_FASTPERIODICCOUNTER),
    /** Discards everything. */
    NULLH(CloudProfiler.H_NULLH),
    /** The configuration server ($CP_CONF_SERVER) decides, and may change it while open. */
    NET_CONF(CloudProfiler.H_NET_CONF),
    /** The return-trip method's start: logs as BUFFER_IDENTITY and receives ReTACKs. */
    FOX_START(CloudProfiler.H_FOX_START),
    /** The return-trip method's end: logs as BUFFER_IDENTITY and sends a ReTACK per event. */
    FOX_END(CloudProfiler.H_FOX_END),
    /** aarch64 boards only: opening it here fails with UNSUPPORTED_PLATFORM. */
    GPIORTT(CloudProfiler.H_GPIORTT),
    /**
     * Counts items an operator takes (one writer, plain increment) and
     * estimates its non-blocking service rate from the counts (Beard and
     * Chamberlain): {@link Channel#markBlocked}, {@link Channel#serviceRate}.
     */
    SERVICERATE(CloudProfiler.H_SERVICERATE),
    /**
     * An operator's lineage (name "OPERATOR[#INSTANCE] lineage"): which
     * input each output was made from, {@link Channel#logLineage}; logTS on
     * it returns ERR_BAD_HANDLER.
     */
    LINEAGE(CloudProfiler.H_LINEAGE);

    private final int value;

    HandlerType(int value) {
        this.value = value;
    }

    /** The value of the C enum constant of the same name. */
    public int value() {
        return value;
    }
}
