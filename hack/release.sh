#!/usr/bin/env bash
# Cuts a release (`make release`) and verifies one (`make verify-release`), as
# docs/development.md "Cutting a release" describes:
#
#   hack/release.sh          builds, pushes and signs, writing into DIST: the CLI for linux and
#                            darwin on amd64 and arm64 (tar.gz, and the krew manifest of
#                            them), the webhook image for
#                            linux/amd64 and linux/arm64 (one index), the shadow image
#                            (linux/amd64), the chart as an OCI artifact, an SPDX SBOM per
#                            binary, image and the chart, checksums.txt, and cosign signatures
#                            over each pushed artifact and the checksums (the images' and the
#                            chart's SBOMs are attached as signed attestations too). Prints
#                            NAME=VALUE lines, which
#                            DIST/release.env keeps.
#   hack/release.sh verify   checks DIST's files against checksums.txt and every signature with
#                            the public key KEY
#
# Environment:
#   VERSION   the release's version, semver with or without a leading v (v1.2.0, 1.3.0-rc.1);
#             default: the tag at HEAD when it is one, else 0.0.0-dev.g<commit>
#   REGISTRY  where to push, registry host with a path: ghcr.io/interlink-hq pushes
#             ghcr.io/interlink-hq/shadowgate, .../shadowgate/shadow and .../charts/shadowgate.
#             Empty (the default) is a dry run: a registry of distribution's on a free loopback
#             port, its storage in DIST/registry, running while the release runs (and again
#             while `verify` runs). A registry on 127.0.0.1, ::1 or localhost is spoken to over
#             plain HTTP, any other over HTTPS with the credentials of docker's and helm's
#             logins
#   DIST      the output directory (default dist/); emptied first when it holds an earlier
#             release, refused when it holds anything else
#   SIGNING_KEY  a cosign private key (cosign generate-key-pair) with COSIGN_PASSWORD; empty
#             (the default, and CI's) generates a throwaway key pair into DIST/throwaway-key/
#   BASE      the webhook image's base (default scratch: the binary is static and needs nothing
#             of it; gcr.io/distroless/static-debian12:nonroot, the Dockerfile's own, where that
#             registry is reachable)
#   KEY       for verify: the public key (default DIST/cosign.pub)
#
# Tools are built into bin/ keyed by version: cosign (hack/build-cosign.sh), helm
# (hack/build-helm.sh), distribution's registry and ociimage (hack/node-tools.sh). Needs root,
# buildah and debootstrap for the images (hack/test-deps.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dist=${DIST:-$root/dist}

fail() {
  echo "release: $*" >&2
  exit 1
}

# tool SCRIPT NAME ARGS...: the path a tool builder prints as NAME=PATH.
tool() {
  local script=$1 name=$2 line
  shift 2
  line=$("$root/hack/$script" "$@" | grep "^$name=") || fail "hack/$script printed no $name="
  echo "${line#"$name"=}"
}

# plain_http HOST[:PORT]: whether the registry is on loopback, which is spoken to over HTTP.
plain_http() {
  local host=${1%%/*}
  host=${host%:*}
  [[ $host == 127.0.0.1 || $host == localhost || $host == "[::1]" ]]
}

# start_registry DIR ADDR: runs distribution's registry on ADDR (loopback), storing into DIR,
# until this script exits, and waits for it to listen.
start_registry() {
  local dir=$1 addr=$2 registry
  registry=$(tool node-tools.sh registry registry)
  mkdir -p "$dir/data"
  cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: $addr
  secret: $(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
EOF
  "$registry" serve "$dir/config.yml" >>"$dir/registry.log" 2>&1 &
  registry_pid=$!
  trap 'kill "$registry_pid" 2>/dev/null || true; cleanup' EXIT
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
      return 0
    fi
    kill -0 "$registry_pid" 2>/dev/null || fail "the registry exited; its log, $dir/registry.log, ends: $(tail -n 5 "$dir/registry.log")"
    sleep 0.1
  done
  fail "the registry did not listen on $addr within 10s; see $dir/registry.log"
}

work=""
cleanup() { [[ -z $work ]] || rm -rf --one-file-system -- "$work"; }
trap cleanup EXIT
# A release stopped by a signal cleans up too (the EXIT trap runs on exit).
trap 'exit 1' INT TERM

cosign=$(tool build-cosign.sh cosign)
helm=$(tool build-helm.sh helm)

# cosign_registry_flags REGISTRY: the flags cosign needs for that registry.
cosign_registry_flags() {
  if plain_http "$1"; then
    echo "--allow-http-registry --allow-insecure-registry"
  fi
}

if [[ ${1:-} == verify ]]; then
  [[ -s $dist/release.env ]] || fail "no $dist/release.env: run make release first (DIST names another directory)"
  declare -A rel=()
  while IFS='=' read -r k v; do rel[$k]=$v; done <"$dist/release.env"
  key=${KEY:-$dist/cosign.pub}
  [[ -s $key ]] || fail "KEY=$key: no such public key"
  work=$(mktemp -d)
  if [[ ${rel["local-registry"]:-} == true ]]; then
    start_registry "$dist/registry" "${rel[registry]%%/*}"
  fi
  # shellcheck disable=SC2046 # the flags are words
  set -- $(cosign_registry_flags "${rel[registry]}")
  (cd "$dist" && sha256sum --quiet --strict --check checksums.txt) || fail "a file of $dist does not match checksums.txt"
  "$cosign" verify-blob --key "$key" --insecure-ignore-tlog --signature "$dist/checksums.txt.sig" "$dist/checksums.txt" 2>/dev/null \
    || fail "checksums.txt's signature does not verify with $key"
  for name in webhook-image webhook-image-linux-amd64 webhook-image-linux-arm64 shadow-image chart-artifact; do
    ref=${rel[$name]:-}
    [[ -n $ref ]] || fail "release.env names no $name"
    "$cosign" verify --key "$key" --insecure-ignore-tlog "$@" "$ref" >/dev/null 2>"$work/err" \
      || fail "$name $ref: its signature does not verify with $key: $(tail -n 3 "$work/err")"
  done
  for name in webhook-image-linux-amd64 webhook-image-linux-arm64 shadow-image chart-artifact; do
    "$cosign" verify-attestation --key "$key" --insecure-ignore-tlog --type spdxjson "$@" "${rel[$name]}" >/dev/null 2>"$work/err" \
      || fail "$name ${rel[$name]}: its SBOM attestation does not verify with $key: $(tail -n 3 "$work/err")"
  done
  # The chart a site pulls is the one checksums.txt names.
  pull=(pull "${rel[chart]}" --version "${rel["chart-version"]}" --destination "$work")
  ! plain_http "${rel[registry]}" || pull+=(--plain-http)
  "$helm" "${pull[@]}" >/dev/null 2>"$work/err" || fail "helm pull ${rel[chart]}: $(cat "$work/err")"
  cmp -s "$work/${rel["chart-file"]}" "$dist/${rel["chart-file"]}" \
    || fail "the chart ${rel[chart]} pulls is not $dist/${rel["chart-file"]}"
  echo "verify-release: every file matches checksums.txt, and checksums.txt, the images, the chart and their SBOMs verify with $key"
  exit 0
fi

# The version: semver, without the leading v.
if [[ -z ${VERSION:-} ]]; then
  VERSION=$(git -C "$root" describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null \
    || echo "0.0.0-dev.g$(git -C "$root" rev-parse --short=12 HEAD)")
fi
version=${VERSION#v}
[[ $version =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] \
  || fail "VERSION=$VERSION is not a semantic version such as v1.2.0 or 1.3.0-rc.1: the chart's version must be one"

registry=${REGISTRY:-}
[[ -z $registry || $registry =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+$ || $registry =~ ^\[::1\](:[0-9]+)?(/[a-z0-9._-]+)+$ ]] \
  || fail "REGISTRY=$registry is not a registry host with a path in lower case, such as ghcr.io/interlink-hq or 127.0.0.1:5000/interlink-hq"
[[ -z ${SIGNING_KEY:-} || -s ${SIGNING_KEY:-} ]] || fail "SIGNING_KEY=$SIGNING_KEY: no such key file"

if [[ -e $dist ]]; then
  [[ -z $(ls -A "$dist") || -e $dist/release.env ]] \
    || fail "DIST=$dist holds files of no release (no release.env): empty it or name another directory"
  rm -rf --one-file-system -- "$dist"
fi
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
work=$(mktemp -d /var/tmp/shadowgate-release.XXXXXX)
start=$SECONDS
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct)

local_registry=false
if [[ -z $registry ]]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  start_registry "$dist/registry" "127.0.0.1:$port"
  registry=127.0.0.1:$port/interlink-hq
  local_registry=true
fi
echo "release: $version into $registry (dist: $dist)" >&2

ociimage=$(tool node-tools.sh ociimage ociimage)
go build -o "$work/sbom" "$root/hack/sbom"

# The CLI, static, as the image's: linux and darwin on amd64 and arm64, each archive as the krew
# manifest (hack/krew/shadowgate.yaml) names it, holding kubectl-shadowgate, and shadowgate
# linked to it; the manifest filled in with the version and each archive's sha256.
sed -e '/^#/d' -e "s/VERSION/v$version/g" "$root/hack/krew/shadowgate.yaml" >"$work/shadowgate.krew.yaml"
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  os=${platform%/*} arch=${platform#*/}
  dir="$work/cli/$os-$arch"
  mkdir -p "$dir"
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath \
    -ldflags "-s -w -X main.version=$version" -o "$dir/kubectl-shadowgate" ./cmd/shadowgate)
  ln -s kubectl-shadowgate "$dir/shadowgate"
  cp "$root/README.md" "$dir/"
  base="kubectl-shadowgate_v${version}_${os}_${arch}"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" -C "$dir" -cf - . \
    | gzip -n >"$dist/$base.tar.gz"
  "$work/sbom" go -name "kubectl-shadowgate_${os}_${arch}" -version "$version" "$dir/kubectl-shadowgate" >"$dist/$base.spdx.json"
  placeholder="SHA256_${os^^}_${arch^^}"
  grep -q "$placeholder" "$work/shadowgate.krew.yaml" || fail "hack/krew/shadowgate.yaml has no $placeholder"
  sed -i "s/$placeholder/$(sha256sum "$dist/$base.tar.gz" | cut -d' ' -f1)/" "$work/shadowgate.krew.yaml"
done
mv "$work/shadowgate.krew.yaml" "$dist/"
echo "release: CLI built ($((SECONDS - start))s)" >&2

# The webhook image for both architectures: the Dockerfile's one step copies the static binary.
# The archives are named as the default image, so an unchanged commit reuses them whatever
# the registry.
webhook="$registry/shadowgate"
archives=()
for arch in amd64 arm64; do
  archive=$(VERSION=$version IMAGE=ghcr.io/interlink-hq/shadowgate:$version BASE=${BASE:-scratch} ARCH=$arch \
    "$root/hack/build-image.sh" | sed -n 's/^shadowgate=//p')
  [[ -s $archive ]] || fail "hack/build-image.sh built no archive for $arch"
  archives+=("$archive")
  "$work/sbom" image -name "$webhook" -version "$version" "$archive" >"$dist/shadowgate-image_${version}_linux_$arch.spdx.json"
done
pushed=$("$ociimage" push-index "$webhook:$version" "${archives[@]}")
webhook_ref=$(sed -n 1p <<<"$pushed")
declare -A platform_ref=()
while read -r platform ref; do platform_ref[$platform]=$ref; done < <(sed 1d <<<"$pushed")
[[ -n ${platform_ref["linux/amd64"]:-} && -n ${platform_ref["linux/arm64"]:-} ]] \
  || fail "ociimage push-index printed no linux/amd64 and linux/arm64 images: $pushed"
echo "release: pushed $webhook_ref ($((SECONDS - start))s)" >&2

# The shadow image, linux/amd64 alone: its base is made by debootstrap on this machine, which
# runs another architecture's package scripts only under an emulator.
archive=$("$root/hack/build-shadow-image.sh" | sed -n 's/^shadow=//p')
shadow_version=$(sed -n 's/^const ShadowImageVersion = "\(.*\)"$/\1/p' "$root/validate/policy/types.go")
shadow="$registry/shadowgate/shadow"
"$work/sbom" image -name "$shadow" -version "$shadow_version" "$archive" >"$dist/shadow-image_${shadow_version}_linux_amd64.spdx.json"
shadow_ref=$("$ociimage" push-archive "$archive" "$shadow:$shadow_version")
echo "release: pushed $shadow_ref ($((SECONDS - start))s)" >&2

# The chart, its values naming the released images: the webhook's by tag and digest, the
# shadow image's repository as the prefix the least-privilege policy admits.
chart="$work/chart/shadowgate"
mkdir -p "$work/chart"
cp -r "$root/manifests/chart/shadowgate" "$chart"
# set_value OLD NEW: replaces the one line of the chart's values.yaml that is OLD.
set_value() {
  [[ $(grep -cxF -- "$1" "$chart/values.yaml") == 1 ]] || fail "the chart's values.yaml has no single line '$1' to set"
  OLD=$1 NEW=$2 awk '$0 == ENVIRON["OLD"] { print ENVIRON["NEW"]; next } { print }' "$chart/values.yaml" >"$chart/values.yaml.new"
  mv "$chart/values.yaml.new" "$chart/values.yaml"
}
set_value "  repository: ghcr.io/interlink-hq/shadowgate" "  repository: $webhook"
set_value '  tag: ""' "  tag: \"$version\""
set_value '  digest: ""' "  digest: \"${webhook_ref#*@}\""
set_value '  - "ghcr.io/interlink-hq/shadowgate/shadow:"' "  - \"$shadow:\""
"$helm" package "$chart" --version "$version" --app-version "$version" --destination "$dist" >/dev/null
chart_file="shadowgate-$version.tgz"
rendered=$("$helm" template shadowgate "$dist/$chart_file" --namespace shadowgate-system)
grep -qxF "        image: \"$webhook:$version@${webhook_ref#*@}\"" <<<"$rendered" \
  || fail "the packaged chart does not render the webhook image $webhook:$version@${webhook_ref#*@}"
"$work/sbom" chart -name "$registry/charts/shadowgate" -version "$version" "$dist/$chart_file" >"$dist/shadowgate-chart_$version.spdx.json"
push=(push "$dist/$chart_file" "oci://$registry/charts")
! plain_http "$registry" || push+=(--plain-http)
out=$("$helm" "${push[@]}" 2>&1) || fail "helm push: $out"
chart_digest=$(sed -n 's/^Digest: //p' <<<"$out")
[[ $chart_digest == sha256:* ]] || fail "helm push printed no digest: $out"
echo "release: pushed oci://$registry/charts/shadowgate:$version@$chart_digest ($((SECONDS - start))s)" >&2

(cd "$dist" && sha256sum -- *.tar.gz *.spdx.json shadowgate.krew.yaml "$chart_file" >checksums.txt)

# Signatures: cosign's, with the key given or a throwaway pair.
if [[ -z ${SIGNING_KEY:-} ]]; then
  mkdir -p "$dist/throwaway-key"
  (cd "$dist/throwaway-key" && COSIGN_PASSWORD="" "$cosign" generate-key-pair >/dev/null 2>&1) \
    || fail "cosign generate-key-pair failed"
  key="$dist/throwaway-key/cosign.key"
  export COSIGN_PASSWORD=""
  cp "$dist/throwaway-key/cosign.pub" "$dist/cosign.pub"
else
  key=$SIGNING_KEY
  "$cosign" public-key --key "$key" >"$dist/cosign.pub" || fail "cosign public-key --key $key failed"
fi
# shellcheck disable=SC2046 # the flags are words
set -- --key "$key" --tlog-upload=false --yes $(cosign_registry_flags "$registry")
cosign_run() {
  "$cosign" "$@" >"$work/cosign.log" 2>&1 || fail "cosign ${*:1:1} failed: $(tail -n 5 "$work/cosign.log")"
}
cosign_run sign-blob --key "$key" --tlog-upload=false --yes --output-signature "$dist/checksums.txt.sig" "$dist/checksums.txt"
chart_ref="$registry/charts/shadowgate@$chart_digest"
cosign_run sign "$@" --recursive "$webhook_ref"
cosign_run sign "$@" "$shadow_ref"
cosign_run sign "$@" "$chart_ref"
for arch in amd64 arm64; do
  cosign_run attest "$@" --type spdxjson --predicate "$dist/shadowgate-image_${version}_linux_$arch.spdx.json" "${platform_ref["linux/$arch"]}"
done
cosign_run attest "$@" --type spdxjson --predicate "$dist/shadow-image_${shadow_version}_linux_amd64.spdx.json" "$shadow_ref"
cosign_run attest "$@" --type spdxjson --predicate "$dist/shadowgate-chart_$version.spdx.json" "$chart_ref"
echo "release: signed ($((SECONDS - start))s)" >&2

{
  echo "version=$version"
  echo "registry=$registry"
  echo "local-registry=$local_registry"
  echo "webhook-image=$webhook_ref"
  echo "webhook-image-linux-amd64=${platform_ref["linux/amd64"]}"
  echo "webhook-image-linux-arm64=${platform_ref["linux/arm64"]}"
  echo "shadow-image=$shadow_ref"
  echo "chart=oci://$registry/charts/shadowgate"
  echo "chart-version=$version"
  echo "chart-artifact=$chart_ref"
  echo "chart-file=$chart_file"
  echo "public-key=$dist/cosign.pub"
} >"$dist/release.env"
cat "$dist/release.env"
echo "release: $version released into $registry in $((SECONDS - start))s; hack/release.sh verify checks it" >&2
