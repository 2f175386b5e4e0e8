// tscorder.c — which instruction may stamp an event: the evidence behind
// LogTS reading `rdtscp` (docs/performance.md, "Which instruction reads the
// counter").
//
// An event is stamped after the work before it (an operator's "out" after
// its computation). `rdtsc` is not ordered with the instructions before it:
// the CPU may read the counter while older instructions are still in
// flight, so a stamp can come before the work it follows has finished.
// `rdtscp` (and `lfence; rdtsc`) waits until every older instruction has
// executed. Here a piece of work whose end is still in flight when the
// stamp is read (K dependent loads that miss every cache, or K dependent
// divisions) is timed three ways, interleaved, and each way's median is
// printed next to the ordered one: what `rdtsc` leaves out is time the work
// really took, which a duration then misses (and a strict bound does not
// cover).
//
// usage: tscorder [ROUNDS]   (a benchmark: it prints, it asserts nothing)
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t rd_tsc(void) {
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
  return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t rd_tscp(void) {
  uint32_t lo, hi, aux;
  __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
  return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t rd_lfence_tsc(void) {
  uint32_t lo, hi;
  __asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi)::"memory");
  return ((uint64_t)hi << 32) | lo;
}

// 64 MiB of one random cycle: every step is a load that misses the caches.
#define CHASE_N ((size_t)(64 << 20) / sizeof(size_t))
static size_t *chase;
static size_t at;

static void make_chase(void) {
  size_t *perm = malloc(CHASE_N * sizeof *perm);
  chase = malloc(CHASE_N * sizeof *chase);
  if (!perm || !chase) { perror("malloc"); exit(1); }
  for (size_t i = 0; i < CHASE_N; i++) perm[i] = i;
  uint64_t x = 88172645463325252ull;  // xorshift64: any fixed seed will do
  for (size_t i = CHASE_N - 1; i > 0; i--) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    size_t j = x % (i + 1), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (size_t i = 0; i < CHASE_N; i++) chase[perm[i]] = perm[(i + 1) % CHASE_N];
  free(perm);
}

static volatile uint64_t divisor = 7;  // volatile: the divisions stay divisions
static uint64_t acc = 0xFFFFFFFFFFFFull;

static inline void work(int kind, int k) {
  if (kind == 0) {
    size_t p = at;
    for (int i = 0; i < k; i++) p = chase[p];
    at = p;
  } else {
    uint64_t a = acc, d = divisor;
    for (int i = 0; i < k; i++) a = a / d + 0xFFFFFFFFFFFFull;
    acc = a;
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double tsc_per_ns(void) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC_RAW, &a);
  uint64_t t0 = rd_tscp();
  do clock_gettime(CLOCK_MONOTONIC_RAW, &b);
  while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < 50e6);
  uint64_t t1 = rd_tscp();
  return (t1 - t0) / ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 2000;
  if (rounds < 10) rounds = 10;
  make_chase();
  double hz = tsc_per_ns();
  uint64_t *d[3];
  for (int m = 0; m < 3; m++) d[m] = malloc(rounds * sizeof(uint64_t));
  static const char *kinds[2] = {"dependent loads missing the caches", "dependent 64-bit divisions"};
  static const int ks[] = {1, 4, 16, 64};
  printf("The work before a stamp, timed with each instruction at both ends (medians of %d interleaved rounds, ns).\n", rounds);
  printf("'rdtsc misses' is the work rdtsc's stamps leave out: the ordered median minus rdtsc's.\n\n");
  printf("%-36s %4s %10s %14s %10s %14s\n", "work", "k", "rdtscp", "lfence;rdtsc", "rdtsc", "rdtsc misses");
  for (int kind = 0; kind < 2; kind++) {
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
      int k = ks[ki];
      for (int r = 0; r < rounds; r++) {
        uint64_t a, b;
        a = rd_tscp(); work(kind, k); b = rd_tscp(); d[0][r] = b - a;
        a = rd_lfence_tsc(); work(kind, k); b = rd_lfence_tsc(); d[1][r] = b - a;
        a = rd_tsc(); work(kind, k); b = rd_tsc(); d[2][r] = b - a;
      }
      double med[3];
      for (int m = 0; m < 3; m++) {
        qsort(d[m], rounds, sizeof(uint64_t), cmp_u64);
        med[m] = d[m][rounds / 2] / hz;
      }
      printf("%-36s %4d %10.1f %14.1f %10.1f %14.1f\n", kinds[kind], k, med[0], med[1], med[2], med[0] - med[2]);
    }
  }
  printf("\n(TSC %.3f GHz; sink %zu %llu)\n", hz, at, (unsigned long long)acc);
  return 0;
}
