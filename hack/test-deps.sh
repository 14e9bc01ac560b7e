#!/usr/bin/env bash
# Installs the system tools the tests and `make lint` run for real (OpenSSH, socat, netcat, the
# linters shellcheck, pyflakes3 and pycodestyle, python3, Slurm, useradd, what builds the shadow
# image (debootstrap, buildah), the real node's runc and CNI plugins) when they are missing.
# Needs root and Debian's package archive; fails naming what it could not get.
set -euo pipefail

# command -> Debian package
declare -A need=(
  [sshd]=openssh-server
  [ssh]=openssh-client
  ["ssh-keygen"]=openssh-client # quoted: shfmt reads a bare a-b as arithmetic
  [socat]=socat
  [nc]=netcat-openbsd
  [shellcheck]=shellcheck
  [pyflakes3]=pyflakes3 # make lint checks inject/relay/relay.py with these two
  [pycodestyle]=pycodestyle
  [python3]=python3
  [useradd]=passwd # the reverse tunnel's tests run the job as throwaway users
  [usermod]=passwd
  # a real single-node Slurm for the reverse tunnel's srun mode
  [munged]=munge
  [slurmctld]=slurmctld
  [slurmd]=slurmd
  [sbatch]=slurm-client
  [scontrol]=slurm-client # node discovery asks it for the node's address
  [squeue]=slurm-client
  [srun]=slurm-client
  [scancel]=slurm-client
  [sinfo]=slurm-client
  [ip]=iproute2 # the local site's compute node is a network namespace of its own
  [nsenter]=util-linux
  [unshare]=util-linux # the site's singularity stand-in binds in a mount namespace
  [nft]=nftables       # the site's cluster node sends Service connections on as kube-proxy does
  [krb5kdc]=krb5-kdc   # the site's Kerberos realm, for the shadow's Auth: kerberos
  [kdb5_util]=krb5-kdc
  ["kadmin.local"]=krb5-admin-server
  [kinit]=krb5-user
  # the shadow image: built from Debian's packages without a registry
  [debootstrap]=debootstrap
  [buildah]=buildah
  # the real cluster node (hack/node-tools.sh builds the rest): containerd runs runc (as the
  # shadow image's test does), the pods' network is Debian's CNI plugins, whose bridge and
  # portmap write iptables rules
  [runc]=runc
  ["/usr/lib/cni/bridge"]=containernetworking-plugins
  [iptables]=iptables
  [modprobe]=kmod       # br_netfilter, where the kernel has it as a module
  [gcc]=build-essential # the pause container, linked static against libc6-dev
)

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

missing=() tools=()
for cmd in "${!need[@]}"; do
  if ! have "$cmd"; then
    missing+=("${need[$cmd]}")
    tools+=("$cmd")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

mapfile -t pkgs < <(printf '%s\n' "${missing[@]}" | sort -u)
mapfile -t tools < <(printf '%s\n' "${tools[@]}" | sort)
if [ "$(id -u)" -ne 0 ]; then
  echo "test-deps: missing ${pkgs[*]}; run as root or install them: apt-get install ${pkgs[*]}" >&2
  exit 1
fi
echo "test-deps: installing ${pkgs[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# apt-get's own message comes first; this one says what it was for.
if ! apt-get update -qq >/dev/null || ! apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; then
  echo "test-deps: apt-get could not install ${pkgs[*]} (its message is above), so the tests lack ${tools[*]}; install them from Debian's packages, or fix the package sources" >&2
  exit 1
fi
for cmd in "${!need[@]}"; do
  have "$cmd" || {
    echo "test-deps: $cmd is still missing after installing ${need[$cmd]}" >&2
    exit 1
  }
done
