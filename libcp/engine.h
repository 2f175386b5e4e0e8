/*
 * engine.h — the channel table shared by the C fast path (fastpath.c), the
 * async-signal-safe flusher (sigflush.c) and the Go side (engine.go), which
 * allocates, drains and closes what the fast path fills.
 *
 * One 64-bit word per channel carries generation, closed bit and a count
 * (ring position or event count), so validating a handle and reserving a
 * record is one atomic add: a close is linearised by the same word.
 */
#ifndef CP_ENGINE_H
#define CP_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include "cloudprofiler.h"

/* Everything below is internal to the library: hidden from its symbol table. */
#pragma GCC visibility push(hidden)

#define CP_MAX_CHANNELS 16384
#define CP_IDX_BITS 20                 /* handle = gen << 20 | (slot index + 1) */
#define CP_GEN_SHIFT 48                /* word   = gen << 48 | closed << 47 | count */
#define CP_CLOSED_BIT (1ULL << 47)
#define CP_COUNT_MASK (CP_CLOSED_BIT - 1)
#define CP_MAX_GEN 0xFFFFULL

/* On-disk frame (little endian), shared with internal/logfile. */
#define CP_FRAME_MAGIC 0x52465043u     /* "CPFR" */
#define CP_FRAME_RECORDS 1
#define CP_FRAME_COUNTER 2
#define CP_FRAME_EVENT 3
#define CP_FRAME_TRAILER 4
#define CP_FRAME_STATUS 5
#define CP_CODEC_RAW 0
#define CP_FLAG_SIGNAL 1               /* written by the SIGTERM flusher */
#define CP_FLAG_CRC 2                  /* crc field: CRC-32C of header[0:28] + payload (v2) */
#define CP_FRAME_HEADER_SIZE 32

/* Status slots (logfile.Status, version 2): two of them right after the file
 * header, rewritten in place (pwrite) by cp_status_write. */
#define CP_STATUS_SIZE 64                                   /* binary payload */
#define CP_STATUS_FRAME_SIZE (CP_FRAME_HEADER_SIZE + CP_STATUS_SIZE)
#define CP_STATUS_LINE_SIZE 228                             /* ASCII line, newline included */
#define CP_STATE_OPEN 0
#define CP_STATE_CLOSED 1
#define CP_STATE_CLOSED_LOSS 2
#define CP_STATE_SIGNAL 3

typedef struct {
  uint32_t magic;
  uint8_t kind, codec;
  uint16_t flags;
  uint32_t n;            /* positions covered (records incl. holes) */
  uint32_t stored_len;   /* payload bytes that follow */
  uint64_t first_pos;    /* ring position of the first record */
  uint32_t raw_len;      /* payload length once decompressed */
  uint32_t crc;
} cp_frame_header_t;

typedef struct {
  uint64_t tsc, tsc_width;   /* midpoint of two TSC reads and their distance */
  int64_t mono_raw_ns, realtime_ns;
} cp_sync_t;

enum cp_kind_class { CP_CLASS_NONE = 0, CP_CLASS_RING = 1, CP_CLASS_COUNTER = 2,
                     CP_CLASS_FIRSTLAST = 3, CP_CLASS_IDENTITY = 4 };

/* XOY's parameters. A new set is published whole on every change (and the
 * old one kept: a LogTS may still read it), so a racing LogTS sees the old
 * or the new x and y with their own multipliers, never a mix. */
struct cp_xoy {
  uint64_t x, y;
  uint64_t m64;         /* 2^64 / y + 1: ids below 2^32 */
  uint64_t m_lo, m_hi;  /* 2^128 / y + 1: other ids; all 0 if y is a power of two or >= 2^32 */
};

/* FOX_END: the ReTACK sender. ReTACK v1, 24 bytes, big-endian:
 *   u32 magic "CPRA" | u8 version 1 | u8 type 1 | u16 length 24 |
 *   i64 tuple id | u64 the END channel's record TSC (its node's counter)
 * sent with one non-blocking send(2) on a UDP socket connected to the START
 * node, from LogTS, right after the record is in the ring. */
#define CP_RETACK_MAGIC 0x43505241u
#define CP_RETACK_VERSION 1
#define CP_RETACK_TYPE 1
#define CP_RETACK_SIZE 24
struct cp_fox {
  int fd;                          /* connected UDP socket */
  _Atomic uint64_t sent, send_failed;
};

/* cp_slot.kind is a cp_handler_type, or this: PERIODICCOUNTER on a NET_CONF
 * channel, which counts in nc_count because its word counts ring positions. */
#define CP_KIND_NC_COUNTER 64

/* Values of cp_slot.fast, the selector of LogTS's shortest path. */
#define CP_FAST_NONE 0      /* per-handler paths */
#define CP_FAST_SHARED 1    /* BUFFER_IDENTITY _TSC, never drops: one atomic add per record */
#define CP_FAST_OWNED 2     /* the same, biased to one writer thread: no atomic at all */
#define CP_FAST_REVOKING 3  /* a second thread came: the owner is being moved to SHARED */
#define CP_FAST_MARK 4      /* as SHARED, on a marked channel: each record notes its thread's waits (marks.c) */
#define CP_FAST_NULL 5      /* NULLH: the handle checked, nothing kept */
#define CP_FAST_COUNT 6     /* FASTPERIODICCOUNTER, SERVICERATE: a plain increment of fpc_count */

/* A marked instance (OPERATOR#INSTANCE of this process; marks.c): its
 * thread's voluntary context switches at its last mark, and that thread;
 * and what it did so far (CP_MarkStats): its ins, and the cycles between
 * its marks that were work (the cost model's: in to out always, out to
 * sent and a departure to the next in when its thread did not wait). */
struct cp_mark {
  _Atomic uint64_t switches;
  _Atomic uintptr_t thread;  /* 0: no mark yet */
  _Atomic uint64_t last;     /* its last mark's TSC */
  _Atomic uint64_t visits, busy;
  _Atomic uint64_t gcs, gc_cycles; /* cp_gc_count and cp_gc_cycles at its last mark */
};
/* A JVM's collections (jni.c: JVMTI's GarbageCollectionStart and Finish):
 * how many ended, and their cycles, so far; 0 in a process that is no JVM. */
extern _Atomic uint64_t cp_gc_count, cp_gc_cycles;
void cp_gc_begin(void);
void cp_gc_end(void);
#define CP_MARK_IN 1         /* cp_slot.mark_role */
#define CP_MARK_OUT 2
#define CP_MARK_SENT 3
#define CP_WAITED_BIT (1ULL << 63)   /* in a marked channel's record TSC: its thread waited since the instance's previous mark */
#define CP_WAITS_OFF 0
#define CP_WAITS_GETRUSAGE 1         /* every mark whose thread marked nothing for CP_WAIT_MIN_NS asks getrusage */
#define CP_WAITS_RSEQ 2              /* a mark asks only when its thread was switched out since it last asked */
#define CP_WAIT_MIN_NS 2000          /* shorter than a wait: giving the CPU up and getting it back */
#define CP_GC_SLACK_NS 1000000       /* the work a gap stopped by a JVM's collections may hold besides */
extern int cp_waits_mode;
int cp_marks_init(int want, double tsc_per_ns);  /* the mode in effect */
uint64_t cp_mark_tsc(struct cp_mark *m, int32_t role, uint64_t t);  /* t, with CP_WAITED_BIT when the thread waited */

typedef struct cp_slot {
  /* hot: the first cache line is all LogTS reads on its fastest path */
  _Atomic uint64_t word;
  _Atomic int32_t fast;      /* CP_FAST_* */
  _Atomic uint32_t busy;     /* the owner is between its check and its commit */
  _Atomic uintptr_t owner;   /* CP_FAST_OWNED: the owner's thread pointer, 0 until claimed */
  uint64_t owner_limit;      /* CP_FAST_OWNED: the owner may write positions below this
                                without looking at ring_seq (owner-only) */
  uint64_t ring_posmask;     /* ring capacity in records - 1 */
  char *ring;                /* ring_blocks * block records * rec_size */
  _Atomic uint64_t *ring_seq;/* per ring block: the block number it may take */
  uint32_t block_shift;      /* log2(records per block) */
  uint32_t ring_blocks;
  /* second line */
  int32_t kind;              /* cp_handler_type */
  uint32_t rec_size;         /* 16 (_TSC) or 24 (with CLOCK_MONOTONIC_RAW) */
  uint32_t with_mono;
  _Atomic uint32_t sr_flags; /* SERVICERATE: CP_BLOCKED_* marked since the sampler last took them */
  _Atomic int64_t arg0, arg1;
  struct cp_xoy *_Atomic xoy;  /* XOY: x, y and their multipliers, immutable once published */
  _Atomic uint64_t aux;      /* DOWNSAMPLE countdown */
  _Atomic uint64_t fpc_count;/* FASTPERIODICCOUNTER, SERVICERATE (plain increments, single writer) */
  _Atomic uint32_t drop_when_full;
  _Atomic uint32_t failed;   /* background writes failing: ring handlers refuse new events */
  _Atomic uint32_t abandoned;/* close gave up: waiting writers must return */
  _Atomic uint32_t inflight; /* IDENTITY writes under way (close waits for 0) */
  _Atomic uint64_t dropped;
  _Atomic uint64_t unwritten; /* records held in memory for a failing disk (Go's spill) */
  _Atomic uint64_t nc_count;  /* PERIODICCOUNTER on a NET_CONF channel (the word counts ring positions) */
  /* cold */
  _Atomic int fd;            /* O_APPEND log file, -1 when none */
  int32_t ascii;
  int32_t log_format;
  _Atomic uint64_t written_pos;  /* positions below this are in the file */
  _Atomic uint64_t drain_wakes;  /* eventfd writes entered_block made for this channel */
  _Atomic uint32_t drain_parked; /* 1: the drainer sleeps, or is about to (drain.go); the logging
                                    thread that clears it wakes the drainer (entered_block) */
  uint32_t wake_blocks;          /* full blocks waiting that wake the drainer at once: the ring
                                    but one (channel.wakeBlocks) */
  _Atomic int lock;              /* FIRSTLAST and MEDIAN state */
  int64_t fl_first_id, fl_last_id;
  uint64_t fl_first_tsc, fl_last_tsc, fl_first_mono, fl_last_mono;
  uint64_t fl_n;
  uint64_t *med_buf;             /* window * 3 words: id, tsc, mono */
  uint32_t med_n, med_cap;
  struct cp_fox *fox;            /* FOX_END: set before the slot is published */
  struct cp_mark *mark;          /* a marked channel that notes waits: its instance (NULL: none) */
  int32_t mark_role;             /* CP_MARK_IN, _OUT or _SENT */
  /* the file: every append and status update goes through status.c */
  _Atomic uint32_t wlock;        /* futex: 0 free, 1 held, 2 held with waiters */
  _Atomic uintptr_t wowner;      /* the holder's thread pointer (the signal flusher never waits for itself) */
  _Atomic int32_t end_stale;     /* a write went in without wlock: file_end must be read again */
  uint64_t file_end;             /* the file's size after our appends (wlock): where a torn write is cut back to */
  _Atomic int status_fd;         /* the same file without O_APPEND (pwrite of the slots), -1 when none */
  uint64_t status_off;           /* offset of status slot 0 */
  _Atomic uint64_t status_seq;   /* seq of the last status written */
  _Atomic uint32_t status_floor; /* CP_STATE_SIGNAL once flushed on SIGTERM: later updates keep it */
  _Atomic uint64_t refused;      /* IDENTITY: positions whose write failed (LogTS returned CP_ERR_IO) */
  _Atomic uint32_t last_errno;   /* the last write error on the file (0: none) */
  _Atomic uint32_t id_failing;   /* IDENTITY: the last write failed (the next success is a recovery) */
} __attribute__((aligned(64))) cp_slot_t;

extern cp_slot_t cp_slots[CP_MAX_CHANNELS];
extern int cp_block_ready_fd;   /* eventfd written when a block fills */

/* CP_FAKE_TSC: set once, at the first OpenChannel, before any handle exists
 * (so every LogTS sees them through the word's acquire). Every TSC the C side
 * reads is then ((unsigned __int128)raw * cp_fake_q32 >> 32) + cp_fake_off,
 * bit-identical to tsc.Fake.Apply. */
extern int cp_fake_on;
extern uint64_t cp_fake_q32, cp_fake_off;
void cp_set_fake(uint64_t q32, int64_t off);
uint64_t cp_fake_apply(uint64_t raw);   /* tests: the same mapping, on any value */
uint64_t cp_tsc_now(void);              /* the TSC as LogTS reads it (faked or not) */

int cp_kind_class(int32_t kind);
int32_t cp_word_error(uint64_t w, uint64_t gen);
void cp_read_sync(cp_sync_t *out);
int cp_membarrier_init(void);
void cp_revoke_owner(cp_slot_t *s);
uint64_t cp_signal_close(cp_slot_t *s, int64_t deadline_ns);
struct cp_xoy *cp_set_xoy(cp_slot_t *s, int64_t x, int64_t y);
int32_t cp_median_set_window(cp_slot_t *s, uint64_t *buf, uint32_t window);
void cp_firstlast_snapshot(cp_slot_t *s, uint64_t out[7]);
/* SERVICERATE: one sample, read together: out[0] the count (not reset),
 * out[1] the blocked marks since the last sample (taken: reset to 0),
 * out[2] the TSC (as LogTS reads it). */
void cp_sr_sample(cp_slot_t *s, uint64_t out[3]);
void cp_firstlast_retire(cp_slot_t *s, uint64_t out[7]);
int32_t cp_ring_put(cp_slot_t *s, int64_t id, uint64_t tsc, uint64_t mono);
void cp_fox_stamp(int64_t kernel_rt_ns, double tsc_per_ns, uint64_t *tsc, uint64_t *mono);
int cp_install_sigterm(void);
void cp_sigflush_init(uint64_t max_block_bytes);
void cp_sigflush_begin_fd_close(void);
void cp_register_atexit(void);
void cp_set_last_error(const char *msg, int32_t len);  /* CP_LastError's message, this thread */
char *cp_put_i64(char *p, int64_t v);
char *cp_put_u64(char *p, uint64_t v);

/* x86-64 TLS ABI: the TCB points to itself; a thread's identity, async-signal-safe. */
static inline uintptr_t cp_thread_pointer(void) {
  uintptr_t tp;
  __asm__("mov %%fs:0, %0" : "=r"(tp));
  return tp;
}

/* status.c: CRC-32C, frame sealing, the file's write lock, appends that
 * never leave a torn write behind, and the status slots. All of it
 * async-signal-safe except cp_wlock (which sleeps on a futex: not for the
 * signal handler, which uses cp_wlock_until). */
uint32_t cp_crc32c(uint32_t crc, const void *p, size_t n);    /* like Go's crc32.Update (Castagnoli) */
uint32_t cp_crc32c_sw(uint32_t crc, const void *p, size_t n); /* the table path */
uint32_t cp_crc32c_hw(uint32_t crc, const void *p, size_t n); /* the SSE4.2 path: only if cp_crc32c_has_hw() */
int cp_crc32c_has_hw(void);
void cp_frame_seal(void *frame);  /* sets FlagCRC and the CRC of a frame (header with stored_len, then payload) */
typedef struct {
  uint64_t seq, accepted, written, unwritten, refused, dropped;
  uint32_t err, state;
} cp_status_t;
size_t cp_status_encode(char *dst, int ascii, const cp_status_t *st);  /* CP_STATUS_FRAME_SIZE or CP_STATUS_LINE_SIZE bytes */
void cp_wlock(cp_slot_t *s);
void cp_wunlock(cp_slot_t *s);
int cp_wlock_until(cp_slot_t *s, int64_t deadline_ns);
int cp_append_locked(cp_slot_t *s, int fd, const void *buf, size_t len);
int cp_append_unlocked(cp_slot_t *s, int fd, const void *buf, size_t len);
int cp_append(cp_slot_t *s, int fd, const void *buf, size_t len);
int cp_status_write_locked(cp_slot_t *s, uint32_t state, uint64_t accepted, uint64_t written);
int cp_status_write(cp_slot_t *s, uint32_t state, uint64_t accepted, uint64_t written);

#pragma GCC visibility pop
#endif
