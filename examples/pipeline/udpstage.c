// udpstage.c — one stage of a pipeline of processes over UDP on one
// machine, marked for the capacity, critical-path and Mace analyses. The
// tests of those analyses (tests/capacity, tests/mace) run it on a shared
// machine, with no real-time priority and no pinning, and work their truth
// out of the records the same run logged (docs/capacity.md, "How we know
// it is right").
//
//   udpstage source NAME --to PORT[,PORT...] --rate R (--tuples N | --duration S)
//                        [--poisson SEED] [--on-off ON,OFF,LOW] [--first-id K]
//   udpstage op     NAME --listen PORT --to PORT[,PORT...] [--work-us W] [--sleep-us W]
//                        [--exp SEED] [--phase SECONDS,WORK_US] [--split K]
//                        [--keep K] [--drop P] [--rcvbuf BYTES]
//   udpstage sink   NAME --listen PORT [--rcvbuf BYTES] [--mark 0|1]
//   udpstage burn   SECONDS                     spin one CPU (another tenant)
//
// Ids travel as 8-byte little-endian datagrams to 127.0.0.1; -1 ends the
// stream. NAME may carry an instance ("mix#1"). The marks (capi/
// cloudprofiler.h, "Marking operators"; BUFFER_IDENTITY, ZSTD_TSC):
//   - a source logs "NAME out" right before it sends an id;
//   - an op logs "NAME in" right after recvfrom returned the id, works,
//     then for each copy it hands on logs "NAME out" right before sendto;
//   - a sink logs "NAME in" right after recvfrom (--mark 0: nothing; a
//     tuple's records then end at the last op's out, where a latency that
//     leaves out the sink's own delays ends).
// Several --to ports take the ids in turn (id modulo the ports): the
// instances of the next operator.
//
// An op's work is CPU work, not a wait on a clock: --work-us W runs a
// loop of dependent multiplications calibrated at start to take W us on an
// idle CPU (the shortest of repeated trials), so that a busy machine
// lengthens it as it lengthens real work. --exp SEED draws each tuple's
// work from an exponential distribution of mean W; --phase S,W2 changes the
// mean to W2 S seconds after the op's first tuple. --sleep-us W makes the
// work a sleep of W us instead: a cost that does not depend on what else
// runs on the machine. Its real cost is whatever the records show: the
// calibration is not the truth.
//
// --rcvbuf BYTES sizes the receive buffer (past net.core.rmem_max when
// run as root): the queue a backlog waits in, and above it datagrams drop.
//
// --split K hands every tuple on K times (the same id; a 1->K operator),
// --keep K hands on only ids divisible by K (a filter), --drop P skips the
// send of a share P of the copies after their "out" mark (the tuple is
// lost between this operator and the next: loss, not filtering), chosen by
// a hash of the id and the copy, so every run drops the same ones.
//
// The source paces on CLOCK_MONOTONIC: id k is due at k/R s (--poisson:
// exponential gaps, seeded), and it sleeps until the next is due (ids
// already due leave at once); --on-off ON,OFF,LOW sends at R for ON
// seconds, then at LOW for OFF seconds, and again. It ends with -1, sent
// five times 20 ms apart after 100 ms; an op forwards the end the same
// way and exits; an op or sink also ends 3 s after its last datagram
// (UDP may drop the end mark under overload).
//
// At exit each stage prints one JSON line on stdout: its name, what it
// received, handed on, dropped (--drop), filtered (--keep), the
// calibration, and an op's work's mean thread CPU time a tuple before
// --phase and after it (cpu_us, phase_cpu_us; 0: no tuple). Errors go to stderr and exit 1; usage errors exit 2.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "cloudprofiler.h"

static const char *name = "udpstage";

static void die(const char *what) {
  fprintf(stderr, "udpstage %s: %s: %s\n", name, what, strerror(errno));
  exit(1);
}

static void check(int64_t rc, const char *what) {
  if (rc < 0) {
    fprintf(stderr, "udpstage %s: %s: %s\n", name, what, CP_ErrorString((int32_t)rc));
    exit(1);
  }
}

static void usage(const char *why) {
  if (why) fprintf(stderr, "udpstage: %s\n", why);
  fprintf(stderr,
          "usage: udpstage source NAME --to PORT[,PORT...] --rate R (--tuples N | --duration S) [--poisson SEED]\n"
          "                         [--on-off ON,OFF,LOW] [--first-id K]\n"
          "       udpstage op NAME --listen PORT --to PORT[,PORT...] [--work-us W | --sleep-us W] [--exp SEED]\n"
          "                         [--phase SECONDS,WORK_US] [--split K] [--keep K] [--drop P] [--rcvbuf BYTES]\n"
          "       udpstage sink NAME --listen PORT [--rcvbuf BYTES] [--mark 0|1]\n"
          "       udpstage burn SECONDS\n");
  exit(2);
}

// thread_cpu_ns: the CPU time this thread has run: the time its work took,
// less what the machine gave to others meanwhile.
static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t) {
  struct timespec ts = {.tv_sec = t / 1000000000, .tv_nsec = t % 1000000000};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

static double fnum(const char *s, const char *what) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !(v >= 0) || isinf(v)) {
    fprintf(stderr, "udpstage: bad %s %s\n", what, s);
    exit(2);
  }
  return v;
}

static long inum(const char *s, const char *what) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < 0) {
    fprintf(stderr, "udpstage: bad %s %s\n", what, s);
    exit(2);
  }
  return v;
}

// ---- the work ----

static uint64_t rng_state;
static uint64_t rng(void) {  // splitmix64
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
static double uniform(void) { return ((double)(rng() >> 11) + 0.5) / 9007199254740992.0; }

static volatile uint64_t work_sink;
static void work_iters(uint64_t n) {
  uint64_t x = work_sink | 1;
  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  work_sink = x;
}

// iters_per_us: the loop's speed on this CPU, the fastest of 30 trials
// (a trial that lost the CPU is slower, never faster).
static double calibrate(void) {
  const uint64_t n = 200000;
  int64_t best = INT64_MAX;
  for (int i = 0; i < 30; i++) {
    int64_t t0 = now_ns();
    work_iters(n);
    int64_t d = now_ns() - t0;
    if (d > 0 && d < best) best = d;
  }
  return (double)n / ((double)best / 1000.0);
}

// ---- sockets ----

static int udp_socket(long listen_port, long rcvbuf) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) die("socket");
  // SO_RCVBUFFORCE passes net.core.rmem_max (root); else SO_RCVBUF, which
  // the kernel caps there.
  if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0 &&
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) < 0)
    die("SO_RCVBUF");
  if (listen_port >= 0) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)listen_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
  }
  return fd;
}

enum { MAX_TO = 64 };
struct dests {
  int n;
  struct sockaddr_in a[MAX_TO];
};

static void parse_to(struct dests *d, const char *s) {
  char *copy = strdup(s), *save = NULL;
  for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
    if (d->n == MAX_TO) usage("too many --to ports");
    long port = inum(p, "port");
    if (port < 1 || port > 65535) usage("--to: a port is 1..65535");
    d->a[d->n++] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  }
  free(copy);
  if (d->n == 0) usage("--to: no port");
}

// send_id sends one id to its destination (id modulo the ports). A full
// socket buffer on loopback (ENOBUFS, EAGAIN) drops it, as the network
// would; refused (the next stage has gone) is not an error either.
static int send_id(int fd, const struct dests *d, int64_t id, int64_t to) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)id >> (8 * i));
  const struct sockaddr_in *a = &d->a[(uint64_t)to % (uint64_t)d->n];
  for (;;) {
    if (sendto(fd, b, 8, 0, (const struct sockaddr *)a, sizeof *a) == 8) return 1;
    if (errno == EINTR) continue;
    if (errno == ENOBUFS || errno == EAGAIN || errno == ECONNREFUSED) return 0;
    die("sendto");
  }
}

static void send_end(int fd, const struct dests *d) {
  usleep(100000);
  for (int k = 0; k < 5; k++) {
    for (int i = 0; i < d->n; i++) send_id(fd, d, -1, i);
    usleep(20000);
  }
}

// recv_id waits for the next id: 1 with one, 0 at the end mark or after
// idle_ms without a datagram.
static int recv_id(int fd, int64_t *id, int idle_ms) {
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, idle_ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    if (rc == 0) return 0;
    unsigned char b[8];
    ssize_t n = recvfrom(fd, b, sizeof b, 0, NULL, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("recvfrom");
    }
    if (n != 8) continue;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    *id = (int64_t)v;
    return *id != -1;
  }
}

static int64_t open_ch(const char *role) {
  char n[512];
  snprintf(n, sizeof n, "%s %s", name, role);
  int64_t ch = OpenChannel(n, CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  check(ch, "OpenChannel");
  return ch;
}

// ---- the stages ----

struct opts {
  struct dests to;
  long listen, rcvbuf, tuples, split, keep, mark;
  double rate, duration, work_us, sleep_us, drop, phase_at, phase_us, on, off, low;
  int has_phase, on_off, poisson, exp;
  uint64_t seed, exp_seed, first_id;
};

static int source(const struct opts *o) {
  if (o->to.n == 0 || !(o->rate > 0) || (o->tuples <= 0 && !(o->duration > 0)))
    usage("source: --to, --rate and --tuples or --duration are needed");
  int fd = udp_socket(-1, 0);
  int64_t out = open_ch("out");
  rng_state = o->seed;
  int64_t start = now_ns() + 1000000, end = o->duration > 0 ? start + (int64_t)(o->duration * 1e9) : INT64_MAX;
  double due = 0;  // seconds after start
  uint64_t sent = 0, dropped = 0;
  for (uint64_t k = 0; o->tuples <= 0 || k < (uint64_t)o->tuples; k++) {
    double rate = o->rate;
    if (o->on_off) {
      double t = fmod(due, o->on + o->off);
      rate = t < o->on ? o->rate : o->low;
    }
    if (k > 0) due += o->poisson ? -log(uniform()) / rate : 1.0 / rate;
    int64_t at = start + (int64_t)(due * 1e9);
    if (at >= end) break;
    if (at > now_ns()) sleep_until(at);
    int64_t id = (int64_t)(o->first_id + k);
    check(LogTS(out, id), "LogTS out");
    if (send_id(fd, &o->to, id, id))
      sent++;
    else
      dropped++;
  }
  send_end(fd, &o->to);
  check(CloseAllChannels(), "CloseAllChannels");
  printf("{\"stage\":\"source\",\"name\":\"%s\",\"sent\":%llu,\"send_dropped\":%llu}\n", name,
         (unsigned long long)sent, (unsigned long long)dropped);
  return 0;
}

// drop_copy: the copy c of id is one of the share p dropped (a hash, the
// same in every run).
static int drop_copy(int64_t id, long c, double p) {
  if (!(p > 0)) return 0;
  uint64_t z = (uint64_t)id * 0x9E3779B97F4A7C15ULL + (uint64_t)c * 0xBF58476D1CE4E5B9ULL;
  z ^= z >> 31;
  z *= 0x94D049BB133111EBULL;
  z ^= z >> 29;
  return (double)(z >> 11) / 9007199254740992.0 < p;
}

static int op(const struct opts *o) {
  if (o->to.n == 0 || o->listen <= 0) usage("op: --listen and --to are needed");
  double ipu = calibrate();
  int in_fd = udp_socket(o->listen, o->rcvbuf), out_fd = udp_socket(-1, 0);
  int64_t in = open_ch("in"), out = open_ch("out");
  rng_state = o->exp_seed;
  uint64_t received = 0, handed = 0, dropped = 0, filtered = 0, send_dropped = 0;
  int64_t id, first = 0;
  // The work's CPU time before and after --phase, and its tuples: what
  // each tuple cost the thread, which the machine's other work does not
  // lengthen (a test's truth beside the records' wall-clock stays).
  int64_t cpu_ns[2] = {0, 0}, cpu_n[2] = {0, 0};
  while (recv_id(in_fd, &id, received ? 3000 : 60000)) {
    check(LogTS(in, id), "LogTS in");
    if (received++ == 0) first = now_ns();
    int ph = o->has_phase && now_ns() - first >= (int64_t)(o->phase_at * 1e9);
    double mean = ph ? o->phase_us : o->sleep_us > 0 ? o->sleep_us : o->work_us;
    double us = o->exp ? -log(uniform()) * mean : mean;
    int64_t c0 = thread_cpu_ns();
    if (o->sleep_us > 0) {
      if (us > 0) sleep_until(now_ns() + (int64_t)(us * 1000));
    } else if (us > 0) {
      work_iters((uint64_t)(us * ipu));
    }
    cpu_ns[ph] += thread_cpu_ns() - c0;
    cpu_n[ph]++;
    if (o->keep > 1 && id % o->keep != 0) {
      filtered++;
      continue;
    }
    for (long c = 0; c < o->split; c++) {
      check(LogTS(out, id), "LogTS out");
      if (drop_copy(id, c, o->drop)) {
        dropped++;
        continue;
      }
      if (send_id(out_fd, &o->to, id, id * o->split + c))
        handed++;
      else
        send_dropped++;
    }
  }
  send_end(out_fd, &o->to);
  check(CloseAllChannels(), "CloseAllChannels");
  printf("{\"stage\":\"op\",\"name\":\"%s\",\"received\":%llu,\"sent\":%llu,\"dropped\":%llu,\"filtered\":%llu,"
         "\"send_dropped\":%llu,\"iters_per_us\":%.1f,\"cpu_us\":%.3f,\"phase_cpu_us\":%.3f}\n",
         name, (unsigned long long)received, (unsigned long long)handed, (unsigned long long)dropped,
         (unsigned long long)filtered, (unsigned long long)send_dropped, ipu,
         cpu_n[0] ? cpu_ns[0] / 1e3 / (double)cpu_n[0] : 0.0, cpu_n[1] ? cpu_ns[1] / 1e3 / (double)cpu_n[1] : 0.0);
  return 0;
}

static int sink(const struct opts *o) {
  if (o->listen <= 0) usage("sink: --listen is needed");
  int fd = udp_socket(o->listen, o->rcvbuf);
  int64_t in = o->mark ? open_ch("in") : -1;
  uint64_t received = 0;
  int64_t id;
  while (recv_id(fd, &id, received ? 3000 : 60000)) {
    if (o->mark) check(LogTS(in, id), "LogTS in");
    received++;
  }
  check(CloseAllChannels(), "CloseAllChannels");
  printf("{\"stage\":\"sink\",\"name\":\"%s\",\"received\":%llu}\n", name, (unsigned long long)received);
  return 0;
}

static int burn(double seconds) {
  int64_t end = now_ns() + (int64_t)(seconds * 1e9);
  while (now_ns() < end) work_iters(100000);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "burn") == 0) return burn(fnum(argv[2], "seconds"));
  if (argc < 3) usage(NULL);
  name = argv[2];
  struct opts o = {.listen = -1, .split = 1, .keep = 1, .mark = 1};
  for (int i = 3; i < argc; i++) {
    const char *f = argv[i];
    if (i + 1 >= argc) usage("a flag without its value");
    const char *v = argv[++i];
    if (!strcmp(f, "--to"))
      parse_to(&o.to, v);
    else if (!strcmp(f, "--listen"))
      o.listen = inum(v, "--listen");
    else if (!strcmp(f, "--mark")) {
      if ((o.mark = inum(v, "--mark")) != 0 && o.mark != 1) usage("--mark 0|1");
    } else if (!strcmp(f, "--rcvbuf"))
      o.rcvbuf = inum(v, "--rcvbuf");
    else if (!strcmp(f, "--rate"))
      o.rate = fnum(v, "--rate");
    else if (!strcmp(f, "--tuples"))
      o.tuples = inum(v, "--tuples");
    else if (!strcmp(f, "--duration"))
      o.duration = fnum(v, "--duration");
    else if (!strcmp(f, "--poisson"))
      o.poisson = 1, o.seed = (uint64_t)inum(v, "--poisson");
    else if (!strcmp(f, "--first-id"))
      o.first_id = (uint64_t)inum(v, "--first-id");
    else if (!strcmp(f, "--on-off")) {
      if (sscanf(v, "%lf,%lf,%lf", &o.on, &o.off, &o.low) != 3 || !(o.on > 0) || !(o.off >= 0) || !(o.low > 0))
        usage("--on-off ON,OFF,LOW: seconds, seconds, a rate");
      o.on_off = 1;
    } else if (!strcmp(f, "--work-us"))
      o.work_us = fnum(v, "--work-us");
    else if (!strcmp(f, "--sleep-us"))
      o.sleep_us = fnum(v, "--sleep-us");
    else if (!strcmp(f, "--exp"))
      o.exp = 1, o.exp_seed = (uint64_t)inum(v, "--exp");
    else if (!strcmp(f, "--phase")) {
      if (sscanf(v, "%lf,%lf", &o.phase_at, &o.phase_us) != 2 || !(o.phase_at >= 0) || !(o.phase_us >= 0))
        usage("--phase SECONDS,WORK_US");
      o.has_phase = 1;
    } else if (!strcmp(f, "--split")) {
      if ((o.split = inum(v, "--split")) < 1) usage("--split K: K >= 1");
    } else if (!strcmp(f, "--keep")) {
      if ((o.keep = inum(v, "--keep")) < 1) usage("--keep K: K >= 1");
    } else if (!strcmp(f, "--drop")) {
      if ((o.drop = fnum(v, "--drop")) > 1) usage("--drop P: a share, 0..1");
    } else
      usage("unknown flag");
  }
  if (!strcmp(argv[1], "source")) return source(&o);
  if (!strcmp(argv[1], "op")) return op(&o);
  if (!strcmp(argv[1], "sink")) return sink(&o);
  usage("unknown stage");
}
