// # Translation into one reference TSC
//
// Every node logs raw TSC readings. NewModel learns, from the rounds of
// probes (ROUNDS.md), how each node's counter maps onto one reference
// node's; Point and Duration then translate readings and durations into
// reference cycles with a strict error bound: the truth lies in
// [Est-Err, Est+Err] as long as the counters are constant-rate (invariant
// TSC) and causality holds (a responder's reading happened between the
// origin's Send and Recv).
//
// The model. Between two nodes, c^A = alpha + r*c^B exactly, for unknown
// alpha and r ("translate B into A": r is the paper's r_B^A). A probe that
// A sent to B bounds A's counter at the instant B read Resp: within
// [Send, Recv]; one that B sent to A bounds B's counter at the instant A
// read Resp. Readings are floors of continuous counters and are taken a
// cycle or so off the instant causality orders, so every reading stands
// for an instant within 2 cycles of it; float64 results are widened by
// about 45 ulps of the numbers involved. Values are computed in centred
// coordinates (a reading minus its node's smallest probe reading), which
// keeps sub-cycle precision over months at GHz rates.
//
// # Reference node
//
// Options.Ref names it. Left empty, the model picks the node that took part
// in the most rounds (a node that missed rounds makes a poor hub), then the
// one into which all other nodes translate with the smallest total
// all-probes error at mid-experiment, then the first name. Its frequency
// (RefHz, as the node registered it) turns reference cycles into seconds.
//
// # Methods
//
// MethodPaper is the paper's two-MinRTT method (sections 3.1-3.3) in a
// strict form. For the link "translate B into A", each round's smallest-RTT
// probe that A sent to B is an anchor: B's reading c_j^B and A's midpoint
// of [Send, Recv], with error d_j = RTT/2 plus quantization slack. The
// ratio (Eq. 2) comes from the first and last anchors, the farthest apart:
// r +- dr with dr = (d_j + d_m)/(c_m^B - c_j^B). A value is translated by
// Eq. 4 from the two anchors that bracket it, with the strict error
// |1-t|*d_j + |t|*d_m, t = (c_y^B - c_j^B)/(c_m^B - c_j^B): the paper's e
// inside the bracket, growing linearly outside it (there the first and last
// anchors are used, whose error grows slowest). Durations follow 3.3:
// scenario 1 (one non-reference node) r*d +- |d|*dr (the paper's 2*d/D*e);
// scenario 2 (one end on the reference) the other end's error; scenario 3
// (two non-reference nodes B, C) the end on C translated into B, the
// duration taken in B's counter and scaled by r_B^A, with error
// |d^B|*dr + r*e_BC + dr*e_BC (the second-order term keeps it strict), or
// the same through C, whichever is smaller (Duration.Via). The baseline
// (3.3.5) translates both ends separately and adds their errors.
//
// MethodAllProbes uses every probe in both directions: each is a pair of
// linear constraints on (alpha, r), and together they cut out a convex
// polygon of the relations the data allows. A translated value alpha + r*c
// is linear in (alpha, r), so its range over the polygon is reached at
// vertices: the estimate is the middle of that range and the error half its
// width. This is the tightest strict bound the probes give; no strict
// method can beat (min one-way delay forward + min one-way delay back)/2,
// and this one comes within a few percent of it between the rounds, in the
// simulations of truth_test.go and over real UDP in e2e_test.go. The
// paper's form, which rests on one probe per round in one direction, was
// 2-8% above the floor in the simulations and 1.2-2.4 times it over UDP
// with asymmetric injected delays. An empty polygon means
// inconsistent data (a bug, or a counter that is not constant-rate):
// NewModel fails naming the pair.
//
// MethodBest (the default) intersects the two: both intervals are strict,
// so their intersection is; in scenario 3 it also intersects the other
// route and the baseline. Whatever the method, Duration.Paper and
// Duration.Baseline carry the paper's numbers for comparison.
//
// # Paths
//
// When a pair has no usable direct link (a node missed rounds, a pair never
// probed, fewer than two rounds) or a detour through another node bounds
// better (a pair with bad round trips), values are translated link by link;
// NewModel picks per source node the path with the smallest bound at the
// node's mid-experiment reading (paths.go). Model.Path and Model.Links
// report the choices.
//
// # Use
//
// Build once with NewModel; the model is immutable and safe for concurrent
// use. For many queries use NodeIndex once and PointIdx, PointRelIdx and
// DurationIdx: no allocation and no map lookup per call. A query reading c
// stands for the instant at which that node's counter equalled c.
//
// NewModel fails with an error naming the cause when there are no rounds,
// the reference is unknown, a node answered no probe or has no usable path
// to the reference (pairs need probes in two or more rounds spanning time),
// or a pair's probes admit no linear relation. Options.SkipUnreachable
// leaves unreachable nodes out instead (Model.Unreachable says why).
package minrtt
