#!/usr/bin/env bash
# Builds cosign, which signs and verifies a release (hack/release.sh), from the Go module proxy
# into bin/, keyed by the version below (hack/build-go-tool.sh; about 8 minutes the first time,
# later runs reuse it). Prints cosign=PATH. v2.6.5 is the newest v2 release: its key-based
# signing and verification run offline with the flags hack/release.sh gives.
set -euo pipefail
exec "$(dirname "$0")/build-go-tool.sh" cosign github.com/sigstore/cosign/v2/cmd/cosign v2.6.5
