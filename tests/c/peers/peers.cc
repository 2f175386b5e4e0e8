// peers.cc — LogTS next to its peers in one process: ns per event and the
// ratio to a floor timed in the same round (make bench-peers, make
// bench-nanolog; tests/bench-peers.sh runs it and sets the peers up).
//
// Each round times, per case, a floor burst (bare rdtscp + a 16-byte store
// into a ring in L1) and right after it the case's burst of BURST events;
// the ratio of the two is the round's figure for the case. Rounds
// interleave the cases; a pause before each pair lets the previous case's
// background work (drain, consumer, worker thread) finish. Medians over the
// rounds, after two warm-up rounds (the ring's first touch, files created).
//
// Which peers are in: CP_PEERS_LTTNG (an LTTng-UST tracepoint with one
// 64-bit integer field), CP_PEERS_SPDLOG (spdlog's async logger and its sync
// basic file logger, one integer field, into files in a temporary
// directory), CP_PEERS_NANOLOG (NanoLog's C++17 NANO_LOG with one %ld). Each
// runs on its own defaults but where said (tests/bench-peers.sh).
#define _GNU_SOURCE 1
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ftw.h>
#include <string>
#include <time.h>
#include <unistd.h>
#include <vector>
#include "cloudprofiler.h"

#ifdef CP_PEERS_LTTNG
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "peers_tp.h"
#endif
#ifdef CP_PEERS_SPDLOG
#include <spdlog/async.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>
#endif
#ifdef CP_PEERS_NANOLOG
#include <array>  // NanoLogCpp17.h uses std::array without including it (g++ 12 then fails)
#include "NanoLogCpp17.h"
#endif

static const int64_t BURST = 1000000;
static const int WARM = 2;

static inline uint64_t rdtscp() {
  uint32_t lo, hi, aux;
  __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
  return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t rdtsc() {
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi)::"memory");
  return ((uint64_t)hi << 32) | lo;
}

static double tsc_per_ns;
static uint64_t sink_ring[4096 * 2];

// A floor: a stamp read with READ and a 16-byte record stored into a ring
// that stays in L1. With rdtscp, what LogTS cannot do without (the floor);
// with rdtsc, what NanoLog and LogTSMany read (not ordered with the work
// before it: docs/performance.md).
template <uint64_t (*READ)()>
static void floor_burst(int64_t first, int64_t n) {
  for (int64_t i = first; i < first + n; i++) {
    uint64_t t = READ();
    volatile uint64_t *r = &sink_ring[(i & 4095) * 2];
    r[0] = (uint64_t)i;
    r[1] = t;
  }
}
static void (*const floor_rdtscp)(int64_t, int64_t) = floor_burst<rdtscp>;
static void (*const floor_rdtsc)(int64_t, int64_t) = floor_burst<rdtsc>;

static int64_t logts_ch = -1, many_ch = -1;
static std::vector<int64_t> many_ids;

static void die(const char *what, int32_t code) {
  fprintf(stderr, "peers: %s: %s\n", what, CP_ErrorString(code));
  exit(1);
}

static void logts_burst(int64_t first, int64_t n) {
  int32_t bad = 0;
  for (int64_t i = first; i < first + n; i++) bad |= LogTS(logts_ch, i);
  if (bad) die("LogTS", bad);
}

// LogTSMany's ids are in memory before its clock starts (prepare).
static void logtsmany_ids(int64_t first, int64_t n) {
  for (int64_t k = 0; k < n; k++) many_ids[k] = first + k;
}

static void logtsmany_burst(int64_t, int64_t n) {
  int32_t bad = 0;
  if (LogTSMany(many_ch, many_ids.data(), n, &bad) != n || bad) die("LogTSMany", bad ? bad : CP_ERR_INTERNAL);
}

#ifdef CP_PEERS_LTTNG
static void lttng_burst(int64_t first, int64_t n) {
  for (int64_t i = first; i < first + n; i++) lttng_ust_tracepoint(cp_peers, event, i);
}
#endif

#ifdef CP_PEERS_SPDLOG
static std::shared_ptr<spdlog::logger> spd_async, spd_sync;
static void spdlog_async_burst(int64_t first, int64_t n) {
  for (int64_t i = first; i < first + n; i++) spd_async->info("id {}", i);
}
static void spdlog_sync_burst(int64_t first, int64_t n) {
  for (int64_t i = first; i < first + n; i++) spd_sync->info("id {}", i);
}
#endif

#ifdef CP_PEERS_NANOLOG
static void nanolog_burst(int64_t first, int64_t n) {
  for (int64_t i = first; i < first + n; i++) NANO_LOG(NOTICE, "id %ld", (long)i);
}
#endif

struct peer {
  std::string name;
  void (*burst)(int64_t first, int64_t n);
  void (*prepare)(int64_t first, int64_t n);  // before the floor burst, untimed (or null)
  std::vector<double> ns, x_floor, x_rdtsc;
};

static double timed(void (*f)(int64_t, int64_t), int64_t first, int64_t n) {
  uint64_t t0 = rdtscp();
  f(first, n);
  return (rdtscp() - t0) / tsc_per_ns / n;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

static std::string tmp_dir;
static int rm_entry(const char *p, const struct stat *, int, struct FTW *) { return remove(p); }
static void remove_tmp() {
  if (!tmp_dir.empty()) nftw(tmp_dir.c_str(), rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 15;
  int pause_ms = argc > 2 ? atoi(argv[2]) : 150;
  if (rounds < 1 || pause_ms < 0) {
    fprintf(stderr, "usage: peers [ROUNDS [PAUSE_MS]]\n");
    return 2;
  }
  const char *base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/cp-peers.XXXXXX";
  std::vector<char> tb(tmpl.begin(), tmpl.end());
  tb.push_back(0);
  if (!mkdtemp(tb.data())) {
    perror("peers: mkdtemp");
    return 1;
  }
  tmp_dir = tb.data();
  std::string cp_dir = tmp_dir + "/cloudprofiler";
  if (!getenv("CP_LOG_DIR")) setenv("CP_LOG_DIR", cp_dir.c_str(), 1);

  timespec n0, n1;
  clock_gettime(CLOCK_MONOTONIC_RAW, &n0);
  uint64_t c0 = rdtscp();
  usleep(100000);
  uint64_t c1 = rdtscp();
  clock_gettime(CLOCK_MONOTONIC_RAW, &n1);
  tsc_per_ns = (c1 - c0) / ((n1.tv_sec - n0.tv_sec) * 1e9 + (n1.tv_nsec - n0.tv_nsec));

  std::vector<peer> peers;
  peers.push_back({"rdtsc + 16-byte store", floor_rdtsc, nullptr, {}, {}, {}});
  logts_ch = OpenChannel("peers logts", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  many_ch = OpenChannel("peers logtsmany", CP_ZSTD_TSC, CP_BUFFER_IDENTITY);
  if (logts_ch < 0) die("OpenChannel", (int32_t)logts_ch);
  if (many_ch < 0) die("OpenChannel", (int32_t)many_ch);
  many_ids.resize(BURST);
  peers.push_back({"LogTS BUFFER_IDENTITY ZSTD_TSC", logts_burst, nullptr, {}, {}, {}});
  peers.push_back({"LogTSMany, 1M ids a call (per id)", logtsmany_burst, logtsmany_ids, {}, {}, {}});
#ifdef CP_PEERS_LTTNG
  // The tracepoint's state when the rounds start: tests/bench-peers.sh
  // starts a session before the process (the process registers with the
  // session daemon in its constructor, waiting up to 3 s).
  bool lttng_on = lttng_ust_tracepoint_enabled(cp_peers, event);
  peers.push_back({lttng_on ? "LTTng-UST tracepoint, session active" : "LTTng-UST tracepoint, NOT ENABLED (no session)",
                   lttng_burst, nullptr, {}, {}, {}});
#endif
#ifdef CP_PEERS_SPDLOG
  // Defaults: a queue of 8192 messages, one worker thread, the block
  // overflow policy (a full queue waits: nothing is lost), the default
  // pattern (date and time to the millisecond, logger name, level).
  spdlog::init_thread_pool(8192, 1);
  spd_async = spdlog::basic_logger_mt<spdlog::async_factory>("async", tmp_dir + "/spdlog-async.log", true);
  spd_sync = spdlog::basic_logger_st("sync", tmp_dir + "/spdlog-sync.log", true);
  peers.push_back({"spdlog async logger, file", spdlog_async_burst, nullptr, {}, {}, {}});
  peers.push_back({"spdlog basic_logger_st (sync), file", spdlog_sync_burst, nullptr, {}, {}, {}});
#endif
#ifdef CP_PEERS_NANOLOG
  std::string nl_file = tmp_dir + "/nanolog.bin";
  NanoLog::setLogFile(nl_file.c_str());
  NanoLog::preallocate();
  peers.push_back({"NanoLog NANO_LOG, one %ld", nanolog_burst, nullptr, {}, {}, {}});
#endif

  const char *rb = getenv("CP_RING_BLOCKS");
  printf("TSC %.3f GHz; ring of the LogTS channels: %s blocks of 65536 records%s; %s\n", tsc_per_ns,
         rb ? rb : "8", rb ? "" : " (the default)", argc > 3 ? argv[3] : "");
  printf("bursts of %lld events; %d rounds after %d warm-up rounds; in each round every case's burst right after "
         "a floor burst (rdtscp + 16-byte store), %d ms pause before each pair\n",
         (long long)BURST, rounds, WARM, pause_ms);
  fflush(stdout);

  std::vector<double> floors;
  int64_t next = 1;
  for (int r = -WARM; r < rounds; r++) {
#ifdef CP_PEERS_SPDLOG
    // Keep the files small: both were opened for appending.
    if (truncate((tmp_dir + "/spdlog-async.log").c_str(), 0) || truncate((tmp_dir + "/spdlog-sync.log").c_str(), 0)) {
      perror("peers: truncate");
      return 1;
    }
#endif
    double rd = 0;
    for (auto &p : peers) {
      usleep(pause_ms * 1000);
      if (p.prepare) p.prepare(next, BURST);
      double f = timed(floor_rdtscp, next, BURST);
      double v = timed(p.burst, next, BURST);
      next += BURST;
      if (p.burst == floor_rdtsc) rd = v;
      if (r < 0) continue;
      floors.push_back(f);
      p.ns.push_back(v);
      p.x_floor.push_back(v / f);
      p.x_rdtsc.push_back(v / rd);
    }
  }

  printf("\n%-46s %9s %10s %10s\n", "case", "ns/event", "x rdtscp", "x rdtsc");
  printf("%-46s %9.2f %10s %10s\n", "floor: rdtscp + 16-byte store", median(floors), "1", "");
  for (auto &p : peers)
    printf("%-46s %9.2f %10.2f %10.2f\n", p.name.c_str(), median(p.ns), median(p.x_floor),
           p.burst == floor_rdtsc ? 1.0 : median(p.x_rdtsc));
  printf("(x rdtscp: the median of each round's burst over the floor burst just before it; x rdtsc: over the\n"
         " same round's rdtsc + store burst)\n");
#ifdef CP_PEERS_LTTNG
  if (lttng_ust_tracepoint_enabled(cp_peers, event) != lttng_on)
    printf("LTTng-UST: the tracepoint's state changed during the rounds; its row is not what it says\n");
#endif
  fflush(stdout);

  if (CloseChannel(logts_ch) != 0 || CloseChannel(many_ch) != 0) die("CloseChannel", CP_ERR_IO);
#ifdef CP_PEERS_SPDLOG
  spdlog::shutdown();
#endif
#ifdef CP_PEERS_NANOLOG
  NanoLog::sync();
#endif
  remove_tmp();
  return 0;
}
