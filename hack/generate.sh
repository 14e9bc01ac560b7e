#!/usr/bin/env bash
# Generates what is derived from the API types in api/: their DeepCopy methods
# (api/*/zz_generated.deepcopy.go) and the CustomResourceDefinitions, into the kustomize base
# and, the same file, the chart. With OUT=<dir>, writes into <dir> instead, in the same layout,
# and changes nothing in the repository (the test that checks the generated files are current).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cg=$("$root/hack/build-controller-gen.sh")
cg=${cg#controller-gen=}
out=${OUT:-$root}
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
"$cg" object paths=./api/... output:object:dir="$tmp/object" crd:crdVersions=v1 output:crd:dir="$tmp/crd"
mkdir -p "$out/api/v1alpha1" "$out/manifests/base" "$out/manifests/chart/shadowgate/templates"
cp "$tmp/object/zz_generated.deepcopy.go" "$out/api/v1alpha1/"
cp "$tmp/crd/shadowgate.interlink.eu_tunnels.yaml" "$out/manifests/base/tunnel-crd.yaml"
cp "$tmp/crd/shadowgate.interlink.eu_tunnels.yaml" "$out/manifests/chart/shadowgate/templates/tunnel-crd.yaml"
