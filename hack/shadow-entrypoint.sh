#!/bin/sh
# The shadow image's entrypoint (shadow.Dockerfile), under tini: makes the container's uid a
# user the C library knows, as ssh requires (common.sh: any_uid), then runs the command.
# Kubernetes containers of a shadow name their own command, which does the same first thing.
# shellcheck source=inject/scripts/common.sh
. /usr/lib/shadowgate/common.sh
any_uid
exec "$@"
