#!/usr/bin/env bash
# make bench-flink-agent: the Flink agent's cost on a job's throughput.
# ThroughputJob (bindings/flink-agent's tests: map, filter, keyBy, a keyed
# process function, a sink, as fast as Flink takes them, chaining on) in a
# JVM of its own, with the agent and without, interleaved ROUNDS times; it
# prints each run's steady pace (the keyed process function's records from
# its tenth to its ninetieth percent over their time: the JVM's and the
# agent's start left out) and the ratio of the medians. WORK_US: microseconds of
# work the keyed process function spins a record (default 0: nothing but
# Flink's own cost, the agent's worst case). A benchmark: two runs are
# two states of the machine, so nothing here passes or fails.
set -euo pipefail
cd "$(dirname "$0")/../bindings/flink-agent"
n=${N:-5000000} rounds=${ROUNDS:-3} workus=${WORK_US:-0}
jar=$PWD/target/cloudprofiler-flink-agent-0.1.0.jar
[ -f "$jar" ] || { echo "no $jar: make java first"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mvn -q -B dependency:build-classpath -Dmdep.includeScope=test -Dmdep.outputFile="$work/cp" > /dev/null
cp="$PWD/target/test-classes:$(cat "$work/cp")"
run() { # $1: with|without
  local a=() ; [ "$1" = with ] && a=(-javaagent:"$jar")
  CP_LOG_DIR="$work/logs" java "${a[@]}" -Djava.io.tmpdir="$work" -cp "$cp" io.cloudprofiler.flink.agent.ThroughputJob "$n" "$workus" 2>/dev/null |
    sed -n 's/^records\/s \([0-9]*\).*/\1/p'
  rm -rf "$work/logs"
}
with=() without=()
for r in $(seq "$rounds"); do
  for m in without with; do
    x=$(run $m)
    echo "round $r, $m the agent: $x records/s"
    if [ $m = with ]; then with+=("$x"); else without+=("$x"); fi
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mw=$(median "${with[@]}") mo=$(median "${without[@]}")
awk -v w="$mw" -v o="$mo" -v n="$n" 'BEGIN {printf "bench-flink-agent: %d records, '"$workus"' us of work each, medians: %d/s with the agent, %d/s without: %.3fx\n", n, w, o, w/o}'
