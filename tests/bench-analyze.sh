#!/usr/bin/env bash
# The analysis on 4N records (N = 25000000: 100M), made by
# tests/analyze-data.sh: nodes a and b, a logs N ids into one channel, b
# into three. Then, on the same files:
#   - the floor: `analyze --decode-only` (zstd and column decoding of every
#     record, on every core, nothing else);
#   - `analyze --no-durations` with --mem-mb 256 (the default) and 64, each
#     with its wall time, records/s, CPU use (200% = both cores), peak RSS
#     against the budget plus the fixed overhead docs/performance.md states, and the
#     ratio to the floor; the two runs' summaries must be identical.
# usage: tests/bench-analyze.sh BUILD_DIR [N] [MEMS]   (MEMS: "256 64")
set -euo pipefail
B=$(cd "$1" && pwd); N=${2:-25000000}; MEMS=${3:-256 64}
T=$B/cloudprofiler
# The fixed overhead on top of --mem-mb (docs/performance.md, "Memory"), MiB.
OVERHEAD=${OVERHEAD_MB:-64}
D=$(mktemp -d "${BENCH_DIR:-/tmp}/cp-bench-analyze.XXXXXX")
trap 'rm -rf "$D"' EXIT
bash "$(dirname "$0")/analyze-data.sh" "$B" "$D" "$N"
R=$((4 * N))
echo "logs: $(du -sh "$D/logs" | cut -f1) for $R records"

/usr/bin/time -f "%e %P" -o "$D/floor.time" "$T" analyze --decode-only --logs "$D/logs" --rounds "$D/rounds" --ref a
read -r floor _ <"$D/floor.time"

status=0
for mem in $MEMS; do
  rm -rf "$D/out"
  /usr/bin/time -f "%e %M %P" -o "$D/an.time" \
    "$T" analyze --rounds "$D/rounds" --logs "$D/logs" --out "$D/out" --no-durations --ref a --mem-mb "$mem" --quiet >"$D/an.out"
  read -r wall rss cpu <"$D/an.time"
  rss_mb=$((rss / 1024))
  verdict="within $mem + $OVERHEAD MiB"
  if [ "$rss_mb" -gt $((mem + OVERHEAD)) ]; then verdict="OVER $mem + $OVERHEAD MiB"; status=1; fi
  awk -v r="$R" -v w="$wall" -v f="$floor" -v m="$mem" -v rss="$rss_mb" -v cpu="$cpu" -v v="$verdict" 'BEGIN {
    printf "analyze --mem-mb %d: %.2f s wall, %.1fM records/s, CPU %s, peak RSS %d MiB (%s); %.1fx the decoding floor (%.2f s, %.1fM records/s)\n",
      m, w, r / w / 1e6, cpu, rss, v, w / f, f, r / f / 1e6 }'
  if [ -f "$D/summary.first" ]; then
    cmp -s "$D/summary.first" "$D/out/summary.csv" || { echo "summary.csv differs between memory budgets"; status=1; }
  else
    cp "$D/out/summary.csv" "$D/summary.first"
  fi
done
exit $status
