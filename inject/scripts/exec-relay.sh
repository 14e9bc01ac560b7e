#!/bin/sh
# exec-relay: ssh-forward's socat listeners start this for every accepted connection, with the
# connection on stdin and stdout. It runs the relay command ("<ExecConnectCommand> '<node>'
# '<port>'", built and checked by ssh-forward) on the login node over the shared control master,
# so nothing asks sshd to forward anything. Should the master be gone, ssh logs in on its own:
# with the policy's options too, so never with looser host key checking or other credentials.
#
# Environment: SHADOW_CONTROL_PATH, SHADOW_LOGIN_HOST, SHADOW_SSH_OPTIONS, SHADOW_RELAY_COMMAND.

# --- shadowgate: insert common ---

set -eu
options=${SHADOW_SSH_OPTIONS:?}
# ssh_option_words prints one argument a line, and no option holds a newline: split on
# newlines alone, with globbing off.
IFS='
'
set -f
# shellcheck disable=SC2046 # split as IFS says, one argument a line
exec ssh -o "ControlPath=${SHADOW_CONTROL_PATH:?}" -o ControlMaster=no $(ssh_option_words "$options") -T \
  -- "${SHADOW_LOGIN_HOST:?}" "${SHADOW_RELAY_COMMAND:?}"
