#!/usr/bin/env bash
# Builds the shadow image (shadow.Dockerfile) on this machine, without a registry: a Debian
# bookworm minbase root filesystem made by debootstrap from the mirror this machine's apt
# configuration names, imported as a local base image, then shadow.Dockerfile built on it by
# buildah (BASE=that image), and written as an OCI archive to bin/images/, keyed by a hash of
# what goes into it, so later runs reuse it. Prints shadow=<archive>; the archive's image is
# named as validate/policy's DefaultImage, so `skopeo copy oci-archive:<archive>
# docker://<registry>/...` pushes it (docs/install.md). Needs root, debootstrap and buildah
# (hack/test-deps.sh installs them).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
images="$root/bin/images"
mkdir -p "$images"

# The image's name: validate/policy's DefaultImage, repository and ShadowImageVersion.
types="$root/validate/policy/types.go"
version=$(sed -n 's/^const ShadowImageVersion = "\(.*\)"$/\1/p' "$types")
repository=$(sed -n 's/^const DefaultImage = "\(.*\):" + ShadowImageVersion$/\1/p' "$types")
[[ -n $version && -n $repository ]] || {
  echo "build-shadow-image: no ShadowImageVersion and DefaultImage in $types" >&2
  exit 1
}
name="$repository:$version"

# apt_uri SUITE prints the URI of the first deb source of this machine's apt configuration
# that names SUITE (deb822 .sources stanzas, then one-line sources.list entries), or nothing.
apt_uri() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk -v suite="$1" 'BEGIN { RS = ""; FS = "\n" }
      {
        types = ""; uri = ""; found = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^Types:/) types = $i
          if ($i ~ /^URIs:/) { split($i, u, /[ \t]+/); uri = u[2] }
          if ($i ~ /^Suites:/) { n = split($i, s, /[ \t]+/); for (j = 2; j <= n; j++) if (s[j] == suite) found = 1 }
        }
        if (found && uri != "" && types ~ /[ \t]deb([ \t]|$)/) { print uri; exit }
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] || continue
    awk -v suite="$1" '$1 == "deb" {
        i = 2
        if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit }
      }' "$f"
  done
}

first() { apt_uri "$1" | sed -n 1p; }
mirror=$(first bookworm)
updates=$(first bookworm-updates)
security=$(first bookworm-security)
[[ -n $mirror ]] || {
  echo "build-shadow-image: this machine's apt configuration (/etc/apt/sources.list.d/*.sources, /etc/apt/sources.list) names no deb source for bookworm to build the base from" >&2
  exit 1
}
base_sources=$(
  printf 'deb %s bookworm main\n' "$mirror"
  [[ -z $updates ]] || printf 'deb %s bookworm-updates main\n' "$updates"
  [[ -z $security ]] || printf 'deb %s bookworm-security main\n' "$security"
)

base_key=$({
  cat "$0"
  printf '%s\n' "$base_sources"
} | sha256sum | cut -c 1-16)
key=$({
  printf '%s\n' "$base_key" "$name"
  cat "$root/shadow.Dockerfile" "$root/hack/shadow-entrypoint.sh" "$root/inject/scripts/common.sh"
} | sha256sum | cut -c 1-16)
archive="$images/shadow-$version-$key.oci.tar"
if [[ -s $archive ]]; then
  echo "shadow=$archive"
  exit 0
fi
for tool in debootstrap buildah; do
  command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || {
    echo "build-shadow-image: $tool is not installed: run hack/test-deps.sh as root" >&2
    exit 1
  }
done
[[ $(id -u) -eq 0 ]] || {
  echo "build-shadow-image: debootstrap and buildah need root" >&2
  exit 1
}

start=$SECONDS
work=$(mktemp -d /var/tmp/shadow-image.XXXXXX)
# debootstrap mounts /proc and /sys in the root filesystem it makes: a build cut short may leave
# them, and nothing of the machine's may be removed through them.
unmount_under() { grep -o " $1/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l || true; }
cleanup() {
  unmount_under "$work"
  rm -rf --one-file-system -- "$work"
}
trap cleanup EXIT
# buildah keeps its images in a store of this build's own, gone with it: nothing of the
# machine's container storage is read or written.
b() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }

# tries WHAT LOG CLEAN COMMAND...: runs COMMAND (its output into LOG) up to three times, as a
# fetch from the package archive can fail for a moment (a name that does not resolve, a
# release file not got); before each new try CLEAN runs. Fails with LOG's end.
tries() {
  local what=$1 log=$2 clean=$3 try
  shift 3
  for try in 1 2 3; do
    "$@" >"$log" 2>&1 && return 0
    tail -n 20 "$log" >&2
    if [[ $try -lt 3 ]]; then
      echo "build-shadow-image: $what failed (try $try of 3, its log's end is above); trying again in $((try * 15))s" >&2
      sleep $((try * 15))
      $clean
    fi
  done
  echo "build-shadow-image: $what failed three times (the last log's end is above)" >&2
  exit 1
}

base_tar="$images/bookworm-minbase-$base_key.tar"
if [[ ! -s $base_tar ]]; then
  echo "build-shadow-image: debootstrap --variant=minbase bookworm from $mirror (minutes the first time)" >&2
  clean_rootfs() {
    unmount_under "$work/rootfs"
    rm -rf --one-file-system -- "$work/rootfs"
  }
  PATH=$PATH:/usr/sbin tries debootstrap "$work/debootstrap.log" clean_rootfs \
    debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror"
  printf '%s\n' "$base_sources" >"$work/rootfs/etc/apt/sources.list"
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar --numeric-owner --xattrs -C "$work/rootfs" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
    -cf "$base_tar.tmp.$$" .
  mv "$base_tar.tmp.$$" "$base_tar"
  rm -rf "$work/rootfs"
  echo "build-shadow-image: base built in $((SECONDS - start))s" >&2
fi

base="localhost/shadowgate-base:$base_key"
ctr=$(b from scratch)
tar --numeric-owner --xattrs -C "$(b mount "$ctr")" -xf "$base_tar"
b umount "$ctr" >/dev/null
b commit --quiet "$ctr" "$base" >/dev/null
b rm "$ctr" >/dev/null

echo "build-shadow-image: buildah bud -f shadow.Dockerfile --build-arg BASE=$base" >&2
tries "buildah bud" "$work/bud.log" : \
  b bud --quiet --isolation chroot --network host --build-arg "BASE=$base" -f "$root/shadow.Dockerfile" -t "$name" "$root"
b push --quiet "$name" "oci-archive:$archive.tmp.$$:$name"
mv "$archive.tmp.$$" "$archive"
echo "build-shadow-image: built $name in $((SECONDS - start))s" >&2
echo "shadow=$archive"
