// Package servicerate estimates the non-blocking service rate of a stream
// processing operator at run time, after Beard & Chamberlain, "Run Time
// Approximation of Non-blocking Service Rates for Streaming Systems"
// (sections III and IV; /work/shared/papers/online-service-rates-raftlib.txt).
// libcp's sampler feeds one Estimator per CP_SERVICERATE channel.
//
// (The full account of the choices follows in a later commit.)
package servicerate
