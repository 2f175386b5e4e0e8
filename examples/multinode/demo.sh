#!/usr/bin/env bash
# The inter-node method on one machine. Three processes play three nodes
# whose TSCs run at different rates from different origins (CP_FAKE_TSC):
# a source on node a, a relay on node b, a sink on node c, passing tuples
# over loopback TCP and logging them with the library. A TSC server and one
# client per node measure round trips before and after the run; `analyze`
# then puts every duration into node a's TSC with a strict error bound.
#
# usage: examples/multinode/demo.sh BUILD_DIR [ANALYZE FLAGS...]
#        (make builds BUILD_DIR/stage; the flags go to analyze)
# Its files go to BUILD_DIR/multinode-demo, or to $CP_DEMO_DIR when set.
set -euo pipefail
B=$(cd "${1:-build}" && pwd)
shift || true
T=$B/cloudprofiler
D=${CP_DEMO_DIR:-$B/multinode-demo}
rm -rf "$D" && mkdir -p "$D/logs" "$D/rounds"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT

# Each node: its counter (RATE:OFFSET over the real TSC) and, for the
# probes, an emulated network with asymmetric delay and jitter.
declare -A FAKE=([a]=1:0 [b]=0.9996:70000000000 [c]=1.00037:-2000000000)
declare -A NET=([a]=fwd=10us,jitter=5us [b]=rev=10us,jitter=5us [c]=jitter=10us)

# waitfor FILE PATTERN: up to 10 s for a line matching PATTERN; prints it.
waitfor() {
  for _ in $(seq 100); do
    if line=$(grep -m1 -e "$2" "$1" 2>/dev/null); then echo "$line"; return 0; fi
    sleep 0.1
  done
  echo "demo: no '$2' in $1 within 10 s:" >&2; cat "$1" >&2; return 1
}

"$T" tsc-server --listen 127.0.0.1:0 --out "$D/rounds" 2>"$D/tsc-server.log" & pids+=($!)
ADDR=$(waitfor "$D/tsc-server.log" 'listening on' | sed 's/^tsc-server: listening on \([^,]*\),.*/\1/')
for n in a b c; do
  CP_FAKE_TSC=${FAKE[$n]} "$T" tsc-client --server "$ADDR" --node $n --inject "${NET[$n]}" 2>"$D/tsc-client-$n.log" &
  pids+=($!)
done
echo "== round before the run"
"$T" tsc-round --server "$ADDR" --label before --wait-nodes 3

N=20000
node() { local n=$1; shift; CP_NODE=$n CP_FAKE_TSC=${FAKE[$n]} CP_LOG_DIR="$D/logs/$n" "$@"; }
echo "== pipeline: $N tuples, source (a) -> relay (b) -> sink (c)"
node c "$B/stage" sink sink 0 $N >"$D/sink.out" 2>"$D/sink.err" & sink=$!
SINK=$(waitfor "$D/sink.err" 'listening on port' | sed 's/.* port //')
node b "$B/stage" relay relay 0 127.0.0.1 "$SINK" 20000 >"$D/relay.out" 2>"$D/relay.err" & relay=$!
RELAY=$(waitfor "$D/relay.err" 'listening on port' | sed 's/.* port //')
node a "$B/stage" source source 127.0.0.1 "$RELAY" $N 20000 >"$D/source.out"
wait $relay $sink
cat "$D/source.out" "$D/relay.out" "$D/sink.out"

echo "== round after the run"
"$T" tsc-round --server "$ADDR" --label after
echo "== analyze"
"$T" analyze --rounds "$D/rounds" --logs "$D/logs" --out "$D/results" --ref a --trace "$D/results/trace.json" "$@"
