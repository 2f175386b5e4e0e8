// logmany.c — logs tuple ids 0..N-1 into each named channel in turn
// (ZSTD_TSC, BUFFER_IDENTITY): `logmany N NAME...`. With CP_NODE and
// CP_FAKE_TSC set it plays one node of a pipeline, for measuring the
// analysis on large logs (make bench-analyze).
#include <stdio.h>
#include <stdlib.h>
#include "cloudprofiler.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: logmany N NAME...\n");
    return 2;
  }
  long long n = atoll(argv[1]);
  int k = argc - 2;
  int64_t ch[16];
  if (k > 16) k = 16;
  for (int i = 0; i < k; i++) {
    ch[i] = OpenChannel(argv[2 + i], CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
    if (ch[i] < 0) {
      fprintf(stderr, "OpenChannel %s: %s\n", argv[2 + i], CP_ErrorString((int32_t)ch[i]));
      return 1;
    }
  }
  for (long long id = 0; id < n; id++)
    for (int i = 0; i < k; i++)
      if (LogTS(ch[i], id) != 0) {
        fprintf(stderr, "LogTS failed at %lld\n", id);
        return 1;
      }
  return CloseAllChannels() == 0 ? 0 : 1;
}
