#!/usr/bin/env bash
# Builds shadowgate's image from the repository's Dockerfile on this machine, without a
# registry: the static binary into bin/image/ (the Dockerfile's build context), then buildah
# bud, written as an OCI archive to bin/images/ keyed by a hash of the binary and the
# Dockerfile, so an unchanged build is reused. Prints shadowgate=<archive> and
# shadowgate-image=<its name>; `skopeo copy oci-archive:<archive>
# docker://<registry>/shadowgate:<tag>` pushes it (docs/install.md).
#
#   hack/build-image.sh              the image; needs root and buildah (hack/test-deps.sh)
#   hack/build-image.sh binary OUT   the image's binary alone, into OUT
#
# Environment: VERSION (default: git describe), the version the binary reports and the tag;
# IMAGE (default ghcr.io/interlink-hq/shadowgate:VERSION), the image's name in the archive;
# BASE, the Dockerfile's base (its default, distroless, must be pullable: BASE=scratch where
# it is not); ARCH (default: go env GOARCH).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=${VERSION:-$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)}
arch=${ARCH:-$(go env GOARCH)}

# binary OUT builds what the image runs: static (it runs on distroless static or scratch),
# without the build machine's paths, reporting VERSION.
binary() {
  (cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$1" ./cmd/shadowgate)
}
if [[ ${1:-} == binary ]]; then
  [[ $# -eq 2 ]] || {
    echo "usage: $0 binary OUT" >&2
    exit 2
  }
  binary "$2"
  exit 0
fi

image=${IMAGE:-ghcr.io/interlink-hq/shadowgate:$version}
context="$root/bin/image"
mkdir -p "$context" "$root/bin/images"
binary "$context/shadowgate-linux-$arch"
key=$({
  printf '%s\n' "$image" "${BASE:-}" "$arch"
  cat "$root/Dockerfile" "$context/shadowgate-linux-$arch"
} | sha256sum | cut -c 1-16)
archive="$root/bin/images/shadowgate-$arch-$key.oci.tar"
if [[ -s $archive ]]; then
  echo "shadowgate=$archive"
  echo "shadowgate-image=$image"
  exit 0
fi
command -v buildah >/dev/null || {
  echo "build-image: buildah is not installed: run hack/test-deps.sh as root" >&2
  exit 1
}
[[ $(id -u) -eq 0 ]] || {
  echo "build-image: buildah here needs root" >&2
  exit 1
}
work=$(mktemp -d /var/tmp/shadowgate-image.XXXXXX)
trap 'rm -rf --one-file-system -- "$work"' EXIT
# A store of this build's own, gone with it: nothing of the machine's container storage is
# read or written.
b() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }
# The Dockerfile's one step copies the binary: another architecture's image needs no emulator.
args=(--platform "linux/$arch" --build-arg "TARGETARCH=$arch")
[[ -z ${BASE:-} ]] || args+=(--build-arg "BASE=$BASE")
b bud --quiet --isolation chroot "${args[@]}" -f "$root/Dockerfile" -t "$image" "$context" >/dev/null
b push --quiet "$image" "oci-archive:$archive.tmp.$$:$image"
mv "$archive.tmp.$$" "$archive"
# Only the newest build of each architecture is kept: each change of the code makes another.
find "$root/bin/images" -name "shadowgate-$arch-*.oci.tar" ! -path "$archive" -delete
echo "build-image: built $image" >&2
echo "shadowgate=$archive"
echo "shadowgate-image=$image"
