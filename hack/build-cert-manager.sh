#!/usr/bin/env bash
# Builds cert-manager (its upstream controllers and cainjector, wired by e2e/tools/certmanager)
# from the Go module proxy into bin/, keyed by the cert-manager version that module pins, so a
# version bump rebuilds and later runs reuse the binary. Prints cert-manager=PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/e2e/tools/certmanager"
version=$(cd "$dir" && go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)
out="$root/bin/cert-manager-$version"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  echo "build-cert-manager: building cert-manager $version (minutes the first time)" >&2
  start=$SECONDS
  # -X sets the version cert-manager reports in its User-Agent and logs.
  (cd "$dir" && go build -trimpath -o "$out.tmp" \
    -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$version" .)
  mv "$out.tmp" "$out"
  echo "build-cert-manager: built cert-manager in $((SECONDS - start))s" >&2
fi
echo "cert-manager=$out"
