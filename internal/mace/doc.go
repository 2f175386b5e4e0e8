// Package mace predicts the maximum latency from load: Chandramouli et
// al.'s maximum cumulative excess (Mace, "Accurate Latency Estimation in a
// Distributed Event Processing System", ICDE 2011;
// ../shared/papers/mace-latency-estimation.txt).
//
// Time is cut into windows of width w from the run's first tuple record.
// A tuple's stimulus is its first record (the source's entry; an operator
// that emits new ids logs lineage, and analyze files the output's records
// under its last input, so the stimulus follows it). Each input event of
// an operator instance belongs to the window of its tuple's stimulus.
//
//   - The deterministic load of an instance j in window p is the number of
//     its input events that belong to p times its cost per tuple: its mean
//     own service time (in to out), the capacity analysis's definition,
//     plus what it spends per tuple between tuples while it has a backlog
//     (from its previous departure to its next in, as the critical-path
//     analysis measures it; the paper counts such overhead in the cost).
//     Counted on 32nds of a window (the theorem assumes arrivals even
//     within a window; a burst is not).
//   - A node is an instance's own thread (one CPU), unless a what-if
//     colocates operators on one; its load is its instances' loads.
//   - The cumulative excess of node i: CE(i,0) = 0, CE(i,p) =
//     max(0, CE(i,p-1) + L(i,p) - w) (seconds of CPU).
//   - Mace(p) = max over nodes of CE(i,p).
//
// Under stimulus-time scheduling (FIFO queues in a chain schedule so), the
// paper proves Mace(p) <= Lat(p) <= Mace(p) + w + eps, with Lat(p) the
// largest latency of a tuple whose stimulus is in p and eps the sum of the
// costs of one event. Beside each window's Mace the analysis puts the
// measured Lat(p), and it says where the run breaks the theorem's
// assumptions (streams merging into one instance, instances that appear to
// share a CPU, events processed out of stimulus order, too few events in a
// window).
//
// What-if scenarios replay the measured arrivals with changes: rate=xR
// (stimulus times from the first record divided by R, so windows hold R
// times the events), cost:OP=F (OP's cost times F), colocate:A,B (A's and
// B's instances on one node); each gives Mace per window and the input rate
// at which some node's long-run load reaches its CPU, past which latency
// grows without bound.
package mace
