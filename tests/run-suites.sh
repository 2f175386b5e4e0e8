#!/usr/bin/env bash
# make test: runs every suite named on the command line (make targets), each
# to its end even when one before it failed, keeping each one's output in
# build/test-logs/SUITE.log as well as printing it; then a summary of what
# passed and failed, with the tail of each failure's log, and a non-zero
# exit if any failed. Variables given to make (FUZZTIME=...) reach the
# suites through MAKEFLAGS.
set -uo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
logs=build/test-logs
mkdir -p "$logs"
names=() results=() times=() failed=()
total0=$(date +%s)
for s in "$@"; do
  echo "==== $s"
  t0=$(date +%s)
  $make --no-print-directory "$s" 2>&1 | tee "$logs/$s.log"
  st=${PIPESTATUS[0]}
  took=$(($(date +%s) - t0))
  names+=("$s") times+=("$took")
  if [ "$st" -eq 0 ]; then
    results+=("passed")
  else
    results+=("FAILED (exit $st)") failed+=("$s")
  fi
  echo "==== $s: ${results[-1]} in ${took}s"
done
total=$(($(date +%s) - total0))
for s in "${failed[@]}"; do
  echo
  echo "---- $s failed; the end of its output ($logs/$s.log has all of it):"
  tail -n 25 "$logs/$s.log"
done
echo
echo "==== make test: ${#names[@]} suites, ${#failed[@]} failed, $((total / 60)) min $((total % 60)) s"
for i in "${!names[@]}"; do
  printf '  %-20s %-18s %5ss\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
done
[ "${#failed[@]}" -eq 0 ]
