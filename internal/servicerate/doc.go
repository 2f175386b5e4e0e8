// Package servicerate estimates the non-blocking service rate of a stream
// processing operator at run time, after Beard & Chamberlain, "Run Time
// Approximation of Non-blocking Service Rates for Streaming Systems"
// (B&C, sections III and IV). libcp's sampler feeds one Estimator per
// CP_SERVICERATE channel (spec section 3 of issue 14): every period T it
// passes the items the operator took in the period (the counter's delta),
// the period's realized length and whether a blocked mark was set in it.
//
// # The heuristic (B&C Algorithm 1), as built
//
//  1. Non-blocking filter (IV, after Lancaster et al.): only periods in
//     which the operator neither waited for input nor for output space tell
//     its service rate. See "Which periods are used" below.
//  2. S: a sliding window of the last Window used periods' rates,
//     items/seconds. B&C keep counts tc and divide q̄ by T at the end; rates
//     are the same thing per period but survive a change of T (widening)
//     and use each period's realized length rather than the requested one.
//  3. S': S filtered with the Gaussian kernel of Eq. 2, radius 2, without
//     padding (Window-4 values). The kernel e^{-x²/2}/√(2π) at x = -2..2 sums
//     to 0.99086, so used as printed it scales every filtered rate by 0.991,
//     a -0.9 % bias; it is normalised to sum 1 here. Each S' value depends
//     on five consecutive S values only, so S' is kept as a ring of its own,
//     one new value per sample: O(1) to filter, O(Window) for the moments.
//  4. q = mean(S') + 1.64485·sd(S') (Eq. 3), the 95th percentile of a normal
//     fitted to S', at every used period once S is full. sd is the sample
//     standard deviation (n-1), computed in two passes (B&C: "the sample
//     mean and standard deviation").
//  5. updateStats(q): q̄, the running mean of the q's (Welford), and sd(q);
//     σ(q̄) = sd(q)/√n, taken relative to q̄ (the spec's choice, so that one
//     tolerance serves any rate; B&C's 5e-7 is on σ(q̄) in items per period).
//  6. QConverged: the sequence of relative σ(q̄) (one value per q from the
//     second on) is filtered with the combined Gaussian+Laplacian kernel of
//     Eq. 4, σ = 1/2, taps computed from the formula at x = -1, 0, 1:
//     {1.29578, -3.19154, 1.29578}. A filtered value needs its right
//     neighbour, so it lags one q. The estimate has converged when the last
//     16 filtered values (B&C's w = 16) all have |v| ≤ TolerancePPM/1e6.
//     The taps sum to -0.6 (the discretised kernel is not zero-sum), so a
//     steady relative error r filters to -0.6r: the test bounds the relative
//     error itself (r ≲ tolerance/0.6, 0.17 % by default) as well as its
//     change. The earliest convergence is at the 19th q, i.e. the
//     (Window+18)th used period; a perfectly steady rate converges exactly
//     then, to exactly its value.
//  7. On convergence Sample returns (true, q̄), State().Rate becomes q̄
//     (Converged true, Convergences+1), and resetStats() restarts q̄, sd(q),
//     the relative-error sequence and the 16 filtered values; S and S' keep
//     sliding (B&C's restart, which follows phase changes). The next
//     estimate needs 19 new q's.
//
// # Which periods are used (B&C leave the mark's semantics to RaftLib's queue)
//
//   - A period with blocked=true is not used (it counts in Periods only).
//   - CP_MarkBlocked is an event: the operator marks once, when it is about
//     to wait, and the sampler clears the mark at each sample. A wait that
//     spans a period boundary therefore leaves the next period unmarked
//     although the operator was waiting in it (RaftLib's queue sets its
//     flag on every failed attempt, a state). So the estimator keeps one bit,
//     "may have been waiting at the end of the last period": set by a marked
//     period, kept by a period that took no items (nothing ended the wait),
//     cleared by an unmarked period that took items. A period that begins
//     in that state is not used either (nor does it count for widening),
//     even if it took items: part of it may have been spent waiting. In a
//     simulated tandem queue at ρ ≤ 0.1 (services 10 to 50 µs, T = 1 ms,
//     20 s runs) without this rule up to 6 of 30 runs converged to
//     estimates 99.2 to 99.8 % too low, and with it applied to item-less
//     periods only, up to 11 of 30 runs to estimates 93 to 95 % too low
//     (periods whose only item arrived just before the sample); with it
//     no period is used there. At ρ ≥ 0.8 the rule costs
//     used periods (20 µs deterministic service at ρ = 0.8: 0.5 % of the
//     periods used instead of 3.5 %, 25 instead of 30 of 30 runs with an
//     estimate within 20 s) but not accuracy; a wrong estimate is worse for
//     the capacity analysis than none.
//   - items == 0 in an unmarked period that does not follow a wait is kept:
//     it is an observation (the operator is in a service longer than T). A
//     window of zeros gives q̄ = 0, whose relative error is undefined: a zero
//     rate never converges (State.Rate stays 0, Converged false), since it
//     more likely tells a missing mark than a stuck operator.
//   - A period whose realized length exceeds 2T of the T requested for it
//     (the period Sample last returned) is late: the sampler itself was
//     late. Spec section 3 discards it; it is used here, as long as it is
//     not longer than 16T, because without a blocked mark it is as valid an
//     observation of the non-blocking rate as any: the operator took items
//     / realized length the whole time, and only the sampler waited for a
//     CPU. It is not a regular period, so it restarts the widening streak.
//     Why: in the real pipeline (tests/capacity, A and B under SCHED_FIFO on
//     two vCPUs, a busy process beside them) the library's sampler is
//     starved: a saturated 0.7 s run saw 47 to 256 periods instead of ~700,
//     and discarding the late ones left too few for an estimate. In the
//     simulation with 30 % of the periods late (TestAccuracyLateSampler)
//     using them raised the periods used from 70 % to 100 % when saturated,
//     the exponential saturated median error from +14.8 % (max +24.6 %, 29
//     of 30 within 20 %) to +11.5 % (max +17.3 %, 30 of 30), and brought
//     the estimates sooner at ρ 0.8 and 0.9; a longer period holds more
//     items, so its rate is less noisy (see Accuracy).
//   - A period longer than 16T is discarded: the sampler missed most of it,
//     which more likely tells that the whole process or machine stood
//     still (stopped, a paused VM, the real-time throttle's 50 ms) than
//     that the operator kept working, and its rate would tell the stall.
//   - A period shorter than T/2 is discarded: the sampler woke early and the
//     few items of a short period make a noisy rate. NaN, ±Inf, zero and
//     negative lengths fall out of the same test ([T/2, 16T]).
//   - A rate above 1e12 items/s is discarded: no counter advances that fast;
//     it is a wrapped or garbage delta (a restarted counter gives ~1.8e19).
//     With lengths ≥ T/2 ≥ 0.5 ms every used rate is ≤ 1e12 and all sums
//     stay far from overflow.
//
// Every discarded period counts in Periods, not in Samples, and restarts the
// widening streak; a late period counts in both and restarts it too.
//
// # Phase changes (an addition to B&C)
//
// B&C restart q̄ only on convergence. With the convergence test above, a q̄
// whose cycle straddles a change of service rate holds q's of both phases;
// its relative error then falls only as 1/n, and the next convergence took
// 87 to 99 s of 16 ms periods in a simulated saturated queue (never, in
// 120 s, at ρ = 0.9), and averaged a blend of the phases. So q̄ also restarts,
// without an estimate, when Window consecutive q's lie more than 10 % away
// from it on the same side: S has differed from q̄ for a whole window, a new
// phase. Stationary runs never trigger it (the number of q's averaged into
// each estimate is unchanged in every simulated configuration); after a
// doubling of the service time the first estimate of the new phase came
// 0.9 to 11 s after the change. Changes of less than 10 % are not told apart.
//
// # State
//
// State.Rate is the last converged estimate if there is one (Converged
// true), else the running q̄ (0 if none). After a restart Converged stays
// true and Rate stays the last converged estimate until the next one,
// however long that takes (no estimate goes stale by itself: the caller can
// watch Periods advance without Samples or Convergences); Running shows q̄
// since the restart (0 until its first q). Averaged tells how many q's the
// last estimate averaged (the service_rate event's Samples).
//
// # Sampling period (B&C IV-A)
//
// T starts at MinPeriod. After WidenAfter (k) consecutive used periods whose
// realized lengths all lie within StablePPM (ε) of their mean, T doubles, up
// to MaxPeriod, and the streak restarts; a discarded period (marked, after a
// wait, bad length or rate) or a late one (used, but longer than 2T)
// restarts it too. The test slides over the last k
// lengths (a ring, their sum and two monotonic queues for their minimum and
// maximum: O(1) a sample, 16 bytes per k). B&C measure stability as "within ε
// of the current T"; the library's timers realise ~1.1 ms for 1 ms, so the
// spread around the lengths' own mean is what tells a stable sampler. B&C
// never narrow T and neither does this package (left open: after a load
// change that blocks most wide periods, a narrower T would see more
// non-blocked periods, Eq. 1b), nor does it declare failure when T cannot
// widen: it keeps sampling at the T it has.
//
// # Accuracy (simulated, see accuracy_test.go; figures from 30 seeded runs)
//
// A tandem queue: Poisson arrivals at ρ·μ (or a saturating source), a
// bounded input queue of 256, one server with deterministic or exponential
// service times of mean 50 µs (μ = 20000 items/s), marks as CP_MarkBlocked
// sets them; the monitor samples every T·U(1.05, 1.15). Default parameters,
// 6 s of simulated time per run. Error of each run's median estimate
// [min, median, max]:
//
//	deterministic ρ=0.8: 30/30 runs within 20 %   [+1.1 %, +1.3 %, +1.5 %]
//	deterministic ρ=0.9: 30/30                    [+0.5 %, +0.7 %, +1.2 %]
//	deterministic saturated: 30/30                [ 0.0 %,  0.0 %, +0.1 %]
//	exponential ρ=0.8: 29/30 (1 run: no estimate) [+1.2 %, +6.8 %, +9.7 %]
//	exponential ρ=0.9: 27/30 (3 runs: none)       [+3.2 %, +6.2 %, +16.9 %]
//	exponential saturated: 30/30                  [+3.7 %, +4.9 %, +5.8 %]
//
// With a starved sampler (TestAccuracyLateSampler: 30 % of the periods
// realized 2T to 8T; the late ones used, none widens T):
//
//	deterministic ρ=0.8: 13/30 (17 runs: none)    [+0.8 %, +1.4 %, +1.8 %]
//	deterministic ρ=0.9: 30/30                    [+0.9 %, +1.1 %, +1.3 %]
//	deterministic saturated: 30/30                [+0.2 %, +0.5 %, +0.8 %]
//	exponential ρ=0.8: 26/30 (4 runs: none)       [+3.7 %, +6.8 %, +13.0 %]
//	exponential ρ=0.9: 30/30                      [+4.8 %, +11.7 %, +16.1 %]
//	exponential saturated: 30/30                  [+7.7 %, +11.5 %, +17.3 %]
//
// At ρ = 0.8 a late period is rarely one whole busy stretch (Eq. 1b gives
// ρ^(μ·length)), so fewer periods are used and estimates come later; when
// saturated T stays short, and exponential service keeps the bias of few
// items per period (below).
//
// One-off runs of 20 s with 20, 50 and 100 µs service (the same simulator,
// not kept as a test, like the comparisons of the mark rule and of the phase
// restart above) gave the same picture: every converged run within 20 %
// (23 to 30 of 30 runs converged), deterministic within +2.4 %, exponential
// within +17 %.
//
// The 95th percentile makes q a biased estimate of the mean rate when the
// per-period rate is noisy: a saturated exponential server taking n = μ·T
// items on average per period has a relative sd of 1/√n per period, √(Σg²) =
// 0.53 of it after the filter, so q ≈ μ·(1 + 0.87/√n). The paper's choice
// holds for the deterministic service its microbenchmarks mostly used; for
// exponential service it relies on n being large. Widening provides that:
// saturated at 100 µs, T widens to 16 ms (n ≈ 176) and the error is +6.5 %;
// with T held at 1 ms (n ≈ 11) it is +26 % and no run of 30 is within 20 %
// (at 50 µs +18 %, at 20 µs +11 %). Below saturation the used periods favour
// slow stretches of service (a fast stretch empties the queue), which pulls
// the other way, and most runs land within +10 %. Keep μ·MaxPeriod ≥ ~20 for
// exponential-like service (mean service ≤ ~0.8 ms at the default 16 ms).
//
// At low load (ρ ≤ 0.1, 10 to 50 µs service, T ≥ 1 ms) the input is empty in
// nearly every period: no period is used, nothing converges, Rate is 0 (B&C
// report the same limit: Rabin-Karp at ρ < 0.1, 35 % of estimates in range).
//
// # In the real pipeline (tests/capacity)
//
// examples/pipeline/tandem.c, A and B under SCHED_FIFO on two vCPUs beside a
// busy process, the count channels only, T held at 2 ms at most; each run
// ends at its first estimate. Six runs of the package, 30 runs each (first
// estimate within 20 % of B's true rate / runs; errors of the converged):
//
//	deterministic 100 µs, ρ=0.8: 29/30    [+0.5 %, +2.2 %, +3.3 %]
//	deterministic 100 µs, ρ=0.9: 30/30    [+0.7 %, +1.3 %, +19.4 %]
//	deterministic 20 µs, saturated: 30/30 [-3.6 %, -2.2 %, -1.5 %]
//	exponential 50 µs, ρ=0.8: 26/30       [+1.3 %, +7.5 %, +21.1 %]
//	exponential 50 µs, ρ=0.9: 29/30       [+7.2 %, +10.9 %, +15.8 %]
//	exponential 20 µs, saturated: 27/30   [+3.6 %, +6.2 %, +8.9 %]
//
// Three things there that the simulation does not show:
//   - The library's sampler is late: 1 ms periods realized a median 1.09 ms
//     but a 90th percentile of 2 ms, and 3 to 20 ms while the machine was
//     busier still (see "Which periods are used" for why late periods are
//     used).
//   - B, a real-time thread, sometimes loses its CPU for ~5 ms (and for 50
//     ms, the kernel's real-time throttle, once it had 950 ms of a second).
//     A period that holds such a stall is a low outlier that raises sd(S')
//     and so q while it is in S; q then stays steady, and a cycle can
//     converge on it: the +19.4 % and +21.1 % above were first estimates
//     that converged at the earliest sample the heuristic allows with a
//     5 ms stall in S. The Gaussian filter of S (B&C's remedy for such
//     effects) spreads an outlier rather than removing it.
//   - T never narrows. At ρ = 0.9, 16 unblocked periods in a row came often
//     enough that T reached 4 to 8 ms in 26 of 40 runs of 2 to 4 s (B at 50
//     or 100 µs) with the default MaxPeriod, after which few periods were
//     unblocked (Eq. 1b): 9 of those 40 runs had no estimate; and after a
//     change of phase that halved the rate at ρ = 0.9, 1 of 6 runs found
//     the new phase within 3 s. In a one-off simulation (not kept as a
//     test) a doubling of the rate at ρ = 0.9 (100 to 50 µs) had no
//     estimate of the new rate in 9 s, T having widened to 4 ms before. A
//     rule that halves T after k periods in a row that could not be used
//     would address it; it is not B&C's, and not built.
//
// # Defaults
//
// DefaultParams are the spec's: T from 1 ms (the library's timers do not
// realise less) doubling up to 16 ms, |S| = 64, k = 16, ε = 10 %, tolerance
// 0.1 %. The simulations above found no reason to change them: 1 ms keeps
// the chance of a non-blocked period high at ρ ≥ 0.8 (Eq. 1b), 16 ms gives
// exponential service enough items per period, and a window of 64 gives the first
// estimate after 0.25 to 5.8 s at 50 µs service.
//
// # Use
//
// Sample and State do not allocate: New allocates S, S' and the widening
// ring (Window·16 + WidenAfter·16 bytes). An Estimator is not safe for
// concurrent use. New brings out-of-range parameters into range instead of
// failing (call Params.Validate to refuse them); Sample never panics.
package servicerate
