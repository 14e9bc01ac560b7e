#!/bin/bash
# ssh-forward: carries connections from the cluster to the offloaded pod through the login node,
# to the compute node the job runs on (current_node: the node file, or Slurm). It supervises the
# tunnel rather than exec'ing ssh: when the node changes (the job was requeued, or Slurm reaches
# its node at another address) it rebuilds the tunnel in place, so the container, and the pod
# IP Kubernetes knows for the offloaded pod, stay; when ssh exits while the node is unchanged
# it exits non-zero and Kubernetes restarts it.
#
#   portforward  one ssh -L <listen>:<port>:<node>:<port> per port
#   exec         one control master, then per port a socat listener that relays each connection
#                through "<ExecConnectCommand> <node> <port>" run on the login node
#
# Environment: SHADOW_LOGIN_HOST, SHADOW_SSH_OPTIONS (one ssh -o option a line),
# SHADOW_NODE_DISCOVERY and what it reads (common.sh: check_discovery), SHADOW_NODE_FILE,
# SHADOW_STATE_DIR (writable), SHADOW_FORWARD_MODE, SHADOW_PORTS
# (space-separated), SHADOW_EXEC_CONNECT_COMMAND and SHADOW_EXEC_RELAY (the relay script) in
# exec mode; SHADOW_LISTEN_ADDRESS (default 0.0.0.0) and SHADOW_POLL_INTERVAL (seconds,
# default 5) for tests.

# --- shadowgate: insert common ---

set -euo pipefail
set -f # no value is a glob, so the space-separated lists below split into words only

login_host=${SHADOW_LOGIN_HOST:?}
state=${SHADOW_STATE_DIR:?}
mode=${SHADOW_FORWARD_MODE:?}
listen=${SHADOW_LISTEN_ADDRESS:-0.0.0.0}
poll=${SHADOW_POLL_INTERVAL:-5}
read -r -a ports <<<"${SHADOW_PORTS:?}"
: "${SHADOW_SSH_OPTIONS:?}"
mapfile -t ssh_args < <(ssh_option_words "$SHADOW_SSH_OPTIONS")

for port in "${ports[@]}"; do
  valid_port "$port" || die "SHADOW_PORTS holds '${port}', not a port number"
done
valid_seconds "$poll" || die "SHADOW_POLL_INTERVAL holds '${poll}', not a number of seconds"
check_discovery
node_poll=$(node_poll "$poll")
[[ $listen =~ ^[0-9.]+$ ]] || die "SHADOW_LISTEN_ADDRESS holds '${listen}', not an IPv4 address"
if [[ $mode == exec ]]; then
  valid_connect_command "${SHADOW_EXEC_CONNECT_COMMAND:?}" \
    || die "SHADOW_EXEC_CONNECT_COMMAND holds '$(printf '%s' "$SHADOW_EXEC_CONNECT_COMMAND" | printable)', not nc, ncat or netcat with -q N or -w N"
fi

control="${state}/control"
pids=()

start_portforward() {
  local node=$1 target=$1 port forwards=()
  [[ $node == *:* ]] && target="[${node}]"
  for port in "${ports[@]}"; do
    forwards+=(-L "${listen}:${port}:${target}:${port}")
  done
  log "forwarding ports ${ports[*]} to ${node} through ${login_host}"
  ssh -N "${ssh_args[@]}" "${forwards[@]}" -- "$login_host" &
  pids=("$!")
}

start_exec() {
  local node=$1 port master
  ssh -N -o ControlMaster=yes -o "ControlPath=${control}" "${ssh_args[@]}" -- "$login_host" &
  master=$!
  pids=("$master")
  # The listeners open only once the master is up, so no connection pays its own handshake.
  until ssh -o "ControlPath=${control}" -O check -- "$login_host" 2>/dev/null; do
    kill -0 "$master" 2>/dev/null || return 0 # the supervisor reports its exit
    sleep 0.2
  done
  for port in "${ports[@]}"; do
    # socat starts ./exec-relay per connection with this environment; SOCAT_* tell it nothing
    # it needs. Node and port are checked above, and quoted for the login node's shell.
    SHADOW_CONTROL_PATH=$control SHADOW_RELAY_COMMAND="${SHADOW_EXEC_CONNECT_COMMAND} '${node}' '${port}'" \
      socat "TCP4-LISTEN:${port},bind=${listen},fork,reuseaddr" EXEC:"sh ./exec-relay" &
    pids+=("$!")
  done
  log "relaying ports ${ports[*]} to ${node} with '${SHADOW_EXEC_CONNECT_COMMAND}' on ${login_host}"
}

start_tunnel() {
  case $mode in
    portforward) start_portforward "$1" ;;
    exec) start_exec "$1" ;;
    *) die "SHADOW_FORWARD_MODE is '${mode}', not portforward or exec" ;;
  esac
}

stop_tunnel() {
  stop_children "${pids[@]}"
  pids=()
  rm -f -- "$control"
}

watcher=
trap 'shutdown stop_tunnel' TERM INT

if [[ $mode == exec ]]; then
  cd -- "$state"
  printf '%s\n' "${SHADOW_EXEC_RELAY:?}" >exec-relay
fi

node=$(current_node)
valid_host "$node" || die "no valid compute node from $(node_source) ('$(printf '%s' "$node" | printable)'); wait-for-node should have waited for one"
start_tunnel "$node"
seen=$node
while :; do
  watch_node "$seen" "$node_poll" >"${state}/forward-node" &
  watcher=$!
  done_pid=
  status=0
  wait -n -p done_pid "${pids[@]}" "$watcher" || status=$?
  if [[ $done_pid == "$watcher" ]]; then
    watcher=
    seen=$(<"${state}/forward-node")
    if [[ -z $seen ]]; then
      log "no compute node from $(node_source) now; the tunnel stays on ${node} until there is one"
    elif ! valid_host "$seen"; then
      log "ignoring compute node '$(printf '%s' "$seen" | printable)': not a hostname or IP address the login node may dial; the tunnel stays on ${node}"
    elif [[ $seen != "$node" ]]; then
      log "compute node changed from ${node} to ${seen}, rebuilding the tunnel"
      stop_tunnel
      node=$seen
      start_tunnel "$node"
    fi
    continue
  fi
  what=ssh
  [[ $done_pid != "${pids[0]}" ]] && what="the socat listener"
  kill "$watcher" 2>/dev/null || true
  watcher=
  stop_tunnel
  die "${what} exited with status ${status} while the compute node is still ${node}; exiting so Kubernetes restarts the tunnel"
done
