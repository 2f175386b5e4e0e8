#!/usr/bin/env bash
# A real JVM with the library loaded gets SIGTERM mid-run: its shutdown hook
# must run (the library chains to the JVM's handler), it exits 143, and every
# record accepted before the hook closed the channel is in the file.
# Needs a JDK >= 22 (Foreign Function API); skipped without one.
set -u
lib=$(realpath "$1"); tool=$(realpath "$2")
java=""
for j in ${JAVA_HOME:+$JAVA_HOME/bin/java} /usr/lib/jvm/*/bin/java $(command -v java); do
  [ -x "$j" ] || continue
  v=$("$j" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  if [ -n "$v" ] && [ "$v" -ge 22 ]; then java=$j; break; fi
done
if [ -z "$java" ]; then echo "jvm: skipped, no JDK >= 22 found"; echo "0 passed, 0 failed, 1 skipped"; exit 0; fi
dir=$(mktemp -d); out=$dir/out
CP_LOG_DIR=$dir/logs "$java" --enable-native-access=ALL-UNNAMED "$(dirname "$0")/SigtermJvm.java" "$lib" >"$out" 2>&1 &
pid=$!
for _ in $(seq 200); do grep -q logging "$out" 2>/dev/null && break; sleep 0.1; done
sleep 1
kill -TERM $pid
wait $pid; status=$?
cat "$out"
fail=0
[ "$status" = 143 ] || { echo "jvm: FAIL exit status $status, want 143"; fail=1; }
grep -q "hook: CloseAllChannels=0" "$out" || { echo "jvm: FAIL the shutdown hook did not run or failed"; fail=1; }
acc=$(sed -n 's/.*accepted>=\([0-9]*\).*/\1/p' "$out")
n=$("$tool" dump --csv "$dir"/logs/*jvm_sigterm.cplog | tail -n +2 | awk -F, -v bad=0 '{ if ($1 != NR-1) bad=1 } END { print (bad ? -1 : NR) }')
echo "jvm: $n records in the file, $acc accepted when the hook ran"
{ [ "$n" -ge "${acc:-1}" ] && [ "${acc:-0}" -gt 0 ]; } || { echo "jvm: FAIL records lost or out of order"; fail=1; }
"$tool" dump "$dir"/logs/*jvm_sigterm.cplog | grep -E "records:|closed:"
rm -rf "$dir"
if [ $fail = 0 ]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi
