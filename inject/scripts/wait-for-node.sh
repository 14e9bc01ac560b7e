#!/bin/sh
# wait-for-node: holds the shadow in Init until the compute node the job runs on is known: with
# NodeDiscovery configmap, once the virtual kubelet has written it into the mounted node
# ConfigMap; with slurm, once Slurm reports the job named after the pod UID running (asked
# over the login node, see current_node). While the job is queued this is the normal state;
# after SHADOW_NODE_WAIT_SECONDS it fails (NodeWaitTimedOut) with the likely causes in the log
# and, as its termination message, what it waited for and what discovery said last; or, when
# Slurm said last that the job completed, with that (JobCompleted). On success the termination
# message is "NodeFound: <node>".
#
# Environment: SHADOW_NODE_DISCOVERY (configmap, the default, or slurm), SHADOW_NODE_FILE and
# SHADOW_NODE_CONFIGMAP (<namespace>/<name>) for configmap; for slurm SHADOW_REVERSE_JOB_NAME
# (the pod UID), SHADOW_LOGIN_HOST, SHADOW_SSH_OPTIONS, SHADOW_STATE_DIR and
# SHADOW_SLURM_POLL_INTERVAL (seconds, default 30); SHADOW_NODE_WAIT_TIMEOUT (as the policy
# wrote it), SHADOW_NODE_WAIT_SECONDS, SHADOW_POLL_INTERVAL (seconds, default 5).

# --- shadowgate: insert common ---

set -eu
stop_on_term
any_uid

discovery=${SHADOW_NODE_DISCOVERY:-configmap}
check_discovery
configmap=
[ "$discovery" = slurm ] || configmap=${SHADOW_NODE_CONFIGMAP:?}
wait_secs=${SHADOW_NODE_WAIT_SECONDS:?}
poll=${SHADOW_POLL_INTERVAL:-5}
case $wait_secs in '' | *[!0-9]*) fail TunnelDown "SHADOW_NODE_WAIT_SECONDS holds '${wait_secs}', not a number of seconds" ;; esac
valid_seconds "$poll" || fail TunnelDown "SHADOW_POLL_INTERVAL holds '${poll}', not a number of seconds"
poll=$(node_poll "$poll")

deadline=$(($(date +%s) + wait_secs))
refused=
log "waiting for the compute node from $(node_source) (the job may still be queued)"
while :; do
  node=$(current_node)
  if valid_host "$node"; then
    log "compute node is ${node}"
    terminate NodeFound "$node"
    exit 0
  fi
  # Slurm could not be asked because the login node refused this login or its host key: no
  # wait mends that (the Secret or ConfigMap must change, and a restarted container mounts the
  # new one), so fail now, naming why, rather than at NodeWaitTimeout, hours later; Kubernetes
  # restarts the container with its back-off. A login node that does not answer may come back,
  # so that one is waited out. Two running jobs named after the pod fail now too: one may be a
  # co-tenant's, and the admin must cancel it before the pod's traffic goes anywhere.
  said=$(discovery_said)
  case $said in
    LoginRefused:* | HostKeyUnknown:* | HostKeyMismatch:* | KerberosFailed:* | DuplicateJobName:*) fail "${said%%:*}" "${said#*: }" ;;
  esac
  if [ -n "$node" ] && [ "$node" != "$refused" ]; then
    refused=$node
    log "ignoring compute node '$(printf '%s' "$node" | printable)': not a hostname or IP address the login node may dial (not its loopback, link-local or a metadata service), so it is not passed to ssh"
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    if [ "$discovery" = slurm ]; then
      # The job ran and completed before its node was found: the tunnel ended with it, which
      # is no failure to explain.
      case $said in
        JobCompleted:*) fail JobCompleted "${said#*: }" ;;
      esac
      job=$SHADOW_REVERSE_JOB_NAME
      cat >&2 <<MSG
no compute node after ${SHADOW_NODE_WAIT_TIMEOUT:-${wait_secs}s} (NodeWaitTimeout): Slurm on ${SHADOW_LOGIN_HOST} has not reported job ${job} running on a usable node.
Likely causes (the lines above say what Slurm answered last):
  - the job is still queued (PENDING): check it with squeue --me --name=${job} on the login node;
  - the job has not been submitted: the interLink Slurm plugin names it after the pod UID (#SBATCH --job-name=<pod UID>); check the plugin's log;
  - the job ended or was cancelled before it ran (squeue --me --states=all --name=${job}, or sacct --name=${job});
  - the plugin submits jobs as another user than the shadow's login (SSH.User), so squeue --me does not list them;
  - the shadow could not log in to ${SHADOW_LOGIN_HOST}, or squeue and scontrol failed there (see "could not ask Slurm" above);
  - Slurm's answer was refused ("refusing Slurm's answer" above): a batch host or NodeAddr that is not a hostname or IP address;
  - the virtual kubelet publishes the node after all: set NodeDiscovery: configmap in the policy.
MSG
      said=$(discovery_said)
      fail NodeWaitTimedOut "no compute node after ${SHADOW_NODE_WAIT_TIMEOUT:-${wait_secs}s} (NodeWaitTimeout): Slurm on ${SHADOW_LOGIN_HOST} has not reported job ${job} running; last: ${said:-no answer yet}"
    fi
    ns=${configmap%%/*}
    name=${configmap#*/}
    cat >&2 <<MSG
no compute node after ${SHADOW_NODE_WAIT_TIMEOUT:-${wait_secs}s} (NodeWaitTimeout): ${configmap} still holds no valid compute-node.
Likely causes:
  - the job is still queued in the batch system (check it with squeue on the login node);
  - the interLink plugin does not report PodStatus.NodeName, so nobody publishes the node;
  - the virtual kubelet refused the name the plugin reported ("Refusing to publish compute node" in its log);
  - the virtual kubelet is not running, or may not write ConfigMaps in this namespace;
  - the virtual kubelet publishes no node at all (EnableTunnel: false): set NodeDiscovery: slurm in the policy.
Check: kubectl get configmap ${name} -n ${ns} -o jsonpath='{.data.compute-node}'
MSG
    held=
    [ -z "$refused" ] || held=" (it holds '$(printf '%s' "$refused" | printable)')"
    fail NodeWaitTimedOut "no compute node after ${SHADOW_NODE_WAIT_TIMEOUT:-${wait_secs}s} (NodeWaitTimeout): ConfigMap ${configmap} still holds no valid compute-node${held}"
  fi
  interruptible sleep "$poll"
done
