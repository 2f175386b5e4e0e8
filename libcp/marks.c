// marks.c — the evidence a marked channel adds to its records: whether the
// instance's thread waited since the instance's previous mark.
//
// The capacity analysis needs to know, of the gap between an instance's
// departure and its next in, whether the instance was working (taking the
// next tuple, which was already there) or waiting for one. The order of
// marks cannot say it in an engine: Flink keeps a tuple in the sender's
// output buffer for up to 100 ms after its out, Storm batches, so a tuple
// whose out came before the receiver's departure may still not have been
// there to take. The kernel can: a thread that waits (for input, for room
// downstream, in a sleep) gives the CPU up, and its voluntary context
// switches go up by one (getrusage's ru_nvcsw). A thread preempted while it
// works switches involuntarily (ru_nivcsw): that is time the instance pays
// on a shared machine, and stays its cost. A thread that waits by spinning
// or by sched_yield (no voluntary switch on Linux) looks as if it worked:
// Flink's task threads and Storm's executors park, Storm's after up to
// 1,000 yields (its progressive wait strategy), which the analysis leaves
// out where the tuple came after the departure (Visit.workedFrom).
//
// So each mark reads the thread's voluntary switches and compares them with
// the count at the instance's previous mark; when they differ, or the mark
// comes from another thread, the record's TSC gets bit 63 (CP_WAITED_BIT):
// "the thread gave the CPU up since this instance's previous mark". The
// file's header says the channel notes waits (logfile.Header.Waits), and
// the reader takes the bit off again (logfile.Record.Waited).
//
// getrusage costs ~130 ns, a mark ~20. Most marks need not ask: a thread
// that was never switched out since it last asked has the same count.
// Restartable sequences tell that for the price of a load: the kernel
// clears a thread's rseq_cs pointer whenever it preempts the thread or the
// thread sleeps and resumes (the pointer names a critical section; ours is
// empty, so the kernel never restarts anything, it only clears the
// pointer). A mark that finds the pointer still set knows the count it
// read last is current; one that finds it cleared sets it again, then asks
// (in that order: a switch between the two clears it again). glibc
// registers the rseq area of every thread (2.35 and later); cp_marks_init
// checks on a sleep of its own that this kernel clears the pointer. Without
// rseq, marks note nothing unless CP_WAITS=getrusage asks for it: then a
// mark asks only when its thread's previous mark was more than
// CP_WAIT_MIN_NS earlier (a thread that gives the CPU up and gets it back
// takes longer than that: two context switches), which for an operator
// that works between its marks is every mark, at 130-500 ns.
#define _GNU_SOURCE
#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/rseq.h>
#include "engine.h"

// glibc's rseq area, at the thread pointer plus __rseq_offset (weak: an
// older glibc has neither, and rseq is then not used).
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

// The critical section the pointer names: empty (post_commit_offset 0), so
// no instruction is ever inside it. The kernel checks the signature in the
// 4 bytes before abort_ip (glibc registered its threads with RSEQ_SIG) and
// kills a thread whose descriptor fails the check: it passes by
// construction, and is never executed.
static const uint32_t cp_rseq_sig[2] __attribute__((aligned(8))) = {RSEQ_SIG, 0};
static struct rseq_cs cp_rseq_desc __attribute__((aligned(32)));

int cp_waits_mode;            // CP_WAITS_*: set once by cp_marks_init, before any marked slot is published
static uint64_t cp_wait_min;  // without rseq: CP_WAIT_MIN_NS in TSC cycles
static uint64_t cp_gc_slack;  // CP_GC_SLACK_NS in TSC cycles

// A JVM stops every thread that runs Java code for a collection: a thread
// with work queued then waits at the safepoint, a voluntary switch, though
// it gave nothing up by choice. The JVM says when its collections begin and
// end (JVMTI, jni.c): a gap whose voluntary switches are no more than the
// collections in it, and no longer than twice their time and a little work
// (CP_GC_SLACK_NS), was work stopped by the JVM, and its time counts as the
// instance's (what it sustains, the JVM's pauses included). Twice: a
// thread stops before the collection begins, while the others reach the
// safepoint (a thread in a counted loop without a poll makes them wait),
// so the stop outlasts the collection. A wait for input that a collection
// fell into lasts longer than that and stays a wait.
_Atomic uint64_t cp_gc_count, cp_gc_cycles;
static _Atomic uint64_t cp_gc_began;

void cp_gc_begin(void) { atomic_store_explicit(&cp_gc_began, cp_tsc_now(), memory_order_relaxed); }

void cp_gc_end(void) {
  uint64_t b = atomic_load_explicit(&cp_gc_began, memory_order_relaxed), t = cp_tsc_now();
  if (b && t > b) atomic_fetch_add_explicit(&cp_gc_cycles, t - b, memory_order_relaxed);
  atomic_fetch_add_explicit(&cp_gc_count, 1, memory_order_release);
}

// The thread's count as of its last look, and (without rseq) when that was;
// the TSC of its latest mark of any instance (tl_mark).
static __thread uint64_t tl_switches, tl_last, tl_mark;
static __thread int tl_valid;

static inline _Atomic uint64_t *rseq_cs_ptr(void) {
  return (_Atomic uint64_t *)(cp_thread_pointer() + __rseq_offset + offsetof(struct rseq, rseq_cs));
}

static uint64_t read_switches(void) {
  struct rusage r;
  if (getrusage(RUSAGE_THREAD, &r) != 0) return 0;
  return (uint64_t)r.ru_nvcsw;
}

int cp_marks_init(int want, double tsc_per_ns) {
  cp_wait_min = (uint64_t)(CP_WAIT_MIN_NS * tsc_per_ns);
  cp_gc_slack = (uint64_t)(CP_GC_SLACK_NS * tsc_per_ns);
  if (want == CP_WAITS_OFF) return cp_waits_mode = CP_WAITS_OFF;
  cp_rseq_desc.version = 0;
  cp_rseq_desc.flags = 0;
  cp_rseq_desc.abort_ip = (uint64_t)(uintptr_t)&cp_rseq_sig[1];
  cp_rseq_desc.start_ip = cp_rseq_desc.abort_ip;
  cp_rseq_desc.post_commit_offset = 0;
  // Asked for getrusage alone, it is used; asked for rseq (the default) and
  // rseq is not there, no notes: getrusage on every mark of an operator
  // that works between its marks costs 130-500 ns a mark, more than a mark.
  cp_waits_mode = want == CP_WAITS_GETRUSAGE ? CP_WAITS_GETRUSAGE : CP_WAITS_OFF;
  if (want != CP_WAITS_RSEQ || &__rseq_size == NULL || &__rseq_offset == NULL || __rseq_size == 0) return cp_waits_mode;
  // This thread's pointer must be ours to use (nobody else's section), and
  // a sleep must clear it.
  _Atomic uint64_t *cs = rseq_cs_ptr();
  if (atomic_load(cs) != 0) return cp_waits_mode;
  atomic_store(cs, (uint64_t)(uintptr_t)&cp_rseq_desc);
  struct timespec ts = {0, 200000};
  nanosleep(&ts, NULL);
  int cleared = atomic_load(cs) == 0;
  atomic_store(cs, 0);
  if (cleared) cp_waits_mode = CP_WAITS_RSEQ;
  return cp_waits_mode;
}

// The thread's voluntary switches now (t: the mark's TSC).
static uint64_t thread_switches(uint64_t t) {
  if (cp_waits_mode == CP_WAITS_RSEQ) {
    _Atomic uint64_t *cs = rseq_cs_ptr();
    if (tl_valid && atomic_load_explicit(cs, memory_order_relaxed) == (uint64_t)(uintptr_t)&cp_rseq_desc)
      return tl_switches;
    atomic_store_explicit(cs, (uint64_t)(uintptr_t)&cp_rseq_desc, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);  // armed before the count is read
  } else if (tl_valid && t - tl_last < cp_wait_min) {
    tl_last = t;
    return tl_switches;
  }
  tl_switches = read_switches();
  tl_last = t;
  tl_valid = 1;
  return tl_switches;
}

uint64_t cp_mark_tsc(struct cp_mark *m, int32_t role, uint64_t t) {
  uint64_t sw = thread_switches(t);
  uintptr_t me = cp_thread_pointer();
  int same = atomic_load_explicit(&m->thread, memory_order_relaxed) == me;
  uint64_t was = atomic_load_explicit(&m->switches, memory_order_relaxed);
  int waited = !same || was != sw;
  uint64_t last = atomic_load_explicit(&m->last, memory_order_relaxed);
  uint64_t gcs = atomic_load_explicit(&cp_gc_count, memory_order_acquire);
  uint64_t gcc = atomic_load_explicit(&cp_gc_cycles, memory_order_relaxed);
  if (waited && same && sw - was <= gcs - atomic_load_explicit(&m->gcs, memory_order_relaxed) && t > last &&
      t - last <= 2 * (gcc - atomic_load_explicit(&m->gc_cycles, memory_order_relaxed)) + cp_gc_slack)
    waited = 0;  // stopped by the JVM's collections, not waiting
  atomic_store_explicit(&m->gcs, gcs, memory_order_relaxed);
  atomic_store_explicit(&m->gc_cycles, gcc, memory_order_relaxed);
  atomic_store_explicit(&m->switches, sw, memory_order_relaxed);
  atomic_store_explicit(&m->thread, me, memory_order_relaxed);
  // What it did since its previous mark, as the cost model counts it: its
  // own work (to an out) whatever happened in it; a send or a take only
  // when its thread never gave the CPU up (else it waited for room or for
  // input). No take where another instance marked on this thread since
  // this one's previous mark: operators chained in one thread (Flink's
  // chaining), whose gap before an in is their upstream's work on the
  // next tuple, then a call (critpath's Visit.workedFrom: the tuple's
  // hand-off, the upstream's departure, comes after the chained in). A
  // send keeps what it called (the chained operators' work is what its
  // collect cost it). One thread marks an instance (its task's, its executor's):
  // plain loads and stores, no atomic add on every mark. A Storm bolt that
  // emits from a thread of its own marks outs there too (MarkingHook): a
  // mark on another thread than the previous one adds nothing (same is
  // false), and two that overlap may lose one gap of busy, in the live
  // figures only (the records are the channel's, whole).
  int chained = role == CP_MARK_IN && tl_mark > last;
  tl_mark = t;
  if (same && t > last && (role == CP_MARK_OUT || !waited) && !chained)
    atomic_store_explicit(&m->busy, atomic_load_explicit(&m->busy, memory_order_relaxed) + (t - last), memory_order_relaxed);
  if (role == CP_MARK_IN)
    atomic_store_explicit(&m->visits, atomic_load_explicit(&m->visits, memory_order_relaxed) + 1, memory_order_relaxed);
  atomic_store_explicit(&m->last, t, memory_order_relaxed);
  // The record's note says the gap before it was not this instance's work:
  // its thread gave the CPU up, or (an in) another instance marked on it.
  // The reader needs the second where no record says when the tuple was
  // handed to this instance (the Flink agent's marks carry no id from one
  // operator to the next): a chained operator's gap is its upstream's work.
  return waited || chained ? t | CP_WAITED_BIT : t;
}
