// fastpath.c — LogTS and everything it touches. Nothing here calls into Go:
// one cgo crossing (~55 ns) would cost five times the whole record (FACTS.md).
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include "engine.h"
#include "_cgo_export.h"

cp_slot_t cp_slots[CP_MAX_CHANNELS];
int cp_block_ready_fd = -1;

static inline uint64_t rdtscp_raw(void) {
  uint32_t lo, hi, aux;
  __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
  return ((uint64_t)hi << 32) | lo;
}

static uint64_t cp_fake_apply_cold(uint64_t raw);

// CP_FAKE_TSC (engine.h): off unless the environment asked for it.
int cp_fake_on;
uint64_t cp_fake_q32, cp_fake_off;

void cp_set_fake(uint64_t q32, int64_t off) {
  cp_fake_q32 = q32;
  cp_fake_off = (uint64_t)off;
  cp_fake_on = 1;
}

uint64_t cp_fake_apply(uint64_t raw) {
  return (uint64_t)(((unsigned __int128)raw * cp_fake_q32) >> 32) + cp_fake_off;
}

// Every TSC read of the library: the hardware counter, or under CP_FAKE_TSC
// the fake one. The fast paths pay one load of a global that never changes
// and a branch that always goes the same way; the mapping itself is out of
// line (cold), so that it takes no registers from the paths that do not use
// it (LogTS keeps needing no stack frame).
//
// LogTS reads rdtscp, not rdtsc: rdtsc is not ordered with the instructions
// before it and may read the counter while the work an event follows is
// still in flight, microseconds early when that work ends in cache misses
// (tests/c/tscorder.c measures it; docs/performance.md). rdtscp waits until
// every older instruction has executed; it costs ~9 ns more (FACTS.md).
static inline __attribute__((always_inline)) uint64_t rdtscp_inline(void) {
  uint64_t t = rdtscp_raw();
  if (__builtin_expect(cp_fake_on, 0)) t = cp_fake_apply_cold(t);
  return t;
}

uint64_t cp_tsc_now(void) { return rdtscp_inline(); }

__attribute__((noinline, cold)) static uint64_t cp_fake_apply_cold(uint64_t raw) { return cp_fake_apply(raw); }

static inline uint64_t mono_raw_inline(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// A sync point: CLOCK_MONOTONIC_RAW and CLOCK_REALTIME bracketed by two TSC
// reads; the narrowest of a few tries wins.
void cp_read_sync(cp_sync_t *out) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 8; i++) {
    struct timespec m, r;
    uint64_t t0 = rdtscp_inline();
    clock_gettime(CLOCK_MONOTONIC_RAW, &m);
    clock_gettime(CLOCK_REALTIME, &r);
    uint64_t t1 = rdtscp_inline();
    if (t1 - t0 < best) {
      best = t1 - t0;
      out->tsc = t0 + (t1 - t0) / 2;
      out->tsc_width = t1 - t0;
      out->mono_raw_ns = (int64_t)m.tv_sec * 1000000000 + m.tv_nsec;
      out->realtime_ns = (int64_t)r.tv_sec * 1000000000 + r.tv_nsec;
    }
  }
}

int cp_kind_class(int32_t kind) {
  switch (kind) {
  case CP_BUFFER_IDENTITY: case CP_BUFFER_IDENTITY_COMP: case CP_MEDIAN:
  case CP_DOWNSAMPLE: case CP_XOY: case CP_FOX_START: case CP_FOX_END: case CP_LINEAGE:
    return CP_CLASS_RING;
  case CP_PERIODICCOUNTER: case CP_FASTPERIODICCOUNTER: case CP_KIND_NC_COUNTER: case CP_SERVICERATE:
    return CP_CLASS_COUNTER;
  case CP_FIRSTLAST:
    return CP_CLASS_FIRSTLAST;
  case CP_IDENTITY:
    return CP_CLASS_IDENTITY;
  }
  return CP_CLASS_NONE;
}

int32_t cp_word_error(uint64_t w, uint64_t gen) {
  if ((w >> CP_GEN_SHIFT) == gen && (w & CP_CLOSED_BIT)) return CP_ERR_CLOSED;
  return CP_ERR_BAD_HANDLE;
}

static void lock_slot(cp_slot_t *s) {
  for (int i = 0;; i++) {
    if (!atomic_exchange_explicit(&s->lock, 1, memory_order_acquire)) return;
    if (i < 100) __builtin_ia32_pause(); else sched_yield();
  }
}
static void unlock_slot(cp_slot_t *s) { atomic_store_explicit(&s->lock, 0, memory_order_release); }

// The ring slot for block b is still being drained: wait, sleeping, for the
// drainer (or return if the channel gave up). Only logging threads wait here.
static int32_t wait_for_block(cp_slot_t *s, _Atomic uint64_t *seq, uint64_t b) {
  long ns = 2000;
  for (int i = 0;; i++) {
    if (atomic_load_explicit(seq, memory_order_acquire) == b) return 0;
    if (atomic_load_explicit(&s->abandoned, memory_order_relaxed)) return CP_ERR_IO;
    if (i < 50) { __builtin_ia32_pause(); continue; }
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 1000000) ns *= 2;
  }
}

// A logging thread entered block b. The drainers poll (they sleep between
// looks) and write in the gaps between bursts, so normally nothing is said;
// only when the ring is full but for the block just entered
// (s->wake_blocks waiting to be written) is the drain woken at once. A burst
// that fits the ring thus never has the drain running beside it (on a 2-vCPU
// machine that work slows the logging thread: docs/performance.md); a
// longer one has it from its last free block on. A wake-up from here costs
// a syscall and tends to pull the woken thread onto this thread's CPU, so
// it is paid only for a drainer that sleeps: the drainer sets drain_parked
// before it sleeps, and the thread that takes the flag back writes the
// eventfd; while the drainer works, nothing is written. No wake-up is lost:
// the drainer looks for wake_blocks waiting after setting the flag
// (drain.go), and the fence orders this thread's records (the word) before
// its look at the flag, so either the drainer sees this block or this
// thread sees the flag.
__attribute__((noinline, cold)) static int32_t entered_block(cp_slot_t *s, uint64_t b) {
  uint64_t drained = atomic_load_explicit(&s->written_pos, memory_order_relaxed) >> s->block_shift;
  if (b - drained < s->wake_blocks) return 0;
  atomic_thread_fence(memory_order_seq_cst);
  if (!atomic_load_explicit(&s->drain_parked, memory_order_relaxed)) return 0;
  if (!atomic_exchange_explicit(&s->drain_parked, 0, memory_order_seq_cst)) return 0;  // another thread took it
  atomic_fetch_add_explicit(&s->drain_wakes, 1, memory_order_relaxed);
  uint64_t one = 1;
  ssize_t r = write(cp_block_ready_fd, &one, sizeof one);
  (void)r;  // EAGAIN means the counter is saturated: the dispatcher is awake anyway
  return 0;
}

// Reserves a position for a channel that drops rather than waits: only if
// its block is free, so the reservation itself never waits. Returns the
// position, or a negative code (in which case the event is not kept).
__attribute__((noinline, cold)) static int64_t reserve_or_drop(cp_slot_t *s, uint64_t gen) {
  for (;;) {
    uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    if ((w >> 47) != (gen << 1)) return cp_word_error(w, gen);
    uint64_t b = (w & CP_COUNT_MASK) >> s->block_shift;
    if (atomic_load_explicit(&s->ring_seq[b & (s->ring_blocks - 1)], memory_order_acquire) != b) {
      atomic_fetch_add_explicit(&s->dropped, 1, memory_order_relaxed);
      return CP_ERR_DROPPED;
    }
    if (atomic_compare_exchange_weak_explicit(&s->word, &w, w + 1, memory_order_acq_rel, memory_order_relaxed))
      return (int64_t)(w & CP_COUNT_MASK);
  }
}

// Stores one record at a ring position reserved from the word. tsc is never
// 0 in a record: 0 marks a slot reserved but not (yet) written. Kept small
// and call-free on the common path; everything rare is out of line.
static inline __attribute__((always_inline)) int32_t put_ring(cp_slot_t *s, uint64_t gen, int64_t id,
                                                              uint64_t t, uint64_t m) {
  if (__builtin_expect(atomic_load_explicit(&s->failed, memory_order_relaxed), 0)) return CP_ERR_IO;
  uint64_t p;
  if (__builtin_expect(atomic_load_explicit(&s->drop_when_full, memory_order_relaxed), 0)) {
    int64_t r = reserve_or_drop(s, gen);
    if (r < 0) return (int32_t)r;
    p = (uint64_t)r;
  } else {
    uint64_t old = atomic_fetch_add_explicit(&s->word, 1, memory_order_acq_rel);
    if (__builtin_expect((old >> 47) != (gen << 1), 0)) return cp_word_error(old, gen);
    p = old & CP_COUNT_MASK;
  }
  uint64_t b = p >> s->block_shift;
  _Atomic uint64_t *seq = &s->ring_seq[b & (s->ring_blocks - 1)];
  if (__builtin_expect(atomic_load_explicit(seq, memory_order_acquire) != b, 0)) {
    int32_t rc = wait_for_block(s, seq, b);
    if (rc) return rc;
  }
  uint64_t *rec = (uint64_t *)(s->ring + (p & s->ring_posmask) * s->rec_size);
  rec[0] = (uint64_t)id;
  if (m) rec[2] = m;  // 24-byte records only: m is 0 for _TSC formats
  atomic_store_explicit((_Atomic uint64_t *)&rec[1], t ? t : 1, memory_order_release);
  uint64_t block_mask = (1ull << s->block_shift) - 1;
  if (__builtin_expect((p & block_mask) == 0, 0)) entered_block(s, b);
  return 0;
}

// Floored id mod y without a division (Lemire's fastmod), with the
// multipliers cp_set_xoy computed once.
static inline uint64_t floor_mod(int64_t id, const struct cp_xoy *p) {
  uint64_t y = p->y;
  if ((y & (y - 1)) == 0) return (uint64_t)id & (y - 1);
  uint64_t a = id >= 0 ? (uint64_t)id : (uint64_t)(-(id + 1));
  uint64_t r;
  if (p->m64 == 0) {
    r = a % y;  // y >= 2^32
  } else if (a <= 0xFFFFFFFFull) {
    r = (uint64_t)(((__uint128_t)(p->m64 * a) * y) >> 64);
  } else {
    __uint128_t M = ((__uint128_t)p->m_hi << 64) | p->m_lo;
    __uint128_t low = M * a;
    uint64_t lo = (uint64_t)low, hi = (uint64_t)(low >> 64);
    r = (uint64_t)(((__uint128_t)hi * y + (((__uint128_t)lo * y) >> 64)) >> 64);
  }
  return id >= 0 ? r : y - 1 - r;
}

// Publishes a new parameter set; returns it (Go keeps it: see struct cp_xoy).
struct cp_xoy *cp_set_xoy(cp_slot_t *s, int64_t x, int64_t y) {
  struct cp_xoy *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->x = (uint64_t)x;
  p->y = (uint64_t)y;
  if ((uint64_t)y <= 0xFFFFFFFFull && (y & (y - 1)) != 0) {
    __uint128_t M = ((__uint128_t)-1) / (uint64_t)y + 1;
    p->m_lo = (uint64_t)M;
    p->m_hi = (uint64_t)(M >> 64);
    p->m64 = UINT64_MAX / (uint64_t)y + 1;
  }
  atomic_store_explicit(&s->xoy, p, memory_order_release);
  return p;
}

static int32_t log_median(cp_slot_t *s, uint64_t gen, int64_t id, uint64_t t);
static int32_t log_fox_end(cp_slot_t *s, uint64_t gen, int64_t id);
static int32_t log_identity(cp_slot_t *s, uint64_t gen, int64_t id, uint64_t t);
static int32_t log_firstlast(cp_slot_t *s, uint64_t gen, int64_t id, uint64_t t);

__attribute__((noinline)) static int32_t log_ring_mono(cp_slot_t *s, uint64_t gen, int64_t id, uint64_t t) {
  return put_ring(s, gen, id, t, mono_raw_inline());
}

static inline __attribute__((always_inline)) int32_t log_ring(cp_slot_t *s, uint64_t gen, int64_t id) {
  uint64_t t = rdtscp_inline();
  // A marked channel off its fast path (drop mode, 24-byte records, a
  // failing disk) still notes its thread's waits.
  if (s->mark) t = cp_mark_tsc(s->mark, s->mark_role, t);
  if (s->with_mono) return log_ring_mono(s, gen, id, t);
  return put_ring(s, gen, id, t, 0);
}

// The handlers that are not on the fastest path.
__attribute__((noinline)) static int32_t log_other(cp_slot_t *s, uint64_t gen, int64_t id, int32_t kind) {
  switch (kind) {
  case CP_NULLH:
    return 0;
  case CP_FASTPERIODICCOUNTER:
  case CP_SERVICERATE:
    atomic_store_explicit(&s->fpc_count, atomic_load_explicit(&s->fpc_count, memory_order_relaxed) + 1, memory_order_relaxed);
    return 0;
  case CP_BUFFER_IDENTITY:
  case CP_BUFFER_IDENTITY_COMP:
  case CP_FOX_START:
    return log_ring(s, gen, id);
  case CP_FOX_END:
    return log_fox_end(s, gen, id);
  case CP_KIND_NC_COUNTER:
    atomic_fetch_add_explicit(&s->nc_count, 1, memory_order_relaxed);
    return 0;
  case CP_PERIODICCOUNTER: {
    uint64_t old = atomic_fetch_add_explicit(&s->word, 1, memory_order_relaxed);
    if (__builtin_expect((old >> 47) != (gen << 1), 0)) {
      if ((old >> CP_GEN_SHIFT) != gen) atomic_fetch_sub_explicit(&s->word, 1, memory_order_relaxed);
      return cp_word_error(old, gen);
    }
    return 0;
  }
  case CP_DOWNSAMPLE:
    atomic_store_explicit(&s->aux, (uint64_t)atomic_load_explicit(&s->arg0, memory_order_relaxed) - 1,
                          memory_order_relaxed);
    return log_ring(s, gen, id);
  case CP_XOY:
    return log_ring(s, gen, id);
  case CP_MEDIAN:
    return log_median(s, gen, id, rdtscp_inline());
  case CP_FIRSTLAST:
    return log_firstlast(s, gen, id, rdtscp_inline());
  case CP_IDENTITY:
    return log_identity(s, gen, id, rdtscp_inline());
  case CP_LINEAGE:  // CP_LogLineage only
    return CP_ERR_BAD_HANDLER;
  }
  return CP_ERR_INTERNAL;
}

// The owner's commit, with busy set: the record, then the word, then busy.
static inline __attribute__((always_inline)) int32_t owner_commit(cp_slot_t *s, uint64_t w, int64_t id, uint64_t t) {
  uint64_t *rec = (uint64_t *)(s->ring + (((w & CP_COUNT_MASK) & s->ring_posmask) << 4));
  rec[0] = (uint64_t)id;
  atomic_store_explicit((_Atomic uint64_t *)&rec[1], t ? t : 1, memory_order_release);
  atomic_store_explicit(&s->word, w + 1, memory_order_release);
  atomic_store_explicit(&s->busy, 0, memory_order_release);
  return 0;
}

// Registers for expedited private membarrier; owned (biased) channels are
// used only if this works.
int cp_membarrier_init(void) {
  return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
}

// Moves an owned channel to SHARED: after the membarrier every thread has
// passed a full barrier, so the owner either saw REVOKING before writing or
// has busy set where we can see it; we wait (sleeping) for it to finish.
void cp_revoke_owner(cp_slot_t *s) {
  int32_t expect = CP_FAST_OWNED;
  if (atomic_compare_exchange_strong(&s->fast, &expect, CP_FAST_REVOKING)) {
    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    while (atomic_load(&s->busy)) {
      struct timespec ts = {0, 10000};
      nanosleep(&ts, NULL);
    }
    atomic_store(&s->fast, CP_FAST_SHARED);
    return;
  }
  while (atomic_load(&s->fast) == CP_FAST_REVOKING) {
    struct timespec ts = {0, 10000};
    nanosleep(&ts, NULL);
  }
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The SIGTERM flusher's close (sigflush.c), used only when the process is
// about to die of the signal: after it, every LogTS and LogTSMany on the
// channel is refused (CP_ERR_CLOSED), so nothing is accepted that the flush
// will not see. An owned channel is revoked first, as cp_revoke_owner does
// (the owner writes the word with plain stores, which would wipe the closed
// bit), except that the wait for a busy owner ends at deadline_ns
// (CLOCK_MONOTONIC), and is skipped when the owner is the thread running
// the handler: the signal interrupted its commit, whose record or run was
// never accepted (its LogTS or LogTSMany has not returned, and never will).
// Returns the word before the OR (its count ends what was accepted), or 0
// when the channel could not be closed: an owner on another thread still
// busy at the deadline. The channel then stays REVOKING, so every other
// writer waits (accepting nothing) until the process dies. Async-signal-safe:
// atomics and syscalls only.
uint64_t cp_signal_close(cp_slot_t *s, int64_t deadline_ns) {
  int32_t f = atomic_load(&s->fast);
  while (f == CP_FAST_OWNED) {
    if (atomic_compare_exchange_strong(&s->fast, &f, CP_FAST_REVOKING)) f = CP_FAST_REVOKING;
  }
  if (f == CP_FAST_REVOKING) {
    // Ours or a revocation under way (perhaps interrupted by this very
    // signal before its membarrier): the membarrier is done again here.
    syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    if (atomic_load(&s->owner) != cp_thread_pointer()) {
      while (atomic_load(&s->busy)) {
        if (mono_ns() >= deadline_ns) return 0;
        struct timespec ts = {0, 10000};
        nanosleep(&ts, NULL);
      }
    }
    atomic_store(&s->fast, CP_FAST_SHARED);
  }
  return atomic_fetch_or(&s->word, CP_CLOSED_BIT);
}

// The owner waits for block b without having reserved a position in it
// (and without busy set): meanwhile another thread may revoke the bias and,
// through the shared path, fill block b and more, so the block may go by
// while the owner sleeps. Returns as soon as the block is free or the bias
// is gone (the caller looks again), never waiting for a block that passed.
static int32_t wait_owned_block(cp_slot_t *s, _Atomic uint64_t *seq, uint64_t b) {
  long ns = 2000;
  for (int i = 0;; i++) {
    if (atomic_load_explicit(seq, memory_order_acquire) == b) return 0;
    if (atomic_load_explicit(&s->fast, memory_order_acquire) != CP_FAST_OWNED) return 0;
    if (atomic_load_explicit(&s->abandoned, memory_order_relaxed)) return CP_ERR_IO;
    if (i < 50) { __builtin_ia32_pause(); continue; }
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 1000000) ns *= 2;
  }
}

// Owned channel, but not the owner's fast case: claim an unowned channel,
// wait for ring space (as the owner), or revoke (another thread).
__attribute__((noinline)) static int32_t log_owned_slow(cp_slot_t *s, uint64_t gen, int64_t id, uint64_t t) {
  uintptr_t me = cp_thread_pointer();
  for (;;) {
    int32_t fast = atomic_load(&s->fast);
    if (fast != CP_FAST_OWNED && fast != CP_FAST_REVOKING) return put_ring(s, gen, id, t, 0);
    if (fast == CP_FAST_REVOKING) { cp_revoke_owner(s); continue; }
    uintptr_t owner = atomic_load(&s->owner);
    if (owner == 0) {
      atomic_compare_exchange_strong(&s->owner, &owner, me);
      continue;
    }
    if (owner != me) { cp_revoke_owner(s); continue; }
    // The owner at the end of its block, or with a revocation racing: wait
    // for the next block if need be, then write with busy held only around
    // the commit.
    uint64_t w = atomic_load(&s->word);
    if ((w >> 47) != (gen << 1)) return cp_word_error(w, gen);
    uint64_t p = w & CP_COUNT_MASK;
    uint64_t b = p >> s->block_shift;
    if (p >= s->owner_limit) {
      _Atomic uint64_t *seq = &s->ring_seq[b & (s->ring_blocks - 1)];
      if (atomic_load_explicit(seq, memory_order_acquire) != b) {
        int32_t rc = wait_owned_block(s, seq, b);
        if (rc) return rc;
        continue;
      }
      s->owner_limit = (b + 1) << s->block_shift;
      entered_block(s, b);
    }
    atomic_store(&s->busy, 1);
    if (atomic_load(&s->fast) != CP_FAST_OWNED) { atomic_store(&s->busy, 0); continue; }
    return owner_commit(s, w, id, t);
  }
}

// The owner's path (LogTS's fastest): w is the word LogTS read at entry.
static inline __attribute__((always_inline)) int32_t log_owned(cp_slot_t *s, uint64_t gen, uint64_t w,
                                                               int64_t tuple_id, uint64_t t) {
  if (atomic_load_explicit(&s->owner, memory_order_relaxed) == cp_thread_pointer()) {
    // busy tells a revoking thread (after its membarrier) that this
    // record is still being written.
    atomic_store_explicit(&s->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (__builtin_expect(atomic_load_explicit(&s->fast, memory_order_relaxed) == CP_FAST_OWNED, 1)) {
      // Only the owner changes the word while owned (close revokes first),
      // so w, read at entry, is current; owner_limit says the block is ours.
      uint64_t p = w & CP_COUNT_MASK;
      if (__builtin_expect(p < s->owner_limit, 1)) {
        return owner_commit(s, w, tuple_id, t);
      }
    }
    atomic_store_explicit(&s->busy, 0, memory_order_release);
  }
  return log_owned_slow(s, gen, tuple_id, t);
}

__attribute__((noinline)) static int32_t log_owned_fake(cp_slot_t *s, uint64_t gen, uint64_t w, int64_t tuple_id) {
  return log_owned(s, gen, w, tuple_id, rdtscp_inline());
}

// Every path but the owned one: a tail call from LogTS, so that LogTS
// itself needs no stack frame.
__attribute__((noinline)) static int32_t log_by_kind(cp_slot_t *s, uint64_t gen, int64_t tuple_id, int32_t fast) {
  if (fast == CP_FAST_SHARED) return put_ring(s, gen, tuple_id, rdtscp_inline(), 0);
  if (fast == CP_FAST_MARK) return put_ring(s, gen, tuple_id, cp_mark_tsc(s->mark, s->mark_role, rdtscp_inline()), 0);
  if (fast == CP_FAST_REVOKING) return log_owned_slow(s, gen, tuple_id, rdtscp_inline());
  int32_t kind = s->kind;  // may differ from what LogTS saw: a NET_CONF switch
  if (kind == CP_XOY) {
    const struct cp_xoy *p = atomic_load_explicit(&s->xoy, memory_order_acquire);
    if (floor_mod(tuple_id, p) >= p->x) return 0;
  } else if (kind == CP_DOWNSAMPLE) {
    uint64_t c = atomic_load_explicit(&s->aux, memory_order_relaxed);
    if (c != 0) {
      atomic_store_explicit(&s->aux, c - 1, memory_order_relaxed);
      return 0;
    }
  }
  return log_other(s, gen, tuple_id, kind);
}

// The slot handle ch names, and its generation in *gen; NULL when ch cannot
// be a handle at all (index or generation out of range). The caller checks
// the generation against the slot's word.
static inline __attribute__((always_inline)) cp_slot_t *handle_slot(int64_t ch, uint64_t *gen) {
  uint64_t h = (uint64_t)ch;
  uint64_t idx = (h & ((1ull << CP_IDX_BITS) - 1)) - 1;
  *gen = h >> CP_IDX_BITS;
  if (__builtin_expect(idx >= CP_MAX_CHANNELS || *gen - 1 >= CP_MAX_GEN, 0)) return NULL;
  return &cp_slots[idx];
}

// LogTS is laid out so that its common paths need no stack frame: anything
// that calls out is a tail call or out of line.
__attribute__((aligned(64))) int32_t LogTS(int64_t ch, int64_t tuple_id) {
  uint64_t gen;
  cp_slot_t *s = handle_slot(ch, &gen);
  if (__builtin_expect(s == NULL, 0)) return CP_ERR_BAD_HANDLE;
  uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
  if (__builtin_expect((w >> 47) != (gen << 1), 0)) return cp_word_error(w, gen);
  int32_t fast = atomic_load_explicit(&s->fast, memory_order_relaxed);
  if (fast == CP_FAST_OWNED) {
    // BUFFER_IDENTITY, _TSC format, one writer thread: plain stores only.
    // Under CP_FAKE_TSC the same path, with the fake counter, out of line:
    // a tail call, so the branch costs this path no register.
    if (__builtin_expect(cp_fake_on, 0)) return log_owned_fake(s, gen, w, tuple_id);
    return log_owned(s, gen, w, tuple_id, rdtscp_raw());
  }
  // The two cheapest handlers stay here, without a call, decided by the
  // selector on the line already read (the handler's kind is on the next).
  if (fast == CP_FAST_NULL) return 0;
  if (fast == CP_FAST_COUNT) {
    uint64_t c = atomic_load_explicit(&s->fpc_count, memory_order_relaxed);
    atomic_store_explicit(&s->fpc_count, c + 1, memory_order_relaxed);
    return 0;
  }
  return log_by_kind(s, gen, tuple_id, fast);
}

// The JNI glue (jni.c) calls LogTS and LogTSMany through these hidden
// aliases: a direct call inside the library, not through the PLT.
extern __typeof__(LogTS) cp_logts __attribute__((visibility("hidden"), alias("LogTS")));

// ---- LogTSMany: n events in one call (the batch path of bindings whose
// calls cost far more than a record, such as Python's ctypes at ~520 ns).

static inline uint64_t rdtsc_raw(void) {
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
  return ((uint64_t)hi << 32) | lo;
}

// The longest run the owner writes with busy held (and commits with one
// store of the word): a revoking thread waits at most this many records.
#define CP_MANY_RUN 4096

// One run of the owner's batch: the positions left in its current block
// (at most CP_MANY_RUN), each record with its own rdtsc, then one store of
// the word. Returns the records written, 0 when this is not the owner's
// fast case (the caller then logs one event through the slow path).
static inline __attribute__((always_inline)) int64_t many_owned_run(cp_slot_t *s, uint64_t gen, const int64_t *ids,
                                                                    int64_t n, int fake) {
  if (atomic_load_explicit(&s->owner, memory_order_relaxed) != cp_thread_pointer()) return 0;
  atomic_store_explicit(&s->busy, 1, memory_order_relaxed);
  atomic_signal_fence(memory_order_seq_cst);  // as in log_owned: the revoker's membarrier orders it
  if (atomic_load_explicit(&s->fast, memory_order_relaxed) != CP_FAST_OWNED) goto none;
  uint64_t w = atomic_load_explicit(&s->word, memory_order_relaxed);  // only the owner changes it while owned
  if ((w >> 47) != (gen << 1)) goto none;
  uint64_t p = w & CP_COUNT_MASK;
  if (p >= s->owner_limit) goto none;
  uint64_t k = s->owner_limit - p;
  if (k > (uint64_t)n) k = (uint64_t)n;
  if (k > CP_MANY_RUN) k = CP_MANY_RUN;
  // The run stays inside one block, so it is contiguous in the ring.
  uint64_t *rec = (uint64_t *)(s->ring + ((p & s->ring_posmask) << 4));
  for (uint64_t i = 0; i < k; i++) {
    uint64_t t = rdtsc_raw();
    if (fake) t = cp_fake_apply_cold(t);
    rec[2 * i] = (uint64_t)ids[i];
    atomic_store_explicit((_Atomic uint64_t *)&rec[2 * i + 1], t ? t : 1, memory_order_release);
  }
  atomic_store_explicit(&s->word, w + k, memory_order_release);
  atomic_store_explicit(&s->busy, 0, memory_order_release);
  return (int64_t)k;
none:
  atomic_store_explicit(&s->busy, 0, memory_order_release);
  return 0;
}

__attribute__((noinline)) static int64_t many_owned(cp_slot_t *s, uint64_t gen, const int64_t *ids, int64_t n) {
  if (__builtin_expect(cp_fake_on, 0)) return many_owned_run(s, gen, ids, n, 1);
  return many_owned_run(s, gen, ids, n, 0);
}

// The shared path's run: up to CP_MANY_SHARED_RUN positions reserved with
// one atomic add (contiguous, so a batch's records stay together), written
// block by block with rdtsc per record. Returns the records written; on a
// refusal stores its code in *rc (positions reserved and not written, only
// if the channel gave up on its drain, are holes).
#define CP_MANY_SHARED_RUN 512
static inline __attribute__((always_inline)) int64_t many_shared_run(cp_slot_t *s, uint64_t gen, const int64_t *ids,
                                                                     int64_t n, int32_t *rc, int fake) {
  if (__builtin_expect(atomic_load_explicit(&s->failed, memory_order_relaxed), 0)) { *rc = CP_ERR_IO; return 0; }
  uint64_t k = n < CP_MANY_SHARED_RUN ? (uint64_t)n : CP_MANY_SHARED_RUN;
  uint64_t old = atomic_fetch_add_explicit(&s->word, k, memory_order_acq_rel);
  if (__builtin_expect((old >> 47) != (gen << 1), 0)) { *rc = cp_word_error(old, gen); return 0; }
  uint64_t p0 = old & CP_COUNT_MASK;
  for (uint64_t i = 0; i < k;) {
    uint64_t p = p0 + i, b = p >> s->block_shift;
    _Atomic uint64_t *seq = &s->ring_seq[b & (s->ring_blocks - 1)];
    if (__builtin_expect(atomic_load_explicit(seq, memory_order_acquire) != b, 0)) {
      int32_t r = wait_for_block(s, seq, b);
      if (r) { *rc = r; return (int64_t)i; }
    }
    uint64_t end = i + (((b + 1) << s->block_shift) - p);  // the block's end
    if (end > k) end = k;
    uint64_t *rec = (uint64_t *)(s->ring + ((p & s->ring_posmask) << 4));
    const int64_t *src = ids + i;
    for (uint64_t j = 0; j < end - i; j++) {
      uint64_t t = rdtsc_raw();
      if (fake) t = cp_fake_apply_cold(t);
      rec[2 * j] = (uint64_t)src[j];
      atomic_store_explicit((_Atomic uint64_t *)&rec[2 * j + 1], t ? t : 1, memory_order_release);
    }
    if ((p & ((1ull << s->block_shift) - 1)) == 0) entered_block(s, b);
    i = end;
  }
  return (int64_t)k;
}

__attribute__((noinline)) static int64_t many_shared(cp_slot_t *s, uint64_t gen, const int64_t *ids, int64_t n,
                                                     int32_t *rc) {
  if (__builtin_expect(cp_fake_on, 0)) return many_shared_run(s, gen, ids, n, rc, 1);
  return many_shared_run(s, gen, ids, n, rc, 0);
}

int64_t LogTSMany(int64_t ch, const int64_t *ids, int64_t n, int32_t *err) {
  int64_t done = 0, dropped = 0;
  int32_t rc = 0;
  if (n <= 0) goto out;
  uint64_t gen;
  cp_slot_t *s = handle_slot(ch, &gen);
  if (s == NULL) { rc = CP_ERR_BAD_HANDLE; goto out; }
  if (ids == NULL) {
    uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    rc = (w >> 47) != (gen << 1) ? cp_word_error(w, gen) : CP_ERR_BAD_ARG_VALUE;
    goto out;
  }
  // The records' stamps are read with rdtsc (9 ns less than rdtscp, per
  // record), after one lfence: lfence waits until every instruction before
  // it has executed, so no stamp of the batch is read before the caller's
  // work has finished (rdtsc alone may run microseconds ahead of loads
  // still in flight: tests/c/tscorder.c, docs/performance.md).
  __builtin_ia32_lfence();
  int64_t i = 0;
  while (i < n) {
    // Every round validates the handle again: a close racing with the batch
    // stops it at the next round (and each path below checks it too).
    uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    if ((w >> 47) != (gen << 1)) { rc = cp_word_error(w, gen); break; }
    int32_t fast = atomic_load_explicit(&s->fast, memory_order_relaxed);
    if (fast == CP_FAST_OWNED) {
      int64_t k = many_owned(s, gen, ids + i, n - i);
      if (k > 0) { i += k; done += k; continue; }
      // Not the owner's fast case (another thread, the block's end, a
      // revocation): one event the way LogTS does it, then look again.
    } else if (fast == CP_FAST_SHARED) {
      // One atomic add per run of positions; the next round looks at the
      // selector again (drop mode or a failing disk changes it).
      int64_t k = many_shared(s, gen, ids + i, n - i, &rc);
      i += k;
      done += k;
      if (rc) break;
      continue;
    } else if (fast == CP_FAST_NULL) {
      done += n - i;
      break;
    } else if (fast == CP_FAST_COUNT) {  // counters add the rest at once
      uint64_t c = atomic_load_explicit(&s->fpc_count, memory_order_relaxed);
      atomic_store_explicit(&s->fpc_count, c + (uint64_t)(n - i), memory_order_relaxed);
      done += n - i;
      break;
    } else if (fast == CP_FAST_NONE) {
      int32_t kind = s->kind;
      int64_t rest = n - i;
      if (kind == CP_NULLH) { done += rest; break; }  // a FIRSTLAST retired (cp_firstlast_retire)
      if (kind == CP_KIND_NC_COUNTER) {
        atomic_fetch_add_explicit(&s->nc_count, (uint64_t)rest, memory_order_relaxed);
        done += rest;
        break;
      }
      if (kind == CP_PERIODICCOUNTER) {
        uint64_t old = atomic_fetch_add_explicit(&s->word, (uint64_t)rest, memory_order_relaxed);
        if ((old >> 47) != (gen << 1)) {
          if ((old >> CP_GEN_SHIFT) != gen) atomic_fetch_sub_explicit(&s->word, (uint64_t)rest, memory_order_relaxed);
          rc = cp_word_error(old, gen);
          break;
        }
        done += rest;
        break;
      }
    }
    // Every other handler (sampling, MEDIAN, FIRSTLAST, IDENTITY, FOX_END,
    // a revocation under way): per id, exactly as LogTS.
    int32_t r = LogTS(ch, ids[i]);
    i++;
    if (r == 0) { done++; }
    else if (r == CP_ERR_DROPPED) { dropped++; }
    else { rc = r; break; }
  }
out:
  if (rc == 0 && dropped) rc = CP_ERR_DROPPED;
  if (err) *err = rc;
  return done;
}

// ---- SERVICERATE: the blocked marks, set by the operator's threads, taken
// by the sampler (sampler.go) once a period with cp_sr_sample.

// The marks share the cache line LogTS reads on this channel (kind,
// fpc_count): marking costs no other line.
_Static_assert(offsetof(cp_slot_t, sr_flags) / 64 == offsetof(cp_slot_t, fpc_count) / 64 &&
                   offsetof(cp_slot_t, kind) / 64 == offsetof(cp_slot_t, fpc_count) / 64,
               "sr_flags, kind and fpc_count on one cache line");

// Validates the handle as LogTS does; then a load, and an atomic OR only
// when a bit is not set yet (once a period at most, per bit).
// The open channel ch names if its handler is kind (its generation in *gen),
// else NULL and the code in *rc: BAD_HANDLE, CLOSED or BAD_HANDLER.
static inline __attribute__((always_inline)) cp_slot_t *slot_of_kind(int64_t ch, int32_t kind, uint64_t *gen,
                                                                     int32_t *rc) {
  cp_slot_t *s = handle_slot(ch, gen);
  if (__builtin_expect(s == NULL, 0)) { *rc = CP_ERR_BAD_HANDLE; return NULL; }
  uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
  if (__builtin_expect((w >> 47) != (*gen << 1), 0)) { *rc = cp_word_error(w, *gen); return NULL; }
  if (__builtin_expect(s->kind != kind, 0)) { *rc = CP_ERR_BAD_HANDLER; return NULL; }
  return s;
}

int32_t CP_MarkBlocked(int64_t ch, int32_t which) {
  uint64_t gen;
  int32_t rc;
  cp_slot_t *s = slot_of_kind(ch, CP_SERVICERATE, &gen, &rc);
  if (__builtin_expect(s == NULL, 0)) return rc;
  uint32_t bits = (uint32_t)which;
  if (__builtin_expect(bits - 1 >= (CP_BLOCKED_INPUT | CP_BLOCKED_OUTPUT), 0)) return CP_ERR_BAD_ARG_VALUE;
  if ((atomic_load_explicit(&s->sr_flags, memory_order_relaxed) & bits) != bits)
    atomic_fetch_or_explicit(&s->sr_flags, bits, memory_order_relaxed);
  return 0;
}

extern __typeof__(CP_MarkBlocked) cp_markblocked __attribute__((visibility("hidden"), alias("CP_MarkBlocked")));

void cp_sr_sample(cp_slot_t *s, uint64_t out[3]) {
  out[2] = rdtscp_inline();
  out[0] = atomic_load_explicit(&s->fpc_count, memory_order_relaxed);
  uint32_t f = atomic_load_explicit(&s->sr_flags, memory_order_relaxed);
  if (f) f = atomic_exchange_explicit(&s->sr_flags, 0, memory_order_relaxed);
  out[1] = f;
}

// ---- LINEAGE: (out_id, in_id) pairs through the ring, as BUFFER_IDENTITY's
// shared path stores a record (its selector stays CP_FAST_NONE: LogTS and
// LogTSMany reach log_other, which refuses them). The TSC column carries
// in_id; 0 there means "never written", so in_id 0 is stored as 2^63 and
// INT64_MIN, which would then be ambiguous, is refused.
int32_t CP_LogLineage(int64_t ch, int64_t out_id, int64_t in_id) {
  uint64_t gen;
  int32_t rc;
  cp_slot_t *s = slot_of_kind(ch, CP_LINEAGE, &gen, &rc);
  if (__builtin_expect(s == NULL, 0)) return rc;
  if (__builtin_expect(in_id == INT64_MIN, 0)) return CP_ERR_BAD_ARG_VALUE;
  uint64_t t = in_id == 0 ? 1ull << 63 : (uint64_t)in_id;
  return put_ring(s, gen, out_id, t, s->with_mono ? mono_raw_inline() : 0);
}

extern __typeof__(CP_LogLineage) cp_loglineage __attribute__((visibility("hidden"), alias("CP_LogLineage")));

// ---- MEDIAN: a window of events under a short lock; the median (by TSC) of
// each full window goes into the ring.
static void swap3(uint64_t *a, uint64_t *b) {
  uint64_t t0 = a[0], t1 = a[1], t2 = a[2];
  a[0] = b[0]; a[1] = b[1]; a[2] = b[2];
  b[0] = t0; b[1] = t1; b[2] = t2;
}

static uint64_t *select_kth(uint64_t *v, uint32_t n, uint32_t k) {
  uint32_t lo = 0, hi = n - 1;
  while (lo < hi) {
    uint64_t pivot = v[3 * ((lo + hi) / 2) + 1];
    uint32_t i = lo, j = hi;
    while (i <= j) {
      while (v[3 * i + 1] < pivot) i++;
      while (v[3 * j + 1] > pivot) j--;
      if (i <= j) { swap3(&v[3 * i], &v[3 * j]); i++; if (j == 0) break; j--; }
    }
    if (k <= j) hi = j; else if (k >= i) lo = i; else break;
  }
  return &v[3 * k];
}

static int32_t log_median(cp_slot_t *s, uint64_t gen, int64_t id, uint64_t t) {
  uint64_t m = s->with_mono ? mono_raw_inline() : 0;
  lock_slot(s);
  if (s->kind != CP_MEDIAN) { unlock_slot(s); return 0; }  // a NET_CONF switch got here first
  uint32_t window = s->med_cap;  // set with the buffer, under this lock
  if (s->med_buf == NULL || window == 0) {
    unlock_slot(s);
    return CP_ERR_CLOSED;  // the window was torn down: this call raced CloseChannel
  }
  uint64_t *e = &s->med_buf[3 * s->med_n++];
  e[0] = (uint64_t)id; e[1] = t; e[2] = m;
  if (s->med_n < window) { unlock_slot(s); return 0; }
  uint64_t *med = select_kth(s->med_buf, s->med_n, s->med_n / 2);
  int64_t mid = (int64_t)med[0];
  uint64_t mt = med[1], mm = med[2];
  s->med_n = 0;
  unlock_slot(s);
  return put_ring(s, gen, mid, mt, mm);
}

// Swaps the window buffer and the window (arg0) together under the lock, so
// a racing LogTS sees one consistent pair.
int32_t cp_median_set_window(cp_slot_t *s, uint64_t *buf, uint32_t window) {
  lock_slot(s);
  s->med_buf = buf;
  s->med_cap = window;
  s->med_n = 0;
  atomic_store_explicit(&s->arg0, window, memory_order_relaxed);
  unlock_slot(s);
  return 0;
}

// ---- FIRSTLAST: two records kept in the slot, written at close.
static int32_t log_firstlast(cp_slot_t *s, uint64_t gen, int64_t id, uint64_t t) {
  uint64_t m = s->with_mono ? mono_raw_inline() : 0;
  lock_slot(s);
  if (s->kind != CP_FIRSTLAST) { unlock_slot(s); return 0; }  // a NET_CONF switch got here first
  // CloseChannel sets the closed bit, then takes the pair under this lock: a
  // call that finds the bit here comes after the snapshot (or races it) and
  // is refused, not answered 0 and counted nowhere.
  uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
  if ((w >> 47) != (gen << 1)) { unlock_slot(s); return cp_word_error(w, gen); }
  if (s->fl_n++ == 0) { s->fl_first_id = id; s->fl_first_tsc = t ? t : 1; s->fl_first_mono = m; }
  s->fl_last_id = id; s->fl_last_tsc = t ? t : 1; s->fl_last_mono = m;
  unlock_slot(s);
  return 0;
}

// Ends a NET_CONF channel's FIRSTLAST: under the lock, so no event lands
// after the snapshot, the kind becomes NULLH and the pair is handed out.
void cp_firstlast_retire(cp_slot_t *s, uint64_t out[7]) {
  lock_slot(s);
  atomic_store_explicit((_Atomic int32_t *)&s->kind, CP_NULLH, memory_order_release);
  out[0] = s->fl_n;
  out[1] = (uint64_t)s->fl_first_id; out[2] = s->fl_first_tsc; out[3] = s->fl_first_mono;
  out[4] = (uint64_t)s->fl_last_id; out[5] = s->fl_last_tsc; out[6] = s->fl_last_mono;
  s->fl_n = 0;
  unlock_slot(s);
}

// Puts one record into a NET_CONF channel's ring for the Go side (FIRSTLAST's
// pair when the channel switches away or closes): a position like any other,
// taken even after the closed bit (the close that set it is the caller).
int32_t cp_ring_put(cp_slot_t *s, int64_t id, uint64_t tsc, uint64_t mono) {
  uint64_t p = atomic_fetch_add_explicit(&s->word, 1, memory_order_acq_rel) & CP_COUNT_MASK;
  uint64_t b = p >> s->block_shift;
  _Atomic uint64_t *seq = &s->ring_seq[b & (s->ring_blocks - 1)];
  if (atomic_load_explicit(seq, memory_order_acquire) != b) {
    int32_t rc = wait_for_block(s, seq, b);
    if (rc) return rc;
  }
  uint64_t *rec = (uint64_t *)(s->ring + (p & s->ring_posmask) * s->rec_size);
  rec[0] = (uint64_t)id;
  if (s->with_mono) rec[2] = mono;
  atomic_store_explicit((_Atomic uint64_t *)&rec[1], tsc ? tsc : 1, memory_order_release);
  return 0;
}

void cp_firstlast_snapshot(cp_slot_t *s, uint64_t out[7]) {
  lock_slot(s);
  out[0] = s->fl_n;
  out[1] = (uint64_t)s->fl_first_id; out[2] = s->fl_first_tsc; out[3] = s->fl_first_mono;
  out[4] = (uint64_t)s->fl_last_id; out[5] = s->fl_last_tsc; out[6] = s->fl_last_mono;
  unlock_slot(s);
}

// ---- IDENTITY: the record goes to the kernel before LogTS returns.
static char *put_u64(char *p, uint64_t v) {
  char tmp[24];
  int n = 0;
  do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

char *cp_put_i64(char *p, int64_t v) {
  if (v < 0) { *p++ = '-'; return put_u64(p, (uint64_t)0 - (uint64_t)v); }
  return put_u64(p, (uint64_t)v);
}

char *cp_put_u64(char *p, uint64_t v) { return put_u64(p, v); }

// Each record is one write(2) under the file's write lock (so a write that
// fails part way can be cut back before anything else lands after it): on a
// failure the file is left exactly as it was, the position is counted as
// refused (the status says so: a gap in the positions that is not damage)
// and LogTS returns CP_ERR_IO. Failures and the recovery update the status.
static int32_t log_identity(cp_slot_t *s, uint64_t gen, int64_t id, uint64_t t) {
  uint64_t m = s->with_mono ? mono_raw_inline() : 0;
  // inflight keeps CloseChannel from closing the fd under this write.
  atomic_fetch_add_explicit(&s->inflight, 1, memory_order_seq_cst);
  uint64_t old = atomic_fetch_add_explicit(&s->word, 1, memory_order_seq_cst);
  int32_t rc = 0;
  if ((old >> 47) != (gen << 1)) { rc = cp_word_error(old, gen); goto out; }
  char buf[96];
  size_t len;
  if (s->ascii) {
    char *p = cp_put_i64(buf, id);
    *p++ = ',';
    p = put_u64(p, t ? t : 1);
    if (s->with_mono) { *p++ = ','; p = put_u64(p, m); }
    *p++ = '\n';
    len = (size_t)(p - buf);
  } else {
    cp_frame_header_t fh = {CP_FRAME_MAGIC, CP_FRAME_RECORDS, CP_CODEC_RAW, 0, 1, s->rec_size,
                            old & CP_COUNT_MASK, s->rec_size, 0};
    memcpy(buf, &fh, sizeof fh);
    uint64_t rec[3] = {(uint64_t)id, t ? t : 1, m};
    memcpy(buf + sizeof fh, rec, s->rec_size);
    cp_frame_seal(buf);
    len = sizeof fh + s->rec_size;
  }
  int fd = atomic_load_explicit(&s->fd, memory_order_acquire);
  cp_wlock(s);
  if (cp_append_locked(s, fd, buf, len) != 0) {
    rc = CP_ERR_IO;  // not accepted: the caller is told, nothing is pending
    atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
    atomic_store_explicit(&s->id_failing, 1, memory_order_relaxed);
    cp_status_write_locked(s, CP_STATE_OPEN, atomic_load(&s->word) & CP_COUNT_MASK, 0);
  } else if (__builtin_expect(atomic_load_explicit(&s->id_failing, memory_order_relaxed), 0)) {
    atomic_store_explicit(&s->id_failing, 0, memory_order_relaxed);
    cp_status_write_locked(s, CP_STATE_OPEN, atomic_load(&s->word) & CP_COUNT_MASK, 0);
  }
  cp_wunlock(s);
out:
  atomic_fetch_sub_explicit(&s->inflight, 1, memory_order_release);
  return rc;
}

// ---- FOX_END: the record, then its ReTACK to the START node (engine.h).
// inflight keeps CloseChannel from closing the socket under a send: it is
// raised before the position is reserved (which fails once closed), and
// close waits for it to fall to 0 after setting the closed bit.
static inline void put_be64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--) { p[i] = (uint8_t)v; v >>= 8; }
}

static int32_t log_fox_end(cp_slot_t *s, uint64_t gen, int64_t id) {
  uint64_t t = rdtscp_inline();
  uint64_t m = s->with_mono ? mono_raw_inline() : 0;
  atomic_fetch_add_explicit(&s->inflight, 1, memory_order_seq_cst);
  int32_t rc = put_ring(s, gen, id, t, m);
  if (rc == 0) {
    struct cp_fox *f = s->fox;
    uint8_t pkt[CP_RETACK_SIZE] = {(uint8_t)(CP_RETACK_MAGIC >> 24), (uint8_t)(CP_RETACK_MAGIC >> 16),
                                   (uint8_t)(CP_RETACK_MAGIC >> 8), (uint8_t)CP_RETACK_MAGIC,
                                   CP_RETACK_VERSION, CP_RETACK_TYPE, 0, CP_RETACK_SIZE};
    put_be64(pkt + 8, (uint64_t)id);
    put_be64(pkt + 16, t ? t : 1);
    ssize_t n = send(f->fd, pkt, sizeof pkt, MSG_DONTWAIT | MSG_NOSIGNAL);
    // A connected UDP socket reports an earlier ICMP "port unreachable" on
    // the next send, which then sends nothing: try once more.
    if (n < 0 && (errno == ECONNREFUSED || errno == EINTR)) n = send(f->fd, pkt, sizeof pkt, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == (ssize_t)sizeof pkt) atomic_fetch_add_explicit(&f->sent, 1, memory_order_relaxed);
    else atomic_fetch_add_explicit(&f->send_failed, 1, memory_order_relaxed);
  }
  atomic_fetch_sub_explicit(&s->inflight, 1, memory_order_release);
  return rc;
}

// The return log's arrival stamp: the TSC (and CLOCK_MONOTONIC_RAW) when
// the kernel received the datagram (kernel_rt_ns, SO_TIMESTAMPNS, in
// CLOCK_REALTIME), from a TSC and CLOCK_REALTIME read together now, back by
// the datagram's age. The narrowest of three brackets: a thread preempted
// inside one would move the stamp by half its width. Without a kernel stamp
// (kernel_rt_ns <= 0), or if the clock stepped, the TSC now.
void cp_fox_stamp(int64_t kernel_rt_ns, double tsc_per_ns, uint64_t *tsc, uint64_t *mono) {
  uint64_t best = UINT64_MAX, mid = 0;
  int64_t rt = 0;
  for (int i = 0; i < 3; i++) {
    struct timespec r;
    uint64_t t0 = rdtscp_inline();
    clock_gettime(CLOCK_REALTIME, &r);
    uint64_t t1 = rdtscp_inline();
    if (t1 - t0 < best) {
      best = t1 - t0;
      mid = t0 + (t1 - t0) / 2;
      rt = (int64_t)r.tv_sec * 1000000000 + r.tv_nsec;
    }
  }
  int64_t age = kernel_rt_ns > 0 ? rt - kernel_rt_ns : 0;
  if (age < 0 || age > 1000000000) age = 0;
  *tsc = mid - (uint64_t)((double)age * tsc_per_ns);
  *mono = mono_raw_inline() - (uint64_t)age;
}

// ---- the last failure's message, per thread. Go code called from C runs
// on the calling thread, so the Go exports set it through cp_set_last_error
// during the call. The buffer is the thread's (freed when it exits).
static pthread_key_t err_key;
static pthread_once_t err_once = PTHREAD_ONCE_INIT;
struct cp_last_error { int32_t len; char msg[]; };

static void err_key_init(void) { pthread_key_create(&err_key, free); }

void cp_set_last_error(const char *msg, int32_t len) {
  pthread_once(&err_once, err_key_init);
  if (len < 0) len = 0;
  if (len > 65536) len = 65536;  // a message, not a payload
  struct cp_last_error *e = malloc(sizeof *e + (size_t)len + 1);
  if (e == NULL) return;  // keep the previous one rather than nothing
  e->len = len;
  if (len > 0) memcpy(e->msg, msg, (size_t)len);
  e->msg[len] = 0;
  free(pthread_getspecific(err_key));
  pthread_setspecific(err_key, e);
}

static void set_last_error_str(const char *msg) { cp_set_last_error(msg, (int32_t)strlen(msg)); }

int32_t CP_LastError(char *buf, int32_t cap) {
  pthread_once(&err_once, err_key_init);
  const struct cp_last_error *e = pthread_getspecific(err_key);
  int32_t len = e ? e->len : 0;
  if (buf != NULL && cap > 0) {
    int32_t k = len < cap - 1 ? len : cap - 1;
    if (k > 0) memcpy(buf, e->msg, (size_t)k);
    buf[k] = 0;
  }
  return len;
}

// ---- the rest of the ABI that is plain C.
int64_t OpenChannel(const char *name, int32_t log_format, int32_t handler_type) {
  if (name == NULL) {
    set_last_error_str("OpenChannel: the channel name is NULL");
    return CP_ERR_BAD_NAME;
  }
  return cpOpenChannel((char *)name, log_format, handler_type);
}

// The reader's entry that takes a const pointer (the Go export cannot).
int64_t CP_LogOpen(const char *path) {
  if (path == NULL) {
    set_last_error_str("CP_LogOpen: the path is NULL");
    return CP_ERR_BAD_NAME;
  }
  return cpLogOpen((char *)path);
}

const char *CP_ErrorString(int32_t code) {
  switch (code) {
  case CP_OK: return "ok";
  case CP_ERR_BAD_HANDLE: return "bad handle: not a channel this process opened";
  case CP_ERR_CLOSED: return "channel is closed";
  case CP_ERR_BAD_NAME: return "bad channel name: NULL, empty, or longer than 4096 bytes";
  case CP_ERR_BAD_FORMAT: return "unknown log format";
  case CP_ERR_BAD_HANDLER: return "unknown handler type";
  case CP_ERR_NOT_SUPPORTED: return "handler not supported yet";
  case CP_ERR_UNSUPPORTED_PLATFORM: return "handler unsupported on this platform (GPIORTT needs an aarch64 board)";
  case CP_ERR_FORMAT_HANDLER: return "this handler cannot write this format (compressed formats need a buffered handler)";
  case CP_ERR_BAD_ARG_NUM: return "this handler has no such argument";
  case CP_ERR_BAD_ARG_VALUE: return "argument value out of range for this handler";
  case CP_ERR_TOO_MANY_CHANNELS: return "too many open channels";
  case CP_ERR_IO: return "log file I/O failed (details on stderr)";
  case CP_ERR_DROPPED: return "event dropped: ring full and channel set to drop when full";
  case CP_ERR_NO_MEMORY: return "out of memory";
  case CP_ERR_INTERNAL: return "internal error";
  case CP_ERR_CONFIG: return "bad configuration: a CP_* environment variable is invalid, or a FOX channel has no peer (details on stderr)";
  }
  return "unknown error code";
}

extern __typeof__(LogTSMany) cp_logtsmany __attribute__((visibility("hidden"), alias("LogTSMany")));
