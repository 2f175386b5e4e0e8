// sustained.c — one thread logs sequential tuple ids into a ZSTD_TSC
// BUFFER_IDENTITY channel as fast as it can for D seconds (waiting, never
// dropping, when the ring is full). Reports end-to-end records/s (until
// CloseChannel returned: everything on disk), bytes per record on disk, and
// peak RSS against the configured ring bound; then idle CPU with channels
// open. The decoder's record count is checked by the Makefile.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cloudprofiler.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 10;
  int32_t fmt = argc > 2 ? atoi(argv[2]) : CP_ZSTD_TSC;
  int64_t ch = OpenChannel("sustained", fmt, CP_BUFFER_IDENTITY);
  if (ch < 0) { fprintf(stderr, "open: %s\n", CP_ErrorString((int32_t)ch)); return 1; }
  double t0 = now(), end = t0 + seconds;
  int64_t id = 0;
  while (now() < end) {
    for (int i = 0; i < 100000; i++, id++)
      if (LogTS(ch, id) != 0) { fprintf(stderr, "LogTS failed at %lld\n", (long long)id); return 1; }
  }
  double t_logged = now();
  if (CloseChannel(ch) != 0) { fprintf(stderr, "close failed\n"); return 1; }
  double t_closed = now();

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  // Size of what was written: the one file in CP_LOG_DIR ending in -sustained.cplog.
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "stat -c %%s \"$CP_LOG_DIR\"/*-sustained.cplog");
  FILE *p = popen(cmd, "r");
  long long bytes = 0;
  if (!p || fscanf(p, "%lld", &bytes) != 1) bytes = -1;
  if (p) pclose(p);
  const char *rb = getenv("CP_RING_BLOCKS"), *br = getenv("CP_BLOCK_RECORDS");
  double ring_mib = (rb ? atof(rb) : 8) * (br ? atof(br) : 65536) * 16 / 1048576.0;
  printf("sustained: %lld records in %.2f s logging + %.3f s to close = %.2f M records/s end to end "
         "(logging thread alone %.2f M/s)\n",
         (long long)id, t_logged - t0, t_closed - t_logged, id / (t_closed - t0) / 1e6, id / (t_logged - t0) / 1e6);
  printf("sustained: %lld bytes on disk = %.3f bytes/record\n", bytes, (double)bytes / id);
  printf("sustained: peak RSS %.1f MiB (ring bound %.1f MiB per channel)\n", ru.ru_maxrss / 1024.0, ring_mib);
  printf("records=%lld\n", (long long)id);

  // Idle: 20 channels of every kind open, nothing logged, for 3 s.
  int64_t chs[20];
  for (int i = 0; i < 20; i++) {
    char name[32];
    snprintf(name, sizeof name, "idle %d", i);
    chs[i] = OpenChannel(name, i % 2 ? CP_ZSTD_TSC : CP_BINARY, i % 3 == 0 ? CP_PERIODICCOUNTER : CP_BUFFER_IDENTITY);
  }
  for (int i = 0; i < 20; i++) LogTS(chs[i], 1);
  sleep(1);
  double c0 = cpu_seconds(), w0 = now();
  sleep(3);
  double cpu = (cpu_seconds() - c0) / (now() - w0) * 100;
  printf("idle: %.3f%% of one CPU with 20 channels open (7 periodic counters at the default 1 s period)\n", cpu);
  CloseAllChannels();
  return 0;
}
