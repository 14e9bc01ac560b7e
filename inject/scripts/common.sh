# shellcheck shell=sh
# The functions every script the shadow runs shares. What follows the "begin common" marker
# line below takes the place of each such script's "insert common" marker line, after its
# header comment, when the scripts are embedded (scripts.go), so they share one copy of these
# functions; the header above it stays in this file. POSIX sh: wait-for-node, kerberos and
# exec-relay run under sh, the others under bash.

# --- shadowgate: begin common ---
# log writes one line to the container's log, with the time and the container's name.
log() { printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$0" "$*" >&2; }

die() {
  log "$*"
  exit 1
}

# valid_host accepts what the webhook lets into the node ConfigMap, a hostname or an IP literal.
# Checking again here keeps a value that got past it from becoming an ssh option or breaking
# out of a relay command.
valid_host() {
  case $1 in
    '' | -* | *[!A-Za-z0-9.:-]*) return 1 ;;
  esac
}

valid_port() {
  case $1 in
    '' | 0* | *[!0-9]* | ??????*) return 1 ;;
  esac
  [ "$1" -le 65535 ]
}

# valid_seconds accepts a number of seconds as sleep takes it, such as 5 or 0.2: the poll
# interval reaches the compute node's shell too.
valid_seconds() {
  case $1 in
    '' | .* | *. | *.*.* | *[!0-9.]*) return 1 ;;
  esac
}

# valid_words accepts plain words between single spaces, such as "nc -q 1": ExecConnectCommand,
# which the login node's shell splits into words and nothing else.
valid_words() {
  case $1 in
    '' | ' '* | *' ' | *'  '* | *[!A-Za-z0-9_./:=+\ -]*) return 1 ;;
  esac
}

# current_node prints the node file: empty until the virtual kubelet publishes the node.
current_node() { cat -- "${SHADOW_NODE_FILE:?}" 2>/dev/null || true; }

# watch_node NODE INTERVAL returns once the node file holds something other than NODE.
watch_node() {
  while sleep "$2"; do
    [ "$(current_node)" = "$1" ] || return 0
  done
}

# ssh_option_words OPTIONS prints, one word a line, "-o" and each option of OPTIONS (one ssh
# option a line, as in SHADOW_SSH_OPTIONS): the arguments every ssh of the shadow starts with.
ssh_option_words() {
  printf '%s\n' "$1" | while IFS= read -r opt; do
    [ -z "$opt" ] || printf -- '-o\n%s\n' "$opt"
  done
}

# stop_children PID... stops these children of the script and waits until they are gone.
stop_children() {
  for child in "$@"; do
    kill "$child" 2>/dev/null || true
  done
  for child in "$@"; do
    wait "$child" 2>/dev/null || true
  done
}

# shutdown STOP is the TERM and INT handler of a supervising script: it stops the node watcher
# ($watcher, when one runs), then runs STOP, which stops the tunnel, and exits 0.
shutdown() {
  if [ -n "${watcher:-}" ]; then
    kill "$watcher" 2>/dev/null || true
  fi
  "$1"
  exit 0
}
