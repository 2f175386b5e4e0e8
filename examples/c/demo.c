// demo.c — a C program instrumented with Cloudprofiler: a two-stage pipeline
// of threads passing tuple ids, a buffered channel at each stage, a periodic
// counter at the end. Build: see the Makefile (`make demo`).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "cloudprofiler.h"

#define N 2000000
static int64_t ch_src, ch_sink, ch_count;

static void check(int64_t rc, const char *what) {
  if (rc < 0) {
    fprintf(stderr, "%s: %s\n", what, CP_ErrorString((int32_t)rc));
    exit(1);
  }
}

static void *sink(void *arg) {
  (void)arg;
  for (int64_t id = 0; id < N; id++) {
    check(LogTS(ch_sink, id), "LogTS sink");
    check(LogTS(ch_count, id), "LogTS counter");
  }
  return NULL;
}

int main(void) {
  ch_src = OpenChannel("demo source", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  check(ch_src, "OpenChannel source");
  ch_sink = OpenChannel("demo sink", CP_S2_TSC, CP_BUFFER_IDENTITY);
  check(ch_sink, "OpenChannel sink");
  ch_count = OpenChannel("demo throughput", CP_ASCII_TSC, CP_PERIODICCOUNTER);
  check(ch_count, "OpenChannel counter");
  check(ParameterizeChannel(ch_count, CP_ARG0, 10 * 1000 * 1000), "ParameterizeChannel");  // 10 ms periods

  for (int64_t id = 0; id < N; id++) check(LogTS(ch_src, id), "LogTS source");
  pthread_t t;
  pthread_create(&t, NULL, sink, NULL);
  pthread_join(t, NULL);

  check(CloseAllChannels(), "CloseAllChannels");
  printf("logged %d tuples on 2 buffered channels and a periodic counter\n", N);

  // Misuse is an error code, never a crash.
  printf("two errors on purpose (misuse returns an error code, never crashes):\n");
  int32_t rc = LogTS(12345, 0);
  printf("  LogTS(12345, 0) = %d (%s)\n", rc, CP_ErrorString(rc));
  rc = CloseChannel(ch_src);
  printf("  CloseChannel twice = %d (%s)\n", rc, CP_ErrorString(rc));
  return 0;
}
