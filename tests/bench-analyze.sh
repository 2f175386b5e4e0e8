#!/usr/bin/env bash
# The analysis on 4N records for each N in NS (25000000: 100M records;
# 250000000: 1,000M), made by tests/analyze-data.sh: nodes a and b, a logs N
# ids into one channel, b into three. Then, on the same files:
#   - the floor: `analyze --decode-only` (zstd and column decoding of every
#     record, on every core, nothing else);
#   - `analyze --no-durations` with each --mem-mb in MEMS, each with its
#     wall time, records/s, CPU use (200% = both cores), peak RSS against
#     the budget plus the fixed overhead docs/performance.md states, and the
#     ratio to the floor; the runs' summaries must be identical. A budget
#     too small for N records is refused by analyze, and said so here;
#   - the floor and the first budget again with a busy loop on one core
#     (a CPU hog): the ratio on a shared machine;
#   - for the first N, if at most 25000000, the analysis with durations.parquet written:
#     its rows a second (the file is about 37 bytes a row).
# usage: tests/bench-analyze.sh BUILD_DIR [NS] [MEMS]   (NS: "25000000 250000000", MEMS: "256 64")
set -euo pipefail
B=$(cd "$1" && pwd); NS=${2:-25000000 250000000}; MEMS=${3:-256 64}
T=$B/cloudprofiler
# The fixed overhead on top of --mem-mb (docs/performance.md, "Memory"), MiB.
OVERHEAD=${OVERHEAD_MB:-64}
D=$(mktemp -d "${BENCH_DIR:-/tmp}/cp-bench-analyze.XXXXXX")
hog=
trap '[ -n "$hog" ] && kill $hog; rm -rf "$D"' EXIT
status=0

# run LABEL MEM [ARGS]: one analysis, its figures against the floor ($floor).
run() {
  local label=$1 mem=$2; shift 2
  rm -rf "$D/out"
  if ! /usr/bin/time -f "%e %M %P" -o "$D/an.time" \
    "$T" analyze --rounds "$D/rounds" --logs "$D/logs" --out "$D/out" --ref a --mem-mb "$mem" --quiet "$@" >"$D/an.out" 2>"$D/an.err"; then
    if grep -q "too many for --mem-mb" "$D/an.err"; then
      echo "$label --mem-mb $mem: refused, as documented: $(grep -o 'give --mem-mb [0-9]* or more' "$D/an.err")"
      return 0
    fi
    cat "$D/an.err"; status=1; return 0
  fi
  read -r wall rss cpu <"$D/an.time"
  local rss_mb=$((rss / 1024)) verdict="within $mem + $OVERHEAD MiB"
  if [ "$rss_mb" -gt $((mem + OVERHEAD)) ]; then verdict="OVER $mem + $OVERHEAD MiB"; status=1; fi
  awk -v l="$label" -v r="$R" -v w="$wall" -v f="$floor" -v m="$mem" -v rss="$rss_mb" -v cpu="$cpu" -v v="$verdict" 'BEGIN {
    printf "%s --mem-mb %d: %.2f s wall, %.1fM records/s, CPU %s, peak RSS %d MiB (%s); %.1fx the decoding floor (%.2f s, %.1fM records/s)\n",
      l, m, w, r / w / 1e6, cpu, rss, v, w / f, f, r / f / 1e6 }'
  if [ -f "$D/summary.first" ]; then
    cmp -s "$D/summary.first" "$D/out/summary.csv" || { echo "summary.csv differs between runs"; status=1; }
  else
    cp "$D/out/summary.csv" "$D/summary.first"
  fi
}

floorrun() {
  /usr/bin/time -f "%e %P" -o "$D/floor.time" "$T" analyze --decode-only --logs "$D/logs" --rounds "$D/rounds" --ref a >/dev/null
  read -r floor _ <"$D/floor.time"
}

first=1
for N in $NS; do
  rm -rf "$D/logs" "$D/rounds" "$D/summary.first"
  bash "$(dirname "$0")/analyze-data.sh" "$B" "$D" "$N" >/dev/null
  R=$((4 * N))
  echo "== $R records: logs $(du -sh "$D/logs" | cut -f1)"
  floorrun
  for mem in $MEMS; do
    run "analyze" "$mem" --no-durations
  done
  (while :; do :; done) & hog=$!
  floorrun
  run "with a CPU hog: analyze" "${MEMS%% *}" --no-durations
  kill $hog; wait $hog 2>/dev/null || true; hog=
  # Durations on the first N only, and not past 100M records (1,000M
  # durations would be a 25 GB file and 8 minutes).
  if [ -n "$first" ] && [ "$N" -le 25000000 ]; then
    first=
    rm -rf "$D/out"
    /usr/bin/time -f "%e %P" -o "$D/dur.time" "$T" analyze --rounds "$D/rounds" --logs "$D/logs" --out "$D/out" --ref a --quiet >/dev/null
    read -r wall cpu <"$D/dur.time"
    rows=$(sed -n 's/.*, \([0-9]*\) durations$/\1/p' "$D/out/summary.txt" | head -1)
    [ -n "$rows" ] || { echo "no durations count in summary.txt"; status=1; continue; }
    size=$(stat -c %s "$D/out/durations.parquet")
    awk -v r="$R" -v rows="$rows" -v w="$wall" -v cpu="$cpu" -v s="$size" 'BEGIN {
      printf "analyze writing durations.parquet: %.2f s wall, CPU %s, %.1fM durations/s (%d rows, %.1f bytes a row)\n", w, cpu, rows / w / 1e6, rows, s / rows }'
  fi
done
exit $status
