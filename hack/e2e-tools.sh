#!/usr/bin/env bash
# Builds the control plane the e2e tests and `make dev` run (kube-apiserver, kubectl, etcd, and
# for the local site kube-controller-manager and kube-scheduler) from the
# Go module proxy into bin/, keyed by version so a version bump rebuilds and later runs reuse them.
# The versions come from e2e/tools/go.mod and e2e/tools/etcd/go.mod. Prints NAME=PATH per tool.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/bin"
mkdir -p "$bin"

modversion() { # module dir, module path -> required version
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

# build NAME VERSION MODULE_DIR PACKAGE: go build into bin/NAME-VERSION unless it is already there.
build() {
  local name=$1 version=$2 dir=$3 pkg=$4 out="$bin/$1-$2"
  if [ ! -x "$out" ]; then
    echo "e2e-tools: building $name $version (minutes the first time)" >&2
    local start=$SECONDS
    (cd "$dir" && go build -trimpath -o "$out.tmp.$$" \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitVersion=$version" \
      "$pkg")
    mv "$out.tmp.$$" "$out"
    echo "e2e-tools: built $name in $((SECONDS - start))s" >&2
  fi
  echo "$name=$out"
}

kube=$(modversion "$root/e2e/tools" k8s.io/kubernetes)
etcd=$(modversion "$root/e2e/tools/etcd" go.etcd.io/etcd/server/v3)
build kube-apiserver "$kube" "$root/e2e/tools" k8s.io/kubernetes/cmd/kube-apiserver
build kubectl "$kube" "$root/e2e/tools" k8s.io/kubernetes/cmd/kubectl
build kube-controller-manager "$kube" "$root/e2e/tools" k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler "$kube" "$root/e2e/tools" k8s.io/kubernetes/cmd/kube-scheduler
build etcd "$etcd" "$root/e2e/tools/etcd" .
