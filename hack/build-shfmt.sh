#!/usr/bin/env bash
# Builds shfmt from the Go module proxy into bin/, keyed by the mvdan.cc/sh/v3 version go.mod
# requires (the tests parse the scripts with the same module), so a version bump rebuilds and
# later runs reuse the binary. Prints shfmt=PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=$(cd "$root" && go list -m -f '{{.Version}}' mvdan.cc/sh/v3)
out="$root/bin/shfmt-$version"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  echo "build-shfmt: building shfmt $version (seconds the first time)" >&2
  start=$SECONDS
  # go install PKG@VERSION builds with shfmt's own go.mod, so this module's stays as it is.
  tmp=$(mktemp -d)
  trap 'rm -rf -- "$tmp"' EXIT
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "mvdan.cc/sh/v3/cmd/shfmt@$version"
  mv "$tmp/shfmt" "$out"
  echo "build-shfmt: built shfmt in $((SECONDS - start))s" >&2
fi
echo "shfmt=$out"
