#!/bin/sh
# wait-for-node: holds the shadow in Init until the virtual kubelet has written the compute node
# the job runs on into the mounted node ConfigMap. While the job is queued this is the normal
# state; after SHADOW_NODE_WAIT_SECONDS it fails with the likely causes.
#
# Environment: SHADOW_NODE_FILE, SHADOW_NODE_CONFIGMAP (<namespace>/<name>),
# SHADOW_NODE_WAIT_TIMEOUT (as the policy wrote it), SHADOW_NODE_WAIT_SECONDS,
# SHADOW_POLL_INTERVAL (seconds, default 5).

# --- shadowgate: insert common ---

set -eu

: "${SHADOW_NODE_FILE:?}" # current_node reads it
configmap=${SHADOW_NODE_CONFIGMAP:?}
wait_secs=${SHADOW_NODE_WAIT_SECONDS:?}
poll=${SHADOW_POLL_INTERVAL:-5}
case $wait_secs in '' | *[!0-9]*) die "SHADOW_NODE_WAIT_SECONDS holds '${wait_secs}', not a number of seconds" ;; esac
valid_seconds "$poll" || die "SHADOW_POLL_INTERVAL holds '${poll}', not a number of seconds"

deadline=$(($(date +%s) + wait_secs))
refused=
log "waiting for the compute node in ${configmap} (the job may still be queued)"
while :; do
  node=$(current_node)
  if valid_host "$node"; then
    log "compute node is ${node}"
    exit 0
  fi
  if [ -n "$node" ] && [ "$node" != "$refused" ]; then
    refused=$node
    log "ignoring compute node '${node}': not a hostname or IP address, so it is not passed to ssh"
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    ns=${configmap%%/*}
    name=${configmap#*/}
    cat >&2 <<MSG
no compute node after ${SHADOW_NODE_WAIT_TIMEOUT:-${wait_secs}s} (NodeWaitTimeout): ${configmap} still holds no valid compute-node.
Likely causes:
  - the job is still queued in the batch system (check it with squeue on the login node);
  - the interLink plugin does not report PodStatus.NodeName, so nobody publishes the node;
  - the virtual kubelet refused the name the plugin reported ("Refusing to publish compute node" in its log);
  - the virtual kubelet is not running, or may not write ConfigMaps in this namespace.
Check: kubectl get configmap ${name} -n ${ns} -o jsonpath='{.data.compute-node}'
MSG
    exit 1
  fi
  sleep "$poll"
done
