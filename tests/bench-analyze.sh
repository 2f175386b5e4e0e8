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
#   - against DuckDB (issue 48: summaries only, at least 3x faster than
#     DuckDB on the exported Parquet), where DuckDB is here (build/pyenv's
#     duckdb module, else a `duckdb` command; neither: one line says so):
#     `export` writes the records translated into the reference clock, as
#     Parquet; DuckDB (2 threads) pivots them by tuple id and gives each
#     hop's (and end to end's) count, mean, median and p99 of end est -
#     start est; `analyze` with summaries only (no durations file,
#     capacity, critical path, Mace or report) on the raw logs. Their wall
#     times, DuckDB's and analyze's peak RSS, and the ratio; DuckDB's counts
#     and medians are checked against analyze's summary.csv;
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

# DuckDB: the duckdb module of build/pyenv (`make test-python` installs
# it), else a duckdb command on PATH.
duck=
if [ -x "$B/pyenv/bin/python" ] && duck_ver=$("$B/pyenv/bin/python" -c 'import duckdb; print(duckdb.__version__)' 2>/dev/null); then
  duck=python
elif command -v duckdb >/dev/null; then
  duck=cli; duck_ver=$(duckdb --version | awk '{ sub(/^v/, "", $1); print $1 }')
else
  echo "DuckDB not found (no duckdb module in $B/pyenv, no duckdb command): no comparison with DuckDB"
fi

# duck_sql HZ: what a data engineer would ask of the export: a row a tuple
# (PIVOT on the channel; the channels and their order are
# tests/analyze-data.sh's), each hop's duration in seconds (est_cycles are
# reference cycles; export.json's ref_hz makes seconds of them), and per hop
# the count, mean, median and p99. quantile_disc is nearest rank, as
# analyze's quantiles; one list of both quantiles sorts each hop once. End
# to end too, as analyze's summaries give it. Spills go under $D; no
# progress bar (it would be written into the result past 2 s).
duck_sql() {
  local hz="$1::DOUBLE" sel= agg= h
  for h in 0 1 2 3; do
    agg="$agg${agg:+, }count(d$h) n$h, avg(d$h) m$h, quantile_disc(d$h, [0.5, 0.99]) q$h"
    sel="$sel${sel:+, }n$h, m$h, q$h[1], q$h[2]"
  done
  cat <<EOF
SET threads = 2;
SET enable_progress_bar = false;
SET temp_directory = '$D/duck.tmp';
WITH t AS (
  PIVOT (SELECT tuple_id, channel, est_cycles FROM read_parquet('$D/exp/records/*/*.parquet'))
  ON channel IN ('a/a out' AS c0, 'b/b in' AS c1, 'b/b work' AS c2, 'b/b out' AS c3)
  USING min(est_cycles) GROUP BY tuple_id),
d AS (SELECT (c1 - c0) / $hz AS d0, (c2 - c1) / $hz AS d1, (c3 - c2) / $hz AS d2, (c3 - c0) / $hz AS d3 FROM t),
s AS (SELECT $agg FROM d)
SELECT $sel FROM s;
EOF
}

# The Python module's run is timed from connect to result: Python's and
# the module's start (about 0.2 s) are left out, in DuckDB's favour. The
# command's is timed whole (its start takes milliseconds).
duck_py='import sys, time, duckdb
sql = open(sys.argv[1]).read()
start = time.perf_counter()
con = duckdb.connect()
for st in sql.split(";"):
    if st.strip():
        rows = con.execute(st).fetchall()
el = time.perf_counter() - start
print(",".join(repr(v) for v in rows[0]))
open(sys.argv[2], "w").write("%.3f\n" % el)'

# duckrun: export, DuckDB on the export, analyze with summaries only; the
# wall times, and DuckDB's counts and medians against analyze's.
duckrun() {
  rm -rf "$D/exp" "$D/duck.tmp" "$D/out"
  if ! /usr/bin/time -f "%e" -o "$D/exp.time" \
    "$T" export --rounds "$D/rounds" --logs "$D/logs" --ref a --out "$D/exp" --quiet >/dev/null 2>"$D/exp.err"; then
    cat "$D/exp.err"; status=1; return 0
  fi
  local hz ok=1 d drss a arss
  hz=$(sed -n 's/^ *"ref_hz": *\([0-9.eE+]*\),*$/\1/p' "$D/exp/export.json")
  [ -n "$hz" ] || { echo "no ref_hz in the export's export.json"; status=1; return 0; }
  duck_sql "$hz" >"$D/duck.sql"
  if [ "$duck" = python ]; then
    /usr/bin/time -f "%M" -o "$D/duck.rss" \
      "$B/pyenv/bin/python" -c "$duck_py" "$D/duck.sql" "$D/duck.time" >"$D/duck.out" 2>"$D/duck.err" || ok=
    [ -z "$ok" ] || { read -r d <"$D/duck.time"; read -r drss <"$D/duck.rss"; }
  else
    /usr/bin/time -f "%e %M" -o "$D/duck.time" duckdb -csv -noheader <"$D/duck.sql" >"$D/duck.out" 2>"$D/duck.err" || ok=
    [ -z "$ok" ] || read -r d drss <"$D/duck.time"
  fi
  [ -n "$ok" ] || { cat "$D/duck.err"; status=1; return 0; }
  rm -rf "$D/exp" "$D/duck.tmp"
  # Summaries only: no durations file, capacity, critical path, Mace or
  # report (the report keeps aggregates over time that DuckDB is not asked for).
  if ! /usr/bin/time -f "%e %M" -o "$D/sum.time" \
    "$T" analyze --rounds "$D/rounds" --logs "$D/logs" --out "$D/out" --ref a --mem-mb "${MEMS%% *}" --quiet \
    --no-durations --no-capacity --no-critical-path --no-mace --no-report >/dev/null 2>"$D/an.err"; then
    cat "$D/an.err"; status=1; return 0
  fi
  if [ -f "$D/summary.first" ] && ! cmp -s "$D/summary.first" "$D/out/summary.csv"; then
    echo "summary.csv with summaries only differs from the full analysis's"; status=1
  fi
  read -r a arss <"$D/sum.time"
  awk -v v="$duck_ver" -v e="$(cat "$D/exp.time")" -v d="$d" -v drss="$drss" -v a="$a" -v arss="$arss" 'BEGIN {
    printf "DuckDB %s (2 threads) on the exported records: %.2f s, peak RSS %d MiB (export %.2f s); analyze summaries only: %.2f s, peak RSS %d MiB: analyze %.2fx DuckDB'"'"'s speed (target 3x)\n",
      v, d, drss / 1024, e, a, arss / 1024, d / a }'
  # Counts equal; medians within twice the strict bound of the median hop
  # (error_median_s: for a hop on one node analyze scales the counter's
  # difference by the node's rate, the export translates each end, and
  # both lie within the bound; across nodes they are the same numbers), and
  # 0.1 % more where analyze's quantiles come from its histogram.
  awk -F, -v row="$(cat "$D/duck.out")" '
    function abs(x) { return x < 0 ? -x : x }
    BEGIN {
      split(row, v, ",")
      split("a/a out>b/b in|b/b in>b/b work|b/b work>b/b out|a/a out>b/b out", hop, "|")
      for (h = 1; h <= 4; h++) { cnt[hop[h]] = v[4 * h - 3]; med[hop[h]] = v[4 * h - 1] }
    }
    NR > 1 && ($2 ">" $3) in cnt {
      k = $2 ">" $3; seen[k] = 1
      tol = 2 * $12 + 1e-9 * abs($7) + ($19 == "exact" ? 0 : 1e-3 * abs($7))
      if (cnt[k] != $4) { printf "DuckDB and analyze disagree: %s -> %s: %s durations, analyze %s\n", $2, $3, cnt[k], $4; bad = 1 }
      else if (abs(med[k] - $7) > tol) { printf "DuckDB and analyze disagree: %s -> %s: median %s s, analyze %s s (%s)\n", $2, $3, med[k], $7, $19; bad = 1 }
    }
    END {
      for (k in cnt) if (!(k in seen)) { sub(/>/, " -> ", k); print "DuckDB and analyze disagree: " k ": not in summary.csv"; bad = 1 }
      exit bad
    }' "$D/out/summary.csv" || status=1
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
  [ -z "$duck" ] || duckrun
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
