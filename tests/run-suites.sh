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
# failures prints a failed suite's failing tests and their assertions, as
# each runner says them: Go's "--- FAIL" with testify's Error/Messages and
# our "check failed" lines, pytest's FAILED and E lines, Surefire's
# [ERROR] Class.method lines, test_abi's and the engine harness's FAIL
# lines, panics. The first 40: the first failure is the one to read.
failures() {
  grep -E -e '--- FAIL:|^FAIL[[:space:]]|Error Trace:|^[[:space:]]+(Error|Messages):|check failed|^panic:|^FAILED |^E  ' \
    -e '\[ERROR\] +[A-Za-z0-9_$.]+[.:][A-Za-z0-9_$]+[:( ]|Tests run:.*FAIL|^ *(child )?FAIL |^\[engines\].*\bfail(ed)?\b' \
    "$1" | grep -v -E '^=== RUN' | head -n 40
}
for s in "${failed[@]}"; do
  echo
  echo "---- $s failed; its failing tests and assertions:"
  f=$(failures "$logs/$s.log")
  if [ -n "$f" ]; then echo "$f"; else echo "  (none in the runners' formats: see the end of its output)"; fi
  echo "---- the end of its output ($logs/$s.log has all of it):"
  tail -n 15 "$logs/$s.log"
done
echo
echo "==== make test: ${#names[@]} suites, ${#failed[@]} failed, $((total / 60)) min $((total % 60)) s"
for i in "${!names[@]}"; do
  printf '  %-20s %-18s %5ss\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
done
[ "${#failed[@]}" -eq 0 ]
