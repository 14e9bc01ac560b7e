#!/bin/sh
# reverse-node: the shadow's ssh-reverse sends this to the compute node on stdin (sh -s), so
# only validated words travel on the command line, through the login node's shell and the
# node's. It runs as the job's user, beside the job.
#
# prepare BIND node|userspace [KEYTYPE KEY]
#   Finds the socket directory of the job's relay for BIND, clears sockets a dropped session
#   left, and prints "dir <path>". With userspace it also writes a fresh host key and an
#   sshd_config there, lets in only the shadow's client key KEYTYPE KEY, and prints
#   "hostkey <public key>". Exit 3: no relay for BIND here (the job has not started yet).
# hold DIR INTERVAL [PORTS]
#   The session's command: runs while DIR and every DIR/rev-<port>.sock of PORTS
#   (comma-separated) exist. It prints "held" once they all do, then writes to its channel
#   every INTERVAL seconds, so it also ends on the node when the connection drops. (ssh joins the words of a remote command, so an
#   empty one would vanish: PORTS comes last, and is left out when there is none.)
set -eu

fail() {
  echo "$*" >&2
  exit 1
}

# relay_dir prints the directory of the relay serving BIND, looking only at this user's
# processes: whoever else runs a relay, its directory is not ours to forward into. A relay is
# "rev-relay.py serve" on its command line, run in its directory: its command line names no
# directory, address or port, as every user of the node can read it.
relay_dir() {
  for proc in /proc/[0-9]*; do
    [ -O "$proc" ] || continue
    relay=
    while IFS= read -r arg; do
      case $arg in
        rev-relay.py) relay=script ;;
        serve) [ "$relay" = script ] && relay=serve ;;
        *) relay= ;;
      esac
    done <<EOF
$(tr '\0' '\n' <"$proc/cmdline" 2>/dev/null)
EOF
    [ "$relay" = serve ] || continue
    dir=$(cd -P -- "$proc/cwd" 2>/dev/null && pwd -P) || continue
    case $dir in
      */il-rev-"$1")
        printf '%s\n' "$dir"
        return 0
        ;;
    esac
  done
  return 1
}

prepare() {
  bind=$1 mode=$2
  dir=$(relay_dir "$bind") || {
    echo "no relay for $bind on $(hostname): the job has not run its pre-exec here yet" >&2
    exit 3
  }
  case $dir in
    /*[!A-Za-z0-9._/+-]*) fail "the socket directory $dir holds characters the tunnel does not pass on" ;;
  esac
  if [ ! -d "$dir" ] || [ -L "$dir" ] || [ ! -O "$dir" ]; then
    fail "$dir is not a directory of $(id -un)"
  fi
  case $(ls -ld "$dir") in
    drwx------*) ;;
    *) fail "$dir is not drwx------" ;;
  esac
  [ -e "$dir/rev-relay.ready" ] || {
    echo "the relay in $dir is not ready yet" >&2
    exit 3
  }
  # A dropped session leaves its sockets behind, and the node's sshd does not replace them.
  rm -f -- "$dir"/rev-[0-9]*.sock
  printf 'dir %s\n' "$dir"
  [ "$mode" = userspace ] || return 0

  [ $# -eq 4 ] || fail "prepare $bind userspace needs the client's public key"
  rm -f -- "$dir/host_ed25519" "$dir/host_ed25519.pub"
  ssh-keygen -q -t ed25519 -N '' -C shadowgate-reverse -f "$dir/host_ed25519" </dev/null >/dev/null \
    || fail "ssh-keygen could not make the user-space sshd's host key"
  printf 'restrict,port-forwarding %s %s\n' "$3" "$4" >"$dir/authorized_keys"
  cat >"$dir/sshd_config" <<EOF
HostKey $dir/host_ed25519
AuthorizedKeysFile $dir/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
UsePAM no
PidFile none
PermitTTY no
X11Forwarding no
AllowAgentForwarding no
PermitTunnel no
PermitOpen none
AllowTcpForwarding remote
AllowStreamLocalForwarding remote
GatewayPorts no
StreamLocalBindMask 0177
StreamLocalBindUnlink yes
LogLevel ERROR
EOF
  printf 'hostkey %s\n' "$(cut -d' ' -f1,2 "$dir/host_ed25519.pub")"
}

hold() {
  dir=$1 interval=$2 ports=${3:-}
  # The forwards are bound before this command starts; give a slow node a moment anyway.
  tries=10
  while :; do
    [ -d "$dir" ] || exit 0
    missing=$(printf '%s\n' "$ports" | tr ',' '\n' | while IFS= read -r port; do
      [ -z "$port" ] || [ -S "$dir/rev-$port.sock" ] || echo "$port"
    done)
    if [ -n "$missing" ]; then
      tries=$((tries - 1))
      [ "$tries" -gt 0 ] || exit 0
      sleep 1
      continue
    fi
    # "held" the first time every socket exists, which the shadow reads as its forwards
    # bound; then an empty line, which also proves the session still carries data.
    if [ "$tries" -gt 0 ]; then
      printf 'held\n' || exit 0
    else
      printf '\n' || exit 0
    fi
    tries=0
    sleep "$interval"
  done
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  prepare) prepare "$@" ;;
  hold) hold "$@" ;;
  *) fail "usage: reverse-node prepare BIND node|userspace [KEYTYPE KEY] | hold DIR INTERVAL [PORTS]" ;;
esac
