// status.c — what every write to a channel's file goes through (format
// version 2, internal/logfile): CRC-32C and frame sealing, the file's write
// lock, appends that leave the file as it was when they fail part way, and
// the two status slots rewritten in place.
//
// Async-signal-safe (the SIGTERM flusher uses all of it) except cp_wlock,
// which sleeps on a futex: the flusher takes the lock with cp_wlock_until.
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include "engine.h"

// ---- CRC-32C (Castagnoli, reflected 0x82F63B78), with the semantics of Go's
// crc32.Update: crc is a finished checksum (0 to start), the result one too.
static uint32_t crc_tab[8][256];  // slicing by 8, built before main (constructor)
static int crc_hw;

__attribute__((constructor)) static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc_tab[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
  __builtin_cpu_init();
  crc_hw = __builtin_cpu_supports("sse4.2");
}

int cp_crc32c_has_hw(void) { return crc_hw; }

uint32_t cp_crc32c_sw(uint32_t crc, const void *buf, size_t n) {
  const unsigned char *p = buf;
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    memcpy(&lo, p, 4);
    memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^
        crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^ crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

// Unaligned 8-byte steps (x86 loads them at full speed), then 4, 2, 1.
__attribute__((target("sse4.2"))) uint32_t cp_crc32c_hw(uint32_t crc, const void *buf, size_t n) {
  const unsigned char *p = buf;
  uint64_t c = (uint32_t)~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c = __builtin_ia32_crc32di(c, v);
  }
  uint32_t c32 = (uint32_t)c;
  if (n & 4) {
    uint32_t v;
    memcpy(&v, p, 4);
    c32 = __builtin_ia32_crc32si(c32, v);
    p += 4;
  }
  if (n & 2) {
    uint16_t v;
    memcpy(&v, p, 2);
    c32 = __builtin_ia32_crc32hi(c32, v);
    p += 2;
  }
  if (n & 1) c32 = __builtin_ia32_crc32qi(c32, *p);
  return ~c32;
}

uint32_t cp_crc32c(uint32_t crc, const void *p, size_t n) {
  return crc_hw ? cp_crc32c_hw(crc, p, n) : cp_crc32c_sw(crc, p, n);
}

// logfile.Seal: FlagCRC, and the CRC over the header's first 28 bytes then
// the payload (stored_len bytes right after the 32-byte header).
void cp_frame_seal(void *frame) {
  unsigned char *f = frame;
  uint16_t flags;
  uint32_t len;
  memcpy(&flags, f + 6, 2);
  flags |= CP_FLAG_CRC;
  memcpy(f + 6, &flags, 2);
  memcpy(&len, f + 12, 4);
  uint32_t c = cp_crc32c(cp_crc32c(0, f, 28), f + CP_FRAME_HEADER_SIZE, len);
  memcpy(f + 28, &c, 4);
}

// ---- one status slot, exactly as logfile.AppendStatusFrame / AppendStatusLine.
static char *put_padded(char *p, uint64_t v, int width) {
  for (int i = width - 1; i >= 0; i--) {
    p[i] = (char)('0' + v % 10);
    v /= 10;
  }
  return p + width;
}

static char *put_str(char *p, const char *s) {
  size_t n = strlen(s);
  memcpy(p, s, n);
  return p + n;
}

size_t cp_status_encode(char *dst, int ascii, const cp_status_t *st) {
  if (ascii) {
    char *p = dst;
    p = put_padded(put_str(p, "#status seq="), st->seq, 20);
    p = put_padded(put_str(p, " accepted="), st->accepted, 20);
    p = put_padded(put_str(p, " written="), st->written, 20);
    p = put_padded(put_str(p, " unwritten="), st->unwritten, 20);
    p = put_padded(put_str(p, " refused="), st->refused, 20);
    p = put_padded(put_str(p, " dropped="), st->dropped, 20);
    p = put_padded(put_str(p, " errno="), st->err, 10);
    p = put_padded(put_str(p, " state="), st->state, 10);
    uint32_t crc = cp_crc32c(0, dst, (size_t)(p - dst));
    p = put_str(p, " crc=");
    for (int i = 7; i >= 0; i--) p[7 - i] = "0123456789abcdef"[(crc >> (4 * i)) & 15];
    p += 8;
    *p++ = '\n';
    return (size_t)(p - dst);
  }
  cp_frame_header_t fh = {CP_FRAME_MAGIC, CP_FRAME_STATUS, CP_CODEC_RAW, 0, 0, CP_STATUS_SIZE, 0, CP_STATUS_SIZE, 0};
  uint64_t pl[8] = {st->seq, st->accepted, st->written, st->unwritten, st->refused, st->dropped,
                    (uint64_t)st->err | (uint64_t)st->state << 32, 0};
  memcpy(dst, &fh, sizeof fh);
  memcpy(dst + CP_FRAME_HEADER_SIZE, pl, sizeof pl);
  cp_frame_seal(dst);
  return CP_STATUS_FRAME_SIZE;
}

// ---- the file's write lock: a futex mutex (0 free, 1 held, 2 held with
// waiters; Drepper, "Futexes are tricky"). Waiters sleep, never spin.
static long futex(_Atomic uint32_t *a, int op, uint32_t v) { return syscall(SYS_futex, a, op, v, NULL, NULL, 0); }

void cp_wlock(cp_slot_t *s) {
  uint32_t c = 0;
  if (!atomic_compare_exchange_strong(&s->wlock, &c, 1)) {
    if (c != 2) c = atomic_exchange(&s->wlock, 2);
    while (c != 0) {
      futex(&s->wlock, FUTEX_WAIT_PRIVATE, 2);
      c = atomic_exchange(&s->wlock, 2);
    }
  }
  atomic_store_explicit(&s->wowner, cp_thread_pointer(), memory_order_relaxed);
}

void cp_wunlock(cp_slot_t *s) {
  atomic_store_explicit(&s->wowner, 0, memory_order_relaxed);
  if (atomic_fetch_sub(&s->wlock, 1) != 1) {
    atomic_store(&s->wlock, 0);
    futex(&s->wlock, FUTEX_WAKE_PRIVATE, 1);
  }
}

static int64_t mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// The signal flusher's lock: 1 if taken, 0 if not (held by the thread the
// handler interrupted, or by another one still at deadline_ns). Without it
// the flusher writes anyway and marks file_end stale.
int cp_wlock_until(cp_slot_t *s, int64_t deadline_ns) {
  for (;;) {
    uint32_t c = 0;
    if (atomic_compare_exchange_strong(&s->wlock, &c, 1)) {
      atomic_store_explicit(&s->wowner, cp_thread_pointer(), memory_order_relaxed);
      return 1;
    }
    if (atomic_load_explicit(&s->wowner, memory_order_relaxed) == cp_thread_pointer() || mono_now() >= deadline_ns)
      return 0;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

// Appends buf to the O_APPEND fd that ended at start, retrying on EINTR and
// short writes. If it fails part way (a full disk), the file is cut back to
// start, so it never holds a torn frame or line that a later write would
// follow. Returns 0 or the errno (also kept as the slot's last_errno).
static int append_from(cp_slot_t *s, int fd, const char *p, size_t len, uint64_t start) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = write(fd, p + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n == 0 ? EIO : errno;
      if (done > 0 && ftruncate(fd, (off_t)start) != 0) atomic_store(&s->end_stale, 1);
      atomic_store(&s->last_errno, (uint32_t)err);
      return err;
    }
    done += (size_t)n;
  }
  return 0;
}

// An append with wlock held: where the file ends is known without a syscall
// (file_end), unless the signal flusher wrote without the lock.
int cp_append_locked(cp_slot_t *s, int fd, const void *buf, size_t len) {
  if (atomic_exchange(&s->end_stale, 0)) {
    off_t e = lseek(fd, 0, SEEK_END);
    if (e < 0) {
      atomic_store(&s->end_stale, 1);
      return errno;
    }
    s->file_end = (uint64_t)e;
  }
  int err = append_from(s, fd, buf, len, s->file_end);
  if (err == 0) s->file_end += len;
  return err;
}

// The signal flusher's append when it could not take wlock: the end is read
// from the file, and the holder is told to read it again after.
int cp_append_unlocked(cp_slot_t *s, int fd, const void *buf, size_t len) {
  atomic_store(&s->end_stale, 1);
  off_t e = lseek(fd, 0, SEEK_END);
  int err = e < 0 ? errno : append_from(s, fd, buf, len, (uint64_t)e);
  atomic_store(&s->end_stale, 1);
  return err;
}

int cp_append(cp_slot_t *s, int fd, const void *buf, size_t len) {
  cp_wlock(s);
  int err = cp_append_locked(s, fd, buf, len);
  cp_wunlock(s);
  return err;
}

// Writes the next status (wlock held, or the signal flusher without it): seq
// one more than the last, into slot seq % 2, in place. accepted and written
// are the caller's; unwritten, refused, dropped and the errno the slot's.
// Once the SIGTERM flusher has written its state, an update that says open
// (a drainer still running in a dying process) says flushed on SIGTERM.
int cp_status_write_locked(cp_slot_t *s, uint32_t state, uint64_t accepted, uint64_t written) {
  int fd = atomic_load_explicit(&s->status_fd, memory_order_acquire);
  if (fd < 0) return EBADF;
  if (state == CP_STATE_SIGNAL) atomic_store(&s->status_floor, CP_STATE_SIGNAL);
  if (state == CP_STATE_OPEN) state = atomic_load(&s->status_floor);
  cp_status_t st = {
      .seq = atomic_fetch_add(&s->status_seq, 1) + 1,
      .accepted = accepted,
      .written = written,
      .unwritten = atomic_load(&s->unwritten),
      .refused = atomic_load(&s->refused),
      .dropped = atomic_load(&s->dropped),
      .err = atomic_load(&s->last_errno),
      .state = state,
  };
  char buf[CP_STATUS_LINE_SIZE];
  size_t n = cp_status_encode(buf, s->ascii, &st);
  off_t off = (off_t)(s->status_off + (st.seq % 2) * n);
  for (size_t done = 0; done < n;) {
    ssize_t w = pwrite(fd, buf + done, n - done, off + (off_t)done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w == 0 ? EIO : errno;
    done += (size_t)w;
  }
  return 0;
}

int cp_status_write(cp_slot_t *s, uint32_t state, uint64_t accepted, uint64_t written) {
  cp_wlock(s);
  int err = cp_status_write_locked(s, state, accepted, written);
  cp_wunlock(s);
  return err;
}
