#!/usr/bin/env bash
# Builds the local site's real cluster node from the Go module proxy into bin/, keyed by
# version so a version bump rebuilds and later runs reuse them: kubelet and kube-proxy
# (e2e/tools, the control plane's k8s.io/kubernetes), containerd, its runc shim and ctr
# (e2e/tools/containerd: the kubelet asks the runtime for its cgroup driver, which containerd
# answers from 2.0 on; 1.37 still falls back to its own setting for Debian's 1.6, as support
# ending in 1.38), CoreDNS with the cluster DNS's plugins (e2e/tools/coredns), and the
# image registry, distribution, with ociimage, which pushes images into it
# (e2e/tools/registry), and the pause container. runc and the CNI plugins are Debian's
# (hack/test-deps.sh).
# Prints NAME=PATH per tool. With tool names as arguments, builds and prints those alone
# (hack/release.sh: registry ociimage).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/e2e/tools"
bin="$root/bin"
mkdir -p "$bin"
only=" $* "

# wanted NAME: whether NAME is to be built, as every tool is when none is named.
wanted() { [[ $only == "  " || $only == *" $1 "* ]]; }

modversion() { # module dir, module path -> required version
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}

# wiring DIR: a hash of a tools module's own code and requirements, for the binaries built
# from a main of ours, so a change to it rebuilds them.
wiring() {
  cat "$1"/go.mod "$1"/go.sum "$1"/*.go "$1"/*/*.go 2>/dev/null | sha256sum | cut -c1-12
}

# build NAME KEY MODULE_DIR PACKAGE [go build flags...]: go build into bin/NAME-KEY unless it
# is already there.
build() {
  local name=$1 key=$2 dir=$3 pkg=$4 out="$bin/$1-$2"
  shift 4
  wanted "$name" || return 0
  if [ ! -x "$out" ]; then
    echo "node-tools: building $name $key (minutes the first time)" >&2
    local start=$SECONDS
    (cd "$dir" && go build -trimpath -o "$out.tmp.$$" "$@" "$pkg")
    mv "$out.tmp.$$" "$out"
    echo "node-tools: built $name in $((SECONDS - start))s" >&2
  fi
  echo "$name=$out"
}

# Static, as release builds are: CoreDNS runs in an image of its binary alone.
export CGO_ENABLED=0

# As containerd's Makefile builds its static release, less the snapshotters the node does not
# use (btrfs needs cgo, devmapper and zfs their own storage); the shim without gRPC.
ctrd=$(modversion "$tools/containerd" github.com/containerd/containerd/v2)
ctrdpkg=github.com/containerd/containerd/v2
ctrdflags="-s -w -X $ctrdpkg/version.Version=$ctrd -X $ctrdpkg/version.Package=$ctrdpkg"
build containerd "$ctrd" "$tools/containerd" $ctrdpkg/cmd/containerd \
  -tags "urfave_cli_no_docs osusergo netgo no_btrfs no_devmapper no_zfs" -ldflags "$ctrdflags"
build containerd-shim-runc-v2 "$ctrd" "$tools/containerd" $ctrdpkg/cmd/containerd-shim-runc-v2 \
  -tags "urfave_cli_no_docs osusergo netgo no_grpc" -ldflags "$ctrdflags"
build ctr "$ctrd" "$tools/containerd" $ctrdpkg/cmd/ctr -tags "urfave_cli_no_docs osusergo netgo" -ldflags "$ctrdflags"

coredns=$(modversion "$tools/coredns" github.com/coredns/coredns)
build coredns "$coredns-$(wiring "$tools/coredns")" "$tools/coredns" . -ldflags "-s -w"

distribution=$(modversion "$tools/registry" github.com/distribution/distribution/v3)
build registry "$distribution" "$tools/registry" github.com/distribution/distribution/v3/cmd/registry \
  -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$distribution"
build ociimage "$(wiring "$tools/registry")" "$tools/registry" ./ociimage -ldflags "-s -w"

kube=$(modversion "$tools" k8s.io/kubernetes)
kubeflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/client-go/pkg/version.gitVersion=$kube"
build kubelet "$kube" "$tools" k8s.io/kubernetes/cmd/kubelet -ldflags "$kubeflags"
build kube-proxy "$kube" "$tools" k8s.io/kubernetes/cmd/kube-proxy -ldflags "$kubeflags"

# The pause container every pod sandbox runs, from the kubernetes module's build/pause, static
# as its Makefile builds it (gcc and libc6-dev: hack/test-deps.sh).
wanted pause || exit 0
pause="$(cd "$tools" && go mod download k8s.io/kubernetes && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause"
pausetag=$(sed -n 's/^TAG ?= //p' "$pause/Makefile")
out="$bin/pause-$pausetag"
if [ ! -x "$out" ]; then
  echo "node-tools: building pause $pausetag" >&2
  gcc -Os -Wall -Werror -static -DVERSION="v$pausetag-$kube" -o "$out.tmp.$$" "$pause/linux/pause.c"
  mv "$out.tmp.$$" "$out"
fi
echo "pause=$out"
