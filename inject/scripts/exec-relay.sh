#!/bin/sh
# exec-relay: ssh-forward's socat listeners start this for every accepted connection, with the
# connection's socket as stdin and stdout, which ssh passes on to the control master. It runs
# the relay command ("<ExecConnectCommand> '<node>' '<port>'", built and checked by
# ssh-forward) on the login node as a channel of one of the shadow's logins, so nothing asks
# sshd to forward anything.
#
# A login carries at most the login node's MaxSessions channels, so the relays share a pool:
# SHADOW_EXEC_LOGINS logins of SHADOW_EXEC_SESSIONS channels each, one slot file per channel
# under SHADOW_EXEC_SLOTS holding the pid of the relay that has it. Login 0 is ssh-forward's
# control master; a relay whose slot is on another login that is not up opens it, one relay
# per login at a time. socat starts no more relays than there are slots, per port; with more
# ports, a relay waits for a slot. Should a login be gone, ssh logs in on its own: with the
# policy's options too, so never with looser host key checking or other credentials.
#
# Environment: SHADOW_CONTROL_PATH (login 0's socket; login N's is that with .N), SHADOW_LOGIN_HOST,
# SHADOW_SSH_OPTIONS, SHADOW_RELAY_COMMAND, SHADOW_EXEC_SLOTS, SHADOW_EXEC_LOGINS,
# SHADOW_EXEC_SESSIONS.

set -eu
control=${SHADOW_CONTROL_PATH:?}
slots=${SHADOW_EXEC_SLOTS:?}
logins=${SHADOW_EXEC_LOGINS:?}
sessions=${SHADOW_EXEC_SESSIONS:?}
host=${SHADOW_LOGIN_HOST:?}
# One option a line, and no option holds a newline: split on newlines alone, globbing off, into
# the arguments every ssh of the shadow starts with, without starting a process.
IFS='
'
set -f
set --
for opt in ${SHADOW_SSH_OPTIONS:?}; do
  set -- "$@" -o "$opt"
done
IFS=' '

# take_slot claims the first free slot, "<login>.<channel>", by creating its file; sets login
# and slot.
take_slot() {
  login=0
  while [ "$login" -lt "$logins" ]; do
    channel=1
    while [ "$channel" -le "$sessions" ]; do
      slot=${slots}/${login}.${channel}
      if { echo "$$" >"$slot"; } 2>/dev/null; then
        return 0
      fi
      channel=$((channel + 1))
    done
    login=$((login + 1))
  done
  return 1
}

# A relay waits up to a minute for a slot; a connection left waiting longer is closed.
# noclobber: creating a slot or lock file that exists fails, which is what claims it.
set -C
waited=0
until take_slot; do
  [ "$waited" -lt 600 ] || exit 1
  sleep 0.1
  waited=$((waited + 1))
done
trap 'rm -f -- "$slot"' EXIT
trap 'exit 143' TERM
trap 'exit 129' HUP

path=$control
if [ "$login" != 0 ]; then
  path=${control}.${login}
  # open_login: the first relay to find login N down opens it, as ssh-forward opens login 0;
  # the others wait for its socket, a login's handshake at most.
  lock=${slots}/login.${login}
  tries=0
  while [ ! -S "$path" ] && [ "$tries" -lt 300 ]; do
    if { echo "$$" >"$lock"; } 2>/dev/null; then
      ssh -N -o ControlMaster=yes -o "ControlPath=${path}" "$@" -- "$host" </dev/null >/dev/null &
      until [ -S "$path" ] || ! kill -0 "$!" 2>/dev/null || [ "$tries" -ge 300 ]; do
        sleep 0.1
        tries=$((tries + 1))
      done
      rm -f -- "$lock"
      break
    fi
    sleep 0.1
    tries=$((tries + 1))
  done
fi
ssh -o "ControlPath=${path}" -o ControlMaster=no "$@" -T -- "$host" "${SHADOW_RELAY_COMMAND:?}"
