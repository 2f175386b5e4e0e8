#!/usr/bin/env bash
# make test-install: make install into a new prefix; examples/c/demo.c built
# from another directory with the compile line docs/c.md gives, run with no
# LD_LIBRARY_PATH, its logs read by the installed tool; make uninstall
# leaves no file behind.
set -euo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
prefix=$(mktemp -d) work=$(mktemp -d)
trap 'rm -rf "$prefix" "$work"' EXIT
$make --no-print-directory install PREFIX="$prefix"
for f in lib/libcloudprofiler.so include/cloudprofiler.h bin/cloudprofiler lib/pkgconfig/cloudprofiler.pc; do
  [ -f "$prefix/$f" ] || { echo "make install: no $prefix/$f"; exit 1; }
done
cp examples/c/demo.c "$work/"
(
  cd "$work"
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  cc demo.c $(pkg-config --cflags --libs cloudprofiler) -o demo
  env -u LD_LIBRARY_PATH CP_LOG_DIR="$work/logs" ./demo > demo.out
  grep -q "logged 2000000 tuples" demo.out || { echo "demo:"; cat demo.out; exit 1; }
  "$prefix/bin/cloudprofiler" dump logs/*demo_sink.cplog > dump.out
  grep -q "^records: *2000000 in" dump.out || { echo "dump of the sink:"; cat dump.out; exit 1; }
)
# The installed tool says its version and, built in a git checkout, the
# commit of the checkout (+changes when the tree differed).
v=$("$prefix/bin/cloudprofiler" --version)
case "$v" in "cloudprofiler 0.1.0 (commit "*) ;; *) echo "cloudprofiler --version: $v"; exit 1;; esac
if head=$(git rev-parse HEAD 2>/dev/null); then
  case "$v" in *"commit $head"[+,]*) ;; *) echo "cloudprofiler --version: $v; the checkout is at $head"; exit 1;; esac
fi
echo "installed in $prefix, demo built with pkg-config from $work: ran, and the installed tool read its logs; $v"
$make --no-print-directory uninstall PREFIX="$prefix"
left=$(find "$prefix" -type f)
[ -z "$left" ] || { echo "make uninstall left: $left"; exit 1; }
echo "ok"
