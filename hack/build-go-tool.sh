#!/usr/bin/env bash
# Builds the Go program PKG at VERSION from the Go module proxy into bin/NAME-VERSION, with the
# program's own go.mod (go install PKG@VERSION), so this module's stays as it is; a version bump
# rebuilds and later runs reuse the binary. Prints NAME=PATH. Usage: build-go-tool.sh NAME PKG VERSION
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name=$1 pkg=$2 version=$3
out="$root/bin/$name-$version"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  echo "build-go-tool: building $name $version (seconds the first time)" >&2
  start=$SECONDS
  tmp=$(mktemp -d)
  trap 'rm -rf -- "$tmp"' EXIT
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "$pkg@$version"
  mv "$tmp/${pkg##*/}" "$out"
  echo "build-go-tool: built $name in $((SECONDS - start))s" >&2
fi
echo "$name=$out"
