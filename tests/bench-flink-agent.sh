#!/usr/bin/env bash
# make bench-flink-agent: the Flink agent's cost on a job's throughput.
# ThroughputJob (bindings/flink-agent's tests: map, filter, keyBy, a keyed
# process function, a sink, as fast as Flink takes them, chaining on) in a
# JVM of its own, without the agent, with it, and with it carrying ids
# (-javaagent:...=ids: 8 bytes more a record over the keyBy's channel),
# interleaved ROUNDS times; it
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
run() { # $1: without|with|ids
  local a=()
  [ "$1" = with ] && a=(-javaagent:"$jar")
  [ "$1" = ids ] && a=(-javaagent:"$jar"=ids)
  CP_LOG_DIR="$work/logs" java "${a[@]}" -Djava.io.tmpdir="$work" -cp "$cp" io.cloudprofiler.flink.agent.ThroughputJob "$n" "$workus" 2>/dev/null |
    sed -n 's/^records\/s \([0-9]*\).*/\1/p'
  rm -rf "$work/logs"
}
with=() without=() ids=()
for r in $(seq "$rounds"); do
  for m in without with ids; do
    x=$(run $m)
    echo "round $r, $m: $x records/s"
    case $m in with) with+=("$x") ;; ids) ids+=("$x") ;; *) without+=("$x") ;; esac
  done
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mw=$(median "${with[@]}") mo=$(median "${without[@]}") mi=$(median "${ids[@]}")
awk -v w="$mw" -v o="$mo" -v i="$mi" -v n="$n" 'BEGIN {printf "bench-flink-agent: %d records, '"$workus"' us of work each, medians: %d/s without the agent, %d/s with it (%.3fx), %d/s with it carrying ids (%.3fx)\n", n, o, w, w/o, i, i/o}'
