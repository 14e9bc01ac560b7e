# shellcheck shell=sh
# What follows the "begin pre-exec" marker line below is the snippet MutatePod puts in
# slurm-job.vk.io/pre-exec, followed by one call, with relay/relay.py in place of the @RELAY@
# line (preexec.go); the header above it stays in this file. Indented with spaces: in a
# pod's YAML an annotation shows as a readable block only when it holds no tab.

# --- shadowgate: begin pre-exec ---
# The reverse tunnel's side in the job. It runs in the batch shell before the workload, so it
# is POSIX sh (the plugin's script may be sh or bash), prefixes every name it sets, and fails
# the job rather than let the workload start without the tunnel it asked for.
#
# shadowgate_reverse_tunnel BIND PYTHON PORTS SOCKS NAMES
#   BIND    the relay's 127.x.y.z address, recorded in interlink.eu/reverse-bind
#   PYTHON  the compute node's python3 (Reverse.PythonPath)
#   PORTS   comma-separated listen ports of interlink.eu/reverse-forwards, or empty
#   SOCKS   the SOCKS5 port, or empty
#   NAMES   comma-separated names the job dials, mapped to BIND in its /etc/hosts, or empty
# The socket directory is <root>/il-rev-BIND (shadowgate_reverse_root chooses the root); the
# shadow finds it by the relay's working directory. SHADOW_REVERSE_WAIT (seconds, default 600)
# is how long the job waits for the tunnel.
shadowgate_reverse_tunnel() {
  sg_rev_bind=$1 sg_rev_py=$2 sg_rev_ports=$3 sg_rev_socks=$4 sg_rev_names=$5
  sg_rev_wait=${SHADOW_REVERSE_WAIT:-600}
  shadowgate_reverse_root "$sg_rev_bind" || return 1
  sg_rev_dir=$sg_rev_root/il-rev-$sg_rev_bind
  if [ -e "$sg_rev_dir" ] || [ -L "$sg_rev_dir" ]; then
    # A job requeued onto this node finds its earlier directory; anyone else's is not ours.
    if [ -L "$sg_rev_dir" ] || [ ! -O "$sg_rev_dir" ]; then
      echo "interLink: $sg_rev_dir already exists and does not belong to $(id -un); the reverse tunnel cannot start." >&2
      return 1
    fi
    # So does another job of the same user with the same bind address (replicas of a template
    # that sets it): its relay still runs, and removing its directory would end its tunnel.
    if shadowgate_reverse_relay_runs "$sg_rev_dir"; then
      echo "interLink: another job of yours holds $sg_rev_bind: its relay runs from $sg_rev_dir. Each pod needs its own interlink.eu/reverse-bind; remove the annotation and shadowgate chooses one per pod. The job stops here." >&2
      return 1
    fi
    rm -rf -- "$sg_rev_dir"
  fi
  if ! mkdir -m 700 -- "$sg_rev_dir"; then
    echo "interLink: cannot create the socket directory $sg_rev_dir; the reverse tunnel cannot start." >&2
    return 1
  fi
  cat >"$sg_rev_dir/rev-relay.py" <<'SHADOWGATE_RELAY_PY' || {
@RELAY@
SHADOWGATE_RELAY_PY
    echo "interLink: cannot write the relay into $sg_rev_dir." >&2
    return 1
  }

  sg_rev_hosts=
  if [ -n "$sg_rev_names" ]; then
    # Only the batch node has the relay, so the copy lives in node-local temporary space.
    sg_rev_hosts=$(mktemp "${TMPDIR:-/tmp}/il-rev-hosts.XXXXXX") || {
      echo "interLink: cannot create a copy of /etc/hosts in ${TMPDIR:-/tmp}; the reverse tunnel cannot start." >&2
      return 1
    }
    case $sg_rev_hosts in
      *[,:]*)
        echo "interLink: $sg_rev_hosts cannot go into a bind list (it holds ',' or ':'); set TMPDIR to a plain path." >&2
        return 1
        ;;
    esac
    # The mapping comes first: the first line naming a host wins, so an entry /etc/hosts
    # already has for a forwarded name does not take the connection elsewhere.
    if ! { printf '%s %s\n' "$sg_rev_bind" "$(printf '%s' "$sg_rev_names" | tr ',' ' ')" && cat /etc/hosts; } >"$sg_rev_hosts" \
      || ! chmod 644 "$sg_rev_hosts"; then
      echo "interLink: cannot write $sg_rev_hosts; the reverse tunnel cannot start." >&2
      return 1
    fi
    shadowgate_reverse_bind_hosts "$sg_rev_hosts"
  fi

  # The arguments go on standard input and the directory is the working directory, so that
  # the command line every user of the node can read says only "rev-relay.py serve".
  (cd -- "$sg_rev_dir" && exec "$sg_rev_py" -I rev-relay.py serve) <<SHADOWGATE_RELAY_ARGS &
$sg_rev_dir
$sg_rev_bind
$$
$sg_rev_ports
$sg_rev_hosts
SHADOWGATE_RELAY_ARGS
  sg_rev_relay=$!
  until [ -e "$sg_rev_dir/rev-relay.ready" ]; do
    if ! kill -0 "$sg_rev_relay" 2>/dev/null; then
      echo "interLink: the reverse tunnel's relay did not start (its message is above); the job stops here." >&2
      return 1
    fi
    sleep 0.2 2>/dev/null || sleep 1
  done

  sg_rev_rc=0
  (cd -- "$sg_rev_dir" && exec "$sg_rev_py" -I rev-relay.py wait) <<SHADOWGATE_RELAY_ARGS || sg_rev_rc=$?
$sg_rev_dir
$sg_rev_ports
$sg_rev_socks
$sg_rev_wait
SHADOWGATE_RELAY_ARGS
  case $sg_rev_rc in
    0) ;;
    2) return 1 ;;
    *)
      echo "interLink: the reverse tunnel did not come up within ${sg_rev_wait}s. Read the log of the shadow's ssh-reverse container (kubectl logs <shadow pod> -c ssh-reverse): 'could not prepare' means the command to the compute node was refused, 'no running job' means squeue on the login node did not list this job." >&2
      return 1
      ;;
  esac
  echo "interLink: reverse tunnel ready on $sg_rev_bind${sg_rev_names:+ for $sg_rev_names}${sg_rev_socks:+, SOCKS5 proxy on 127.0.0.1:$sg_rev_socks (every user of this node can use it)}"
  unset sg_rev_bind sg_rev_py sg_rev_ports sg_rev_socks sg_rev_names sg_rev_wait sg_rev_root \
    sg_rev_dir sg_rev_hosts sg_rev_relay sg_rev_rc sg_rev_pid sg_rev_uid sg_rev_base sg_rev_said \
    sg_rev_passed
}

# shadowgate_reverse_root BIND sets sg_rev_root, the root of the socket directory for BIND, and
# says on the job's output which it is: INTERLINK_SOCKET_DIR_ROOT where the plugin exports one
# (its CommandPrefix can), else <base>/interlink-<uid>, a drwx------ directory of the job's user
# in the first of $TMPDIR and /tmp that no other user can take it out of (shadowgate_reverse_base).
# Such a path that someone else made, or made a symbolic link, is refused, never used.
shadowgate_reverse_root() {
  if [ -n "${INTERLINK_SOCKET_DIR_ROOT:-}" ]; then
    sg_rev_root=$INTERLINK_SOCKET_DIR_ROOT
    case $sg_rev_root in
      /*[!A-Za-z0-9._/+-]* | [!/]*)
        echo "interLink: the socket directory root $sg_rev_root (INTERLINK_SOCKET_DIR_ROOT) is not an absolute path of letters, digits and ._/+-; the reverse tunnel cannot use it, so the job stops at start." >&2
        return 1
        ;;
    esac
    # A unix socket's path is at most 107 bytes; the longest here ends in /rev-65535.sock.
    if [ $((${#sg_rev_root} + 8 + ${#1})) -gt 92 ]; then
      echo "interLink: the socket directory $sg_rev_root/il-rev-$1 is too long for unix sockets (at most 92 characters); INTERLINK_SOCKET_DIR_ROOT has to be shorter." >&2
      return 1
    fi
    echo "interLink: the reverse tunnel's socket directory is under $sg_rev_root, from INTERLINK_SOCKET_DIR_ROOT"
    return 0
  fi
  sg_rev_uid=$(id -u) sg_rev_passed=
  for sg_rev_base in ${TMPDIR:+"$TMPDIR"} /tmp; do
    if ! sg_rev_said=$(shadowgate_reverse_base "$sg_rev_base"); then
      sg_rev_passed="$sg_rev_passed; $sg_rev_base was passed over: $sg_rev_said"
      continue
    fi
    sg_rev_root=${sg_rev_said%/}/interlink-$sg_rev_uid
    if [ $((${#sg_rev_root} + 8 + ${#1})) -gt 92 ]; then
      sg_rev_passed="$sg_rev_passed; $sg_rev_base was passed over: $sg_rev_root/il-rev-$1 is too long for unix sockets (at most 92 characters)"
      continue
    fi
    # mkdir makes no directory where anything is, a symbolic link included, and follows none.
    mkdir -m 700 -- "$sg_rev_root" 2>/dev/null
    sg_rev_said=
    if [ -L "$sg_rev_root" ]; then
      sg_rev_said="is a symbolic link"
    elif [ ! -d "$sg_rev_root" ]; then
      sg_rev_said="is not a directory"
    elif [ ! -O "$sg_rev_root" ]; then
      sg_rev_said="belongs to another user"
    fi
    if [ -n "$sg_rev_said" ]; then
      echo "interLink: INTERLINK_SOCKET_DIR_ROOT is not set, and $sg_rev_root, where the reverse tunnel's sockets go without it, $sg_rev_said, not a directory of $(id -un)'s own: the reverse tunnel cannot start, so the job stops. The node's admins remove it, or the plugin exports a root of the site's (CommandPrefix: export INTERLINK_SOCKET_DIR_ROOT=...)." >&2
      return 1
    fi
    case $(ls -ldn -- "$sg_rev_root") in
      drwx------*) ;;
      *)
        echo "interLink: INTERLINK_SOCKET_DIR_ROOT is not set, and $sg_rev_root, where the reverse tunnel's sockets go without it, is not drwx------, so other users may reach into it. The reverse tunnel cannot start, so the job stops: chmod 700 it, or remove it." >&2
        return 1
        ;;
    esac
    echo "interLink: INTERLINK_SOCKET_DIR_ROOT is not set, so the reverse tunnel's socket directory is under $sg_rev_root, a drwx------ directory of $(id -un) on this node$sg_rev_passed"
    return 0
  done
  echo "interLink: INTERLINK_SOCKET_DIR_ROOT is not set, and no directory for the reverse tunnel's sockets is safe on this node$sg_rev_passed. The job stops at start: the plugin has to export a root (CommandPrefix: export INTERLINK_SOCKET_DIR_ROOT=...)." >&2
  return 1
}

# shadowgate_reverse_base DIR prints DIR without symbolic links when no other user than root can
# rename or remove what is in it or in any directory above it: each is owned by root or the
# job's user, and one that others may write has the sticky bit. Otherwise it prints why not and
# fails. It runs in a subshell of its own.
shadowgate_reverse_base() {
  sg_rev_real=$(cd -P -- "$1" 2>/dev/null && pwd -P) || {
    echo "it is not a directory here"
    return 1
  }
  case $sg_rev_real in
    /*[!A-Za-z0-9._/+-]*)
      echo "$sg_rev_real holds characters other than letters, digits and ._/+-"
      return 1
      ;;
  esac
  sg_rev_up=$sg_rev_real
  while :; do
    read -r sg_rev_mode _ sg_rev_owner _ <<SHADOWGATE_LS
$(ls -ldn -- "$sg_rev_up")
SHADOWGATE_LS
    case $sg_rev_owner in
      0 | "$sg_rev_uid") ;;
      *)
        echo "$sg_rev_up belongs to uid $sg_rev_owner, neither root nor $(id -un)"
        return 1
        ;;
    esac
    case $sg_rev_mode in
      d????w???[tT]* | d???????w[tT]*) ;;
      d????w* | d???????w*)
        echo "other users may write $sg_rev_up and it has no sticky bit"
        return 1
        ;;
    esac
    [ "$sg_rev_up" != / ] || break
    sg_rev_up=${sg_rev_up%/*}
    sg_rev_up=${sg_rev_up:-/}
  done
  printf '%s\n' "$sg_rev_real"
}

# shadowgate_reverse_relay_runs DIR reports whether DIR/rev-relay.ready names a process that is
# still the relay serving DIR (a pid of a job that has gone may since belong to anything): a
# relay by its command line, serving DIR by its working directory.
shadowgate_reverse_relay_runs() {
  sg_rev_pid=$(cat -- "$1/rev-relay.ready" 2>/dev/null) || return 1
  case $sg_rev_pid in
    '' | *[!0-9]*) return 1 ;;
  esac
  tr '\0' '\n' 2>/dev/null <"/proc/$sg_rev_pid/cmdline" | grep -qxF -- rev-relay.py || return 1
  [ "$(cd -P -- "/proc/$sg_rev_pid/cwd" 2>/dev/null && pwd -P)" = "$(cd -P -- "$1" 2>/dev/null && pwd -P)" ]
}

# shadowgate_reverse_bind_hosts FILE binds FILE over the container's /etc/hosts, after the
# job's own binds.
shadowgate_reverse_bind_hosts() {
  # Apptainer reads SINGULARITY_BIND only while APPTAINER_BIND is unset: starting from it
  # keeps the job's own binds when only the legacy variable was set.
  if [ -z "${APPTAINER_BIND:-}" ] && [ -n "${SINGULARITY_BIND:-}" ]; then
    APPTAINER_BIND=$SINGULARITY_BIND
  fi
  SINGULARITY_BIND=${SINGULARITY_BIND:+$SINGULARITY_BIND,}$1:/etc/hosts
  APPTAINER_BIND=${APPTAINER_BIND:+$APPTAINER_BIND,}$1:/etc/hosts
  export SINGULARITY_BIND APPTAINER_BIND
}
