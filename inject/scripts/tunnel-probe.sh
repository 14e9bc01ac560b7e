#!/bin/sh
# tunnel-probe STATUS_FILE: the readiness probe of ssh-forward, ssh-reverse and krb-refresh. It
# opens nothing: it reads the status file the container's script keeps ("<epoch> <Reason>:
# <message>", common.sh: report) and exits 0 only when the reason is Ready and the line is at
# most SHADOW_STATUS_MAX_AGE (60) seconds old. Otherwise it prints the reason line, which the
# kubelet puts in the pod's Unhealthy Event, and exits 1. No file yet, or one older than the
# container, is Connecting: the probe may run before the script's first line.
f=$1
max=${SHADOW_STATUS_MAX_AGE:-60}
line=$(cat -- "$f" 2>/dev/null) || line=''
at=${line%% *}
case $at in
  '' | *[!0-9]*)
    echo "Connecting: the ${f##*/} script has written no status yet"
    exit 1
    ;;
esac
age=$(($(date +%s) - at))
if [ "$age" -gt "$max" ]; then
  echo "TunnelDown: no status for ${age} s: the ${f##*/} script has stopped updating it"
  exit 1
fi
# The state directory outlives the container: a line written before this container's first
# process (its PID 1, the script, whose start /proc/1/stat gives in clock ticks since boot:
# the shadow pod shares no process namespace, so /proc/1 is this container's own) started is
# a previous run's, which the script removes as it starts (common.sh:
# clear_status), and never this run's word. Within a second or two: uptime is whole seconds.
started=$(sed -n 's/.*) //p' /proc/1/stat 2>/dev/null | cut -d ' ' -f 20)
up=$(cut -d . -f 1 /proc/uptime 2>/dev/null)
hz=$(getconf CLK_TCK 2>/dev/null)
case $started$up$hz in
  '' | *[!0-9]*) ;;
  *)
    started=$(($(date +%s) - up + started / hz))
    if [ "$((at + 2))" -lt "$started" ]; then
      echo "Connecting: the ${f##*/} script has written no status since it started"
      exit 1
    fi
    ;;
esac
case ${line#* } in
  Ready:*) exit 0 ;;
esac
printf '%s\n' "${line#* }"
exit 1
