// Package critpath says where the latency goes: the critical path of each
// time slice (Sager, "Critical Path Analysis of a Dataflow Engine", ch. 3
// and 5; SnailTrail's critical participation) and every tuple's end-to-end
// latency taken apart into its operators' own work, queueing behind
// earlier tuples, transfers, and the rest (docs/critical-path.md).
//
// The activity graph comes from the operator marks of package capacity: an
// operator instance is a worker; its in..out is processing; out..sent is
// waiting for room downstream (blocked); the gap from its previous
// departure to its next in is either waiting (the tuple it takes next was
// handed off after the gap began: the hand-off ended the wait) or time it
// spent taking an already queued tuple (the tuple was handed off before:
// worker time, on the path); a hand-off (the tuple's record before the in)
// to the in is a communication activity. Nothing is assumed that the
// records cannot show: a gap is waiting only when the record of the
// hand-off that ended it is later than the gap's start.
//
// The analysis runs in two passes. Pass 1 (Collector, one per analyze
// worker) sees each tuple's records joined, in hop order, and computes
// every part of its latency but one: how a hand-off-to-in hop splits into
// queueing (the receiving instance was busy with earlier tuples) and
// transfer, which needs the instance's previous departure, another tuple's
// record. So pass 1 writes one Visit per marked in, with the hop's ends,
// into sorted runs (in memory, or spilled past the budget). Pass 2 merges
// the runs into one stream ordered by the in's time and walks it: each
// instance's previous departure splits the hop, and the same walk builds
// the activity graph forward in time and finds the critical path of each
// slice (the backtracking of Sager's Algorithm 1, computed forward: each
// worker carries the vector of its path so far) and critical
// participation. Times are integer reference cycles, so a tuple's parts
// add up to its end-to-end latency exactly.
//
// With Config.Fast (every instance that marks its in marks no sent, and
// its departures' counters, indexed while decoding (DepIndex), climb and
// fit a quarter of the budget), pass 1 finds each in's previous departure
// itself: the latest departure counter below the in's, translated at the
// node's rate from the in's estimate. It splits the hop there and keeps
// only the visits where the instance waited (its first, a tuple's first
// record, a hand-off after the previous departure) or departed after its
// out: between two kept visits the instance worked without a break, so
// pass 2 takes (previous departure, next kept visit's D] as its own work
// (walker.onPath) and looks a sender's state at a hand-off up from its
// last kept departure extended on its own path (istate.lookup).
package critpath
