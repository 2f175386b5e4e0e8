// stage.c — one stage of a pipeline of processes, instrumented with
// Cloudprofiler: the demo (examples/multinode/demo.sh) and the multi-node
// test (tests/multinode) run it. Tuple ids travel over TCP as 8-byte little-endian integers.
//
//   stage source NAME NEXT_HOST NEXT_PORT N RATE   emit ids 0..N-1 at RATE/s
//   stage relay  NAME LISTEN_PORT NEXT_HOST NEXT_PORT WORK_NS
//   stage sink   NAME LISTEN_PORT N
//   stage burn   SECONDS                          spin one CPU (load)
//
// LISTEN_PORT 0 lets the kernel choose; the stage then prints
// "<NAME>: listening on port <P>" on stderr before it waits.
//
// A source logs "<NAME> out" just before it sends an id; a relay logs
// "<NAME> in" when an id arrives, works WORK_NS (spinning), logs "<NAME> out"
// and forwards it; a sink logs "<NAME> in" and counts. Channels are
// BUFFER_IDENTITY in ZSTD_TSC. Every stage closes its channels before it
// exits 0 and prints one line "<role> <NAME> ids=<count>" on stdout. Any
// error exits 1 with a message on stderr. Every wait is bounded.
//
// STAGE_FOX=1 in the environment adds the return-trip (ReT) method (docs/clocks.md,
// "The return-trip method"): the source opens "<NAME> out" as FOX_START
// (receives ReTACKs on CP_RET_LISTEN and writes them to its return log,
// <...>.ret.cplog) and the sink opens "<NAME> in" as FOX_END (sends one
// ReTACK per id to CP_RET_START, which it needs at open). They log the same
// records as without it; relays ignore it. The source opens its channel
// before it connects, so it listens before any id can reach the sink. After
// its last id it waits for the next stage to close the connection (all ids
// passed it) and then STAGE_FOX_LINGER_MS more (default 1000) for the last
// ReTACKs, before it closes its channels (which ends the return log).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "cloudprofiler.h"

static const char *stage = "stage";

static void die(const char *what) {
  fprintf(stderr, "%s: %s: %s\n", stage, what, strerror(errno));
  exit(1);
}

static void check(int64_t rc, const char *what) {
  if (rc < 0) {
    fprintf(stderr, "%s: %s: %s\n", stage, what, CP_ErrorString((int32_t)rc));
    exit(1);
  }
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static long num(const char *s, const char *what) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < 0) {
    fprintf(stderr, "%s: bad %s %s\n", stage, what, s);
    exit(2);
  }
  return v;
}

static int64_t open_ch(const char *suffix, int32_t handler) {
  char name[256];
  snprintf(name, sizeof name, "%s %s", stage, suffix);
  int64_t ch = OpenChannel(name, CP_ZSTD_TSC, handler);
  check(ch, "OpenChannel");
  return ch;
}

// fox: STAGE_FOX=1 (the source and the sink use the FOX handlers).
static int fox(void) {
  const char *v = getenv("STAGE_FOX");
  return v && strcmp(v, "1") == 0;
}

// wait_closed waits up to 60 s for the peer of fd to close the connection.
static void wait_closed(int fd) {
  char b[64];
  int64_t deadline = now_ns() + 60 * 1000000000LL;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = poll(&p, 1, 1000);
    if (rc < 0 && errno != EINTR) die("poll");
    if (rc > 0) {
      ssize_t n = recv(fd, b, sizeof b, 0);
      if (n == 0) return;
      if (n < 0 && errno != EINTR) die("recv");
    }
    if (now_ns() > deadline) {
      fprintf(stderr, "%s: the next stage did not close within 60 s\n", stage);
      exit(1);
    }
  }
}

// connect_retry connects to host:port, retrying for up to 15 s while the next
// stage starts listening.
static int connect_retry(const char *host, long port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    fprintf(stderr, "%s: bad address %s\n", stage, host);
    exit(2);
  }
  int64_t deadline = now_ns() + 15 * 1000000000LL;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    close(fd);
    if (now_ns() > deadline) die("connect (15 s)");
    usleep(20000);
  }
}

// accept_one listens on port (all addresses of this namespace) and accepts
// one connection within 30 s.
static int accept_one(long port) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  if (ls < 0) die("socket");
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_ANY)};
  if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
  if (listen(ls, 1) < 0) die("listen");
  if (port == 0) {  // the kernel chose: say which, for whoever starts the previous stage
    socklen_t len = sizeof a;
    if (getsockname(ls, (struct sockaddr *)&a, &len) < 0) die("getsockname");
    fprintf(stderr, "%s: listening on port %u\n", stage, ntohs(a.sin_port));
  }
  struct pollfd p = {.fd = ls, .events = POLLIN};
  int rc = poll(&p, 1, 30000);
  if (rc < 0) die("poll");
  if (rc == 0) {
    fprintf(stderr, "%s: nobody connected within 30 s\n", stage);
    exit(1);
  }
  int fd = accept(ls, NULL, NULL);
  if (fd < 0) die("accept");
  close(ls);
  return fd;
}

static void send_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      die("send");
    }
    p += w;
    n -= (size_t)w;
  }
}

// Reader of 8-byte ids from a stream, with at most 60 s between reads.
struct reader {
  int fd;
  unsigned char buf[8192];
  size_t have, at;
};

// next_id returns 1 with an id, 0 at a clean end of stream.
static int next_id(struct reader *r, int64_t *id) {
  while (r->have - r->at < 8) {
    memmove(r->buf, r->buf + r->at, r->have - r->at);
    r->have -= r->at;
    r->at = 0;
    struct pollfd p = {.fd = r->fd, .events = POLLIN};
    int rc = poll(&p, 1, 60000);
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) die("poll (60 s without data)");
    ssize_t n = recv(r->fd, r->buf + r->have, sizeof r->buf - r->have, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("recv");
    }
    if (n == 0) {
      if (r->have != 0) {
        fprintf(stderr, "%s: stream ended inside an id\n", stage);
        exit(1);
      }
      return 0;
    }
    r->have += (size_t)n;
  }
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | r->buf[r->at + i];
  r->at += 8;
  *id = (int64_t)v;
  return 1;
}

static void put_id(unsigned char out[8], int64_t id) {
  for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)id >> (8 * i));
}

static void spin_ns(int64_t ns) {
  int64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

static int source(const char *host, long port, long n, long rate) {
  int64_t ch = open_ch("out", fox() ? CP_FOX_START : CP_BUFFER_IDENTITY);
  int fd = connect_retry(host, port);
  int64_t start = now_ns();
  for (int64_t id = 0; id < n; id++) {
    int64_t due = start + id * 1000000000LL / rate;  // paced: id k leaves at k/RATE s
    int64_t wait = due - now_ns();
    if (wait > 0) {
      struct timespec ts = {.tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000};
      nanosleep(&ts, NULL);
    }
    unsigned char b[8];
    put_id(b, id);
    check(LogTS(ch, id), "LogTS out");
    send_all(fd, b, 8);
  }
  if (shutdown(fd, SHUT_WR) < 0) die("shutdown");
  if (fox()) {  // the last ReTACKs are still on their way
    wait_closed(fd);
    const char *l = getenv("STAGE_FOX_LINGER_MS");
    long ms = l ? num(l, "STAGE_FOX_LINGER_MS") : 1000;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000};
    nanosleep(&ts, NULL);
  }
  close(fd);
  check(CloseAllChannels(), "CloseAllChannels");
  printf("source %s ids=%ld\n", stage, n);
  return 0;
}

static int relay(long lport, const char *host, long port, long work_ns) {
  int64_t in = open_ch("in", CP_BUFFER_IDENTITY), out = open_ch("out", CP_BUFFER_IDENTITY);
  int nfd = connect_retry(host, port);
  struct reader r = {.fd = accept_one(lport)};
  int64_t id, count = 0;
  while (next_id(&r, &id)) {
    check(LogTS(in, id), "LogTS in");
    spin_ns(work_ns);
    unsigned char b[8];
    put_id(b, id);
    check(LogTS(out, id), "LogTS out");
    send_all(nfd, b, 8);
    count++;
  }
  if (shutdown(nfd, SHUT_WR) < 0) die("shutdown");
  close(nfd);
  close(r.fd);
  check(CloseAllChannels(), "CloseAllChannels");
  printf("relay %s ids=%lld\n", stage, (long long)count);
  return 0;
}

static int sink(long lport, long n) {
  int64_t in = open_ch("in", fox() ? CP_FOX_END : CP_BUFFER_IDENTITY);
  struct reader r = {.fd = accept_one(lport)};
  int64_t id, count = 0;
  while (next_id(&r, &id)) {
    check(LogTS(in, id), "LogTS in");
    if (id != count) {
      fprintf(stderr, "%s: id %lld arrived as number %lld\n", stage, (long long)id, (long long)count);
      exit(1);
    }
    count++;
  }
  close(r.fd);
  check(CloseAllChannels(), "CloseAllChannels");
  printf("sink %s ids=%lld\n", stage, (long long)count);
  if (count != n) {
    fprintf(stderr, "%s: received %lld ids, want %ld\n", stage, (long long)count, n);
    return 1;
  }
  return 0;
}

static int burn(long seconds) {
  volatile uint64_t x = 0;
  int64_t end = now_ns() + seconds * 1000000000LL;
  while (now_ns() < end)
    for (int i = 0; i < 100000; i++) x += (uint64_t)i;
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc == 3 && strcmp(argv[1], "burn") == 0) return burn(num(argv[2], "seconds"));
  if (argc < 3) goto usage;
  stage = argv[2];
  if (strcmp(argv[1], "source") == 0 && argc == 7)
    return source(argv[3], num(argv[4], "port"), num(argv[5], "N"), num(argv[6], "rate") ?: 1);
  if (strcmp(argv[1], "relay") == 0 && argc == 7)
    return relay(num(argv[3], "port"), argv[4], num(argv[5], "port"), num(argv[6], "work"));
  if (strcmp(argv[1], "sink") == 0 && argc == 5) return sink(num(argv[3], "port"), num(argv[4], "N"));
usage:
  fprintf(stderr,
          "usage: stage source NAME NEXT_HOST NEXT_PORT N RATE | relay NAME LISTEN_PORT NEXT_HOST NEXT_PORT "
          "WORK_NS | sink NAME LISTEN_PORT N | burn SECONDS\n");
  return 2;
}
