#!/usr/bin/env bash
# make bench-peers, make bench-nanolog: runs BIN (tests/c/peers/peers.cc,
# built with some peers) four times: the LogTS channels on the default ring
# (8 blocks) and on CP_RING_BLOCKS=32, each quiet and then with a CPU hog (a
# shell loop spinning beside it, on the other vCPU of this 2-vCPU machine,
# killed after the run). Each run prints its own table: ratios compare
# bursts of one run only.
#
# For a binary with the LTTng-UST tracepoint (LTTNG=1), each run gets a
# recording session of its own, started before the process (which registers
# with the session daemon as it starts): a session daemon is started here
# when none answers (and stopped at the end), one user-space channel with
# 8 sub-buffers of 1 MiB per CPU (8 MiB, as the default LogTS ring), in
# discard mode with an infinite blocking timeout and LTTNG_UST_ALLOW_BLOCKING
# set, so that a full buffer makes the tracepoint wait for the consumer
# rather than drop the event (LogTS keeps every record too); the trace is
# written into a directory under BUILD, removed after the run, and the
# session's discarded-event count is printed. Without a session daemon the
# binary labels the row as the cost of a tracepoint not enabled.
#
# usage: tests/bench-peers.sh BUILD BIN   (PEERS_ROUNDS=15 PEERS_PAUSE_MS=150)
set -euo pipefail
build=$1
bin=$2
rounds=${PEERS_ROUNDS:-15}
pause=${PEERS_PAUSE_MS:-150}
lttng=${LTTNG:-}

# Each run starts in a directory of its own (NanoLog opens ./compressedLog
# as it starts, before the binary names its file), removed at the end.
bin=$(realpath "$bin")
run=$(mktemp -d "$(realpath "$build")/peers-run.XXXXXX")
sd= sess= out= hog=
cleanup() {
  rm -rf "$run"
  if [ -n "$hog" ]; then kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true; fi
  if [ -n "$sess" ]; then lttng --no-sessiond destroy "$sess" >/dev/null 2>&1 || true; fi
  if [ -n "$out" ]; then rm -rf "$out"; fi
  if [ -n "$sd" ]; then kill "$sd" 2>/dev/null || true; wait "$sd" 2>/dev/null || true; fi
}
trap cleanup EXIT

if [ -n "$lttng" ] && ! lttng --no-sessiond list >/dev/null 2>&1; then
  lttng-sessiond --no-kernel >"$run/lttng-sessiond.log" 2>&1 &
  sd=$!
  for _ in $(seq 50); do
    lttng --no-sessiond list >/dev/null 2>&1 && break
    kill -0 "$sd" 2>/dev/null || break
    sleep 0.2
  done
  if ! lttng --no-sessiond list >/dev/null 2>&1; then
    echo "bench-peers: no LTTng session daemon could be started:"
    tail -n 5 "$run/lttng-sessiond.log"
    echo "the LTTng-UST row is the cost of a tracepoint that is not enabled"
    kill "$sd" 2>/dev/null || true
    wait "$sd" 2>/dev/null || true
    sd= lttng=
  fi
fi

session_start() {
  sess=cp-peers-$$
  out=$(mktemp -d "$(realpath "$build")/peers-lttng.XXXXXX")
  lttng --no-sessiond create "$sess" --output="$out" >/dev/null
  lttng --no-sessiond enable-channel -u -s "$sess" --subbuf-size=1M --num-subbuf=8 --blocking-timeout=inf c >/dev/null
  lttng --no-sessiond enable-event -u -s "$sess" -c c 'cp_peers:event' >/dev/null
  lttng --no-sessiond start "$sess" >/dev/null
}

session_end() {
  lttng --no-sessiond stop "$sess" >/dev/null
  local stats
  stats=$(lttng --no-sessiond list "$sess" | sed -n 's/^ *\(Discarded events\|Lost packets\): */\1 /p' | paste -sd ';' -)
  echo "LTTng-UST session: ${stats:-no statistics}; trace $(du -sh "$out" | cut -f1) on disk"
  lttng --no-sessiond destroy "$sess" >/dev/null
  rm -rf "$out"
  sess= out=
}

for load in quiet hog; do
  for ring in default 32; do
    echo
    echo "== $(basename "$bin"): $load, LogTS ring ${ring}$([ "$ring" = default ] && echo ' (8 blocks)' || echo ' blocks')"
    if [ -n "$lttng" ]; then session_start; fi
    if [ "$load" = hog ]; then
      (while :; do :; done) &
      hog=$!
    fi
    (cd "$run" && env CP_CONF_SERVER= $([ "$ring" = 32 ] && echo CP_RING_BLOCKS=32) LTTNG_UST_ALLOW_BLOCKING=1 \
      "$bin" "$rounds" "$pause" "$([ "$load" = hog ] && echo 'with a CPU hog (a shell loop spinning)' || echo quiet)")
    if [ -n "$hog" ]; then kill "$hog"; wait "$hog" 2>/dev/null || true; hog=; fi
    if [ -n "$lttng" ]; then session_end; fi
  done
done
