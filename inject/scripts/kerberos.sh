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
stop_on_term
any_uid

principal=${SHADOW_KRB_PRINCIPAL:?}
keytab=${SHADOW_KRB_KEYTAB:?}
: "${KRB5CCNAME:?}"
krb_out=${SHADOW_STATE_DIR:?}/kinit-${0##*/}.out
[ -z "${SHADOW_KRB_REFRESH_SECONDS:-}" ] || clear_status

# Without KRB5_CONFIG (the policy's Krb5ConfigMap) the Kerberos library reads the image's
# /etc/krb5.conf; shadowgate's image ships none, so kinit could only say it finds no KDC.
if [ -z "${KRB5_CONFIG:-}" ] && [ ! -f /etc/krb5.conf ]; then
  fail KerberosFailed "no Kerberos configuration for ${principal}: the image has no /etc/krb5.conf and the policy names no Krb5ConfigMap (KRB5_CONFIG is not set), so no KDC is known"
fi

# get_ticket runs kinit, logging what it said; on failure krb_said holds that, printable.
get_ticket() {
  if interruptible kinit -k -t "$keytab" "$principal" >"$krb_out" 2>&1; then
    log "got a ticket for ${principal}"
    return 0
  fi
  krb_said=$(printable <"$krb_out")
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
    interruptible sleep "$step"
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
