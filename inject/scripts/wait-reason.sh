#!/bin/sh
# wait-reason [probe]: the shadow's wait-reason sidecar under NodeDiscovery slurm, which carries
# what Slurm says of the queued job (its reason and expected start, common.sh: slurm_pending)
# to the kubelet's Events, where shadowgate reads it: an init container, as wait-for-node is,
# can have no probe, and this one starts before it and runs beside it.
#
# Without an argument it is the container's process: it forgets what it printed before a
# restart and idles until TERM. With probe it is the container's readiness probe: it reads the
# line wait-for-node logged last ($SHADOW_STATE_DIR/node-discovery.wait-for-node.logged: a
# new reason, or an expected start moved by 10 minutes or more) and, when that is a
# WaitingForNode line it has not printed yet, prints it, which the kubelet puts in the pod's
# Unhealthy Event, and fails; otherwise it passes. So the kubelet records an Event per change,
# not per period, and nothing once wait-for-node has found the node.
set -u
logged=${SHADOW_STATE_DIR:?}/node-discovery.wait-for-node.logged
printed=$SHADOW_STATE_DIR/status/wait-reason.printed
if [ "$#" -eq 0 ]; then
  rm -f -- "$printed"
  trap 'exit 0' TERM INT
  while :; do
    sleep 3600 &
    wait $!
  done
fi
line=$(cat -- "$logged" 2>/dev/null) || exit 0
case $line in
  WaitingForNode:*) ;;
  *) exit 0 ;;
esac
[ "$line" != "$(cat -- "$printed" 2>/dev/null)" ] || exit 0
mkdir -p -- "${printed%/*}" && printf '%s\n' "$line" >"$printed" || exit 0
printf '%s\n' "$line"
exit 1
