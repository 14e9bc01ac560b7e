#!/usr/bin/env bash
# Builds controller-gen (sigs.k8s.io/controller-tools) into bin/, keyed by the version below.
# Prints controller-gen=PATH.
set -euo pipefail
exec "$(dirname "$0")/build-go-tool.sh" controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen v0.23.0
