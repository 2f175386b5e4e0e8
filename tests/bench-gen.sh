#!/usr/bin/env bash
# The data generator on loopback: achieved versus target rate for a ladder
# of rates (gen send against an unlimited gen recv), then the maximum rates
# gen maxrate finds against (1) the unlimited receiver (the limit of the
# sender, loopback and receiver together on this machine) and (2) receivers
# standing in for systems under test of known capacity (--capacity): the
# search must land on the capacity (plus what the queue absorbs); last, the
# Go benchmarks that report, as ratios, the rates the tests no longer assert.
# usage: tests/bench-gen.sh BUILD_DIR [THREADS] [DURATION]
set -euo pipefail
B=$(cd "$1" && pwd); TH=${2:-2}; DUR=${3:-3s}
T=$B/cloudprofiler
D=$(mktemp -d /tmp/cp-bench-gen.XXXXXX)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
recv() { # recv NAME ARGS...: starts a receiver, sets ADDR
  local name=$1; shift
  "$T" gen recv --listen 127.0.0.1:0 "$@" >"$D/$name.out" 2>"$D/$name.log" & pids+=($!)
  for _ in $(seq 50); do grep -q 'listening on' "$D/$name.log" && break; sleep 0.1; done
  ADDR=$(sed -n 's/^gen recv: listening on \([^,]*\).*/\1/p' "$D/$name.log")
  [ -n "$ADDR" ] || { cat "$D/$name.log"; exit 1; }
}
recv free
echo "achieved versus target: $TH threads, $DUR per run, synthetic ad events (~246 B), loopback"
printf '%12s %12s %9s %10s %12s %8s\n' target achieved "% target" "max lag" received lost
for r in 10000 100000 500000 1000000 2000000 4000000 8000000; do
  out=$("$T" gen send --to "$ADDR" --rate "$r" --duration "$DUR" --threads "$TH" --synthetic --json 2>/dev/null || true)
  python3 - "$r" <<PY
import json, sys
r = json.loads('''$out''')
lag = max(t["MaxLag"] for t in r["Threads"]) / 1e6
print("%12d %12.0f %8.2f%% %8.2fms %12d %8d%s" % (int(sys.argv[1]), r["Achieved"], 100 * r["Achieved"] / r["Target"],
      lag, r["Received"], r["Lost"], "" if r["Reached"] else "  NOT REACHED"))
PY
done
echo
echo "gen maxrate against the unlimited receiver (the sender + loopback + receiver limit):"
"$T" gen maxrate --to "$ADDR" --start 1M --duration "$DUR" --threads "$TH" --synthetic --resolution 2% --pause 500ms 2>/dev/null | tail -1
for cap in 200000 1000000; do
  recv "cap$cap" --capacity "$cap" --queue 20000
  echo
  echo "gen maxrate against a receiver that processes $cap tuples/s with a queue of 20000 (the answer may exceed it by at most 20000/$DUR):"
  "$T" gen maxrate --to "$ADDR" --start 50k --duration "$DUR" --threads "$TH" --synthetic --resolution 1% --pause 500ms 2>/dev/null
done
echo
echo "the rates the datagen tests do not assert (a busy machine misses them), as ratios: 1 = the target, or the capacity:"
(cd "$(dirname "$0")/.." && go test -run '^$' -bench 'SendRate|MaxRateCapacity' -benchtime 1x ./datagen/ | grep '^Benchmark')
