#!/usr/bin/env bash
# The analysis on 100M records: two processes play nodes a and b (different
# fake counters), a logs N ids into one channel, b into three ("b in",
# "b work", "b out"); a TSC server and two clients on loopback measure a
# round before and after; then `analyze --no-durations` joins the
# 4N records. Prints the analysis's wall time and peak RSS.
# usage: tests/bench-analyze.sh BUILD_DIR [N]   (N = 25000000: 100M records)
set -euo pipefail
B=$(cd "$1" && pwd); N=${2:-25000000}
T=$B/cloudprofiler
D=$(mktemp -d /tmp/cp-bench-analyze.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
"$T" tsc-server --listen 127.0.0.1:0 --out "$D/rounds" 2>"$D/server.log" & pids+=($!)
for _ in $(seq 50); do grep -q 'listening on' "$D/server.log" && break; sleep 0.1; done
ADDR=$(sed -n 's/^tsc-server: listening on \([^,]*\),.*/\1/p' "$D/server.log")
[ -n "$ADDR" ] || { cat "$D/server.log"; exit 1; }
CP_FAKE_TSC=1:0 "$T" tsc-client --server "$ADDR" --node a 2>"$D/a.log" & pids+=($!)
CP_FAKE_TSC=0.9996:70000000000 "$T" tsc-client --server "$ADDR" --node b 2>"$D/b.log" & pids+=($!)
"$T" tsc-round --server "$ADDR" --label before --wait-nodes 2 >/dev/null
CP_NODE=a CP_FAKE_TSC=1:0 CP_LOG_DIR="$D/logs/a" "$B/logmany" "$N" "a out"
CP_NODE=b CP_FAKE_TSC=0.9996:70000000000 CP_LOG_DIR="$D/logs/b" "$B/logmany" "$N" "b in" "b work" "b out"
"$T" tsc-round --server "$ADDR" --label after >/dev/null
echo "logs: $(du -sh "$D/logs" | cut -f1) for $((4 * N)) records"
/usr/bin/time -f "analyze: %e s wall, peak RSS %M KiB" \
  "$T" analyze --rounds "$D/rounds" --logs "$D/logs" --out "$D/out" --no-durations --ref a
