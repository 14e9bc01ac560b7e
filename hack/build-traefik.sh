#!/usr/bin/env bash
# Builds Traefik (an ingress controller: Kubernetes Ingress and Gateway API providers) from the Go
# module proxy into bin/, keyed by the version below, so a version bump rebuilds and later runs
# reuse the binary. Prints traefik=PATH.
#
# It builds in Traefik's released module with that module's own go.mod and go.sum, replace
# directives included, as Traefik's Makefile does: go install PKG@VERSION refuses a module with
# replace directives. v3.6.12 is the newest v3 release the proxy serves whole: each v3.7 release
# replaces github.com/traefik/traefik/dynamic/ext with its nested directory pkg/config/dynamic/ext,
# which a module zip leaves out and the proxy does not serve, and pins module versions it refuses.
# The web UI's assets are built with yarn and are not in the module; the binary serves no
# dashboard. Run it with --global.checknewversion=false: by default it asks Traefik's update
# server for new releases.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=v3.6.12
module=github.com/traefik/traefik/v3
out="$root/bin/traefik-$version"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  echo "build-traefik: building traefik $version (minutes the first time)" >&2
  start=$SECONDS
  tmp=$(mktemp -d)
  trap 'rm -rf -- "$tmp"' EXIT
  # Outside any module, so this module's go.mod and go.sum stay as they are.
  if ! dir=$(cd "$tmp" && export GOWORK=off && go mod download "$module@$version" \
    && go list -m -f '{{.Dir}}' "$module@$version"); then
    echo "build-traefik: the Go module proxy does not serve $module@$version (above)" >&2
    exit 1
  fi
  # As Traefik's Makefile: no cgo, stripped, and the version `traefik version` reports.
  if ! (cd "$dir" && CGO_ENABLED=0 GOWORK=off go build -mod=readonly -trimpath -o "$tmp/traefik" \
    -ldflags "-s -w -X $module/pkg/version.Version=$version" ./cmd/traefik); then
    echo "build-traefik: cannot build traefik $version: the go command names the missing module above" >&2
    exit 1
  fi
  mv "$tmp/traefik" "$out"
  echo "build-traefik: built traefik in $((SECONDS - start))s" >&2
fi
echo "traefik=$out"
