#!/bin/sh
# exec-relay: ssh-forward's socat listeners start this for every accepted connection, with the
# connection on stdin and stdout. It runs the relay command ("<ExecConnectCommand> '<node>'
# '<port>'", built and checked by ssh-forward) on the login node over the shared control master,
# so nothing asks sshd to forward anything.
#
# Environment: SHADOW_CONTROL_PATH, SHADOW_LOGIN_HOST, SHADOW_RELAY_COMMAND.
set -eu
exec ssh -o "ControlPath=${SHADOW_CONTROL_PATH:?}" -o ControlMaster=no -o BatchMode=yes -T \
  -- "${SHADOW_LOGIN_HOST:?}" "${SHADOW_RELAY_COMMAND:?}"
