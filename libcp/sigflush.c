// sigflush.c — shutdown without loss: the SIGTERM handler and the atexit hook.
//
// The SIGTERM handler cannot wait for Go (the signal may land on a Go thread,
// or on a thread that holds a ring position it has not written yet), so it
// writes every accepted record itself, raw, with write(2) only. Frames carry
// their first ring position; the decoder orders them and drops duplicates of
// what the Go drainer wrote concurrently. Then it chains to the handler that
// was there before, or dies of SIGTERM as the default disposition would.
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "engine.h"
#include "_cgo_export.h"


static struct sigaction prev_term;
static char *sig_buf;               // one block plus headers, allocated up front
static uint64_t sig_buf_size;
static _Atomic int sig_busy;        // Dekker flag shared with cp_sigflush_begin_fd_close
static _Atomic int sig_flushing;    // one flush at a time
static _Atomic int in_signal_chain; // set while the host's handler runs (it may exit())

void cp_sigflush_init(uint64_t max_block_bytes) {
  if (sig_buf) return;
  sig_buf_size = max_block_bytes + 4096;
  sig_buf = malloc(sig_buf_size);
}

// Called by Go after it stored fd = -1 and before it closes the fd or frees the
// ring: once this returns no signal flush can still be using either.
void cp_sigflush_begin_fd_close(void) {
  atomic_thread_fence(memory_order_seq_cst);
  while (atomic_load(&sig_busy)) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

// The channel being flushed: whether the flush holds its write lock,
// whether a write failed, and the records of ring blocks it could not write
// (one flush at a time: sig_flushing).
static int sig_locked, sig_failed;
static uint64_t sig_unwritten;

// Appends one frame or block; one that fails part way is cut back (status.c).
static int sig_write(cp_slot_t *s, int fd, const char *p, size_t n) {
  int err = sig_locked ? cp_append_locked(s, fd, p, n) : cp_append_unlocked(s, fd, p, n);
  if (err) sig_failed = 1;
  return err;
}

// A frame in sig_buf: its header, sealed over the payload that follows it.
static void put_frame_header(char *dst, uint8_t kind, uint32_t n, uint32_t len, uint64_t first) {
  cp_frame_header_t fh = {CP_FRAME_MAGIC, kind, CP_CODEC_RAW, CP_FLAG_SIGNAL, n, len, first, len, 0};
  memcpy(dst, &fh, sizeof fh);
  cp_frame_seal(dst);
}

// Writes ring positions [from, to) of one block, if the block is still in the
// ring (the drainer may have written and recycled it meanwhile: then skip).
static void flush_block_range(cp_slot_t *s, int fd, uint64_t b, uint64_t from, uint64_t to) {
  _Atomic uint64_t *seq = &s->ring_seq[b & (s->ring_blocks - 1)];
  if (atomic_load_explicit(seq, memory_order_acquire) != b) return;
  uint64_t n = to - from;
  char *p = sig_buf;
  if (s->ascii) {
    memcpy(p, "#block ", 7); p += 7;
    p = cp_put_u64(p, from); *p++ = ' ';
    p = cp_put_u64(p, n);
    memcpy(p, " signal\n", 8); p += 8;
  } else {
    p += CP_FRAME_HEADER_SIZE;
  }
  for (uint64_t pos = from; pos < to; pos++) {
    uint64_t *rec = (uint64_t *)(s->ring + (pos & s->ring_posmask) * s->rec_size);
    uint64_t t = atomic_load_explicit((_Atomic uint64_t *)&rec[1], memory_order_acquire);
    if (s->ascii) {
      if ((uint64_t)(p - sig_buf) + 96 > sig_buf_size) break;
      if (t == 0) { memcpy(p, "#hole\n", 6); p += 6; continue; }
      p = cp_put_i64(p, (int64_t)rec[0]); *p++ = ',';
      p = cp_put_u64(p, t);
      if (s->with_mono) { *p++ = ','; p = cp_put_u64(p, rec[2]); }
      *p++ = '\n';
    } else {
      uint64_t r[3] = {rec[0], t, s->with_mono ? rec[2] : 0};
      memcpy(p, r, s->rec_size);
      p += s->rec_size;
    }
  }
  // The drainer may have recycled the block while we copied: then it is on disk.
  if (atomic_load_explicit(seq, memory_order_acquire) != b) return;
  if (!s->ascii)
    put_frame_header(sig_buf, CP_FRAME_RECORDS, (uint32_t)n,
                     (uint32_t)(p - sig_buf - CP_FRAME_HEADER_SIZE), from);
  if (sig_write(s, fd, sig_buf, (size_t)(p - sig_buf))) sig_unwritten += n;
}

static void flush_ring(cp_slot_t *s, int fd, uint64_t end) {
  uint64_t start = atomic_load_explicit(&s->written_pos, memory_order_acquire);
  uint64_t per_block = 1ull << s->block_shift;
  for (uint64_t b = start >> s->block_shift; b * per_block < end; b++) {
    uint64_t from = b * per_block > start ? b * per_block : start;
    uint64_t to = (b + 1) * per_block < end ? (b + 1) * per_block : end;
    if (from < to) flush_block_range(s, fd, b, from, to);
  }
}

static void flush_event(cp_slot_t *s, int fd, const char *what, uint64_t total) {
  cp_sync_t sp;
  cp_read_sync(&sp);
  char *p = sig_buf + (s->ascii ? 0 : CP_FRAME_HEADER_SIZE);
  char *start = p;
  if (s->ascii) { memcpy(p, "#event ", 7); p += 7; }
  const char *k1 = "{\"event\":\"";
  memcpy(p, k1, strlen(k1)); p += strlen(k1);
  memcpy(p, what, strlen(what)); p += strlen(what);
  memcpy(p, "\",\"sync\":{\"tsc\":", 16); p += 16;
  p = cp_put_u64(p, sp.tsc);
  memcpy(p, ",\"tsc_width\":", 13); p += 13;
  p = cp_put_u64(p, sp.tsc_width);
  memcpy(p, ",\"mono_raw_ns\":", 15); p += 15;
  p = cp_put_i64(p, sp.mono_raw_ns);
  memcpy(p, ",\"realtime_ns\":", 15); p += 15;
  p = cp_put_i64(p, sp.realtime_ns);
  memcpy(p, "},\"total\":", 10); p += 10;
  p = cp_put_u64(p, total);
  uint64_t unwritten = atomic_load(&s->unwritten);
  if (unwritten) {  // held in memory for a failing disk: lost with the process
    memcpy(p, ",\"unwritten\":", 13); p += 13;
    p = cp_put_u64(p, unwritten);
  }
  *p++ = '}';
  if (s->ascii) *p++ = '\n';
  else put_frame_header(sig_buf, CP_FRAME_EVENT, 0, (uint32_t)(p - start), 0);
  sig_write(s, fd, sig_buf, (size_t)(p - sig_buf));
}

static void flush_firstlast(cp_slot_t *s, int fd) {
  uint64_t v[7];
  // No lock: the interrupted thread may hold it. A torn pair is possible only
  // for an event logged at the instant of the signal.
  v[0] = s->fl_n;
  v[1] = (uint64_t)s->fl_first_id; v[2] = s->fl_first_tsc; v[3] = s->fl_first_mono;
  v[4] = (uint64_t)s->fl_last_id; v[5] = s->fl_last_tsc; v[6] = s->fl_last_mono;
  if (v[0] == 0) return;
  uint32_t n = v[0] > 1 ? 2 : 1;
  char *p = sig_buf;
  if (s->ascii) {
    memcpy(p, "#block 0 ", 9); p += 9;
    p = cp_put_u64(p, n);
    memcpy(p, " signal\n", 8); p += 8;
    for (uint32_t i = 0; i < n; i++) {
      p = cp_put_i64(p, (int64_t)v[1 + 3 * i]); *p++ = ',';
      p = cp_put_u64(p, v[2 + 3 * i]);
      if (s->with_mono) { *p++ = ','; p = cp_put_u64(p, v[3 + 3 * i]); }
      *p++ = '\n';
    }
  } else {
    p += CP_FRAME_HEADER_SIZE;
    for (uint32_t i = 0; i < n; i++) {
      memcpy(p, &v[1 + 3 * i], s->rec_size);
      p += s->rec_size;
    }
    put_frame_header(sig_buf, CP_FRAME_RECORDS, n, (uint32_t)(p - sig_buf - CP_FRAME_HEADER_SIZE), 0);
  }
  sig_write(s, fd, sig_buf, (size_t)(p - sig_buf));
}

// Puts a NET_CONF channel's FIRSTLAST pair into its ring (the SIGTERM path:
// no lock, no waiting; positions are taken only where the block is free) and
// starts the pair anew. Returns the word after.
static uint64_t firstlast_into_ring(cp_slot_t *s, uint64_t w) {
  uint64_t n = s->fl_n;
  uint64_t v[6] = {(uint64_t)s->fl_first_id, s->fl_first_tsc, s->fl_first_mono,
                   (uint64_t)s->fl_last_id, s->fl_last_tsc, s->fl_last_mono};
  for (uint64_t i = 0; i < n && i < 2; i++) {
    uint64_t p = w & CP_COUNT_MASK, b = p >> s->block_shift;
    if (atomic_load(&s->ring_seq[b & (s->ring_blocks - 1)]) != b) break;
    if (!atomic_compare_exchange_strong(&s->word, &w, w + 1)) { i--; continue; }
    uint64_t *rec = (uint64_t *)(s->ring + (p & s->ring_posmask) * s->rec_size);
    rec[0] = v[3 * i];
    if (s->with_mono) rec[2] = v[3 * i + 2];
    atomic_store((_Atomic uint64_t *)&rec[1], v[3 * i + 1] ? v[3 * i + 1] : 1);
    w++;
  }
  s->fl_n = 0;
  return atomic_load(&s->word);
}

// The dying flush's bound on waiting: for an owner mid-commit on another
// thread, and for writers that reserved positions before the close and have
// not yet written them (whatever is still unwritten then is a hole).
#define SIG_CLOSE_WAIT_NS 50000000
// The flush's bound on waiting for the channels' write locks (a drainer or
// an IDENTITY writer in the middle of a write), all channels together.
#define SIG_LOCK_WAIT_NS 50000000

static int64_t sig_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// Whether every position in [*done, end) is written or already drained; moves
// *done past what is, so each position is looked at once. A position whose
// block is not yet in the ring (its writer waits for the drain) is not.
static int ring_written(cp_slot_t *s, uint64_t *done, uint64_t end) {
  uint64_t per_block = 1ull << s->block_shift;
  uint64_t start = atomic_load_explicit(&s->written_pos, memory_order_acquire);
  if (*done < start) *done = start;
  while (*done < end) {
    uint64_t b = *done >> s->block_shift;
    uint64_t to = (b + 1) * per_block < end ? (b + 1) * per_block : end;
    _Atomic uint64_t *seq = &s->ring_seq[b & (s->ring_blocks - 1)];
    uint64_t sq = atomic_load_explicit(seq, memory_order_acquire);
    if (sq > b) { *done = to; continue; }  // drained and handed back: on disk
    if (sq < b) return 0;
    uint64_t p = *done;
    while (p < to) {
      uint64_t *rec = (uint64_t *)(s->ring + (p & s->ring_posmask) * s->rec_size);
      if (atomic_load_explicit((_Atomic uint64_t *)&rec[1], memory_order_acquire) == 0) break;
      p++;
    }
    // The block may have been drained and reused while we looked: then it
    // is on disk; if not, what we saw was its own records.
    sq = atomic_load_explicit(seq, memory_order_acquire);
    if (sq > b) { *done = to; continue; }
    *done = p;
    if (p < to) return 0;
  }
  return 1;
}

// ends[i]: for a channel the dying flush closed, the word before its close
// (0: not closed here); done[i]: positions below it known written.
static uint64_t sig_ends[CP_MAX_CHANNELS], sig_done[CP_MAX_CHANNELS];

// Closes every open channel (dying), so that nothing is accepted after the
// positions are read, then waits, boundedly, for records reserved before the
// close to be written.
static void close_all_raw(void) {
  int64_t deadline = sig_mono_ns() + SIG_CLOSE_WAIT_NS;
  for (int i = 0; i < CP_MAX_CHANNELS; i++) {
    cp_slot_t *s = &cp_slots[i];
    sig_ends[i] = 0;
    sig_done[i] = 0;
    if (atomic_load(&s->fd) <= 0) continue;
    uint64_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    if ((w >> CP_GEN_SHIFT) == 0 || (w & CP_CLOSED_BIT)) continue;  // closing already: its close drains it
    uint64_t old = cp_signal_close(s, deadline);
    if (old != 0 && !(old & CP_CLOSED_BIT)) sig_ends[i] = old;
  }
  for (;;) {
    int pending = 0;
    for (int i = 0; i < CP_MAX_CHANNELS; i++) {
      cp_slot_t *s = &cp_slots[i];
      if (sig_ends[i] == 0 || !s->ring) continue;
      if (!ring_written(s, &sig_done[i], sig_ends[i] & CP_COUNT_MASK)) pending = 1;
    }
    if (!pending || sig_mono_ns() >= deadline) return;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

// Writes what every open channel has accepted. Async-signal-safe: no locks,
// no allocation, no Go. dying: the process dies of the signal right after
// (no handler of the program's to chain to); every channel is closed first.
static void flush_all_raw(int dying) {
  if (sig_buf == NULL) return;
  if (atomic_exchange(&sig_flushing, 1)) {
    // Another thread is flushing (a second SIGTERM): wait for it, up to 10 s,
    // so that this one does not end the process under it.
    for (int i = 0; i < 10000 && atomic_load(&sig_flushing); i++) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    return;
  }
  atomic_store(&sig_busy, 1);
  if (dying) close_all_raw();
  int64_t lock_deadline = sig_mono_ns() + SIG_LOCK_WAIT_NS;
  for (int i = 0; i < CP_MAX_CHANNELS; i++) {
    cp_slot_t *s = &cp_slots[i];
    // fd first: OpenChannel publishes the word before the fd, CloseChannel
    // clears the fd before it frees anything. A closing channel (closed bit
    // set, fd still open) is flushed too: its final drain may not be done.
    int fd = atomic_load(&s->fd);
    if (fd <= 0) continue;
    // Closed here: the count at the close (refused calls add to the word
    // after it). Otherwise the word now.
    uint64_t w = dying && sig_ends[i] ? sig_ends[i] : atomic_load_explicit(&s->word, memory_order_acquire);
    if ((w >> CP_GEN_SHIFT) == 0) continue;
    // The write lock keeps a drainer's or an IDENTITY writer's torn write
    // from being cut back over ours (or ours over theirs); the thread this
    // handler interrupted may hold it: then the flush goes on without.
    sig_locked = cp_wlock_until(s, lock_deadline);
    sig_failed = 0;
    sig_unwritten = 0;
    // A NET_CONF channel has a ring whatever its handler is now; a FIRSTLAST
    // pair it holds goes into the ring first, at positions of its own.
    if (s->ring && s->kind == CP_FIRSTLAST) w = firstlast_into_ring(s, w);
    if (s->ring) flush_ring(s, fd, w & CP_COUNT_MASK);
    uint64_t total;
    switch (cp_kind_class(s->kind)) {
    case CP_CLASS_COUNTER:
      total = s->kind == CP_PERIODICCOUNTER ? (w & CP_COUNT_MASK)
              : s->kind == CP_KIND_NC_COUNTER ? atomic_load(&s->nc_count)
                                              : atomic_load(&s->fpc_count);
      break;
    case CP_CLASS_FIRSTLAST:
      if (!s->ring) flush_firstlast(s, fd);  // NET_CONF: its pair goes through the ring at switch or close
      total = s->fl_n;
      break;
    default:
      total = w & CP_COUNT_MASK;
      break;
    }
    // What could not be written goes into the event and the status: held
    // for a failing disk (the drainer's spill) and, when the process dies
    // now, what this flush could not write (otherwise it is still in the
    // ring, for the drainer).
    if (dying && sig_unwritten) atomic_fetch_add(&s->unwritten, sig_unwritten);
    flush_event(s, fd, "sigterm", total);
    // The status: what was accepted (ring channels: positions) and, if every
    // write went in and nothing is held for a failing disk, that all of it
    // is in the file now.
    uint64_t accepted = s->ring ? (w & CP_COUNT_MASK) : total;
    uint64_t written = atomic_load_explicit(&s->written_pos, memory_order_acquire);
    if (s->ring && !sig_failed && atomic_load(&s->unwritten) == 0) written = w & CP_COUNT_MASK;
    cp_status_write_locked(s, CP_STATE_SIGNAL, accepted, written);
    // A process that dies now keeps the lock: a drainer that took it next
    // would start a frame the death cuts short (a fatal signal ends a write
    // to a file part way), and the file, which holds every accepted record,
    // would end in a torn duplicate that readers call "cut short".
    if (sig_locked && !dying) cp_wunlock(s);
  }
  atomic_store(&sig_busy, 0);
  atomic_store(&sig_flushing, 0);
}

static void on_sigterm(int sig, siginfo_t *info, void *uc) {
  int saved = errno;
  // With no program handler to chain to, the process dies right after the
  // flush: the channels are closed first, so that a thread logging on
  // meanwhile (the signal may be handled on any thread) is refused rather
  // than accepted and lost. A program's handler closes (or not) its own way.
  flush_all_raw(!(prev_term.sa_flags & SA_SIGINFO) && prev_term.sa_handler == SIG_DFL);
  errno = saved;
  if (prev_term.sa_flags & SA_SIGINFO) {
    atomic_store(&in_signal_chain, 1);
    prev_term.sa_sigaction(sig, info, uc);
    atomic_store(&in_signal_chain, 0);
  } else if (prev_term.sa_handler == SIG_DFL) {
    // Die of SIGTERM as if we had never been here: the signal stays blocked
    // until this handler returns, then the default action ends the process.
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGTERM, &dfl, NULL);
    raise(SIGTERM);
  } else if (prev_term.sa_handler != SIG_IGN) {
    atomic_store(&in_signal_chain, 1);
    prev_term.sa_handler(sig);
    atomic_store(&in_signal_chain, 0);
  }
  errno = saved;
}

// Installs the handler once. Returns 1 if installed, 0 if not (disabled by
// CP_NO_SIGNAL_HANDLER=1, or SIGTERM is ignored by the host), -1 on error.
int cp_install_sigterm(void) {
  const char *off = getenv("CP_NO_SIGNAL_HANDLER");
  if (off && off[0] == '1') return 0;
  struct sigaction cur;
  if (sigaction(SIGTERM, NULL, &cur) != 0) return -1;
  if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN) return 0;
  if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigterm) return 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigterm;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  prev_term = cur;
  if (sigaction(SIGTERM, &sa, NULL) != 0) return -1;
  return 1;
}

// The process that registered the hook: a child made by fork() without
// exec inherits it, but not the Go runtime's threads, and a call into Go
// there parks forever (a child that called exit(0) never ended).
static pid_t hook_pid;

// Go handles a signal that arrives while it runs on a host's thread on that
// thread's alternate signal stack, and with none it dies ("non-Go code
// disabled sigaltstack"). By the time exit() runs this hook, the host may
// have removed the stack its thread had when it first called in: CPython's
// faulthandler frees its own at interpreter shutdown and leaves the thread
// without one. So the hook gives the thread a stack of its own, never freed,
// before entering Go (Go takes whichever stack is current).
static char exit_sigstack[64 * 1024];

static void ensure_signal_stack(void) {
  stack_t cur;
  if (sigaltstack(NULL, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;
  stack_t st;
  memset(&st, 0, sizeof st);
  st.ss_sp = exit_sigstack;
  st.ss_size = sizeof exit_sigstack;
  sigaltstack(&st, NULL);
}

static void on_exit_hook(void) {
  // If the host's SIGTERM handler called exit(), we are inside a signal
  // handler: entering Go is not safe there, and the raw flush already ran.
  if (atomic_load(&in_signal_chain)) return;
  // A forked child: its channels are the parent's (the parent closes
  // them); whatever it logged itself never had a drainer (docs/limits.md).
  if (getpid() != hook_pid) return;
  ensure_signal_stack();
  cpCloseAllAtExit();
}

void cp_register_atexit(void) {
  hook_pid = getpid();
  atexit(on_exit_hook);
}
