#!/usr/bin/env bash
# Part of make test-java, after make java: the checkout installed its Maven
# modules as its own version (Makefile, MAVEN_VERSION), which another
# checkout of the same commit on this machine does not share, and every
# `mvn` run inside the checkout (the examples, the engine tests) resolves
# that version: two checkouts never overwrite each other's artifacts.
set -euo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
repo=${CP_MAVEN_REPO:-$HOME/.m2/repository}
v=$($make -s --no-print-directory maven-version)
case "$v" in 0.1.0-????????-SNAPSHOT) ;; *) echo "maven-version: '$v'"; exit 1;; esac
grep -qx -- "-Drevision=$v" .mvn/maven.config || { echo ".mvn/maven.config does not name $v:"; cat .mvn/maven.config; exit 1; }

for m in java flink storm flink-agent; do
  d=$repo/io/cloudprofiler/cloudprofiler-$m/$v
  for f in "$d/cloudprofiler-$m-$v.jar" "$d/cloudprofiler-$m-$v.pom"; do
    [ -f "$f" ] || { echo "make java installed no $f"; exit 1; }
  done
  # The installed pom names the version it was built as, not ${revision}:
  # a consumer of cloudprofiler-flink finds cloudprofiler-java beside it.
  pom=$d/cloudprofiler-$m-$v.pom
  grep -q "<version>$v</version>" "$pom" || { echo "$pom does not say $v"; exit 1; }
  if grep -q '<version>${revision}</version>' "$pom"; then echo "$pom left \${revision} unresolved"; exit 1; fi
done

# The installed binding carries the library this checkout built.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && unzip -q "$repo/io/cloudprofiler/cloudprofiler-java/$v/cloudprofiler-java-$v.jar" resources/Linux-amd64/libcloudprofiler.so)
cmp -s "$tmp/resources/Linux-amd64/libcloudprofiler.so" build/libcloudprofiler.so ||
  { echo "the installed cloudprofiler-java $v carries another library than build/libcloudprofiler.so"; exit 1; }

# The examples resolve this checkout's version, with no flag.
(cd examples/flink && mvn -B dependency:list -DincludeGroupIds=io.cloudprofiler) > "$tmp/deps" 2>&1 ||
  { cat "$tmp/deps"; exit 1; }
for m in java flink; do
  grep -q "io.cloudprofiler:cloudprofiler-$m:jar:$v:" "$tmp/deps" ||
    { echo "examples/flink does not resolve cloudprofiler-$m $v:"; grep -i "cloudprofiler" "$tmp/deps"; exit 1; }
done

# A second checkout of the same commit gets a version of its own (this
# checkout's Makefile, which may hold changes not committed yet).
git clone -q --shared . "$tmp/other"
other=$($make -s --no-print-directory -C "$tmp/other" -f "$PWD/Makefile" maven-version)
[ "$other" != "$v" ] || { echo "a second checkout gets the same version, $v"; exit 1; }
echo "ok: this checkout installs $v, a second checkout would install $other; the examples resolve $v"
