#!/usr/bin/env bash
# Builds shfmt into bin/, keyed by the mvdan.cc/sh/v3 version go.mod requires (the tests parse
# the scripts with the same module). Prints shfmt=PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=$(cd "$root" && go list -m -f '{{.Version}}' mvdan.cc/sh/v3)
exec "$root/hack/build-go-tool.sh" shfmt mvdan.cc/sh/v3/cmd/shfmt "$version"
