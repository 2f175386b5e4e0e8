#!/usr/bin/env bash
# make bench-spark: the analysis on Spark in local mode (local[1], local[2])
# next to analyze, on the same logs, in the same run, for each size in NS
# (tuples of 4 records on 2 nodes, as make bench-analyze makes them). Both
# compute the same results (durations summarised per pair; no durations
# file, no capacity, critical path, Mace or report, which the partitioned
# analysis does not do); the export (which a cluster runs on every node at
# once) is timed apart, and the cut of every record (export --format logs),
# each beside the decoding floor (analyze --decode-only) of the same run.
# Prints each one's time and records per second per core; the Spark times
# leave out the session's start (JVM, a few seconds).
# usage: tests/bench-spark.sh BUILD_DIR PYTHON [NS] [PARTITIONS]
set -euo pipefail
B=$(cd "$1" && pwd); PY=$2; NS=${3:-2500000 25000000}; P=${4:-64}
T=$B/cloudprofiler
HERE=$(cd "$(dirname "$0")" && pwd)
D=$(mktemp -d "${BENCH_DIR:-/tmp}/cp-bench-spark.XXXXXX")
trap 'rm -rf "$D"' EXIT
export TMPDIR=$D
only=(--no-durations --no-capacity --no-critical-path --no-mace --no-report --quiet)
timed() { /usr/bin/time -f "%e" -o "$D/t" "$@" >"$D/o" 2>"$D/e" || { cat "$D/e"; exit 1; }; cat "$D/t"; }
for N in $NS; do
  rm -rf "$D/logs" "$D/rounds" "$D/x" "$D/out"*
  bash "$HERE/analyze-data.sh" "$B" "$D" "$N" >/dev/null
  R=$((4 * N))
  echo "== $R records ($(du -sh "$D/logs" | cut -f1) of logs), $(nproc) vCPUs"
  an=$(timed "$T" analyze --logs "$D/logs" --rounds "$D/rounds" --out "$D/out-a" --ref a "${only[@]}")
  fl=$(timed "$T" analyze --decode-only --logs "$D/logs" --rounds "$D/rounds" --ref a)
  ex=$(timed "$T" export --logs "$D/logs" --rounds "$D/rounds" --out "$D/x" --ref a --partitions "$P")
  cu=$(timed "$T" export --format logs --to 1000000 --logs "$D/logs" --rounds "$D/rounds" --out "$D/cut" --ref a)
  rm -rf "$D/cut"
  awk -v r="$R" -v t="$an" 'BEGIN { printf "analyze (2 cores):      %7.1f s  %6.2fM records/s  %5.2fM a core\n", t, r/t/1e6, r/t/2e6 }'
  awk -v r="$R" -v t="$fl" 'BEGIN { printf "decoding floor:         %7.2f s  %6.2fM records/s  (analyze --decode-only)\n", t, r/t/1e6 }'
  awk -v r="$R" -v t="$ex" -v f="$fl" -v p="$P" -v s="$(du -sm "$D/x" | cut -f1)" 'BEGIN { printf "export (2 cores):       %7.1f s  %6.2fM records/s  %5.1fx the floor (%d partitions, %d MB)\n", t, r/t/1e6, t/f, p, s }'
  awk -v r="$R" -v t="$cu" -v f="$fl" 'BEGIN { printf "cut, all kept:          %7.2f s  %6.2fM records/s  %5.1fx the floor (export --format logs)\n", t, r/t/1e6, t/f }'
  for m in 1 2; do
    read -r sp n < <(cd "$D" && "$PY" "$HERE/spark/bench_spark.py" "local[$m]" "$D/x" "$D/out-s$m" "$T" 2>"$D/e" | tail -1) || { cat "$D/e"; exit 1; }
    [ "$n" = "$R" ] || { echo "Spark local[$m] analysed $n records, not $R"; cat "$D/e"; exit 1; }
    cmp -s "$D/out-a/summary.csv" "$D/out-s$m/summary.csv" || { echo "Spark local[$m]: summary.csv differs from analyze's"; exit 1; }
    awk -v r="$R" -v t="$sp" -v m="$m" -v a="$an" 'BEGIN { printf "Spark local[%d]:         %7.1f s  %6.2fM records/s  %5.2fM a core (%.1fx analyze a core)\n", m, t, r/t/1e6, r/t/m/1e6, (t*m)/(a*2) }'
  done
done
