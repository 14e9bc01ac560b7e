#!/usr/bin/env bash
# Builds controller-gen (sigs.k8s.io/controller-tools) from the Go module proxy into bin/, keyed
# by the version below, so a version bump rebuilds and later runs reuse the binary. Prints
# controller-gen=PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=v0.23.0
out="$root/bin/controller-gen-$version"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  echo "build-controller-gen: building controller-gen $version (seconds the first time)" >&2
  start=$SECONDS
  # go install PKG@VERSION builds with controller-tools' own go.mod, so this module's stays as it is.
  tmp=$(mktemp -d)
  trap 'rm -rf -- "$tmp"' EXIT
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/controller-tools/cmd/controller-gen@$version"
  mv "$tmp/controller-gen" "$out"
  echo "build-controller-gen: built controller-gen in $((SECONDS - start))s" >&2
fi
echo "controller-gen=$out"
