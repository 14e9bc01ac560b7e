#!/usr/bin/env bash
# Builds the program PKG (a path inside MODULE, such as ./cmd/traefik) of MODULE at VERSION from
# the Go module proxy into bin/KEY, inside the released module with that module's own go.mod and
# go.sum, replace directives included, as its own Makefile does (go install PKG@VERSION refuses a
# module with replace directives): no cgo, stripped, and the rest of go build's flags as given
# (-tags, -ldflags -X of the version the program reports). A new KEY rebuilds; later runs reuse
# the binary. Prints NAME=PATH.
# Usage: build-in-module.sh NAME KEY MODULE VERSION PKG [GO-BUILD-FLAGS...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name=$1 key=$2 module=$3 version=$4 pkg=$5
shift 5
out="$root/bin/$key"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  echo "build-$name: building $name $version (minutes the first time)" >&2
  start=$SECONDS
  tmp=$(mktemp -d)
  trap 'rm -rf -- "$tmp"' EXIT
  # Outside any module, so this module's go.mod and go.sum stay as they are.
  if ! dir=$(cd "$tmp" && export GOWORK=off && go mod download "$module@$version" \
    && go list -m -f '{{.Dir}}' "$module@$version"); then
    echo "build-$name: the Go module proxy does not serve $module@$version (above)" >&2
    exit 1
  fi
  if ! (cd "$dir" && CGO_ENABLED=0 GOWORK=off go build -mod=readonly -trimpath -o "$tmp/$name" "$@" "$pkg"); then
    echo "build-$name: cannot build $name $version: the go command names the missing module above" >&2
    exit 1
  fi
  mv "$tmp/$name" "$out"
  echo "build-$name: built $name in $((SECONDS - start))s" >&2
fi
echo "$name=$out"
