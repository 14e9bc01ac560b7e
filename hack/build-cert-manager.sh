#!/usr/bin/env bash
# Builds cert-manager (its upstream controllers and cainjector, wired by e2e/tools/certmanager)
# from the Go module proxy into bin/, keyed by the cert-manager version that module pins and a
# hash of our wiring, so a version bump or an edit of the main rebuilds and later runs reuse the
# binary. Prints cert-manager=PATH, and cert-manager-crds=DIR: the CRDs of that same version,
# from the module's deploy/crds. Also builds secret-volume (e2e/tools/secretvolume: the
# kubelet's secret volume writer, which keeps serve's --cert-dir in step with the serving
# Secret in that e2e) and prints secret-volume=PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/e2e/tools/certmanager"
version=$(cd "$dir" && go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)
wiring=$(cat "$dir"/*.go "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-12)
out="$root/bin/cert-manager-$version-$wiring"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  rm -f "$root"/bin/cert-manager-* # builds of other versions or wirings
  echo "build-cert-manager: building cert-manager $version (minutes the first time)" >&2
  start=$SECONDS
  # -X sets the version cert-manager reports in its User-Agent and logs.
  (cd "$dir" && go build -trimpath -o "$out.tmp" \
    -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$version" .)
  mv "$out.tmp" "$out"
  echo "build-cert-manager: built cert-manager in $((SECONDS - start))s" >&2
fi
echo "cert-manager=$out"
echo "cert-manager-crds=$(cd "$dir" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)/deploy/crds"

# From the e2e/tools module, keyed like cert-manager: with -trimpath, as hack/e2e-tools.sh
# builds kube-apiserver, it reuses those compiled packages and links in seconds.
tools="$root/e2e/tools"
kube=$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
wiring=$(cat "$tools"/secretvolume/*.go "$tools/go.mod" "$tools/go.sum" | sha256sum | cut -c1-12)
out="$root/bin/secret-volume-$kube-$wiring"
if [ ! -x "$out" ]; then
  mkdir -p "$root/bin"
  rm -f "$root"/bin/secret-volume-*
  echo "build-cert-manager: building secret-volume" >&2
  (cd "$tools" && go build -trimpath -o "$out.tmp" -ldflags "-s -w" ./secretvolume)
  mv "$out.tmp" "$out"
fi
echo "secret-volume=$out"
