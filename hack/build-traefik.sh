#!/usr/bin/env bash
# Builds Traefik (an ingress controller: Kubernetes Ingress and Gateway API providers) from the Go
# module proxy into bin/, keyed by the version below, so a version bump rebuilds and later runs
# reuse the binary (hack/build-in-module.sh: in the released module, as Traefik's Makefile
# builds it; about 8 minutes the first time). Prints traefik=PATH.
#
# v3.6.12 is the newest v3 release the proxy serves whole: each v3.7 release replaces
# github.com/traefik/traefik/dynamic/ext with its nested directory pkg/config/dynamic/ext, which a
# module zip leaves out and the proxy does not serve, and pins module versions it refuses. The
# web UI's assets are built with yarn and are not in the module; the binary serves no dashboard.
# Run it with --global.checknewversion=false: by default it asks Traefik's update server for new
# releases.
set -euo pipefail
version=v3.6.12
module=github.com/traefik/traefik/v3
exec "$(dirname "$0")/build-in-module.sh" traefik "traefik-$version" "$module" "$version" ./cmd/traefik \
  -ldflags "-s -w -X $module/pkg/version.Version=$version"
