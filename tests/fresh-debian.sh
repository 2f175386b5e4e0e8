#!/usr/bin/env bash
# A newcomer's first command on a fresh Debian: a minimal Debian 12
# (debootstrap's minbase: no Go, no compiler, no Java, no git) in a chroot
# gets a clone of this repository; .ci/run --setup installs what the build
# needs (apt packages, and Go from the Go module proxy: Debian's golang-go
# is too old), then README's first command, `make`, builds and runs the
# demos. Prints the time and disk each step took.
#
# usage: tests/fresh-debian.sh [DIR]   (as root; DIR defaults to build/fresh-debian)
#
# Needs root (chroot, mounts), debootstrap (apt-get install debootstrap), and
# the network: Debian's mirror and the Go module proxy. Not part of `make
# test`: it fetches a Debian and about 1 GB of packages. `make test-fresh`
# runs it; the minimal Debian is kept in DIR.tar for the next run. The mounts live in a mount namespace of their own (unshare), so
# nothing stays mounted when it ends, however it ends.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-$repo/build/fresh-debian}
[ "$(id -u)" = 0 ] || { echo "fresh-debian: needs root (chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh-debian: needs debootstrap (apt-get install debootstrap)" >&2; exit 2; }
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

step() { printf '== %s\n' "$*"; }
t0=$(date +%s)
# The minimal system is fetched once and kept as a tarball beside the
# chroot; every run starts from it afresh.
if [ ! -s "$root.tar" ]; then
  step "debootstrap --variant=minbase bookworm"
  rm -rf "$root.part"
  debootstrap --variant=minbase bookworm "$root.part" "$mirror" > "$root.debootstrap.log" 2>&1 ||
    { tail -20 "$root.debootstrap.log" >&2; exit 1; }
  tar -C "$root.part" -cf "$root.tar.part" . && mv "$root.tar.part" "$root.tar"
  rm -rf "$root.part"
fi
rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xf "$root.tar"
# The minimal system, before: no go, gcc, javac or git.
for c in go gcc javac git; do
  if chroot "$root" /usr/bin/env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin sh -c "command -v $c" >/dev/null; then
    echo "fresh-debian: $root.tar already has $c: not a fresh machine (remove it to start over)" >&2
    exit 1
  fi
done
# The repository as a clone has it (what is committed), without git.
git -C "$repo" archive --format=tar --prefix=cloudprofiler/ HEAD | tar -x -C "$root/root"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The host's TLS trust, as a machine behind a TLS-inspecting proxy has it:
# its CA bundle installed as a local CA (Debian's ca-certificates adds it
# to the system's when .ci/run installs it), and the variables that point
# tools with a bundle of their own (pip) at the system's.
trust=()
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /etc/ssl/certs/ca-certificates.crt "$root/usr/local/share/ca-certificates/host-trust.crt"
  for v in PIP_CERT REQUESTS_CA_BUNDLE SSL_CERT_FILE CURL_CA_BUNDLE; do
    [ "${!v:-}" = /etc/ssl/certs/ca-certificates.crt ] && trust+=("$v=/etc/ssl/certs/ca-certificates.crt")
  done
fi

# Inside: .ci/run --setup, then `make` as README says, with HOME empty.
cat > "$root/root/fresh.sh" <<'EOF'
set -euo pipefail
cd /root/cloudprofiler
s=$(date +%s)
bash .ci/run --setup > /root/setup.log 2>&1 || { tail -30 /root/setup.log; exit 1; }
echo "setup: $(( $(date +%s) - s )) s ($(go_bin=$(bash .ci/go.sh 2>/dev/null); "$go_bin/go" version))"
export PATH="$(bash .ci/go.sh 2>/dev/null):$PATH"
s=$(date +%s)
make > /root/make.log 2>&1 || { tail -40 /root/make.log; exit 1; }
echo "make: $(( $(date +%s) - s )) s; build/ $(du -sm build | cut -f1) MB"
tail -5 /root/make.log
EOF
step "chroot: .ci/run --setup, then make"
unshare --mount --propagation private bash -c '
  set -e
  root=$1; shift
  mount -t proc proc "$root/proc"
  mount --rbind /dev "$root/dev"
  mount -t sysfs sys "$root/sys"
  mount -t tmpfs tmp "$root/tmp"
  chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 "$@" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash /root/fresh.sh
' _ "$root" "${trust[@]}"
# The demo's outputs, read from outside.
out=$root/root/cloudprofiler/build
for f in libcloudprofiler.so cloudprofiler; do
  [ -s "$out/$f" ] || { echo "fresh-debian: make left no build/$f" >&2; exit 1; }
done
[ -s "$out/multinode-demo/results/report.html" ] || { echo "fresh-debian: make wrote no report.html" >&2; exit 1; }
echo "fresh-debian: passed in $(( $(date +%s) - t0 )) s; the chroot holds $(du -sm "$root" | cut -f1) MB"
