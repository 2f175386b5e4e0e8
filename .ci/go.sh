#!/usr/bin/env bash
# Prints the bin directory of a Go that can build this module: the go on
# PATH if it is at least the version go.mod names, else that version's
# toolchain from the Go module proxy (the zip the go command itself fetches
# for GOTOOLCHAIN), unpacked once into ~/.cache/cloudprofiler/. Debian's
# golang-go is far older than the module needs.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(awk '$1 == "go" { print $2; exit }' go.mod)
if have=$(go env GOVERSION 2>/dev/null) && [ "$(printf '%s\n' "go$want" "$have" | sort -V | head -1)" = "go$want" ]; then
  dirname "$(command -v go)"
  exit 0
fi
case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) echo "no Go toolchain for $(uname -m) here: install Go $want" >&2; exit 1 ;;
esac
dir=${XDG_CACHE_HOME:-$HOME/.cache}/cloudprofiler/go$want
if [ ! -x "$dir/bin/go" ]; then
  proxy=${GOPROXY:-https://proxy.golang.org}
  proxy=${proxy%%[,|]*}
  case $proxy in http*) ;; *) proxy=https://proxy.golang.org ;; esac
  mod=golang.org/toolchain@v0.0.1-go$want.linux-$arch
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "fetching Go $want from $proxy (about 80 MB)" >&2
  curl -fsSL -o "$tmp/go.zip" "$proxy/golang.org/toolchain/@v/v0.0.1-go$want.linux-$arch.zip"
  python3 -m zipfile -e "$tmp/go.zip" "$tmp/x"
  # A module zip keeps no file modes: the go command makes bin/ and
  # pkg/tool/ executable when it unpacks a toolchain, and so do we.
  chmod -R a+x "$tmp/x/$mod/bin" "$tmp/x/$mod/pkg/tool"
  mkdir -p "$(dirname "$dir")"
  rm -rf "$dir"
  mv "$tmp/x/$mod" "$dir"
fi
"$dir/bin/go" version >&2
echo "$dir/bin"
