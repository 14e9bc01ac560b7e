#!/bin/bash
# ssh-forward: carries connections from the cluster to the offloaded pod through the login node,
# to the compute node the job runs on (current_node: the node file, or Slurm). It supervises the
# tunnel rather than exec'ing ssh: when the node changes (the job was requeued, or Slurm reaches
# its node at another address) it rebuilds the tunnel in place, so the container, and the pod
# IP Kubernetes knows for the offloaded pod, stay; when ssh exits while the node is unchanged
# it exits non-zero and Kubernetes restarts it.
#
#   portforward  one ssh -L <listen>:<port>:<node>:<port> per port, and one session once the
#                forwards are checked (run_session)
#   exec         one control master, then per port a socat listener that relays each connection
#                through "<ExecConnectCommand> <node> <port>" run on the login node
#
# Environment: SHADOW_LOGIN_HOST, SHADOW_SSH_OPTIONS (one ssh -o option a line),
# SHADOW_NODE_DISCOVERY and what it reads (common.sh: check_discovery), SHADOW_NODE_FILE,
# SHADOW_STATE_DIR (writable), SHADOW_FORWARD_MODE, SHADOW_PORTS
# (space-separated), SHADOW_EXEC_CONNECT_COMMAND and SHADOW_EXEC_RELAY (the relay script's path) in
# exec mode; SHADOW_LISTEN_ADDRESS (default 0.0.0.0) and SHADOW_POLL_INTERVAL (seconds,
# default 5) for tests.

# --- shadowgate: insert common ---

set -euo pipefail
set -f # no value is a glob, so the space-separated lists below split into words only
any_uid
clear_status

login_host=${SHADOW_LOGIN_HOST:?}
state=${SHADOW_STATE_DIR:?}
mode=${SHADOW_FORWARD_MODE:?}
listen=${SHADOW_LISTEN_ADDRESS:-0.0.0.0}
poll=${SHADOW_POLL_INTERVAL:-5}
check_interval=${SHADOW_CHECK_INTERVAL:-10}
check_bound=5 # seconds a check waits for a channel to open
read -r -a ports <<<"${SHADOW_PORTS:?}"
: "${SHADOW_SSH_OPTIONS:?}"
mapfile -t ssh_args < <(ssh_option_words "$SHADOW_SSH_OPTIONS")

for port in "${ports[@]}"; do
  valid_port "$port" || fail TunnelDown "SHADOW_PORTS holds '${port}', not a port number"
done
valid_seconds "$poll" || fail TunnelDown "SHADOW_POLL_INTERVAL holds '${poll}', not a number of seconds"
valid_seconds "$check_interval" || fail TunnelDown "SHADOW_CHECK_INTERVAL holds '${check_interval}', not a number of seconds"
check_discovery
node_poll=$(node_poll "$poll")
[[ $listen =~ ^[0-9.]+$ ]] || fail TunnelDown "SHADOW_LISTEN_ADDRESS holds '${listen}', not an IPv4 address"
if [[ $mode == exec ]]; then
  exec_logins=${SHADOW_EXEC_LOGINS:?}
  exec_sessions=${SHADOW_EXEC_SESSIONS:?}
  [[ $exec_logins =~ ^[1-9][0-9]*$ ]] || fail TunnelDown "SHADOW_EXEC_LOGINS holds '$(printf '%s' "$exec_logins" | printable)', not a number of logins"
  [[ $exec_sessions =~ ^[1-9][0-9]*$ ]] || fail TunnelDown "SHADOW_EXEC_SESSIONS holds '$(printf '%s' "$exec_sessions" | printable)', not a number of channels"
  valid_connect_command "${SHADOW_EXEC_CONNECT_COMMAND:?}" \
    || fail TunnelDown "SHADOW_EXEC_CONNECT_COMMAND holds '$(printf '%s' "$SHADOW_EXEC_CONNECT_COMMAND" | printable)', not nc, ncat or netcat with -N, -q N or -w N"
fi

control=${state}/control
# Exec mode's pool of channels (exec-relay): one slot file per channel in use, and the
# connections waiting for one.
slots=${state}/exec-slots
exec_backlog=1024
# The ssh session's stderr goes to the container's log and to ssh_err, which the checker reads
# for the reason a channel failed (sshd's reason reaches the master, not the channel's client)
# and the supervisor for why ssh exited.
ssh_err=${state}/ssh-forward.err
ssh_fifo=${state}/ssh-forward.fifo
pids=() tee_pid='' checker=''

# start_session ARGS... starts the ssh session: -N, the control master at $control, the
# policy's options, ARGS (the -L forwards); its pid is pids[0].
start_session() {
  rm -f -- "$control" "$ssh_fifo"
  : >"$ssh_err"
  mkfifo -- "$ssh_fifo"
  tee -a -- "$ssh_err" <"$ssh_fifo" >&2 &
  tee_pid=$!
  ssh -N -o ControlMaster=yes -o "ControlPath=${control}" "${ssh_args[@]}" "$@" -- "$login_host" 2>"$ssh_fifo" &
  pids=("$!")
}

start_portforward() {
  local node=$1 target=$1 port forwards=()
  [[ $node == *:* ]] && target="[${node}]"
  for port in "${ports[@]}"; do
    forwards+=(-L "${listen}:${port}:${target}:${port}")
  done
  log "forwarding ports ${ports[*]} to ${node} through ${login_host}"
  start_session "${forwards[@]}"
}

start_exec() {
  local node=$1 port
  start_session
  # The listeners open only once the master is up, so no connection pays its own handshake.
  until ssh -o "ControlPath=${control}" -O check -- "$login_host" 2>/dev/null; do
    kill -0 "${pids[0]}" 2>/dev/null || return 0 # the supervisor reports its exit
    sleep 0.2
  done
  rm -rf -- "$slots"
  mkdir -- "$slots"
  for port in "${ports[@]}"; do
    # socat hands each connection to ./exec-relay (nofork: the relay's stdin and stdout are the
    # connection itself, which its ssh passes on to the control master, so no process copies
    # the bytes and no timer of socat's cuts an answer that follows the client's end of data),
    # with this environment; SOCAT_* tell it nothing it needs. Node and port are checked above,
    # and quoted for the login node's shell. nodelay: a reply written in parts goes out as it
    # comes, not held for the client's delayed ACK. socat starts at most one relay per slot
    # (max-children); connections beyond wait in the listener's backlog rather than being reset.
    SHADOW_CONTROL_PATH=$control SHADOW_EXEC_SLOTS=$slots SHADOW_EXEC_LOGINS=$exec_logins \
      SHADOW_EXEC_SESSIONS=$exec_sessions SHADOW_RELAY_COMMAND="${SHADOW_EXEC_CONNECT_COMMAND} '${node}' '${port}'" \
      socat "TCP4-LISTEN:${port},bind=${listen},fork,reuseaddr,nodelay,backlog=${exec_backlog},max-children=$((exec_logins * exec_sessions))" \
      EXEC:"sh ./exec-relay",nofork &
    pids+=("$!")
  done
  log "relaying ports ${ports[*]} to ${node} with '${SHADOW_EXEC_CONNECT_COMMAND}' on ${login_host}"
}

# channel_opened OUT says whether OUT, what a check's ssh printed, shows the channel open:
# the mux client's "master session id" (ssh -v, once the login node confirmed the channel),
# or the connect command's own word for a connection made, under -v: OpenBSD nc's "Connection
# to %s %s port [%s] succeeded!", ncat's "Ncat: Connected to %s.", traditional netcat's
# "%s [%s] %d (%s) open".
channel_opened() {
  grep -qs -e 'master session id' -e ' succeeded!$' -e '^Ncat: Connected to ' -e ') open$' -- "$1"
}

# check_channel NODE PORT OUT opens one channel to NODE:PORT over the session, as traffic
# does, and returns 0 once it is open; OUT gets what the check printed, $check_status its exit
# status. It sends nothing (stdin /dev/null) and stops at once when the channel is open, the
# check ends, or after $check_bound seconds: a node that never answers holds it no longer.
check_channel() {
  local node=$1 port=$2 out=$3 target=$1 pid i
  [[ $node == *:* ]] && target="[${node}]"
  # Emptied here, before the check starts: the check's own redirection runs once it is
  # forked, and until then the loop below would read the last check's output as this one's.
  : >"$out"
  if [[ $mode == portforward ]]; then
    timeout "$check_bound" ssh -v -o "ControlPath=${control}" "${ssh_args[@]}" -W "${target}:${port}" -- "$login_host" </dev/null >>"$out" 2>&1 &
  else
    # -z: connect and close at once. A netcat left connected would outlive the check on the
    # login node, its session held there until the job's server hangs up, and the login
    # sshd's MaxSessions would soon refuse the relays real traffic needs. -v: OpenBSD nc says
    # nothing of a refused connection without it. Node and port are checked, and quoted for
    # the login node's shell, as for the relays.
    timeout "$check_bound" ssh -o "ControlPath=${control}" "${ssh_args[@]}" -T -- "$login_host" \
      "${SHADOW_EXEC_CONNECT_COMMAND} -z -v '${node}' '${port}'" </dev/null >>"$out" 2>&1 &
  fi
  pid=$!
  # The check is stopped only while it runs: once it has ended the shell may have reaped it,
  # and its pid may be another process's.
  for ((i = 0; i < check_bound * 10; i++)); do
    channel_opened "$out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
  fi
  check_status=0
  wait "$pid" || check_status=$?
  channel_opened "$out"
}

# check_ports NODE proves every port end to end over the live session and reports what it
# found: Ready when each opened a channel to NODE; else the first port's failure, classified
# from what the check and the session's master printed meanwhile. Under NodeDiscovery slurm a
# failed check asks Slurm once more (job_ended), as the job's end stops its server: a job that
# completed, ended otherwise or is ending is the reason rather than the channel. A passing check
# asks nothing.
check_ports() {
  local node=$1 port from out=${state}/ssh-forward.check i
  if ! ssh -o "ControlPath=${control}" -O check -- "$login_host" >/dev/null 2>&1; then
    report TunnelDown "the ssh session to $(login_name) does not answer on its control socket ${control}"
    return 0
  fi
  for port in "${ports[@]}"; do
    from=$(($(wc -c <"$ssh_err")))
    check_channel "$node" "$port" "$out" && continue
    # sshd's reason reaches the master's stderr, which tee copies a moment later.
    for ((i = 0; i < 10; i++)); do
      (($(wc -c <"$ssh_err") > from)) && break
      sleep 0.1
    done
    {
      tail -c "+$((from + 1))" -- "$ssh_err" || true
      cat -- "$out"
    } >"$out.all"
    classify "$out.all"
    if [[ $cl_reason == TunnelDown ]]; then
      # shellcheck disable=SC2034 # cl_said is read by failure_message (common.sh)
      case $check_status in
        127) cl_reason=ExecCommandMissing ;;
        124 | 143) cl_reason=NodeUnreachable cl_said="no connection within ${check_bound} s" ;;
      esac
    fi
    if job_ended; then
      # shellcheck disable=SC2154 # job_ended (common.sh) sets sn_reason and sn_said
      report "$sn_reason" "$sn_said"
    else
      report "$cl_reason" "$(failure_message "$node" "$port")"
    fi
    return 0
  done
  if [[ $mode == portforward ]]; then
    report Ready "forwarding ports ${ports[*]} to ${node} through ${login_host}"
  else
    report Ready "relaying ports ${ports[*]} to ${node} with '${SHADOW_EXEC_CONNECT_COMMAND}' on ${login_host}"
  fi
}

# run_session runs one session over the master: portforward mode's only one. sshd sets
# TCP_NODELAY on a login's connection once it runs a session, and until then a reply the
# node's server writes in parts (a header, then a body) waits for the client's delayed ACK, 40
# ms each. Exec mode's checks and relays are sessions. A login node that runs none is said in
# the log and is no failure: the forwards carry everything all the same.
run_session() {
  local out=${state}/ssh-forward.session status=0
  timeout "$check_bound" ssh -o "ControlPath=${control}" "${ssh_args[@]}" -T -- "$login_host" true </dev/null >"$out" 2>&1 || status=$?
  # 255 is ssh's own failure, the session refused; 124 and 143 a session that did not end
  # within the bound, which sshd did start. Any other status is the command's, which sshd ran: a
  # ForceCommand's or the login shell's.
  case $status in
    255)
      log "the login node ran no session ($(printable 200 <"$out")): sshd then leaves Nagle's algorithm on, and a reply written in parts may wait 40 ms for the client's ACK"
      ;;
    124 | 143) log "the session run on the login node did not end within ${check_bound} s" ;;
  esac
}

# check_tunnel NODE reports Connecting, then checks the ports as soon as the session is up and
# every $check_interval seconds after: per check one control message to the master and one
# channel per port over the session, no login. In portforward mode, after the first check, it
# runs one session (run_session).
check_tunnel() {
  report Connecting "logging in to $(login_name) to reach ports ${ports[*]} on $1"
  until ssh -o "ControlPath=${control}" -O check -- "$login_host" >/dev/null 2>&1; do
    sleep 0.2
  done
  check_ports "$1"
  [[ $mode == exec ]] || run_session
  while :; do
    close_logins idle
    sleep "$check_interval"
    check_ports "$1"
  done
}

start_tunnel() {
  case $mode in
    portforward) start_portforward "$1" ;;
    exec) start_exec "$1" ;;
    *) fail TunnelDown "SHADOW_FORWARD_MODE is '${mode}', not portforward or exec" ;;
  esac
  check_tunnel "$1" &
  checker=$!
}

# close_logins [idle] closes exec mode's logins beyond the first (exec-relay opens them): all
# of them, or with idle those no relay holds a slot on. It first frees the slots and locks of
# relays that are gone.
close_logins() {
  local file pid path login
  [[ $mode == exec && -d $slots ]] || return 0
  for file in "$slots"/*; do
    [[ -f $file ]] || continue
    pid=$(<"$file") || continue
    [[ -z $pid ]] || kill -0 "$pid" 2>/dev/null || rm -f -- "$file"
  done
  for ((login = 1; login < exec_logins; login++)); do
    path=${control}.${login}
    [[ -S $path ]] || continue
    if [[ ${1-} == idle ]]; then
      compgen -G "${slots}/${login}.*" >/dev/null && continue
    fi
    ssh -o "ControlPath=${path}" -O exit -- "$login_host" 2>/dev/null || rm -f -- "$path"
  done
}

stop_tunnel() {
  close_logins
  stop_children "${pids[@]}" ${checker:+"$checker"}
  # tee ends once ssh, the last writer of its fifo, has gone.
  [[ -z $tee_pid ]] || wait "$tee_pid" 2>/dev/null || true
  pids=() tee_pid='' checker=''
  rm -f -- "$control" "$ssh_fifo"
}

watcher=
trap 'shutdown stop_tunnel' TERM INT

if [[ $mode == exec ]]; then
  cd -- "$state"
  cp -- "${SHADOW_EXEC_RELAY:?}" exec-relay
fi

node=$(current_node)
valid_host "$node" || fail_without_node "$node"
start_tunnel "$node"
seen=$node
while :; do
  done_pid=
  status=0
  if ! kill -0 "${pids[0]}" 2>/dev/null; then
    # ssh is gone already (exec mode waits for its master before this): wait -n would not
    # see a job the shell has reaped, but wait still has its status.
    done_pid=${pids[0]}
    wait "$done_pid" || status=$?
  else
    watch_node "$seen" "$node_poll" >"${state}/forward-node" &
    watcher=$!
    wait -n -p done_pid "${pids[@]}" "$watcher" || status=$?
  fi
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
  [[ -z $watcher ]] || kill "$watcher" 2>/dev/null || true
  watcher=
  if [[ $done_pid != "${pids[0]}" ]]; then
    stop_tunnel
    fail TunnelDown "the socat listener exited with status ${status} while the compute node is still ${node}"
  fi
  stop_tunnel
  classify "$ssh_err"
  fail "$cl_reason" "$(failure_message "$node" "") (ssh exited with status ${status}, the compute node still ${node})"
done
