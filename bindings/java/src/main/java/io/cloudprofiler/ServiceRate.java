package io.cloudprofiler;

/**
 * A SERVICERATE channel's estimate at one moment (the C cp_service_rate_t),
 * from {@link Channel#serviceRate()} or {@link CloudProfiler#serviceRate(long)}.
 * Rates are items per second.
 *
 * @param rate the last converged estimate, else the running one; 0: none yet
 * @param running the running mean of estimates since the last convergence (0: none)
 * @param periodSeconds the sampling period T now
 * @param samples unblocked periods used so far
 * @param periods periods sampled so far
 * @param convergences converged estimates so far (each an event in the file)
 * @param converged true when rate is a converged estimate
 * @param mean the mean rate of the last window of unblocked periods (0: none yet): what the
 *     operator did a second while not blocked, preemption and all; {@code rate} (their 95th
 *     percentile) keeps the periods it ran undisturbed and stands above it on a shared machine
 */
public record ServiceRate(double rate, double running, double periodSeconds, long samples, long periods,
                          long convergences, boolean converged, double mean) {}
