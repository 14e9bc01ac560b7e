#!/usr/bin/env bash
# Builds promtool, Prometheus's rule checker and tester, from the Go module proxy into bin/,
# keyed by the version below, so a version bump rebuilds and later runs reuse the binary
# (hack/build-in-module.sh: in the released module, as Prometheus's Makefile builds it): the
# tests run `promtool check rules` and `promtool test rules` on the monitoring bundle's alerts.
# Prints promtool=PATH.
#
# The module's versions are v0.MINOR.PATCH for the release vMAJOR.MINOR.PATCH (v0.316.0 is
# Prometheus 3.16.0). Built with the tag remove_all_sd, which leaves out the service discoveries
# promtool does not import itself (the cloud providers' SDKs, a fifth of its packages): the
# tests check and test rules, and never discover targets.
set -euo pipefail
version=v0.316.0
exec "$(dirname "$0")/build-in-module.sh" promtool "promtool-$version-nosd" github.com/prometheus/prometheus "$version" ./cmd/promtool \
  -tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version"
