#!/usr/bin/env bash
# Builds helm from the Go module proxy into bin/, keyed by the helm.sh/helm/v3 version that
# e2e/tools/helm/go.mod pins, so a version bump rebuilds and later runs reuse the binary.
# Prints helm=PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/e2e/tools/helm"
version=$(cd "$dir" && go list -m -f '{{.Version}}' helm.sh/helm/v3)
out="$root/bin/helm-$version"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  echo "build-helm: building helm $version (a minute or two the first time)" >&2
  start=$SECONDS
  # As helm's own Makefile: the version `helm version` reports, and the Kubernetes version
  # `helm template` and `helm lint` assume (1.N for the k8s.io/client-go v0.N it links).
  k8s=$(cd "$dir" && go list -m -f '{{.Version}}' k8s.io/client-go)
  minor=$(echo "$k8s" | cut -d. -f2)
  (cd "$dir" && go build -trimpath -o "$out.tmp" -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$version \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor" \
    helm.sh/helm/v3/cmd/helm)
  mv "$out.tmp" "$out"
  echo "build-helm: built helm in $((SECONDS - start))s" >&2
fi
echo "helm=$out"
