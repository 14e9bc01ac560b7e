#!/bin/bash
# reverse-hop: how ssh-reverse reaches the compute node, written to its state directory so
# ssh can run it as a ProxyCommand. Every value comes from the environment, checked by
# ssh-reverse before it exported them.
#
#   jump HOST PORT  a byte stream to HOST:PORT on the site's network, through the login node:
#                   ssh -W (portforward), or ExecConnectCommand run there (exec)
#   run NODE CMD..  runs CMD on the compute node as the job's user: with NodeExec ssh through
#                   the checked node hop (the shadow's own ssh to the node's sshd, its host key
#                   verified like the login node's); with srun, srun --jobid --overlap pinned
#                   to the job's batch host, the job chosen as node discovery chooses it
#                   (common.sh: slurm_job), on the login node
#   node NODE PORT  a byte stream to the node's sshd on PORT: with NodeExec ssh, jump NODE PORT;
#                   with srun, the job's relay (relay.py connect) run through "run" on the batch
#                   host, to that host's sshd on 127.0.0.1, so neither the session nor its
#                   forwards can land on another node of the job or need ssh to reach the node
#   sshd            the user-space sshd -i on the compute node, through "run"
#
# Environment: SHADOW_LOGIN_HOST, SHADOW_SSH_OPTIONS, SHADOW_FORWARD_MODE,
# SHADOW_EXEC_CONNECT_COMMAND, SHADOW_REVERSE_LOGIN_OPTIONS (options that go first on the
# login hop of srun), SHADOW_REVERSE_NODE_EXEC, SHADOW_REVERSE_JOB_NAME, SHADOW_STATE_DIR and
# SHADOW_NODE_DISCOVERY (srun's lookup of the job, slurm_job), SHADOW_REVERSE_PYTHON,
# SHADOW_REVERSE_NODE_PORT, SHADOW_REVERSE_SSHD_PATH; and, set by ssh-reverse,
# SHADOW_REVERSE_PREPARED_NODE and SHADOW_REVERSE_PREPARED_DIR, the node and the socket
# directory prepared there.

# --- shadowgate: insert common ---

set -euo pipefail

login_host=${SHADOW_LOGIN_HOST:?}
: "${SHADOW_SSH_OPTIONS:?}"
mapfile -t login_args < <(ssh_option_words "$SHADOW_SSH_OPTIONS")

bracket() { if [[ $1 == *:* ]]; then printf '[%s]' "$1"; else printf '%s' "$1"; fi; }

jump() {
  local host=$1 port=$2
  if [[ ${SHADOW_FORWARD_MODE:?} == exec ]]; then
    # Quoted for the login node's shell; host and port are checked by ssh-reverse.
    exec ssh "${login_args[@]}" -T -- "$login_host" "${SHADOW_EXEC_CONNECT_COMMAND:?} '${host}' '${port}'"
  fi
  exec ssh "${login_args[@]}" -W "$(bracket "$host"):${port}" -- "$login_host"
}

# shellcheck disable=SC2154 # slurm_job (common.sh) sets the sn_ variables
run() {
  local node=$1 srun_args
  shift
  if [[ ${SHADOW_REVERSE_NODE_EXEC:?} == ssh ]]; then
    exec ssh -o "ProxyCommand=bash '$0' jump %h %p" -o "Port=${SHADOW_REVERSE_NODE_PORT:-22}" \
      "${login_args[@]}" -T -- "$node" "$@"
  fi
  # The plugin names the batch job after the pod's UID; the relay and the socket directory
  # are on its batch host, so every step is pinned there. The job is the one node discovery
  # takes (slurm_job): every pod of the virtual node runs its job as one site account, so a
  # co-tenant can name a job of its own after this pod's UID and run it while the pod's own
  # waits (queued, or requeued), and srun steps into neither. Under NodeDiscovery slurm the
  # job's node must be NODE too, where ssh-reverse prepared the tunnel. stdin is for the
  # command on the node, not for the lookup.
  slurm_job </dev/null
  case $sn_reason in
    NodeFound) ;;
    WaitingForNode | Connecting | NoRunningJob | JobCompleted)
      reason_line "$sn_reason" "$sn_said" >&2
      exit 3
      ;;
    *)
      reason_line "$sn_reason" "$sn_said" >&2
      exit 1
      ;;
  esac
  if [[ ${SHADOW_NODE_DISCOVERY:-configmap} == slurm && $sn_addr != "$node" ]]; then
    echo "job ${sn_job} runs on ${sn_host}, which Slurm reaches at ${sn_addr}, not on ${node}, so srun steps into it only once the reverse tunnel follows it there" >&2
    exit 3
  fi
  mapfile -t srun_args < <(ssh_option_words "${SHADOW_REVERSE_LOGIN_OPTIONS-}")
  srun_args+=("${login_args[@]}")
  exec ssh "${srun_args[@]}" -T -- "$login_host" srun "--jobid=${sn_id}" --overlap -w "$sn_host" -N1 -n1 -u -Q "$@"
}

node_sshd() {
  if [[ ${SHADOW_REVERSE_NODE_EXEC:?} == ssh ]]; then
    jump "$1" "$2"
  fi
  run "$1" "${SHADOW_REVERSE_PYTHON:?}" -I "${SHADOW_REVERSE_PREPARED_DIR:?}/rev-relay.py" connect 127.0.0.1 "$2"
}

case ${1:-} in
  jump) jump "$2" "$3" ;;
  node) node_sshd "$2" "$3" ;;
  run)
    shift
    run "$@"
    ;;
  sshd) run "${SHADOW_REVERSE_PREPARED_NODE:?}" "${SHADOW_REVERSE_SSHD_PATH:?}" -i -f "${SHADOW_REVERSE_PREPARED_DIR:?}/sshd_config" ;;
  *)
    echo "usage: reverse-hop jump HOST PORT | node NODE PORT | run NODE CMD... | sshd" >&2
    exit 64
    ;;
esac
