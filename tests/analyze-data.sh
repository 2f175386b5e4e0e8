#!/usr/bin/env bash
# Makes the logs `make bench-analyze` analyses, in DIR: two processes play
# nodes a and b (different fake counters); a logs ids 0..N-1 into one
# channel ("a out"), b into three ("b in", "b work", "b out"), ZSTD_TSC with
# BUFFER_IDENTITY; a TSC server and two clients on loopback measure a round
# before and after. DIR/rounds and DIR/logs/{a,b} are what analyze reads.
# usage: tests/analyze-data.sh BUILD_DIR DIR N
set -euo pipefail
B=$(cd "$1" && pwd); D=$2; N=$3
T=$B/cloudprofiler
mkdir -p "$D"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
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
