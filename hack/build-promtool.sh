#!/usr/bin/env bash
# Builds promtool, Prometheus's rule checker and tester, from the Go module proxy into bin/,
# keyed by the version below, so a version bump rebuilds and later runs reuse the binary: the
# tests run `promtool check rules` and `promtool test rules` on the monitoring bundle's alerts.
# Prints promtool=PATH.
#
# It builds in Prometheus's released module with that module's own go.mod and go.sum, as its
# Makefile does. The module's versions are v0.MINOR.PATCH for the release vMAJOR.MINOR.PATCH
# (v0.316.0 is Prometheus 3.16.0). Built with the tag remove_all_sd, which leaves out the
# service discoveries promtool does not import itself (the cloud providers' SDKs, a fifth of
# its packages): the tests check and test rules, and never discover targets.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=v0.316.0
module=github.com/prometheus/prometheus
out="$root/bin/promtool-$version-nosd"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  echo "build-promtool: building promtool $version (a few minutes the first time)" >&2
  start=$SECONDS
  tmp=$(mktemp -d)
  trap 'rm -rf -- "$tmp"' EXIT
  # Outside any module, so this module's go.mod and go.sum stay as they are.
  if ! dir=$(cd "$tmp" && export GOWORK=off && go mod download "$module@$version" \
    && go list -m -f '{{.Dir}}' "$module@$version"); then
    echo "build-promtool: the Go module proxy does not serve $module@$version (above)" >&2
    exit 1
  fi
  # As Prometheus's Makefile (promu): no cgo, stripped, and the version `promtool --version`
  # reports.
  if ! (cd "$dir" && CGO_ENABLED=0 GOWORK=off go build -mod=readonly -trimpath -tags remove_all_sd -o "$tmp/promtool" \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version" ./cmd/promtool); then
    echo "build-promtool: cannot build promtool $version: the go command names the missing module above" >&2
    exit 1
  fi
  mv "$tmp/promtool" "$out"
  echo "build-promtool: built promtool in $((SECONDS - start))s" >&2
fi
echo "promtool=$out"
