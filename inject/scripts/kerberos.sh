#!/bin/sh
# kinit / krb-refresh: gets a Kerberos ticket from the keytab into the ticket cache the shadow's
# ssh uses. As kinit (an init container) it gets one and exits; as krb-refresh, with
# SHADOW_KRB_REFRESH_SECONDS set, it renews it that often for the life of the tunnel, so a
# long-running notebook survives ticket expiry.
#
# Environment: SHADOW_KRB_PRINCIPAL, SHADOW_KRB_KEYTAB, KRB5CCNAME, SHADOW_KRB_REFRESH_SECONDS.

# --- shadowgate: insert common ---

set -eu

principal=${SHADOW_KRB_PRINCIPAL:?}
keytab=${SHADOW_KRB_KEYTAB:?}
: "${KRB5CCNAME:?}"

get_ticket() {
  if kinit -k -t "$keytab" "$principal"; then
    log "got a ticket for ${principal}"
    return 0
  fi
  log "kinit failed for ${principal}: check that KeytabSecret holds a keytab for this principal under KeytabSecretKey, and that /etc/krb5.conf (Krb5ConfigMap) knows its realm"
  return 1
}

if [ -z "${SHADOW_KRB_REFRESH_SECONDS:-}" ]; then
  get_ticket
  exit
fi
valid_seconds "$SHADOW_KRB_REFRESH_SECONDS" \
  || die "SHADOW_KRB_REFRESH_SECONDS holds '${SHADOW_KRB_REFRESH_SECONDS}', not a number of seconds"
while :; do
  sleep "$SHADOW_KRB_REFRESH_SECONDS"
  # A failed renewal is retried sooner; the ticket in the cache usually outlives a few tries.
  until get_ticket; do
    sleep 60
  done
done
