// bench.c — ns per LogTS called from C through the header, per handler and
// format, next to the floor measured in the same run: the same rdtscp the
// library uses plus a 16-byte store into a ring in memory.
//
// Bursts of BURST calls that fit the ring (the Makefile sets CP_RING_BLOCKS
// so they do), with pauses that let the background pipeline drain; the
// median burst is reported. `bench halfring`: bursts of half the ring a
// channel gets (the default unless CP_RING_BLOCKS says otherwise).
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "cloudprofiler.h"

#define BURST 1000000
#define BURSTS 15


static inline uint64_t rdtscp(void) {
  uint32_t lo, hi, aux;
  __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
  return ((uint64_t)hi << 32) | lo;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double tsc_per_ns;

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmp);
  return v[n / 2];
}

static uint64_t sink_ring[4096 * 2];

static double floor_burst(int64_t burst) {
  uint64_t t0 = rdtscp();
  for (int64_t i = 0; i < burst; i++) {
    uint64_t t = rdtscp();
    volatile uint64_t *r = &sink_ring[(i & 4095) * 2];
    r[0] = i;
    r[1] = t;
  }
  return (rdtscp() - t0) / tsc_per_ns / burst;
}

// The floor of a batch record: rdtsc (what LogTSMany reads) + the same store.
static inline uint64_t rdtsc(void) {
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
  return ((uint64_t)hi << 32) | lo;
}

static double floor_burst_rdtsc(int64_t burst) {
  uint64_t t0 = rdtscp();
  for (int64_t i = 0; i < burst; i++) {
    uint64_t t = rdtsc();
    volatile uint64_t *r = &sink_ring[(i & 4095) * 2];
    r[0] = i;
    r[1] = t;
  }
  return (rdtscp() - t0) / tsc_per_ns / burst;
}

static double floor_ns(void) {
  double v[BURSTS];
  for (int b = 0; b < BURSTS; b++) v[b] = floor_burst(BURST);
  return median(v, BURSTS);
}

static int64_t next_id;

// The records of a channel's ring, as the library sizes it from the
// environment (its defaults: 8 blocks of 65536).
static int64_t ring_records(void) {
  const char *rb = getenv("CP_RING_BLOCKS"), *br = getenv("CP_BLOCK_RECORDS");
  return (int64_t)(rb ? atol(rb) : 8) * (br ? atol(br) : 65536);
}

typedef struct { double ns, floor_ns, ratio, first_lap_ns; } result_t;

// One case: a warm-up lap of the ring (its first touch of fresh memory pays
// page faults; reported apart), then BURSTS bursts, each followed by a floor
// burst of the same length, so that every ratio compares two neighbours.
// many: each burst is one LogTSMany call over burst ids. rdtsc_floor: the
// floor bursts read rdtsc, not rdtscp.
static int64_t *many_ids;

static result_t bench(const char *name, int32_t fmt, int32_t h, int32_t arg, int64_t val, int32_t arg2, int64_t val2,
                      int64_t burst, int many, int rdtsc_floor) {
  int64_t ch = OpenChannel(name, fmt, h);
  if (ch < 0) { fprintf(stderr, "%s: %s\n", name, CP_ErrorString((int32_t)ch)); exit(1); }
  if (arg >= 0 && ParameterizeChannel(ch, arg, val) != 0) { fprintf(stderr, "param %s\n", name); exit(1); }
  if (arg2 >= 0 && ParameterizeChannel(ch, arg2, val2) != 0) { fprintf(stderr, "param2 %s\n", name); exit(1); }
  int64_t ring = ring_records();
  double v[BURSTS], f[BURSTS], r[BURSTS], first = 0;
  int warm = (int)((ring + burst - 1) / burst);
  for (int b = -warm; b < BURSTS; b++) {
    int64_t id = next_id, end = next_id + burst;
    int32_t bad = 0;
    uint64_t t0;
    if (many) {
      for (int64_t k = 0; k < burst; k++) many_ids[k] = id + k;
      t0 = rdtscp();
      if (LogTSMany(ch, many_ids, burst, &bad) != burst && !bad) bad = CP_ERR_INTERNAL;
    } else {
      t0 = rdtscp();
      for (; id < end; id++) bad |= LogTS(ch, id);
    }
    double ns = (rdtscp() - t0) / tsc_per_ns / burst;
    next_id = end;
    if (bad) { fprintf(stderr, "LogTS failed on %s: %s\n", name, CP_ErrorString(bad)); exit(1); }
    if (b == -warm) first = ns;
    if (b >= 0) {
      v[b] = ns;
      f[b] = rdtsc_floor ? floor_burst_rdtsc(burst) : floor_burst(burst);
      r[b] = v[b] / f[b];
    }
    usleep(150000);  // let the pipeline drain: the next burst starts with an empty ring
  }
  if (CloseChannel(ch) != 0) { fprintf(stderr, "close %s\n", name); exit(1); }
  result_t res = {median(v, BURSTS), median(f, BURSTS), median(r, BURSTS), first};
  return res;
}

// SERVICERATE next to the counters' floor, FASTPERIODICCOUNTER, in the same
// rounds: each round times a burst of LogTS on a FASTPERIODICCOUNTER
// channel, then one on a SERVICERATE channel (its sampler running, every
// 1 ms at first), then a burst of CP_MarkBlocked on it (the mark is set
// once a period, then only loaded), each next to the same burst on the
// counter; the medians of the per-round ratios are reported.
static double logts_burst(int64_t ch, int64_t burst, int32_t *bad) {
  uint64_t t0 = rdtscp();
  for (int64_t i = 0; i < burst; i++) *bad |= LogTS(ch, i);
  return (rdtscp() - t0) / tsc_per_ns / burst;
}

static double mark_burst(int64_t ch, int64_t burst, int32_t *bad) {
  uint64_t t0 = rdtscp();
  for (int64_t i = 0; i < burst; i++) *bad |= CP_MarkBlocked(ch, CP_BLOCKED_OUTPUT);
  return (rdtscp() - t0) / tsc_per_ns / burst;
}

static void bench_service_rate(void) {
  int64_t fpc = OpenChannel("bench fpc", CP_BINARY_TSC, CP_FASTPERIODICCOUNTER);
  int64_t sr = OpenChannel("bench sr count", CP_BINARY_TSC, CP_SERVICERATE);
  if (fpc < 0 || sr < 0) { fprintf(stderr, "SERVICERATE bench: open failed\n"); exit(1); }
  double f[BURSTS], l[BURSTS], m[BURSTS], rl[BURSTS], rm[BURSTS];
  int32_t bad = 0;
  for (int b = -2; b < BURSTS; b++) {  // two rounds of warm-up
    double f1 = logts_burst(fpc, BURST, &bad);
    double l1 = logts_burst(sr, BURST, &bad);
    double f2 = logts_burst(fpc, BURST, &bad);
    double m1 = mark_burst(sr, BURST, &bad);
    if (b < 0) continue;
    f[b] = (f1 + f2) / 2;
    l[b] = l1;
    m[b] = m1;
    rl[b] = l1 / f1;
    rm[b] = m1 / f2;
    usleep(20000);
  }
  cp_service_rate_t st;
  int32_t rc = CP_ServiceRate(sr, &st);
  if (bad || rc || CloseChannel(fpc) || CloseChannel(sr)) {
    fprintf(stderr, "SERVICERATE bench: %s\n", CP_ErrorString(bad ? bad : rc));
    exit(1);
  }
  printf("\nSERVICERATE next to FASTPERIODICCOUNTER (the counters' floor), bursts of %d, medians of %d rounds:\n",
         BURST, BURSTS);
  printf("%-34s %9s %9s\n", "call", "ns/call", "x FPC");
  printf("%-34s %9.2f %9s\n", "LogTS FASTPERIODICCOUNTER", median(f, BURSTS), "1");
  printf("%-34s %9.2f %9.2f\n", "LogTS SERVICERATE", median(l, BURSTS), median(rl, BURSTS));
  printf("%-34s %9.2f %9.2f\n", "CP_MarkBlocked SERVICERATE", median(m, BURSTS), median(rm, BURSTS));
  printf("(the estimator sampled %lld periods meanwhile, T now %.0f ms)\n", (long long)st.periods, st.period_s * 1e3);
}

// The notes of a marked channel (OPERATOR#INSTANCE in|out: each record
// says whether the instance's thread waited since its previous mark) next
// to the same channels under names that mark nothing, in rounds: pairs of
// LogTS on an in and an out channel, back to back, and 3 us of spinning
// apart (as an operator's work keeps them: without rseq, getrusage is asked
// for every mark more than 2 us after the thread's previous one). The
// difference per record is what the notes cost.
static double spin_until(uint64_t t) {
  while (rdtscp() < t) {}
  return 0;
}

static double pair_burst(int64_t in, int64_t out, int64_t pairs, double gap_ns, int32_t *bad) {
  uint64_t gap = (uint64_t)(gap_ns * tsc_per_ns);
  if (!gap) {
    uint64_t t0 = rdtscp();
    for (int64_t i = 0; i < pairs; i++) {
      *bad |= LogTS(in, i);
      *bad |= LogTS(out, i);
    }
    return (rdtscp() - t0) / tsc_per_ns / (2.0 * pairs);
  }
  // Spaced: each call timed alone (the spins between are not counted).
  uint64_t spent = 0;
  for (int64_t i = 0; i < pairs; i++) {
    uint64_t a = rdtscp();
    *bad |= LogTS(in, i);
    uint64_t b = rdtscp();
    spin_until(b + gap);
    uint64_t c = rdtscp();
    *bad |= LogTS(out, i);
    uint64_t d = rdtscp();
    spin_until(d + gap);
    spent += (b - a) + (d - c);
  }
  return spent / tsc_per_ns / (2.0 * pairs);
}

static void bench_notes(void) {
  const char *mode = getenv("CP_WAITS");
  int64_t mi = OpenChannel("bench-mark#0 in", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  int64_t mo = OpenChannel("bench-mark#0 out", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  int64_t pi = OpenChannel("bench-plain#0 entered", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  int64_t po = OpenChannel("bench-plain#0 left", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  if (mi < 0 || mo < 0 || pi < 0 || po < 0) { fprintf(stderr, "notes bench: open failed\n"); exit(1); }
  printf("\nThe notes of a marked channel's waits (CP_WAITS=%s), a record on an in and an out channel in turn,\n"
         "next to the same on channels whose names mark nothing; medians of %d rounds:\n", mode && *mode ? mode : "rseq, the default", BURSTS);
  printf("%-34s %9s %9s %9s\n", "records", "ns/rec", "no notes", "+ns/rec (median of the rounds' differences)");
  struct { const char *name; int64_t pairs; double gap; } cases[] = {
    {"back to back", BURST / 2, 0},
    {"3 us apart, each call timed", 20000, 3000},
  };
  for (int c = 0; c < 2; c++) {
    double m[BURSTS], p[BURSTS], d[BURSTS];
    int32_t bad = 0;
    for (int b = -2; b < BURSTS; b++) {
      double x = pair_burst(mi, mo, cases[c].pairs, cases[c].gap, &bad);
      double y = pair_burst(pi, po, cases[c].pairs, cases[c].gap, &bad);
      if (b >= 0) m[b] = x, p[b] = y, d[b] = x - y;
      usleep(100000);
    }
    if (bad) { fprintf(stderr, "notes bench: %s\n", CP_ErrorString(bad)); exit(1); }
    printf("%-34s %9.2f %9.2f %+9.2f\n", cases[c].name, median(m, BURSTS), median(p, BURSTS), median(d, BURSTS));
  }
  if (CloseChannel(mi) || CloseChannel(mo) || CloseChannel(pi) || CloseChannel(po)) { fprintf(stderr, "notes bench: close\n"); exit(1); }
}

// The ring as a channel gets it (no CP_RING_BLOCKS): bursts of half the
// ring, which fit, each next to a floor burst of the same length.
static int bench_half_ring(void) {
  int64_t ring = ring_records();
  struct { const char *name; int32_t fmt; } cases[] = {
    {"BUFFER_IDENTITY ZSTD_TSC", CP_ZSTD_TSC},
    {"BUFFER_IDENTITY BINARY_TSC", CP_BINARY_TSC},
  };
  printf("\nbursts of %lld calls, half the ring (%lld records, %lld MiB a channel); medians of %d bursts, each next to\n"
         "a floor burst (rdtscp + 16-byte store) of the same length\n", (long long)(ring / 2), (long long)ring,
         (long long)(ring * 16 >> 20), BURSTS);
  printf("%-34s %9s %9s %8s %10s  %s\n", "handler / format", "ns/LogTS", "floor ns", "x floor", "first lap", "target");
  for (int i = 0; i < 2; i++) {
    result_t res = bench(cases[i].name, cases[i].fmt, CP_BUFFER_IDENTITY, -1, 0, -1, 0, ring / 2, 0, 0);
    printf("%-34s %9.2f %9.2f %8.2f %10.2f  <= 1.1x floor%s\n", cases[i].name, res.ns, res.floor_ns, res.ratio,
           res.first_lap_ns, res.ratio > 1.1 ? "  MISSED" : "");
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL;
  double n0 = now_ns();
  uint64_t t0 = rdtscp();
  usleep(100000);
  tsc_per_ns = (rdtscp() - t0) / (now_ns() - n0);

  // FOX_END sends each ReTACK to a UDP socket of this process that nobody
  // reads (the start node would be another machine): the kernel drops what
  // overflows its buffer, after the send(2) LogTS pays for.
  int sink = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t slen = sizeof sa;
  if (sink < 0 || bind(sink, (struct sockaddr *)&sa, sizeof sa) != 0 || getsockname(sink, (struct sockaddr *)&sa, &slen) != 0) {
    perror("FOX_END sink socket");
    return 1;
  }
  char start[64];
  snprintf(start, sizeof start, "127.0.0.1:%d", ntohs(sa.sin_port));
  setenv("CP_RET_START", start, 1);

  // rdtsc: the row's floor is rdtsc + the store (LogTSMany's stamp; for the
  // handlers that read no counter, the timestamp they skip).
  struct { const char *name; int32_t fmt, h, arg; int64_t val; int32_t arg2; int64_t val2; double target_ratio, target_ns; int64_t burst; int many, rdtsc; } cases[] = {
    {"NULLH", CP_BINARY_TSC, CP_NULLH, -1, 0, -1, 0, 0.35, 0, 0, 0, 1},
    {"NET_CONF resolved to NULLH", CP_BINARY_TSC, CP_NET_CONF, -1, 0, -1, 0, 0.35, 0, 0, 0, 1},
    {"FASTPERIODICCOUNTER", CP_BINARY_TSC, CP_FASTPERIODICCOUNTER, -1, 0, -1, 0, 0.35, 0, 0, 0, 1},
    {"SERVICERATE", CP_BINARY_TSC, CP_SERVICERATE, -1, 0, -1, 0, 0.35, 0, 0, 0, 1},
    {"PERIODICCOUNTER", CP_BINARY_TSC, CP_PERIODICCOUNTER, -1, 0, -1, 0, 0, 0, 0, 0, 1},
    {"XOY skipped (x=0,y=1000)", CP_BINARY_TSC, CP_XOY, CP_ARG0, 0, CP_ARG1, 1000, 0, 0, 0, 0, 1},
    {"XOY 1/1024 kept", CP_BINARY_TSC, CP_XOY, -1, 0, -1, 0, 0, 0},
    {"DOWNSAMPLE n=1000 (skipped path)", CP_BINARY_TSC, CP_DOWNSAMPLE, CP_ARG0, 1000, -1, 0, 0, 0, 0, 0, 1},
    {"DOWNSAMPLE n=10", CP_BINARY_TSC, CP_DOWNSAMPLE, CP_ARG0, 10, -1, 0, 0, 0},
    {"FIRSTLAST", CP_BINARY_TSC, CP_FIRSTLAST, -1, 0, -1, 0, 0, 0},
    {"MEDIAN window=1000", CP_BINARY_TSC, CP_MEDIAN, -1, 0, -1, 0, 0, 0},
    {"BUFFER_IDENTITY BINARY_TSC", CP_BINARY_TSC, CP_BUFFER_IDENTITY, -1, 0, -1, 0, 1.3, 0},
    {"BUFFER_IDENTITY ZSTD_TSC", CP_ZSTD_TSC, CP_BUFFER_IDENTITY, -1, 0, -1, 0, 1.3, 0},
    {"BUFFER_IDENTITY S2_TSC", CP_S2_TSC, CP_BUFFER_IDENTITY, -1, 0, -1, 0, 1.3, 0},
    {"BUFFER_IDENTITY_COMP ZSTD_TSC", CP_ZSTD_TSC, CP_BUFFER_IDENTITY_COMP, -1, 0, -1, 0, 1.3, 0},
    {"BUFFER_IDENTITY ASCII_TSC", CP_ASCII_TSC, CP_BUFFER_IDENTITY, -1, 0, -1, 0, 0, 0},
    {"BUFFER_IDENTITY BINARY (+mono)", CP_BINARY, CP_BUFFER_IDENTITY, -1, 0, -1, 0, 0, 0},
    {"BUFFER_IDENTITY ZSTD (+mono)", CP_ZSTD, CP_BUFFER_IDENTITY, -1, 0, -1, 0, 0, 0},
    {"LogTSMany 1M ids, BUF_ID ZSTD_TSC", CP_ZSTD_TSC, CP_BUFFER_IDENTITY, -1, 0, -1, 0, 0, 20, 0, 1, 1},
    {"FOX_START ZSTD_TSC", CP_ZSTD_TSC, CP_FOX_START, -1, 0, -1, 0, 1.3, 0},
    {"FOX_END ZSTD_TSC (+ReTACK send)", CP_ZSTD_TSC, CP_FOX_END, -1, 0, -1, 0, 0, 0, 100000},
  };
  int n = sizeof cases / sizeof cases[0];
  many_ids = malloc(BURST * sizeof *many_ids);
  if (only && !strcmp(only, "halfring")) return bench_half_ring();
  double fl = floor_ns();
  printf("TSC %.3f GHz; floor = rdtscp + 16-byte store into a ring in L1, %.2f ns now\n", tsc_per_ns, fl);
  printf("rdtsc floor = rdtsc + the same store, %.2f ns now; rows marked (rdtsc) are next to it (the handlers that\n"
         "read no counter; LogTSMany, whose rows give ns per record of one call over the burst's ids)\n",
         floor_burst_rdtsc(BURST));
  printf("bursts of %d calls after a warm-up lap of the ring; medians of %d bursts, each next to a floor burst\n\n",
         BURST, BURSTS);
  printf("%-42s %9s %9s %8s %10s  %s\n", "handler / format", "ns/LogTS", "floor ns", "x floor", "first lap", "target");
  for (int i = 0; i < n; i++) {
    if (only && !strstr(cases[i].name, only)) continue;
    result_t res = bench(cases[i].name, cases[i].fmt, cases[i].h, cases[i].arg, cases[i].val, cases[i].arg2, cases[i].val2,
                         cases[i].burst ? cases[i].burst : BURST, cases[i].many, cases[i].rdtsc);
    char target[64] = "";
    int miss = 0;
    if (cases[i].target_ratio > 0) {
      snprintf(target, sizeof target, "<= %.2gx floor", cases[i].target_ratio);
      miss = res.ratio > cases[i].target_ratio;
    } else if (cases[i].target_ns > 0) {
      snprintf(target, sizeof target, "<= %.0f ns", cases[i].target_ns);
      miss = res.ns > cases[i].target_ns;
    }
    char label[64];
    snprintf(label, sizeof label, "%s%s", cases[i].name, cases[i].rdtsc ? " (rdtsc)" : "");
    printf("%-42s %9.2f %9.2f %8.2f %10.2f  %s%s\n", label, res.ns, res.floor_ns, res.ratio, res.first_lap_ns,
           target, miss ? "  MISSED" : "");
    fflush(stdout);
  }
  if (!only || strstr("SERVICERATE", only)) bench_service_rate();
  if (!only || strstr("notes", only)) bench_notes();
  return 0;
}
