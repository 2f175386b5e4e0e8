// tandem.c — a pipeline with a known truth, for the capacity analysis and
// the Beard & Chamberlain estimator (tests/capacity runs it; issue 14).
//
//   source -> [queue] -> A -> [queue] -> B -> [queue] -> sink
//
// One thread each, joined by bounded queues (a mutex and two condition
// variables: a thread that finds its input empty or its output full sleeps,
// nothing spins while it waits). A and B each spend a known number of TSC
// cycles per tuple by spinning on rdtsc: that spin IS the simulated work.
// The cycles come from a seeded PRNG (deterministic or exponential), and the
// cycles drawn are summed, so the truth for exponential work is the realised
// mean, not the nominal one.
//
// Marks (capi/cloudprofiler.h, "Marking operators"; BUFFER_IDENTITY,
// ZSTD_TSC): "source out" before the source pushes a tuple into A's queue,
// "source sent" when the push returned; "A#0 in" right after A took a tuple,
// "A#0 out" right before it pushes it to B's queue, "A#0 sent" when that push
// returned; the same for B; "sink#0 in" and "sink#0 out" when the sink took
// it (--no-marks: none of these). And, unless --no-count, CP_SERVICERATE
// channels "A#0 count" and "B#0 count" counting the items each took, with
// CP_MarkBlocked(ch, CP_BLOCKED_INPUT) right before it waits on an empty
// input queue and CP_BLOCKED_OUTPUT right before it waits on a full output
// queue.
//
// At exit it prints one JSON line of ground truth on stdout (tsc_hz, per
// operator the tuples, the realised mean cost in cycles, the true service
// rate tsc_hz / mean cycles, the wall-clock throughput tuples / (last out -
// first in), and each count channel's CP_ServiceRate answer). Everything
// else goes to stderr. Every library call's return code is checked: a
// refused record fails the run (exit 1). Usage errors exit 2.
//
// --burst N (internal source): the first N tuples leave back to back (as
// fast as A's queue takes them), then the source goes on at --rate until
// --tuples/--duration. The truth then has "burst" (the burst's ids) and, per
// operator, what the queueing charged to it should be: for the burst's
// tuples, the time each waited in the operator's input queue (from the push
// into it to the pop, both read with rdtsc under the queue's lock) while the
// operator worked on an earlier tuple (its rdtsc from "in" to "out"), summed
// in cycles (burst_queue_cycles); beside it the whole waits
// (burst_wait_cycles: the difference is time the operator was between
// tuples or blocked on its output) and the number of tuples ahead of each in
// the queue when it entered times the operator's realised mean work
// (burst_ahead_cycles, the textbook figure). Operators take tuples in order,
// so a burst tuple waits only behind earlier ones: the first N tuples each
// operator took are the burst's.
//
// --on-off ON,OFF,LOW (internal source): arrivals at --rate for ON seconds,
// then at LOW tuples/s for OFF seconds, and again: a high phase above B's
// capacity builds a backlog that the low phase drains (tests/mace checks
// the latency Mace predicts from it). With a --queue large enough that the
// source never waits, a tuple's "source out" is its arrival.
//
// --fork: the topology becomes
//
//   source -> [queue] -> A -> [queue] -+
//         \                            +-> join -> [queue] -> sink
//          -> [queue] -> B -> [queue] -+
//
// the source gives its tuple k to A as id 2k and to B as id 2k+1 ("source
// out"/"source sent" for both ids); A and B work as above (--a-cost,
// --b-cost) and push into the join's one queue, so the join takes inputs in
// the order they arrived from either branch, logging "join#0 in" for each.
// Once both halves of k have arrived it spins --join-cost (default none),
// logs a CP_LogLineage record for each input on "join#0 lineage" (handler
// CP_LINEAGE, in arrival order: the last logged is the one the output waited
// for), then "join#0 out" with the output id 2^40 + k, pushes it to the sink
// and logs "join#0 sent"; the sink logs "sink#0 in"/"sink#0 out". The truth
// has "fork": per tuple which branch arrived last at the join, counted
// (b_last, a_last). A library without CP_LogLineage or CP_LINEAGE: exit 2.
//
// --eager-sink: the sink's queue wakes the sink at every tuple, as the other
// queues wake their consumers (by default it is lazy, see struct queue): a
// tuple then reaches the sink within a wake-up, not within 1 ms, at the
// price of a futex wake-up in B's (or the join's) "out" to "sent".
//
// Run `tandem --help` for the options. Two source modes:
//   internal: Poisson or constant arrivals at --rate for --tuples N or
//     --duration D; the source sleeps until the next arrival is due (or
//     until A's queue has room), it never spins; --rate max pushes as fast
//     as A's queue takes them.
//   --listen HOST:PORT: a receiver of `cloudprofiler gen send`'s wire
//     format (datagen/FRAMING.md): each connection's thread pushes every
//     tuple id it receives into A's queue (so backpressure reaches TCP), and
//     answers END with the REPORT once the sink has taken every tuple of
//     that stream. It runs until --streams streams ended, or SIGTERM/SIGINT.
//
// Every thread runs under the normal scheduler, as a program on a shared
// cloud VM does: a busy process elsewhere on the machine may preempt an
// operator inside a tuple, and the tests that run tandem take their truth
// from the records this run logged (and from what it measured with rdtsc),
// never from the work it was told to do. None of the threads spins while it
// waits (A and B spin only while working).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>
#include "cloudprofiler.h"

// Weak, so that tandem builds and runs (with --no-count) against a library
// that does not have CP_SERVICERATE yet: they are then NULL, and asking for
// count channels says so.
#pragma weak CP_MarkBlocked
#pragma weak CP_ServiceRate

// --fork's lineage: declared here as well (weak), so that tandem builds and
// runs without --fork against a library (and header) without it.
int32_t CP_LogLineage(int64_t ch, int64_t out_id, int64_t in_id) __attribute__((weak));
enum { TANDEM_LINEAGE = 15 };  // CP_LINEAGE in capi/cloudprofiler.h

// ---- errors ----

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tandem: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

// chk fails the run on any negative library return code.
static void chk(int64_t rc, const char *what) {
  if (rc < 0) {
    char detail[512] = "";
    CP_LastError(detail, sizeof detail);
    die("%s: %s%s%s", what, CP_ErrorString((int32_t)rc), detail[0] ? ": " : "", detail);
  }
}

// ---- time ----

static uint64_t rdtsc(void) { return __rdtsc(); }

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t clock_ns(void) {  // CLOCK_MONOTONIC: what clock_nanosleep sleeps on
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t_ns) {
  struct timespec ts = {.tv_sec = t_ns / 1000000000, .tv_nsec = t_ns % 1000000000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

// A TSC and CLOCK_MONOTONIC_RAW read together (the TSC between two clock
// reads 1 us apart at most).
struct sync_pt {
  uint64_t tsc;
  int64_t ns;
};

static struct sync_pt sync_now(void) {
  for (int i = 0;; i++) {
    int64_t a = mono_ns();
    uint64_t t = rdtsc();
    int64_t b = mono_ns();
    if (b - a < 1000 || i > 100) return (struct sync_pt){t, a + (b - a) / 2};
  }
}

static double hz_between(struct sync_pt a, struct sync_pt b) {
  return (double)(b.tsc - a.tsc) * 1e9 / (double)(b.ns - a.ns);
}

// ---- PRNG (splitmix64) ----

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Exponential with the given mean: -mean * ln(u), u uniform in (0, 1].
static double rng_exp(uint64_t *s, double mean) {
  double u = (double)((rng_next(s) >> 11) + 1) * 0x1.0p-53;
  return -mean * log(u);
}

// ---- options ----

enum dist { DET, EXP };

struct cost {
  double value;  // as given
  int cycles;    // 1: value is in cycles; 0: in ns
  enum dist dist;
};

static struct {
  struct cost a, b, b2;   // b2: B's cost after --phase-after tuples
  long long phase_after;  // 0: no phase change
  long queue;
  double rate;            // tuples/s; <= 0: as fast as A's queue takes them
  double rate2;           // after --phase-after tuples (0: the same)
  int poisson;
  long long tuples;       // internal source: how many (0: --duration)
  double duration_s;
  const char *listen;
  long streams;           // listen: exit after this many streams ended (0: on a signal)
  int rcvbuf;
  int count;              // open the count channels
  int marks;              // open the in/out/sent mark channels
  uint64_t seed;
  long long sr_args[6];   // CP_ARG_SR_* (-1: the default)
  long long count_record_ns;  // the count channels' counter records every (CP_ARG0; 0: the default)
  long long stop_after;   // internal source: stop once B's count channel converged this often (0: no)
  long long burst;        // internal source: the first this many tuples back to back
  int fork;               // source -> {A, B} -> join -> sink
  int eager_sink;         // the sink woken at every push (not lazily)
  struct cost join;       // the join's work per output (value 0: none)
  int verbose;
  int64_t tick_ns;
  double on_s, off_s, off_rate;  // --on-off: --rate for on_s, off_rate for off_s, again (0: off)
} opt = {.queue = 64, .tick_ns = 1000000, .poisson = 1, .count = 1, .marks = 1, .seed = 1,
         .sr_args = {-1, -1, -1, -1, -1, -1}};

static void usage(FILE *f) {
  fprintf(f,
          "usage: tandem [options]\n"
          "  source -> A -> B -> sink, one thread each, bounded queues; prints one JSON line of truth.\n"
          "  --a-cost C          A's mean work per tuple: NUMBER with ns, us, ms or c (cycles) [10us]\n"
          "  --b-cost C          B's mean work per tuple [20us]\n"
          "  --a-dist det|exp    A's distribution of work: deterministic or exponential [det]\n"
          "  --b-dist det|exp    B's [det]\n"
          "  --phase-after N     B changes its cost after it took N tuples ...\n"
          "  --b-cost2 C         ... to this (same distribution)\n"
          "  --rate2 R           internal source: its rate after it sent --phase-after tuples (B's load\n"
          "                      stays the same when R / --rate is --b-cost / --b-cost2) [--rate]\n"
          "  --queue N           capacity of each queue, tuples [64]\n"
          "  --rate R|max        internal source: arrivals per second; max: as fast as A's queue takes them\n"
          "  --arrivals poisson|constant   [poisson]\n"
          "  --tick D            the source sleeps at least this long (ns, us, ms) between bursts: the\n"
          "                      arrivals due meanwhile leave together (fewer timer interrupts on A's\n"
          "                      and B's CPUs, which would lengthen their tuples) [1ms]\n"
          "  --tuples N          internal source: send N tuples ...\n"
          "  --duration D        ... or for D seconds (NUMBER with s or ms)\n"
          "  --listen HOST:PORT  source: a receiver of `cloudprofiler gen send` (datagen/FRAMING.md);\n"
          "                      port 0: the kernel picks (printed on stderr: \"listening on HOST:PORT\")\n"
          "  --streams N         with --listen: exit once N streams ended and none is open [0: at SIGTERM/SIGINT]\n"
          "  --rcvbuf BYTES      with --listen: SO_RCVBUF of the connections [kernel's]\n"
          "  --seed S            PRNG seed [1]\n"
          "  --no-count          no CP_SERVICERATE count channels (a library without them)\n"
          "  --no-marks          no in/out/sent mark channels: A and B instrumented with the count\n"
          "                      channels only (what the Beard & Chamberlain estimator is for)\n"
          "  --sr-min-period NS, --sr-max-period NS, --sr-window N, --sr-widen-after K,\n"
          "  --sr-stable-ppm P, --sr-tolerance-ppm P   the count channels' estimator (CP_ARG_SR_*)\n"
          "  --stop-after-estimates N  internal source: stop sending once B's count channel has converged\n"
          "                      N times (with --phase-after: since main saw B change its cost; main looks\n"
          "                      every 10 ms), if --tuples/--duration did not end it\n"
          "  --count-record-ns NS  the count channels' counter records every NS (CP_ARG0, >= 1e6) [1e9];\n"
          "                      their times show when the library's sampler woke\n"
          "  --on-off ON,OFF,LOW internal source: --rate for ON seconds, then LOW tuples/s for OFF seconds,\n"
          "                      again until --tuples/--duration (a high phase above B's capacity and\n"
          "                      a low one: the backlog Mace predicts, tests/mace)\n"
          "  --burst N           internal source: the first N tuples back to back (as fast as A's queue\n"
          "                      takes them), then at --rate; the truth gives the burst's ids and per\n"
          "                      operator the waits of its tuples in the operator's input queue while\n"
          "                      it worked (burst_queue_cycles) [0]\n"
          "  --fork              topology source -> {A, B} -> join -> sink: tuple k goes to A as id 2k and\n"
          "                      to B as id 2k+1, the join emits 2^40 + k once both arrived and logs\n"
          "                      their lineage (CP_LogLineage on \"join#0 lineage\"); internal source only\n"
          "  --join-cost C       with --fork: the join's work per output [none]\n"
          "  --eager-sink        the sink is woken at every tuple (B, or the join, pays a futex wake-up\n"
          "                      after its \"out\"), not at half a queue or within 1 ms: latencies\n"
          "                      to the sink without that 1 ms\n"
          "  --verbose           progress on stderr\n"
          "Logs go to $CP_LOG_DIR (the library's variables apply). Exit 0; 1 on a failure (a library\n"
          "call refused, a socket error); 2 on a usage error.\n");
}

static void bad(const char *what, const char *v) __attribute__((noreturn));
static void bad(const char *what, const char *v) {
  fprintf(stderr, "tandem: bad %s %s\n", what, v ? v : "(missing)");
  usage(stderr);
  exit(2);
}

static double num(const char *s, const char *what, const char **rest) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || !(v >= 0) || isinf(v)) bad(what, s);
  *rest = end;
  return v;
}

static long long integer(const char *s, const char *what) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < 0) bad(what, s);
  return v;
}

static struct cost parse_cost(const char *s, const char *what, enum dist d) {
  const char *u;
  double v = num(s, what, &u);
  struct cost c = {.dist = d};
  if (strcmp(u, "c") == 0) c.cycles = 1, c.value = v;
  else if (strcmp(u, "ns") == 0) c.value = v;
  else if (strcmp(u, "us") == 0) c.value = v * 1e3;
  else if (strcmp(u, "ms") == 0) c.value = v * 1e6;
  else bad(what, s);
  if (!(c.value > 0)) bad(what, s);
  return c;
}

static enum dist parse_dist(const char *s, const char *what) {
  if (s && strcmp(s, "det") == 0) return DET;
  if (s && strcmp(s, "exp") == 0) return EXP;
  bad(what, s);
}

static void parse_args(int argc, char **argv) {
  enum dist ad = DET, bd = DET;
  const char *ac = "10us", *bc = "20us", *bc2 = NULL, *jc = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && (v || (bad(name, NULL), 0)) && (i++, 1))
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (ARG("--a-cost")) ac = v;
    else if (ARG("--b-cost")) bc = v;
    else if (ARG("--b-cost2")) bc2 = v;
    else if (ARG("--a-dist")) ad = parse_dist(v, a);
    else if (ARG("--b-dist")) bd = parse_dist(v, a);
    else if (ARG("--phase-after")) opt.phase_after = integer(v, a);
    else if (ARG("--queue")) {
      opt.queue = (long)integer(v, a);
      if (opt.queue < 1 || opt.queue > 1 << 20) bad(a, v);
    } else if (ARG("--rate")) {
      const char *rest;
      opt.rate = strcmp(v, "max") == 0 ? 0 : num(v, a, &rest);
      if (strcmp(v, "max") != 0 && (*rest || !(opt.rate > 0))) bad(a, v);
    } else if (ARG("--rate2")) {
      const char *rest;
      opt.rate2 = num(v, a, &rest);
      if (*rest || !(opt.rate2 > 0)) bad(a, v);
    } else if (ARG("--arrivals")) {
      if (strcmp(v, "poisson") == 0) opt.poisson = 1;
      else if (strcmp(v, "constant") == 0) opt.poisson = 0;
      else bad(a, v);
    } else if (ARG("--tuples")) opt.tuples = integer(v, a);
    else if (ARG("--duration")) {
      const char *u;
      double d = num(v, a, &u);
      if (strcmp(u, "s") == 0) opt.duration_s = d;
      else if (strcmp(u, "ms") == 0) opt.duration_s = d / 1e3;
      else bad(a, v);
    } else if (ARG("--listen")) opt.listen = v;
    else if (ARG("--streams")) opt.streams = (long)integer(v, a);
    else if (ARG("--rcvbuf")) opt.rcvbuf = (int)integer(v, a);
    else if (ARG("--seed")) opt.seed = (uint64_t)integer(v, a);
    else if (ARG("--tick")) {
      struct cost t = parse_cost(v, a, DET);
      if (t.cycles) bad(a, v);
      opt.tick_ns = (int64_t)t.value;
    }
    else if (ARG("--sr-min-period")) opt.sr_args[0] = integer(v, a);
    else if (ARG("--sr-max-period")) opt.sr_args[1] = integer(v, a);
    else if (ARG("--sr-window")) opt.sr_args[2] = integer(v, a);
    else if (ARG("--sr-widen-after")) opt.sr_args[3] = integer(v, a);
    else if (ARG("--sr-stable-ppm")) opt.sr_args[4] = integer(v, a);
    else if (ARG("--sr-tolerance-ppm")) opt.sr_args[5] = integer(v, a);
    else if (ARG("--count-record-ns")) opt.count_record_ns = integer(v, a);
    else if (ARG("--stop-after-estimates")) opt.stop_after = integer(v, a);
    else if (strcmp(a, "--no-count") == 0) opt.count = 0;
    else if (strcmp(a, "--no-marks") == 0) opt.marks = 0;
    else if (strcmp(a, "--no-rt") == 0) {
      // accepted, as before: every thread runs under the normal scheduler
    }    else if (ARG("--burst")) opt.burst = integer(v, a);
    else if (ARG("--on-off")) {
      char *e1, *e2, *e3;
      opt.on_s = strtod(v, &e1);
      opt.off_s = *e1 == ',' ? strtod(e1 + 1, &e2) : (e2 = e1, -1);
      opt.off_rate = *e2 == ',' ? strtod(e2 + 1, &e3) : (e3 = e2, -1);
      if (*e3 || !(opt.on_s > 0) || !(opt.off_s > 0) || !(opt.off_rate > 0)) bad(a, v);
    }
    else if (ARG("--join-cost")) jc = v;
    else if (strcmp(a, "--fork") == 0) opt.fork = 1;
    else if (strcmp(a, "--eager-sink") == 0) opt.eager_sink = 1;
    else if (strcmp(a, "--verbose") == 0) opt.verbose = 1;
    else bad("option", a);
#undef ARG
  }
  opt.a = parse_cost(ac, "--a-cost", ad);
  opt.b = parse_cost(bc, "--b-cost", bd);
  if ((bc2 != NULL) != (opt.phase_after > 0)) bad("--phase-after/--b-cost2 (give both)", bc2);
  if (bc2) opt.b2 = parse_cost(bc2, "--b-cost2", bd);
  if (opt.rate2 > 0 && (opt.phase_after == 0 || opt.listen || !(opt.rate > 0)))
    bad("--rate2 (it needs --phase-after and an internal source with a --rate)", NULL);
  if (!opt.listen && opt.tuples == 0 && !(opt.duration_s > 0)) bad("source: --tuples, --duration or --listen", NULL);
  if (opt.listen && (opt.tuples || opt.duration_s > 0)) bad("--listen with --tuples/--duration", opt.listen);
  if (!opt.marks && !opt.count) bad("--no-marks with --no-count (nothing to log)", NULL);
  if (opt.stop_after > 0 && (opt.listen || !opt.count)) bad("--stop-after-estimates (it needs the internal source and count channels)", NULL);
  if (opt.burst > 0 && opt.listen) bad("--burst (it needs the internal source)", opt.listen);
  if (opt.on_s > 0 && (opt.listen || !(opt.rate > 0) || opt.rate2 > 0 || opt.burst > 0))
    bad("--on-off (it needs the internal source with a --rate, and no --rate2 or --burst)", NULL);
  if (opt.fork && opt.listen) bad("--fork (it needs the internal source)", opt.listen);
  if (opt.fork && !opt.marks) bad("--fork with --no-marks (the join's marks are what it is for)", NULL);
  if (jc && !opt.fork) bad("--join-cost without --fork", jc);
  if (jc && strcmp(jc, "0") != 0) opt.join = parse_cost(jc, "--join-cost", DET);
}

// ---- queues ----

// A bounded FIFO of tuple ids. A consumer that finds it empty, or a producer
// that finds it full, marks its count channel (if any) blocked and sleeps on
// a condition variable. A waiting producer is woken when the queue is down
// to half full (not at every pop: one wake-up, one futex call, per half a
// queue), a waiting consumer at the next push; but a lazy queue's consumer
// (the sink's) is woken only at half full and otherwise looks every 1 ms, so
// that B does not pay a futex wake-up per tuple outside its marks (that
// would make B's throughput lower than its service rate by a few percent;
// --eager-sink: not lazy).
struct queue {
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  int64_t *buf;
  size_t cap, head, count;
  int closed, lazy;
  int cons_waiting, prod_waiting;
  int producers;  // q_close closes it when the last of them closed it
  uint64_t pushed, popped;
  // --burst: the first rec_n tuples' push and pop (rdtsc under the lock)
  // and how many were in the queue ahead of each when it entered.
  size_t rec_n;
  uint64_t *push_tsc, *pop_tsc, *ahead;
};

static void q_init(struct queue *q, size_t cap, int lazy) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->not_empty, &ca);
  pthread_cond_init(&q->not_full, &ca);
  q->buf = calloc(cap, sizeof *q->buf);
  if (!q->buf) die("out of memory");
  q->cap = cap;
  q->lazy = lazy;
  q->producers = 1;
}

// q_record keeps the first n tuples' push and pop times (--burst).
static void q_record(struct queue *q, size_t n) {
  q->push_tsc = calloc(n, sizeof *q->push_tsc);
  q->pop_tsc = calloc(n, sizeof *q->pop_tsc);
  q->ahead = calloc(n, sizeof *q->ahead);
  if (!q->push_tsc || !q->pop_tsc || !q->ahead) die("out of memory");
  q->rec_n = n;
}

static void mark(int64_t count_ch, int32_t which) {
  if (count_ch > 0) chk(CP_MarkBlocked(count_ch, which), "CP_MarkBlocked");
}

// q_push appends id, waiting while the queue is full; returns the queue's
// push count after it (the tuple's sequence number: the pipeline keeps order).
static uint64_t q_push(struct queue *q, int64_t id, int64_t count_ch, uint64_t *waits) {
  pthread_mutex_lock(&q->mu);
  if (q->count == q->cap) {
    mark(count_ch, CP_BLOCKED_OUTPUT);
    if (waits) (*waits)++;
    q->prod_waiting++;
    while (q->count == q->cap) pthread_cond_wait(&q->not_full, &q->mu);
    q->prod_waiting--;
  }
  q->buf[(q->head + q->count) % q->cap] = id;
  if (q->pushed < q->rec_n) q->push_tsc[q->pushed] = rdtsc(), q->ahead[q->pushed] = q->count;
  q->count++;
  uint64_t seq = ++q->pushed;
  if (q->cons_waiting && (!q->lazy || q->count >= (q->cap + 1) / 2)) pthread_cond_signal(&q->not_empty);
  pthread_mutex_unlock(&q->mu);
  return seq;
}

// q_pop takes the oldest id, waiting while the queue is empty; 0 when the
// queue is empty and closed (the input is over: empty for good, and so
// marked, so that the count channel's periods after the last tuple do not
// count as periods in which the operator could have worked).
static int q_pop(struct queue *q, int64_t *id, int64_t count_ch, uint64_t *waits, uint64_t *wait_cycles) {
  pthread_mutex_lock(&q->mu);
  if (q->count == 0 && !q->closed) {
    mark(count_ch, CP_BLOCKED_INPUT);
    if (waits) (*waits)++;
    uint64_t w0 = rdtsc();
    q->cons_waiting++;
    while (q->count == 0 && !q->closed) {
      if (!q->lazy) {
        pthread_cond_wait(&q->not_empty, &q->mu);
        continue;
      }
      int64_t t = clock_ns() + 1000000;
      struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
      pthread_cond_timedwait(&q->not_empty, &q->mu, &ts);
    }
    if (wait_cycles) *wait_cycles += rdtsc() - w0;
    q->cons_waiting--;
  }
  if (q->count == 0) {
    mark(count_ch, CP_BLOCKED_INPUT);
    pthread_mutex_unlock(&q->mu);
    return 0;
  }
  *id = q->buf[q->head];
  if (q->popped < q->rec_n) q->pop_tsc[q->popped] = rdtsc();
  q->popped++;
  q->head = (q->head + 1) % q->cap;
  q->count--;
  if (q->prod_waiting && q->count <= q->cap / 2) pthread_cond_broadcast(&q->not_full);
  pthread_mutex_unlock(&q->mu);
  return 1;
}

static void q_close(struct queue *q) {
  pthread_mutex_lock(&q->mu);
  if (--q->producers > 0) {  // --fork: the join's queue has two (A and B)
    pthread_mutex_unlock(&q->mu);
    return;
  }
  q->closed = 1;
  pthread_cond_broadcast(&q->not_empty);
  pthread_mutex_unlock(&q->mu);
}

// ---- the pipeline ----

static double tsc_hz0;  // calibrated at start: converts costs in ns to cycles
static struct queue q_a, q_b, q_sink, q_join;  // q_join: --fork's
static volatile sig_atomic_t stop_req;
static int stop_source;  // atomic: --stop-after-estimates reached

struct phase {
  uint64_t tuples;
  uint64_t cycles;  // drawn
  uint64_t spun;    // the spins as they took: rdtsc at the end - at the start (interruptions of the CPU past the end included)
  uint64_t first_in, last_out;
};

struct op {
  const char *name;  // "A", "B"
  struct queue *in, *out;
  struct cost cost, cost2;
  long long phase_after;
  uint64_t seed;
  int64_t ch_in, ch_out, ch_sent, ch_count;
  // results
  struct phase ph[2];
  uint64_t tuples, cycles, spun, first_in, last_out;
  uint64_t waits_in, waits_out;  // times it waited on an empty input, a full output
  uint64_t waited_in;            // cycles it waited on an empty input, in all
  uint64_t preempted, preempted_cycles;  // tuples whose spin saw a gap > 10 us, and the gaps' cycles
  uint64_t longest_gap;                  // the longest such gap, cycles (a stall: the RT throttle, a paused VM)
  // --burst: the first rec_n tuples' work, rdtsc at "in" and at "out".
  size_t rec_n;
  uint64_t *busy_start, *busy_end;
};

static struct op op_a = {.name = "A"}, op_b = {.name = "B"};

// The sink's progress, for --listen's REPORT after the stream's last tuple.
static uint64_t sunk;  // atomic
static int drain_waiters;  // atomic
static pthread_mutex_t drain_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t drain_cv = PTHREAD_COND_INITIALIZER;
static uint64_t sink_tuples;

static int64_t open_ch(const char *name, int32_t handler) {
  int64_t ch = OpenChannel(name, CP_ZSTD_TSC, handler);
  char what[300];
  snprintf(what, sizeof what, "OpenChannel \"%s\"", name);
  if (ch < 0 && handler == CP_SERVICERATE && (ch == CP_ERR_BAD_HANDLER || ch == CP_ERR_NOT_SUPPORTED))
    die("%s: %s: this libcloudprofiler.so has no CP_SERVICERATE handler (run with --no-count)", what,
        CP_ErrorString((int32_t)ch));
  chk(ch, what);
  return ch;
}

static void open_op(struct op *o) {
  char name[64];
  if (opt.marks) {
    snprintf(name, sizeof name, "%s#0 in", o->name);
    o->ch_in = open_ch(name, CP_BUFFER_IDENTITY);
    snprintf(name, sizeof name, "%s#0 out", o->name);
    o->ch_out = open_ch(name, CP_BUFFER_IDENTITY);
    snprintf(name, sizeof name, "%s#0 sent", o->name);
    o->ch_sent = open_ch(name, CP_BUFFER_IDENTITY);
  }
  if (opt.count) {
    snprintf(name, sizeof name, "%s#0 count", o->name);
    o->ch_count = open_ch(name, CP_SERVICERATE);
    if (opt.count_record_ns > 0) chk(ParameterizeChannel(o->ch_count, CP_ARG0, opt.count_record_ns), "ParameterizeChannel (count records)");
    for (int i = 0; i < 6; i++)
      if (opt.sr_args[i] >= 0) chk(ParameterizeChannel(o->ch_count, CP_ARG_SR_MIN_PERIOD_NS + i, opt.sr_args[i]),
                                   "ParameterizeChannel (count)");
  }
}

// log_mark logs a mark's record; a channel not opened (--no-marks) is skipped.
static void log_mark(int64_t ch, int64_t id, const char *what) {
  if (ch > 0) chk(LogTS(ch, id), what);
}

static uint64_t draw(const struct cost *c, uint64_t *s) {
  double mean = c->cycles ? c->value : c->value * tsc_hz0 / 1e9;
  double x = c->dist == DET ? mean : rng_exp(s, mean);
  uint64_t n = (uint64_t)llround(x);
  return n ? n : 1;
}

static void *op_main(void *arg) {
  struct op *o = arg;
  uint64_t rng = o->seed;
  const uint64_t gap_limit = (uint64_t)(tsc_hz0 * 10e-6);  // a spin step longer than 10 us: descheduled
  int64_t id;
  for (;;) {
    int phase = o->phase_after > 0 && (long long)o->tuples >= o->phase_after;
    uint64_t c = draw(phase ? &o->cost2 : &o->cost, &rng);  // before "in": the draw is not the work
    if (!q_pop(o->in, &id, o->ch_count, &o->waits_in, &o->waited_in)) break;
    log_mark(o->ch_in, id, "LogTS in");
    uint64_t start = rdtsc();
    if (o->ch_count > 0) chk(LogTS(o->ch_count, id), "LogTS count");
    // The work: spin until c cycles have passed since the tuple was taken.
    uint64_t now = start, last = start, gaps = 0;
    while (now - start < c) {
      now = rdtsc();
      if (now - last > gap_limit) {
        gaps += now - last;
        if (now - last > o->longest_gap) o->longest_gap = now - last;
      }
      last = now;
    }
    if (gaps) o->preempted++, o->preempted_cycles += gaps;
    uint64_t out = rdtsc();
    log_mark(o->ch_out, id, "LogTS out");
    struct phase *p = &o->ph[phase];
    if (p->tuples == 0) p->first_in = start;
    p->tuples++, p->cycles += c, p->spun += out - start, p->last_out = out;
    if (o->tuples == 0) o->first_in = start;
    if (o->tuples < o->rec_n) o->busy_start[o->tuples] = start, o->busy_end[o->tuples] = out;
    o->tuples++, o->cycles += c, o->spun += out - start, o->last_out = out;
    q_push(o->out, id, o->ch_count, &o->waits_out);
    log_mark(o->ch_sent, id, "LogTS sent");
  }
  q_close(o->out);
  return NULL;
}


static void *sink_main(void *arg) {
  (void)arg;
  int64_t in = 0, out = 0;
  if (opt.marks) in = open_ch("sink#0 in", CP_BUFFER_IDENTITY), out = open_ch("sink#0 out", CP_BUFFER_IDENTITY);
  int64_t id;
  while (q_pop(&q_sink, &id, 0, NULL, NULL)) {
    log_mark(in, id, "LogTS sink in");
    log_mark(out, id, "LogTS sink out");
    sink_tuples++;
    __atomic_add_fetch(&sunk, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&drain_waiters, __ATOMIC_SEQ_CST)) {
      pthread_mutex_lock(&drain_mu);
      pthread_cond_broadcast(&drain_cv);
      pthread_mutex_unlock(&drain_mu);
    }
  }
  return NULL;
}

// ---- --fork: the join ----

static int64_t join_in, join_out, join_sent, join_lineage;
static uint64_t join_outputs, join_a_last, join_b_last, join_cycles;
static uint64_t join_max_pending;

// join_main takes A's and B's outputs from their one queue in the order they
// arrived; once both halves of k (2k from A, 2k+1 from B) are in, it emits
// 2^40 + k with a lineage record per input, in arrival order.
static void *join_main(void *arg) {
  (void)arg;
  size_t ring = 1;
  while (ring < 4 * (size_t)opt.queue + 16) ring <<= 1;  // more pending than the queues hold cannot be
  struct slot {
    int64_t k1;     // k + 1 while one half of k is in; 0: free
    int64_t first;  // that half's id
  } *pend = calloc(ring, sizeof *pend);
  if (!pend) die("out of memory");
  uint64_t seed = 0, cost = opt.join.value > 0 ? draw(&opt.join, &seed) : 0, pending = 0;
  int64_t id;
  while (q_pop(&q_join, &id, 0, NULL, NULL)) {
    log_mark(join_in, id, "LogTS join in");
    int64_t k = id >> 1;
    struct slot *sl = &pend[(size_t)k & (ring - 1)];
    if (sl->k1 == 0) {
      sl->k1 = k + 1, sl->first = id;
      if (++pending > join_max_pending) join_max_pending = pending;
      continue;
    }
    if (sl->k1 != k + 1 || sl->first == id)
      die("join: input %lld does not pair (its slot holds %lld)", (long long)id, (long long)sl->first);
    for (uint64_t t0 = rdtsc(); rdtsc() - t0 < cost;) {
    }
    join_cycles += cost;
    int64_t out = ((int64_t)1 << 40) + k;
    chk(CP_LogLineage(join_lineage, out, sl->first), "CP_LogLineage (first input)");
    chk(CP_LogLineage(join_lineage, out, id), "CP_LogLineage (last input)");
    if (id & 1) join_b_last++;
    else join_a_last++;
    sl->k1 = 0, pending--;
    log_mark(join_out, out, "LogTS join out");
    q_push(&q_sink, out, 0, NULL);
    log_mark(join_sent, out, "LogTS join sent");
    join_outputs++;
  }
  if (pending) die("join: %llu inputs never paired", (unsigned long long)pending);
  q_close(&q_sink);
  free(pend);
  return NULL;
}

// wait_sunk waits until the sink has taken seq tuples (or a stop is asked).
static void wait_sunk(uint64_t seq) {
  pthread_mutex_lock(&drain_mu);
  __atomic_add_fetch(&drain_waiters, 1, __ATOMIC_SEQ_CST);
  while (__atomic_load_n(&sunk, __ATOMIC_SEQ_CST) < seq && !stop_req) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&drain_cv, &drain_mu, &ts);  // the timeout only to see stop_req
  }
  __atomic_sub_fetch(&drain_waiters, 1, __ATOMIC_SEQ_CST);
  pthread_mutex_unlock(&drain_mu);
}

// ---- the source ----

static int64_t src_out, src_sent;
static uint64_t src_tuples;
static pthread_mutex_t src_mu = PTHREAD_MUTEX_INITIALIZER;  // --listen: connections log one at a time

static uint64_t push_marked(struct queue *q, int64_t id) {
  log_mark(src_out, id, "LogTS source out");
  uint64_t seq = q_push(q, id, 0, NULL);
  log_mark(src_sent, id, "LogTS source sent");
  return seq;
}

// source_push hands tuple id on (--fork: as 2 id to A, then 2 id + 1 to B).
static uint64_t source_push(int64_t id) {
  if (!opt.fork) return push_marked(&q_a, id);
  push_marked(&q_a, 2 * id);
  return push_marked(&q_b, 2 * id + 1);
}

static void internal_source(void) {
  uint64_t rng = opt.seed ^ 0x5EED5EED5EEDULL;
  int64_t start = clock_ns(), due = start;
  int64_t end = opt.duration_s > 0 ? start + (int64_t)(opt.duration_s * 1e9) : INT64_MAX;
  for (int64_t id = 0; (opt.tuples == 0 || id < opt.tuples) && !stop_req && !__atomic_load_n(&stop_source, __ATOMIC_ACQUIRE);
       id++) {
    if (id < opt.burst) {  // the burst: back to back
      if (clock_ns() >= end) break;
    } else if (opt.rate > 0) {
      if (id == opt.burst && id > 0) due = clock_ns();  // the rate from the burst's end
      double rate = opt.rate2 > 0 && id >= opt.phase_after ? opt.rate2 : opt.rate;
      if (opt.on_s > 0 && fmod((due - start) / 1e9, opt.on_s + opt.off_s) >= opt.on_s) rate = opt.off_rate;
      due += (int64_t)llround(opt.poisson ? rng_exp(&rng, 1e9 / rate) : 1e9 / rate);
      if (due >= end) break;
      int64_t now = clock_ns();
      if (due > now) sleep_until(due > now + opt.tick_ns ? due : now + opt.tick_ns);  // late: at once (a burst), never a spin
    } else if (clock_ns() >= end) {
      break;
    }
    source_push(id);
    src_tuples++;
  }
}

// ---- --listen: datagen's wire format (datagen/FRAMING.md) ----

enum { HELLO = 1, BUCKET = 2, END = 3, REPORT = 4 };
#define MAX_GAPS 4096

struct conn {
  int fd;
  pthread_t th;
  int done;
  unsigned char *buf;
  size_t bufcap;
};

struct stream_report {
  uint64_t run_id, first_id, tuples, sent, received, lost, out_of_order, duplicates, out_of_range, bytes;
  uint32_t thread, threads;
  char sender[257];
  uint64_t gaps[MAX_GAPS][2];
  int ngaps, gaps_truncated;
  uint64_t next;
  double seconds;
};

static pthread_mutex_t streams_mu = PTHREAD_MUTEX_INITIALIZER;
static long streams_ended, streams_reported;
static uint64_t listen_received, listen_lost;

// read_full reads n bytes, polling so that a stop is seen; deadline_ns 0: none.
// Returns 1, 0 at a clean end of stream before any byte, -1 on an error.
static int read_full(int fd, void *p, size_t n, int64_t deadline_ns) {
  size_t got = 0;
  while (got < n) {
    if (stop_req) return -1;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int rc = poll(&pf, 1, 100);
    if (rc < 0 && errno != EINTR) return -1;
    if (deadline_ns && clock_ns() > deadline_ns) return -1;
    if (rc <= 0) continue;
    ssize_t r = recv(fd, (char *)p + got, n - got, 0);
    if (r == 0) return got == 0 ? 0 : -1;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
    got += (size_t)r;
  }
  return 1;
}

static uint64_t be64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | p[i];
  return v;
}
static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }
static uint16_t be16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }

// account takes one received id (FRAMING.md, "Accounting"); 1: push it on.
static int account(struct stream_report *s, uint64_t id) {
  if (id < s->first_id || id - s->first_id >= s->tuples) {
    s->out_of_range++;
    return 0;
  }
  if (id == s->next) {
    s->received++, s->next++;
    return 1;
  }
  if (id > s->next) {
    if (s->ngaps < MAX_GAPS) s->gaps[s->ngaps][0] = s->next, s->gaps[s->ngaps][1] = id - 1, s->ngaps++;
    else s->gaps_truncated = 1;
    s->lost += id - s->next;
    s->received++, s->next = id + 1;
    return 1;
  }
  for (int i = 0; i < s->ngaps; i++) {  // late: in a gap?
    uint64_t lo = s->gaps[i][0], hi = s->gaps[i][1];
    if (id < lo || id > hi) continue;
    if (lo == hi) {
      memmove(s->gaps[i], s->gaps[i + 1], (size_t)(s->ngaps - i - 1) * sizeof s->gaps[0]);
      s->ngaps--;
    } else if (id == lo) {
      s->gaps[i][0]++;
    } else if (id == hi) {
      s->gaps[i][1]--;
    } else if (s->ngaps < MAX_GAPS) {
      memmove(s->gaps[i + 1], s->gaps[i], (size_t)(s->ngaps - i) * sizeof s->gaps[0]);
      s->gaps[i][1] = id - 1, s->gaps[i + 1][0] = id + 1, s->ngaps++;
    } else {
      s->gaps_truncated = 1;  // cannot split: the id stays lost (FRAMING.md: then lost is an upper bound)
      s->duplicates++;
      return 0;
    }
    s->lost--, s->out_of_order++, s->received++;
    return 1;
  }
  s->duplicates++;
  return 0;
}

static void send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "tandem: sending the REPORT: %s\n", strerror(errno));
      return;  // the sender gave up waiting: nothing to do
    }
    c += w, n -= (size_t)w;
  }
}

static void json_str(char *out, size_t cap, const char *s) {
  size_t o = 0;
  out[o++] = '"';
  for (; *s && o + 8 < cap; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') o += (size_t)snprintf(out + o, cap - o, "\\%c", ch);
    else if (ch < 0x20) o += (size_t)snprintf(out + o, cap - o, "\\u%04x", ch);
    else out[o++] = (char)ch;
  }
  out[o++] = '"';
  out[o] = 0;
}

static void send_report(int fd, struct stream_report *s) {
  static __thread char body[16384];
  char name[600];
  json_str(name, sizeof name, s->sender);
  int n = snprintf(body + 5, sizeof body - 5,
                   "{\"run_id\":%llu,\"sender\":%s,\"thread\":%u,\"threads\":%u,\"first_id\":%llu,\"sent\":%llu,"
                   "\"received\":%llu,\"lost\":%llu,\"out_of_order\":%llu,\"duplicates\":%llu,\"out_of_range\":%llu,"
                   "\"dropped\":0,\"bytes\":%llu,\"gaps\":[",
                   (unsigned long long)s->run_id, name, s->thread, s->threads, (unsigned long long)s->first_id,
                   (unsigned long long)s->sent, (unsigned long long)s->received, (unsigned long long)s->lost,
                   (unsigned long long)s->out_of_order, (unsigned long long)s->duplicates,
                   (unsigned long long)s->out_of_range, (unsigned long long)s->bytes);
  for (int i = 0; i < s->ngaps && i < 100; i++)
    n += snprintf(body + 5 + n, sizeof body - 5 - (size_t)n, "%s[%llu,%llu]", i ? "," : "",
                  (unsigned long long)s->gaps[i][0], (unsigned long long)s->gaps[i][1]);
  n += snprintf(body + 5 + n, sizeof body - 5 - (size_t)n, "],\"gaps_truncated\":%s,\"seconds\":%.6f}",
                s->gaps_truncated || s->ngaps > 100 ? "true" : "false", s->seconds);
  uint32_t len = (uint32_t)n + 1;
  body[0] = (unsigned char)(len >> 24), body[1] = (unsigned char)(len >> 16), body[2] = (unsigned char)(len >> 8);
  body[3] = (unsigned char)len, body[4] = REPORT;
  send_all(fd, body, (size_t)n + 5);
}

// A frame's body into c->buf (grown as needed, never past the type's limit).
static int read_body(struct conn *c, size_t n) {
  if (n > c->bufcap) {
    unsigned char *b = realloc(c->buf, n);
    if (!b) return -1;
    c->buf = b, c->bufcap = n;
  }
  return read_full(c->fd, c->buf, n, 0) == 1 ? 1 : -1;
}

static int cmp_gap(const void *a, const void *b) {
  const uint64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void *conn_main(void *arg) {
  struct conn *c = arg;
  struct stream_report *s = calloc(1, sizeof *s);
  const char *why = NULL;
  int64_t t_first = 0;
  uint64_t last_seq = 0;
  if (!s) die("out of memory");
  unsigned char h[5];
  // HELLO, whole within 10 s.
  if (read_full(c->fd, h, 5, clock_ns() + 10000000000LL) != 1) {
    why = "no HELLO within 10 s";
    goto out;
  }
  uint32_t len = be32(h);
  if (h[4] != HELLO || len < 1 + 50 + 1 || len > 1 + 50 + 256) {
    why = "malformed HELLO";
    goto out;
  }
  if (read_body(c, len - 1) != 1) {
    why = "HELLO cut short";
    goto out;
  }
  const unsigned char *b = c->buf;
  uint16_t nl = be16(b + 48);  // after the rate (f64 at 40), which the pipeline does not need
  if (memcmp(b, "CPDG", 4) != 0 || be16(b + 4) != 1 || nl < 1 || 50u + nl != len - 1) {
    why = "malformed HELLO (magic, version or name length)";
    goto out;
  }
  s->run_id = be64(b + 8), s->thread = be32(b + 16), s->threads = be32(b + 20);
  s->first_id = be64(b + 24), s->tuples = be64(b + 32);
  if (s->first_id + s->tuples < s->first_id) {
    why = "HELLO: first id + tuples overflows";
    goto out;
  }
  memcpy(s->sender, b + 50, nl);
  s->sender[nl] = 0;
  s->next = s->first_id;
  for (;;) {
    int rc = read_full(c->fd, h, 5, 0);
    if (rc != 1) {
      why = rc == 0 ? "connection closed before END" : "connection broken before END";
      goto out;
    }
    len = be32(h);
    if (len < 1 || len > (64u << 20) + 1) {
      why = "malformed frame length";
      goto out;
    }
    if (h[4] == BUCKET) {
      if (len < 1 + 4 || read_body(c, len - 1) != 1) {
        why = "malformed or cut BUCKET";
        goto out;
      }
      if (!t_first) t_first = clock_ns();
      const unsigned char *p = c->buf, *e = c->buf + len - 1;
      uint32_t n = be32(p);
      p += 4;
      if (n < 1 || n > 1048576) {
        why = "malformed BUCKET count";
        goto out;
      }
      for (uint32_t i = 0; i < n; i++) {
        if (e - p < 12) {
          why = "malformed BUCKET (cut tuple)";
          goto out;
        }
        uint64_t id = be64(p);
        uint32_t pl = be32(p + 8);
        p += 12;
        if (pl > (16u << 20) || (size_t)(e - p) < pl) {
          why = "malformed BUCKET (payload length)";
          goto out;
        }
        p += pl;
        s->bytes += 12 + pl;
        if (account(s, id)) {
          pthread_mutex_lock(&src_mu);
          last_seq = source_push((int64_t)id);
          src_tuples++;
          pthread_mutex_unlock(&src_mu);
        }
      }
      if (p != e) {
        why = "malformed BUCKET (bytes after the last tuple)";
        goto out;
      }
    } else if (h[4] == END) {
      if (len != 17 || read_body(c, 16) != 1) {
        why = "malformed END";
        goto out;
      }
      s->sent = be64(c->buf);
      if (s->sent > s->tuples) {
        why = "END: more tuples than HELLO planned";
        goto out;
      }
      // Every tuple of the stream through the pipeline, then the REPORT.
      wait_sunk(last_seq);
      if (stop_req) {
        why = "stopped";
        goto out;
      }
      uint64_t end = s->first_id + s->sent;
      if (s->next < end) {
        if (s->ngaps < MAX_GAPS) s->gaps[s->ngaps][0] = s->next, s->gaps[s->ngaps][1] = end - 1, s->ngaps++;
        else s->gaps_truncated = 1;
        s->lost += end - s->next;
      }
      qsort(s->gaps, (size_t)s->ngaps, sizeof s->gaps[0], cmp_gap);
      s->seconds = t_first ? (double)(clock_ns() - t_first) / 1e9 : 0;
      send_report(c->fd, s);
      pthread_mutex_lock(&streams_mu);
      streams_reported++;
      listen_received += s->received, listen_lost += s->lost;
      pthread_mutex_unlock(&streams_mu);
      if (opt.verbose)
        fprintf(stderr, "tandem: stream %u/%u of run %llu: sent %llu received %llu lost %llu in %.3f s\n", s->thread,
                s->threads, (unsigned long long)s->run_id, (unsigned long long)s->sent,
                (unsigned long long)s->received, (unsigned long long)s->lost, s->seconds);
      break;
    } else {
      why = "unknown frame type";
      goto out;
    }
  }
out:
  if (why && opt.verbose) fprintf(stderr, "tandem: connection ended: %s\n", why);
  if (why && !opt.verbose && strcmp(why, "stopped") != 0) fprintf(stderr, "tandem: a stream ended without REPORT: %s\n", why);
  close(c->fd);
  free(s);
  free(c->buf);
  pthread_mutex_lock(&streams_mu);
  streams_ended++;
  pthread_mutex_unlock(&streams_mu);
  __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static int listen_on(const char *hostport) {
  char host[256];
  const char *colon = strrchr(hostport, ':');
  if (!colon || (size_t)(colon - hostport) >= sizeof host) bad("--listen", hostport);
  memcpy(host, hostport, (size_t)(colon - hostport));
  host[colon - hostport] = 0;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
  int rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai);
  if (rc) die("--listen %s: %s", hostport, gai_strerror(rc));
  int fd = socket(ai->ai_family, SOCK_STREAM, 0);
  if (fd < 0) die("socket: %s", strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (opt.rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opt.rcvbuf, sizeof opt.rcvbuf) < 0)
    die("SO_RCVBUF: %s", strerror(errno));
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) die("bind %s: %s", hostport, strerror(errno));
  freeaddrinfo(ai);
  if (listen(fd, 64) < 0) die("listen: %s", strerror(errno));
  struct sockaddr_storage a;
  socklen_t alen = sizeof a;
  if (getsockname(fd, (struct sockaddr *)&a, &alen) < 0) die("getsockname: %s", strerror(errno));
  char h[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (a.ss_family == AF_INET) {
    struct sockaddr_in *in = (struct sockaddr_in *)&a;
    inet_ntop(AF_INET, &in->sin_addr, h, sizeof h);
    port = ntohs(in->sin_port);
  } else {
    struct sockaddr_in6 *in = (struct sockaddr_in6 *)&a;
    inet_ntop(AF_INET6, &in->sin6_addr, h, sizeof h);
    port = ntohs(in->sin6_port);
  }
  fprintf(stderr, "tandem: listening on %s:%u\n", h, port);
  return fd;
}

#define MAX_CONNS 64

static void listen_source(void) {
  int ls = listen_on(opt.listen);
  struct conn *conns[MAX_CONNS] = {0};
  for (;;) {
    int open = 0;
    for (int i = 0; i < MAX_CONNS; i++) {  // reap finished connections
      if (conns[i] && __atomic_load_n(&conns[i]->done, __ATOMIC_ACQUIRE)) {
        pthread_join(conns[i]->th, NULL);
        free(conns[i]);
        conns[i] = NULL;
      }
      open += conns[i] != NULL;
    }
    pthread_mutex_lock(&streams_mu);
    int enough = opt.streams > 0 && streams_ended >= opt.streams && open == 0;
    pthread_mutex_unlock(&streams_mu);
    if (enough || stop_req) break;
    struct pollfd pf = {.fd = ls, .events = POLLIN};
    int rc = poll(&pf, 1, 50);
    if (rc < 0 && errno != EINTR) die("poll: %s", strerror(errno));
    if (rc <= 0) continue;
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      die("accept: %s", strerror(errno));
    }
    int slot = -1;
    for (int i = 0; i < MAX_CONNS && slot < 0; i++)
      if (!conns[i]) slot = i;
    if (slot < 0) {
      fprintf(stderr, "tandem: more than %d connections at once: closed one\n", MAX_CONNS);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct conn *c = calloc(1, sizeof *c);
    if (!c) die("out of memory");
    c->fd = fd;
    conns[slot] = c;
    if ((rc = pthread_create(&c->th, NULL, conn_main, c))) die("pthread_create: %s", strerror(rc));
  }
  close(ls);
  for (int i = 0; i < MAX_CONNS; i++)
    if (conns[i]) {
      if (!__atomic_load_n(&conns[i]->done, __ATOMIC_ACQUIRE)) shutdown(conns[i]->fd, SHUT_RDWR);
      pthread_join(conns[i]->th, NULL);
      free(conns[i]);
    }
}

// ---- main ----

static void on_signal(int sig) {
  (void)sig;
  stop_req = 1;
}

// One phase (or the whole run) of an operator: tuples, realised mean work,
// the true service rate tsc_hz / mean, and tuples / (last out - first in).
static void print_phase(const struct phase *p, double hz) {
  double mean = p->tuples ? (double)p->cycles / (double)p->tuples : 0;
  double wall = p->last_out > p->first_in ? (double)(p->last_out - p->first_in) / hz : 0;
  printf("\"tuples\":%llu,\"mean_cycles\":%.3f,\"true_rate\":%.6f,\"spun_mean_cycles\":%.3f,\"wall_rate\":%.6f,"
         "\"first_in_tsc\":%llu,\"last_out_tsc\":%llu",
         (unsigned long long)p->tuples, mean, mean > 0 ? hz / mean : 0, p->tuples ? (double)p->spun / (double)p->tuples : 0,
         wall > 0 ? (double)p->tuples / wall : 0,
         (unsigned long long)p->first_in, (unsigned long long)p->last_out);
}

// burst_truth: for the first rec_n tuples the operator took (the burst's),
// the cycles each waited in its input queue (push to pop) while the operator
// worked on an earlier one (its "in" to "out"), summed; the whole waits; and
// the tuples ahead of each when it entered times the realised mean work.
struct burst_sums {
  uint64_t tuples, queue_cycles, wait_cycles;
  double ahead_cycles;
};

// busy_before: the operator's busy cycles before t, from its first n work
// intervals (in order, apart) and their running sums cum.
static uint64_t busy_before(const struct op *o, const uint64_t *cum, size_t n, uint64_t t) {
  size_t lo = 0, hi = n;  // the first interval that ends after t
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (o->busy_end[mid] <= t) lo = mid + 1;
    else hi = mid;
  }
  return cum[lo] + (lo < n && o->busy_start[lo] < t ? t - o->busy_start[lo] : 0);
}

static struct burst_sums burst_truth(const struct op *o) {
  struct burst_sums r = {0};
  size_t n = o->rec_n < o->tuples ? o->rec_n : (size_t)o->tuples;
  if (o->in->popped < n) n = (size_t)o->in->popped;
  uint64_t *cum = calloc(n + 1, sizeof *cum);  // cum[j]: the busy cycles of the first j tuples
  if (!cum) die("out of memory");
  for (size_t j = 0; j < n; j++) cum[j + 1] = cum[j] + (o->busy_end[j] - o->busy_start[j]);
  double mean = o->tuples ? (double)o->cycles / (double)o->tuples : 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t push = o->in->push_tsc[i], pop = o->in->pop_tsc[i];
    if (pop < push) continue;  // cannot be (one lock orders them)
    r.tuples++;
    r.wait_cycles += pop - push;
    r.queue_cycles += busy_before(o, cum, n, pop) - busy_before(o, cum, n, push);
    r.ahead_cycles += (double)o->in->ahead[i] * mean;
  }
  free(cum);
  return r;
}

static void print_op(const struct op *o, double hz, int last) {
  struct phase all = {o->tuples, o->cycles, o->spun, o->first_in, o->last_out};
  double nominal = o->cost.cycles ? o->cost.value : o->cost.value * tsc_hz0 / 1e9;
  printf("{\"name\":\"%s\",\"instance\":\"0\",\"dist\":\"%s\",\"nominal_cycles\":%.3f,", o->name,
         o->cost.dist == EXP ? "exp" : "det", nominal);
  print_phase(&all, hz);
  printf(",\"waits_input\":%llu,\"waited_input_s\":%.6f,\"waits_output\":%llu,\"preempted_tuples\":%llu,"
         "\"preempted_s\":%.6f,\"longest_gap_s\":%.6f",
         (unsigned long long)o->waits_in, (double)o->waited_in / hz, (unsigned long long)o->waits_out,
         (unsigned long long)o->preempted,
         (double)o->preempted_cycles / hz, (double)o->longest_gap / hz);
  if (o->phase_after > 0) {
    printf(",\"phase_after\":%lld,\"phases\":[{", o->phase_after);
    print_phase(&o->ph[0], hz);
    printf("},{");
    print_phase(&o->ph[1], hz);
    printf("}]");
  }
  if (o->rec_n > 0) {
    struct burst_sums b = burst_truth(o);
    printf(",\"burst_tuples\":%llu,\"burst_queue_cycles\":%llu,\"burst_wait_cycles\":%llu,\"burst_ahead_cycles\":%.0f",
           (unsigned long long)b.tuples, (unsigned long long)b.queue_cycles, (unsigned long long)b.wait_cycles,
           b.ahead_cycles);
  }
  if (o->ch_count > 0) {
    cp_service_rate_t sr;
    chk(CP_ServiceRate(o->ch_count, &sr), "CP_ServiceRate");
    printf(",\"service_rate\":{\"rate\":%.6f,\"running\":%.6f,\"period_s\":%.6f,\"samples\":%lld,\"periods\":%lld,"
           "\"convergences\":%lld,\"converged\":%s}",
           sr.rate, sr.running, sr.period_s, (long long)sr.samples, (long long)sr.periods, (long long)sr.convergences,
           sr.converged ? "true" : "false");
  } else {
    printf(",\"service_rate\":null");
  }
  printf("}%s", last ? "" : ",");
}

// The count channels' estimates over the run: main polls CP_ServiceRate and
// keeps each new convergence with B's tuple count then (which phase it saw).
struct sr_point {
  double t_s, rate;
  uint64_t b_tuples;
  int64_t convergences;
  const char *op;
};
static struct sr_point sr_trace[4096];
static int n_sr_trace;

static void poll_estimates(int64_t t0) {
  static int64_t seen[2];
  static int64_t b_at_switch = -1;  // B's convergences when main saw it change its cost
  struct op *ops[2] = {&op_a, &op_b};
  for (int i = 0; i < 2; i++) {
    if (ops[i]->ch_count <= 0) continue;
    cp_service_rate_t sr;
    chk(CP_ServiceRate(ops[i]->ch_count, &sr), "CP_ServiceRate");
    if (ops[i] == &op_b && opt.stop_after > 0) {
      int64_t base = 0;
      if (opt.phase_after > 0) {
        if (b_at_switch < 0 && (long long)__atomic_load_n(&op_b.tuples, __ATOMIC_RELAXED) >= opt.phase_after)
          b_at_switch = sr.convergences;
        base = b_at_switch;
      }
      if (base >= 0 && sr.convergences - base >= opt.stop_after) __atomic_store_n(&stop_source, 1, __ATOMIC_RELEASE);
    }
    if (sr.convergences > seen[i] && n_sr_trace < 4096) {
      seen[i] = sr.convergences;
      sr_trace[n_sr_trace++] = (struct sr_point){(double)(clock_ns() - t0) / 1e9, sr.rate,
                                                 __atomic_load_n(&op_b.tuples, __ATOMIC_RELAXED), sr.convergences,
                                                 ops[i]->name};
    }
  }
}

static int source_done;  // atomic

static void *source_main(void *arg) {
  (void)arg;
  if (opt.listen) listen_source();
  else internal_source();
  q_close(&q_a);
  if (opt.fork) q_close(&q_b);
  __atomic_store_n(&source_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  parse_args(argc, argv);
  if (opt.count && (!CP_MarkBlocked || !CP_ServiceRate))
    die("this libcloudprofiler.so has no CP_MarkBlocked/CP_ServiceRate (CP_SERVICERATE): run with --no-count");
  // Our handler first: the library chains to it after its SIGTERM flush.
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // the source's sleeps end on time (threads inherit it)

  struct sync_pt s0 = sync_now();
  struct timespec cal = {.tv_nsec = 20000000};
  nanosleep(&cal, NULL);
  tsc_hz0 = hz_between(s0, sync_now());

  if (opt.fork && !CP_LogLineage) {
    fprintf(stderr, "tandem: --fork: this libcloudprofiler.so has no CP_LogLineage (CP_LINEAGE channels)\n");
    exit(2);
  }
  q_init(&q_a, (size_t)opt.queue, 0);
  q_init(&q_b, (size_t)opt.queue, 0);
  q_init(&q_sink, (size_t)opt.queue, !opt.eager_sink);
  op_a.in = &q_a, op_a.out = &q_b, op_a.cost = opt.a, op_a.seed = opt.seed * 1000003 + 1;
  op_b.in = &q_b, op_b.out = &q_sink, op_b.cost = opt.b, op_b.seed = opt.seed * 1000003 + 2;
  op_b.cost2 = opt.b2, op_b.phase_after = opt.phase_after;
  if (opt.fork) {  // A and B side by side, both into the join's queue
    q_init(&q_join, (size_t)opt.queue, 0);
    q_join.producers = 2;
    op_a.out = op_b.out = &q_join;
  }
  if (opt.burst > 0) {
    struct op *ops[2] = {&op_a, &op_b};
    for (int i = 0; i < 2; i++) {
      struct op *o = ops[i];
      q_record(o->in, (size_t)opt.burst);
      o->rec_n = (size_t)opt.burst;
      o->busy_start = calloc(o->rec_n, sizeof *o->busy_start);
      o->busy_end = calloc(o->rec_n, sizeof *o->busy_end);
      if (!o->busy_start || !o->busy_end) die("out of memory");
    }
  }
  if (opt.marks) {
    src_out = open_ch("source out", CP_BUFFER_IDENTITY);
    src_sent = open_ch("source sent", CP_BUFFER_IDENTITY);
  }
  open_op(&op_a);
  open_op(&op_b);
  if (opt.fork) {
    join_in = open_ch("join#0 in", CP_BUFFER_IDENTITY);
    join_out = open_ch("join#0 out", CP_BUFFER_IDENTITY);
    join_sent = open_ch("join#0 sent", CP_BUFFER_IDENTITY);
    join_lineage = OpenChannel("join#0 lineage", CP_ZSTD_TSC, TANDEM_LINEAGE);
    if (join_lineage == CP_ERR_BAD_HANDLER || join_lineage == CP_ERR_NOT_SUPPORTED) {
      fprintf(stderr, "tandem: --fork: OpenChannel \"join#0 lineage\": %s: this libcloudprofiler.so has no CP_LINEAGE handler\n",
              CP_ErrorString((int32_t)join_lineage));
      exit(2);
    }
    chk(join_lineage, "OpenChannel \"join#0 lineage\"");
  }

  pthread_t ta, tb, ts, tsrc, tj;
  int rc;
  if ((rc = pthread_create(&ts, NULL, sink_main, NULL)) || (opt.fork && (rc = pthread_create(&tj, NULL, join_main, NULL))) ||
      (rc = pthread_create(&tb, NULL, op_main, &op_b)) || (rc = pthread_create(&ta, NULL, op_main, &op_a)))
    die("pthread_create: %s", strerror(rc));
  int64_t t0 = clock_ns();
  struct sync_pt run0 = sync_now();
  if ((rc = pthread_create(&tsrc, NULL, source_main, NULL))) die("pthread_create: %s", strerror(rc));
  // main: poll the estimators every 10 ms while the source runs (sleeping).
  while (!__atomic_load_n(&source_done, __ATOMIC_ACQUIRE)) {
    struct timespec p = {.tv_nsec = 10000000};
    nanosleep(&p, NULL);
    poll_estimates(t0);
    if (opt.verbose && opt.listen == NULL && ((clock_ns() - t0) / 10000000) % 100 == 0)
      fprintf(stderr, "tandem: %.1f s: source %llu, B %llu, sink %llu\n", (double)(clock_ns() - t0) / 1e9,
              (unsigned long long)src_tuples, (unsigned long long)op_b.tuples, (unsigned long long)sink_tuples);
  }
  pthread_join(tsrc, NULL);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  if (opt.fork) pthread_join(tj, NULL);
  pthread_join(ts, NULL);
  poll_estimates(t0);
  struct sync_pt run1 = sync_now();
  double hz = hz_between(run0, run1);
  if ((double)(run1.ns - run0.ns) < 2e8) hz = hz_between(s0, run1);  // a short run: the longest baseline

  printf("{\"tsc_hz\":%.3f,\"elapsed_s\":%.6f,\"source\":{\"mode\":\"%s\",\"arrivals\":\"%s\",\"rate\":%.3f,\"rate2\":%.3f,"
         "\"stopped_after_estimates\":%s,"
         "\"tuples\":%llu},\"queue\":%ld,\"seed\":%llu,\"count_channels\":%s,\"operators\":[",
         hz, (double)(run1.ns - run0.ns) / 1e9, opt.listen ? "listen" : "internal",
         opt.listen ? "tcp" : (opt.rate <= 0 ? "max" : opt.poisson ? "poisson" : "constant"), opt.rate,
         opt.rate2 > 0 ? opt.rate2 : opt.rate, __atomic_load_n(&stop_source, __ATOMIC_ACQUIRE) ? "true" : "false",
         (unsigned long long)src_tuples, opt.queue, (unsigned long long)opt.seed, opt.count ? "true" : "false");
  print_op(&op_a, hz, 0);
  print_op(&op_b, hz, 1);
  printf("],\"sink\":{\"tuples\":%llu}", (unsigned long long)sink_tuples);
  if (opt.burst > 0) {
    long long n = opt.burst < (long long)src_tuples ? opt.burst : (long long)src_tuples;
    printf(",\"burst\":{\"tuples\":%lld,\"first_id\":0,\"last_id\":%lld}", n, opt.fork ? 2 * n - 1 : n - 1);
  }
  if (opt.fork)
    printf(",\"fork\":{\"outputs\":%llu,\"a_last\":%llu,\"b_last\":%llu,\"join_cycles\":%llu,\"max_pending\":%llu,"
           "\"output_id_base\":%lld}",
           (unsigned long long)join_outputs, (unsigned long long)join_a_last, (unsigned long long)join_b_last,
           (unsigned long long)join_cycles, (unsigned long long)join_max_pending, (long long)1 << 40);
  printf(",\"estimates\":[");
  for (int i = 0; i < n_sr_trace; i++)
    printf("%s{\"op\":\"%s\",\"t_s\":%.6f,\"rate\":%.6f,\"b_tuples\":%llu,\"convergences\":%lld}", i ? "," : "",
           sr_trace[i].op, sr_trace[i].t_s, sr_trace[i].rate, (unsigned long long)sr_trace[i].b_tuples,
           (long long)sr_trace[i].convergences);
  printf("]");
  if (opt.listen)
    printf(",\"streams\":{\"ended\":%ld,\"reported\":%ld,\"received\":%llu,\"lost\":%llu}", streams_ended,
           streams_reported, (unsigned long long)listen_received, (unsigned long long)listen_lost);
  // Close last: CP_ServiceRate above needs the count channels open.
  chk(CloseAllChannels(), "CloseAllChannels");
  printf("}\n");
  if (sink_tuples != src_tuples) {
    fprintf(stderr, "tandem: the sink took %llu tuples, the source sent %llu\n", (unsigned long long)sink_tuples,
            (unsigned long long)src_tuples);
    return 1;
  }
  return 0;
}
