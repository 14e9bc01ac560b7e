#!/bin/sh
# kinit / krb-refresh: gets a Kerberos ticket from the keytab into the ticket cache the shadow's
# ssh uses. As kinit (an init container) it gets one and exits, failing (KerberosFailed) with
# what kinit said when it cannot; as krb-refresh, with SHADOW_KRB_REFRESH_SECONDS set, it
# renews it that often for the life of the tunnel, so a long-running notebook survives ticket
# expiry, and keeps its status file (common.sh: report): Ready after a renewal, KerberosFailed
# after a failed one.
#
# Environment: SHADOW_KRB_PRINCIPAL, SHADOW_KRB_KEYTAB, KRB5CCNAME, SHADOW_STATE_DIR,
# SHADOW_KRB_REFRESH_SECONDS.

# --- shadowgate: insert common ---

set -eu

principal=${SHADOW_KRB_PRINCIPAL:?}
keytab=${SHADOW_KRB_KEYTAB:?}
: "${KRB5CCNAME:?}"

# get_ticket runs kinit, logging what it said; on failure krb_said holds that, printable.
get_ticket() {
  if krb_out=$(kinit -k -t "$keytab" "$principal" 2>&1); then
    log "got a ticket for ${principal}"
    return 0
  fi
  krb_said=$(printf '%s' "$krb_out" | printable)
  log "kinit failed for ${principal}: ${krb_said}"
  return 1
}

# krb_failure is the message of a failed kinit.
krb_failure() {
  printf 'kinit -k -t %s %s failed: %s' "$keytab" "$principal" "$krb_said"
}

if [ -z "${SHADOW_KRB_REFRESH_SECONDS:-}" ]; then
  get_ticket || fail KerberosFailed "$(krb_failure)"
  exit 0
fi
case $SHADOW_KRB_REFRESH_SECONDS in
  *[!0-9]* | 0*) fail TunnelDown "SHADOW_KRB_REFRESH_SECONDS holds '$(printf '%s' "$SHADOW_KRB_REFRESH_SECONDS" | printable)', not a whole number of seconds" ;;
esac
# kinit got the first ticket; the status says so until the first renewal.
status=Ready
said="the ticket of ${principal} is in ${KRB5CCNAME}, renewed every ${SHADOW_KRB_REFRESH_SECONDS} s"
# The status is written again every 30 s at most, so the probe sees a fresh line between
# renewals; a failed renewal is retried after 60 s, as the ticket in the cache usually
# outlives a few tries.
next=$SHADOW_KRB_REFRESH_SECONDS
while :; do
  report "$status" "$said"
  left=$next
  while [ "$left" -gt 0 ]; do
    step=30
    [ "$left" -ge "$step" ] || step=$left
    sleep "$step"
    left=$((left - step))
    [ "$left" -le 0 ] || report "$status" "$said"
  done
  if get_ticket; then
    status=Ready said="renewed the ticket of ${principal} in ${KRB5CCNAME}; next in ${SHADOW_KRB_REFRESH_SECONDS} s"
    next=$SHADOW_KRB_REFRESH_SECONDS
  else
    status=KerberosFailed said="renewing: $(krb_failure)"
    next=60
  fi
done
