#!/usr/bin/env bash
# Runs the Go fuzz targets listed in tests/fuzz-targets.txt (one per line:
# "<package path> <FuzzName>"; blank lines and # comments are skipped), one
# after another, each for $FUZZTIME (default 10s) with one fuzzing worker
# (-parallel 1), so that it leaves the machine's other core alone. Fails if
# any target fails or is not found; a failing input is saved by go test
# under that package's testdata/fuzz/<FuzzName>/ (`go test -run` replays it).
#
# Where it writes: new interesting inputs into Go's cache ($GOCACHE/fuzz);
# temporary files (the fuzzer's shared memory, go's work directory) into a
# directory under $GOCACHE that is removed when the script ends: nothing is
# left in /tmp, and nothing the tests use is removed.
#
# usage: tests/fuzz.sh [TARGETS_FILE]   (env: FUZZTIME=30s, GO=go)
set -euo pipefail
cd "$(dirname "$0")/.."
list=${1:-tests/fuzz-targets.txt}
fuzztime=${FUZZTIME:-10s}
GO=${GO:-go}
cache=$("$GO" env GOCACHE)
[ -n "$cache" ] && [ "$cache" != off ] || { echo "fuzz.sh: GOCACHE is off: go test -fuzz needs it" >&2; exit 1; }
mkdir -p "$cache"
tmp=$(mktemp -d "$cache/fuzz-tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
export TMPDIR=$tmp GOTMPDIR=$tmp

failed=()
n=0
while read -r pkg name extra || [ -n "${pkg:-}" ]; do
  case "$pkg" in ''|'#'*) continue ;; esac
  if [ -z "${name:-}" ] || [ -n "${extra:-}" ]; then
    echo "fuzz.sh: $list: want \"<package> <FuzzName>\", got: $pkg ${name:-} ${extra:-}" >&2
    exit 2
  fi
  n=$((n + 1))
  listed=$("$GO" test -list "^${name}\$" "$pkg" </dev/null 2>&1 || true)
  if ! grep -qx "$name" <<<"$listed"; then
    echo "fuzz.sh: no fuzz target $name in $pkg" >&2
    failed+=("$pkg $name (not found)")
    continue
  fi
  echo "== fuzz $pkg $name for $fuzztime"
  corpus="$pkg/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | sort || true)
  # The output is printed once the run is classified (below), not as it
  # comes: a few seconds each.
  if "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -parallel 1 "$pkg" </dev/null >"$tmp/out" 2>&1; then
    cat "$tmp/out"
  else
    after=$(ls "$corpus" 2>/dev/null | sort || true)
    # Go 1.26's fuzz coordinator can report its own -fuzztime deadline as a
    # failure ("context deadline exceeded", no failing input written) when a
    # busy machine delays a worker at the deadline: golang/go#75804, fixed
    # in Go 1.27. A real failure always writes its input under testdata/fuzz.
    if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$tmp/out" \
       && ! grep -q -e '^    --- FAIL' -e 'Failing input written' -e '^panic:' "$tmp/out"; then
      # Printed with go test's FAIL lines marked, so that nothing reading
      # this log counts a failure that is not one.
      sed -e 's/^--- FAIL: /--- deadline race (not a failure): /' -e 's/^FAIL/deadline race, not a failure:/' "$tmp/out"
      echo "fuzz.sh: $pkg $name: the fuzz coordinator's own deadline race (golang/go#75804), no failing input: not a failure"
    else
      cat "$tmp/out"
      failed+=("$pkg $name")
    fi
  fi
done <"$list"

if [ "$n" -eq 0 ]; then
  echo "fuzz.sh: no targets in $list" >&2
  exit 2
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: ${#failed[@]} of $n targets failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzz.sh: $n targets passed ($fuzztime each)"
