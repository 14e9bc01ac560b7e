#!/bin/bash
# ssh-reverse: carries connections from the offloaded job back into the cluster. Once the
# compute node is known it finds, on that node, the socket directory of the job's relay (keyed
# by the pod's bind address), then holds an ssh session whose -R forwards end in
# <dir>/rev-<port>.sock and are dialled from here, inside the cluster.
#
#   Sshd node       the forwards are made by the compute node's own sshd, its host key checked
#                   like the login node's, reached through the login node (reverse-hop node):
#                   with NodeExec ssh directly, with srun through a byte relay that srun runs on
#                   the job's batch host, to that host's sshd on its loopback
#   Sshd userspace  a user-space sshd -i started on the node for each session, as the job's
#                   user, with a host key made there and a client key made here per start
#
# A session ends when the socket directory or one of its sockets goes (the job ended, or was
# requeued); it is rebuilt once the relay is back, and when the compute node changes
# (current_node: the node file, or Slurm). A SOCKS proxy gets a session of its own, so another user taking its port
# while the tunnel is down cannot take the listed forwards down too.
#
# Environment: SHADOW_LOGIN_HOST, SHADOW_SSH_OPTIONS, SHADOW_NODE_DISCOVERY and what it reads
# (common.sh: check_discovery), SHADOW_NODE_FILE, SHADOW_STATE_DIR,
# SHADOW_REVERSE_BIND, SHADOW_REVERSE_FORWARDS (one "<listen port> <host> <port>" a line),
# SHADOW_REVERSE_SOCKS_PORT, SHADOW_REVERSE_SSHD (node|userspace), SHADOW_REVERSE_HOP and
# SHADOW_REVERSE_NODE_SCRIPT (the scripts' paths), and what reverse-hop reads; SHADOW_POLL_INTERVAL
# (seconds, default 5) and SHADOW_REVERSE_NODE_PORT (the node sshd's, default 22) for tests.

# --- shadowgate: insert common ---

set -euo pipefail
set -f
any_uid
clear_status

: "${SHADOW_LOGIN_HOST:?}" # reverse-hop logs in there
state=${SHADOW_STATE_DIR:?}
bind=${SHADOW_REVERSE_BIND:?}
socks=${SHADOW_REVERSE_SOCKS_PORT-}
sshd_mode=${SHADOW_REVERSE_SSHD:?}
poll=${SHADOW_POLL_INTERVAL:-5}
node_exec=${SHADOW_REVERSE_NODE_EXEC:?}
mapfile -t forwards <<<"${SHADOW_REVERSE_FORWARDS-}"
: "${SHADOW_SSH_OPTIONS:?}"
mapfile -t ssh_args < <(ssh_option_words "$SHADOW_SSH_OPTIONS")

[[ $bind =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || fail TunnelDown "SHADOW_REVERSE_BIND holds '${bind}', not a 127.x.y.z address"
[[ -z $socks ]] || valid_port "$socks" || fail TunnelDown "SHADOW_REVERSE_SOCKS_PORT holds '${socks}', not a port"
[[ $sshd_mode == node || $sshd_mode == userspace ]] || fail TunnelDown "SHADOW_REVERSE_SSHD is '${sshd_mode}', not node or userspace"
[[ $node_exec == ssh || $node_exec == srun ]] || fail TunnelDown "SHADOW_REVERSE_NODE_EXEC is '${node_exec}', not ssh or srun"
# The poll interval is also the hold command's, on the compute node.
valid_seconds "$poll" || fail TunnelDown "SHADOW_POLL_INTERVAL holds '${poll}', not a number of seconds"
check_discovery
node_poll=$(node_poll "$poll")
# While no session runs the loop turns every $poll seconds; it looks at the node every
# $node_poll seconds at most (whole seconds: sooner when that is below one).
node_poll_whole=${node_poll%.*}
valid_port "${SHADOW_REVERSE_NODE_PORT:-22}" || fail TunnelDown "SHADOW_REVERSE_NODE_PORT is not a port"
if [[ ${SHADOW_FORWARD_MODE:?} == exec ]]; then
  valid_connect_command "${SHADOW_EXEC_CONNECT_COMMAND:?}" \
    || fail TunnelDown "SHADOW_EXEC_CONNECT_COMMAND holds '$(printf '%s' "$SHADOW_EXEC_CONNECT_COMMAND" | printable)', not nc, ncat or netcat with -N, -q N or -w N"
fi
if [[ $node_exec == srun ]]; then
  # squeue -n "" would list every job of the user: the first one is not necessarily this pod's.
  [[ ${SHADOW_REVERSE_JOB_NAME-} =~ ^[A-Za-z0-9-]+$ ]] \
    || fail TunnelDown "SHADOW_REVERSE_JOB_NAME holds '${SHADOW_REVERSE_JOB_NAME-}', not the pod UID the batch job is named after"
  [[ ${SHADOW_REVERSE_PYTHON:?} =~ ^/?[A-Za-z0-9_.+][A-Za-z0-9_./+-]*$ ]] \
    || fail TunnelDown "SHADOW_REVERSE_PYTHON holds '${SHADOW_REVERSE_PYTHON}', not a command name or absolute path"
fi
# The state directory is named in ssh's ProxyCommand, single-quoted, where % starts a token.
[[ $state == /* && $state != *[\'%]* ]] || fail TunnelDown "SHADOW_STATE_DIR holds '${state}', not an absolute path without ' or %"
[[ ${SHADOW_REVERSE_SSHD_PATH-/} =~ ^/[A-Za-z0-9_./+-]*$ ]] || fail TunnelDown "SHADOW_REVERSE_SSHD_PATH is not an absolute path"

ports=() remotes=()
for f in "${forwards[@]}"; do
  [[ -n $f ]] || continue
  read -r listen host port <<<"$f"
  if ! valid_port "$listen" || ! valid_dial_host "$host" || ! valid_port "$port"; then
    fail TunnelDown "SHADOW_REVERSE_FORWARDS holds '${f}', not '<listen port> <host> <port>'"
  fi
  [[ $host == *:* ]] && host="[${host}]"
  ports+=("$listen")
  remotes+=("${host}:${port}")
done
[[ ${#ports[@]} -gt 0 || -n $socks ]] || fail TunnelDown "neither SHADOW_REVERSE_FORWARDS nor SHADOW_REVERSE_SOCKS_PORT lists anything to carry"
ports_csv=$(
  IFS=,
  printf '%s' "${ports[*]}"
)

# The login user is the job's user: the user-space sshd lets in only it.
user=
for opt in "${ssh_args[@]}"; do
  [[ -z $user && $opt == User=* ]] && user=${opt#User=}
done

w=$state/reverse
mkdir -p -- "$w"
chmod 700 -- "$w"
cp -- "${SHADOW_REVERSE_HOP:?}" "$w/hop"
cp -- "${SHADOW_REVERSE_NODE_SCRIPT:?}" "$w/node.sh"
hop=$w/hop
export SHADOW_REVERSE_PREPARED_NODE='' SHADOW_REVERSE_PREPARED_DIR=''

# prepare finds the socket directory on $1 and, in user-space mode, readies the sshd there.
# Returns 3 while the job's relay is not there yet.
prepare() {
  local node=$1 out status=0 line args=(prepare "$bind" "$sshd_mode")
  if [[ $sshd_mode == userspace ]]; then
    rm -f -- "$w/client" "$w/client.pub"
    ssh-keygen -q -t ed25519 -N '' -C shadowgate-reverse -f "$w/client" </dev/null >/dev/null
    read -r -a key <"$w/client.pub"
    args+=("${key[0]}" "${key[1]}")
  fi
  out=$(bash "$hop" run "$node" sh -s -- "${args[@]}" <"$w/node.sh" 2>"$w/prepare.err") || status=$?
  [[ $status -eq 0 ]] || return "$status"
  SHADOW_REVERSE_PREPARED_DIR='' hostkey=''
  while IFS= read -r line; do
    case $line in
      "dir "*) SHADOW_REVERSE_PREPARED_DIR=${line#dir } ;;
      "hostkey "*) hostkey=${line#hostkey } ;;
    esac
  done <<<"$out"
  if [[ ! $SHADOW_REVERSE_PREPARED_DIR =~ ^/[A-Za-z0-9._/+-]+/il-rev-${bind//./\\.}$ ]]; then
    echo "the node reported socket directory '${SHADOW_REVERSE_PREPARED_DIR}'" >"$w/prepare.err"
    return 1
  fi
  if [[ $sshd_mode == userspace ]]; then
    if [[ ! $hostkey =~ ^ssh-ed25519\ [A-Za-z0-9+/=]+$ ]]; then
      echo "the node reported host key '${hostkey}'" >"$w/prepare.err"
      return 1
    fi
    printf 'shadowgate-reverse %s\n' "$hostkey" >"$w/known_hosts"
  fi
  SHADOW_REVERSE_PREPARED_NODE=$node
}

# session NODE IDX PORTS -R... holds one ssh, session IDX, with the -R forwards given while
# the hold command on the node runs, watching the sockets of PORTS (comma-separated; empty:
# only the directory); its stderr goes to the log and to session.IDX.err.
session() {
  local node=$1 idx=$2 hold=(hold "$SHADOW_REVERSE_PREPARED_DIR" "$poll")
  [[ -z $3 ]] || hold+=("$3")
  shift 3
  local args=()
  if [[ $sshd_mode == userspace ]]; then
    args=(-o "ProxyCommand=bash '${hop}' sshd" -o HostKeyAlias=shadowgate-reverse
      -o "UserKnownHostsFile=${w}/known_hosts" -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes
      -o "IdentityFile=${w}/client" -o IdentitiesOnly=yes -o PreferredAuthentications=publickey
      -o BatchMode=yes -o "User=${user}" -o ExitOnForwardFailure=yes
      -o ServerAliveInterval=30 -o ServerAliveCountMax=3)
  else
    args=(-o "ProxyCommand=bash '${hop}' node %h %p" -o "Port=${SHADOW_REVERSE_NODE_PORT:-22}" "${ssh_args[@]}")
  fi
  rm -f -- "$w/held.$idx" "$w/session.$idx.err"
  exec ssh "${args[@]}" "$@" -T -- "$node" sh -s -- "${hold[@]}" <"$w/node.sh" \
    > >(session_held "$idx") 2> >(tee -a -- "$w/session.$idx.err" >&2)
}

# session_held IDX reads session IDX's output: the hold command's "held" once every socket of
# its forwards exists on the node, then a line every $poll seconds. While every session holds,
# each line reports Ready, so the status stays fresh as long as the sessions carry data.
session_held() {
  local line i
  while IFS= read -r line; do
    [[ $line != held ]] || : >"$w/held.$1"
    [[ -e $w/held.$1 ]] || continue
    for ((i = 0; i < sessions; i++)); do
      [[ -e $w/held.$i ]] || continue 2
    done
    report Ready "$holding"
  done
  rm -f -- "$w/held.$1"
}

pids=() sessions=0 holding=''
start_sessions() {
  local node=$1 i rflags=()
  for i in "${!ports[@]}"; do
    rflags+=(-R "${SHADOW_REVERSE_PREPARED_DIR}/rev-${ports[$i]}.sock:${remotes[$i]}")
  done
  holding="holding ${bind} ports ${ports[*]:-none} to ${remotes[*]:-nothing}${socks:+, SOCKS5 on 127.0.0.1:${socks}} on ${node}"
  sessions=0
  [[ ${#ports[@]} -eq 0 ]] || sessions=$((sessions + 1))
  [[ -z $socks ]] || sessions=$((sessions + 1))
  report Connecting "starting the reverse tunnel on ${node}"
  if [[ ${#ports[@]} -gt 0 ]]; then
    session "$node" "${#pids[@]}" "$ports_csv" "${rflags[@]}" &
    pids+=("$!")
  fi
  if [[ -n $socks ]]; then
    session "$node" "${#pids[@]}" "" -R "127.0.0.1:${socks}" &
    pids+=("$!")
  fi
  log "reverse tunnel up on ${node}: ${bind} ports ${ports[*]:-none} to ${remotes[*]:-nothing}${socks:+, SOCKS5 on 127.0.0.1:${socks}}"
}

# report_failure NODE FILE STATUS reports why preparing or holding the tunnel on NODE failed,
# from what the hop printed in FILE (STATUS 3: the job's relay, or its job, is not there):
# the login's own failures by their reason, a refused hop to the node as NodeHopRefused. A
# relay missing for less than a minute is the job starting: Connecting, then NoRunningJob; or
# JobCompleted at once, when Slurm said last that the job completed (NodeDiscovery slurm).
# Under NodeDiscovery slurm a failure asks Slurm once more (job_ended), as discovery's last
# answer may be a poll interval old: a job that has ended, or is ending, is the reason rather
# than the failure. Not when the hop's srun had Slurm's answer itself, just now.
report_failure() {
  local said ask=1
  classify "$2"
  case $cl_reason in
    NodeConnectionRefused | ExecCommandMissing | ForwardingProhibited) cl_reason=NodeHopRefused ;;
    NoRunningJob | JobCompleted | DuplicateJobName) ask='' ;;
    TunnelDown)
      if [[ $3 -eq 3 ]]; then
        said=$(discovery_said)
        if [[ $said == JobCompleted:* ]]; then
          report JobCompleted "${said#*: }"
          return 0
        fi
        cl_reason=NoRunningJob
        if (($(date +%s) - waiting_since < 60)); then
          # shellcheck disable=SC2154 # classify (common.sh) sets cl_said
          report Connecting "waiting for the job's relay on $1: ${cl_said}"
          return 0
        fi
      fi
      ;;
  esac
  if [[ -n $ask ]] && job_ended; then
    # shellcheck disable=SC2154 # job_ended (common.sh) sets sn_reason and sn_said
    report "$sn_reason" "$sn_said"
    return 0
  fi
  report "$cl_reason" "$(failure_message "$1")"
}

stop_sessions() {
  stop_children "${pids[@]}"
  pids=()
  rm -f -- "$w"/held.*
}

watcher=
trap 'shutdown stop_sessions' TERM INT

[[ -z $socks ]] || log "WARNING: pod asks for a SOCKS5 proxy on port ${socks}: it listens on 127.0.0.1 of the compute node, and every user of that node can use it to reach this cluster"

node=$(current_node)
valid_host "$node" || fail_without_node "$node"
looked=$(date +%s)
waiting_since=$looked
seen=$node
said=
while :; do
  if [[ ${#pids[@]} -eq 0 ]]; then
    status=0
    prepare "$node" || status=$?
    if [[ $status -ne 0 ]]; then
      why=$(tr -s '\r\n' '  ' <"$w/prepare.err")
      msg="could not prepare the reverse tunnel on ${node}: ${why}"
      [[ $status -eq 3 ]] && msg="waiting for the job's relay on ${node}: ${why}"
      [[ $msg == "$said" ]] || log "$msg"
      said=$msg
      report_failure "$node" "$w/prepare.err" "$status"
      sleep "$poll"
    else
      said=
      waiting_since=$(date +%s)
      start_sessions "$node"
    fi
  fi
  if [[ ${#pids[@]} -gt 0 ]]; then
    watch_node "$seen" "$node_poll" >"$w/node" &
    watcher=$!
    done_pid=
    status=0
    wait -n -p done_pid "${pids[@]}" "$watcher" || status=$?
    if [[ $done_pid == "$watcher" ]]; then
      seen=$(<"$w/node")
      looked=$(date +%s)
    else
      kill "$watcher" 2>/dev/null || true
      wait "$watcher" 2>/dev/null || true
      watcher=
      stop_sessions
      log "the reverse tunnel session on ${node} ended (ssh status ${status}): the socket directory or one of its sockets went, or the connection dropped; rebuilding it once the job's relay is back"
      sleep "$poll"
      # By now tee has what ssh said last.
      cat -- "$w"/session.*.err >"$w/session.err" 2>/dev/null || true
      report_failure "$node" "$w/session.err" 1
      waiting_since=$(date +%s)
      # The job may have moved: look before preparing on the node it left.
      seen=$(current_node)
      looked=$(date +%s)
    fi
    watcher=
  elif (($(date +%s) - looked >= ${node_poll_whole:-0})); then
    seen=$(current_node)
    looked=$(date +%s)
  fi
  if ! valid_host "$seen"; then
    [[ $seen == "$said" ]] || log "ignoring compute node '$(printf '%s' "$seen" | printable)': not a hostname or IP address the login node may dial; the tunnel stays on ${node}"
    said=$seen
  elif [[ $seen != "$node" ]]; then
    log "compute node changed from ${node} to ${seen}, rebuilding the reverse tunnel"
    stop_sessions
    node=$seen
    waiting_since=$(date +%s)
    said=
  fi
done
