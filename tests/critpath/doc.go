// Package critpath holds the tests of the critical-path analysis (issue 18)
// against pipelines whose truth is known: examples/pipeline/tandem.c
// (source -> A -> B -> sink, or with --fork source -> {A, B} -> join ->
// sink, each operator spinning a known number of TSC cycles per tuple) runs,
// `cloudprofiler analyze` writes criticalpath.csv and breakdown.csv
// (/work/notes/critpath-spec.md: the columns and their meaning), and the
// tests check:
//
//   - invariants on every slice of criticalpath.csv (shares and
//     participation each sum to 1, slices consistent) and on every group of
//     breakdown.csv (the parts' total_cycles add up to the end-to-end row's,
//     exactly);
//   - heavy load (source above B's capacity, bounded queues): B holds at
//     least 90% of the critical path, over the run and in most slices;
//   - light load (5% of B's capacity): waiting for input holds at least 80%;
//   - fork-join (A 1 us, B 3 us): the path goes through B in at least 95% of
//     the slices;
//   - counterfactual: halving the operator with the largest share lowers the
//     tail of the end-to-end latency, halving one with a share near 0 does
//     not move it (tail latencies measured from the logs themselves);
//   - a burst: the queueing breakdown.csv charges to B equals what tandem
//     measured (burst_queue_cycles) within 5%;
//   - bad input (a missing channel, a truncated file, no rounds, no
//     tuples): a clear message, never a panic.
//
// `make test-critpath` runs it (it needs build/tandem and build/cloudprofiler
// named by CP_TANDEM and CP_TOOL; without them it skips). The checks that
// read criticalpath.csv or breakdown.csv fail until analyze writes them; the
// rest (the pipelines' truth, latencies from the logs, bad input) run now.
// The package has tests only.
package critpath
