# shellcheck shell=sh
# The functions every script the shadow runs shares. What follows the "begin common" marker
# line below takes the place of each such script's "insert common" marker line, after its
# header comment, when the scripts are embedded (scripts.go), so they share one copy of these
# functions; the header above it stays in this file. POSIX sh: wait-for-node, kerberos and
# exec-relay run under sh, the others under bash.

# --- shadowgate: begin common ---
# log writes one line to the container's log, with the time and the container's name.
log() { printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$0" "$*" >&2; }

# Reason lines (the contract between these scripts, the readiness probe and shadowgate's
# reporter): "<Reason>: <message>", one line of at most 512 printable ASCII characters. Reason
# is one CamelCase token (Ready, Connecting, LoginRefused, ...); the message says what failed
# with its concrete values, never the remedy: shadowgate adds that, keyed by the token.

# reason_line REASON MESSAGE prints the reason line, made printable and cut to 512 characters
# (cut ends it with a newline).
reason_line() { printf '%s: %s' "$1" "$2" | printable 512; }

# terminate REASON MESSAGE writes the reason line to SHADOW_TERMINATION_LOG (the container's
# termination message path), when it is set, so the pod's status says why the container ended.
terminate() {
  [ -n "${SHADOW_TERMINATION_LOG:-}" ] || return 0
  reason_line "$1" "$2" >"$SHADOW_TERMINATION_LOG" 2>/dev/null || true
}

# fail REASON MESSAGE logs the reason line, leaves it as the termination message and exits 1.
# A setting the script cannot use fails as TunnelDown: the webhook refuses those, so one that
# gets here is not a failure the catalogue names.
fail() {
  log "$(reason_line "$1" "$2")"
  terminate "$1" "$2"
  exit 1
}

# any_uid makes this process's uid a user the C library knows, as ssh requires ("No user
# exists for uid N", even for ssh -V): a uid the image does not name, as OpenShift's restricted
# SCCs assign, gets a passwd line (home: a directory of its own) and a group line in files
# under TMPDIR (/tmp, an emptyDir of the shadow pod), which nss_wrapper (libnss-wrapper),
# preloaded into every command the script runs, answers from. An image without nss_wrapper
# fails (TunnelDown) naming what to do.
any_uid() {
  au_uid=$(id -u)
  ! getent passwd "$au_uid" >/dev/null 2>&1 || return 0
  au_lib=''
  # The library's directory is a glob, which a script that set -f (ssh-forward, ssh-reverse)
  # would not expand: globbing is on for the loop alone.
  case $- in
    *f*) au_noglob=1 ;;
    *) au_noglob='' ;;
  esac
  set +f
  for au_try in /usr/lib/*/libnss_wrapper.so /usr/lib64/libnss_wrapper.so /usr/lib/libnss_wrapper.so; do
    if [ -f "$au_try" ]; then
      au_lib=$au_try
      break
    fi
  done
  [ -z "$au_noglob" ] || set -f
  [ -n "$au_lib" ] || fail TunnelDown "uid ${au_uid} has no passwd entry in the image, which ssh needs, and the image has no nss_wrapper (libnss_wrapper.so) to give it one: use shadowgate's shadow image, add Debian's libnss-wrapper to this one, or run the shadow as a uid the image's /etc/passwd names"
  au_dir=$(mktemp -d -- "${TMPDIR:-/tmp}/shadow-user.XXXXXX" 2>/dev/null) \
    || fail TunnelDown "uid ${au_uid} has no passwd entry in the image, and ${TMPDIR:-/tmp} is not writable to give it one there: mount a writable emptyDir at /tmp"
  au_gid=$(id -g)
  {
    cat /etc/passwd 2>/dev/null || true
    printf 'shadow:x:%s:%s:shadowgate shadow:%s:/bin/sh\n' "$au_uid" "$au_gid" "$au_dir"
  } >"$au_dir/passwd"
  {
    cat /etc/group 2>/dev/null || true
    getent group "$au_gid" >/dev/null 2>&1 || printf 'shadow:x:%s:\n' "$au_gid"
  } >"$au_dir/group"
  LD_PRELOAD=$au_lib${LD_PRELOAD:+ $LD_PRELOAD}
  NSS_WRAPPER_PASSWD=$au_dir/passwd
  NSS_WRAPPER_GROUP=$au_dir/group
  HOME=$au_dir
  export LD_PRELOAD NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP HOME
}

# interruptible COMMAND... runs COMMAND in the background and waits for it, returning its
# status. The script is its container's PID 1, which takes no signal it has no trap for, and
# takes a trapped one only once the command in the foreground has ended; wait ends at once.
# stop_on_term sets the trap that ends the command and the script.
interruptible() {
  "$@" &
  int_pid=$!
  int_rc=0
  wait "$int_pid" || int_rc=$?
  int_pid=''
  return "$int_rc"
}

# stop_on_term makes TERM and INT end the script at once, with the command interruptible
# runs: a deletion or a roll of the shadow waits for no grace period.
stop_on_term() {
  trap 'stopped' TERM INT
}

stopped() {
  [ -z "${int_pid:-}" ] || kill "$int_pid" 2>/dev/null || true
  exit 143
}

# clear_status removes the status file a previous run of this container left (the state
# directory outlives a container's restart), so the probe never takes its line for this run's.
clear_status() {
  rm -f -- "${SHADOW_STATE_DIR:?}/status/${0##*/}" 2>/dev/null || true
}

# report REASON MESSAGE replaces this container's status file, $SHADOW_STATE_DIR/status/<name>
# ($0 is the container's name: the builder runs each script as sh -c '. FILE' NAME), with
# "<epoch seconds> <reason line>", which the readiness probe (tunnel-probe.sh) reads. A new
# file moved over the old one, so the probe reads either line, never part of one; a mktemp
# name of its own, as a script's checker and its main loop may report at once. The line is
# logged when its reason line differs from the one it replaces.
report() {
  rp_dir=${SHADOW_STATE_DIR:?}/status
  rp_file=$rp_dir/${0##*/}
  rp_line=$(reason_line "$1" "$2")
  mkdir -p -- "$rp_dir" 2>/dev/null || true
  rp_old=$(cat -- "$rp_file" 2>/dev/null || true)
  rp_tmp=$(mktemp -- "$rp_file.XXXXXX" 2>/dev/null) || {
    log "cannot write the status file ${rp_file}: ${rp_line}"
    return 0
  }
  if ! { printf '%s %s\n' "$(date +%s)" "$rp_line" >"$rp_tmp" && mv -f -- "$rp_tmp" "$rp_file"; }; then
    rm -f -- "$rp_tmp"
  fi
  [ "${rp_old#* }" = "$rp_line" ] || log "status: ${rp_line}"
}

# ssh_option NAME prints the value of the first NAME=value line of SHADOW_SSH_OPTIONS, the one
# ssh uses (it keeps the first value of an option).
ssh_option() {
  printf '%s\n' "${SHADOW_SSH_OPTIONS-}" | sed -n "s/^$1=//p" | head -n 1
}

# login_name prints user@login-host:port, the login every ssh of the shadow makes.
login_name() {
  printf '%s@%s:%s' "$(ssh_option User)" "${SHADOW_LOGIN_HOST-}" "$(ssh_option Port)"
}

# classify FILE reads what ssh wrote in FILE (with what the commands it ran wrote: nc,
# srun, reverse-hop) and sets cl_reason to the reason it names and cl_said to the line that
# names it, printable; TunnelDown and the last lines of FILE when no line is recognised. The
# first recognised line wins: ssh names the failure first, and what follows is its fallout
# (a ProxyCommand's login failure, then the outer ssh's "Connection closed"). Lines naming a
# host are judged by whether that host is the login node: a refusal by any other host is the
# reverse tunnel's hop to the compute node, except the bastion's (SHADOW_BASTION, user@host:port,
# when the login goes through one): its refusals are the login's, and cl_hop says which of the
# two named it (login or bastion). SHADOW_EXEC_CONNECT_COMMAND, when set, names the program whose
# absence is ExecCommandMissing.
classify() {
  cl_reason='' cl_said='' cl_hop=login
  cl_login=${SHADOW_LOGIN_HOST-}
  cl_bastion=${SHADOW_BASTION-}
  cl_bastion=${cl_bastion#*@}
  cl_bastion=${cl_bastion%:*}
  # No host holds a '/', so without a bastion its patterns below match no line.
  [ -n "$cl_bastion" ] || cl_bastion=/
  cl_prog=${SHADOW_EXEC_CONNECT_COMMAND-}
  cl_prog=${cl_prog%% *}
  cl_gss=no
  case ${SHADOW_SSH_OPTIONS-} in *PreferredAuthentications=gssapi-with-mic*) cl_gss=yes ;; esac
  # The lines reach the loop over a pipe, in a subshell that prints "<reason> <hop> <said>":
  # a here-document of the file would need a temporary file once it is over a pipe's 64 KiB,
  # which a read-only root without a writable /tmp refuses, and the reason would be lost.
  cl_out=$(tr -d '\000' <"$1" 2>/dev/null | classify_lines) || true
  case $cl_out in
    [A-Z]*' '*' '*)
      cl_reason=${cl_out%% *}
      cl_out=${cl_out#* }
      cl_hop=${cl_out%% *}
      cl_said=${cl_out#* }
      ;;
  esac
  if [ -z "$cl_reason" ]; then
    cl_reason=TunnelDown
    cl_said=$(tail -n 3 -- "$1" 2>/dev/null | printable)
  fi
}

# classify_lines reads ssh's lines on stdin and prints "<reason> <hop> <said>" for the first
# it recognises, or nothing; part of classify, whose cl_* settings it reads.
classify_lines() {
  while [ -z "$cl_reason" ] && { IFS= read -r cl_line || [ -n "$cl_line" ]; }; do
    case $cl_line in
      # sshconnect2.c: "Load key \"%s\": %s": the identity file could not be opened (its
      # mode or owner keeps this uid out), or ssh refused it ("bad permissions", after
      # "Permissions 0644 for '%s' are too open."): the login that fails next is its fallout.
      'Load key "'*'": Permission denied'* | 'Load key "'*'": bad permissions'*) cl_reason=KeyUnreadable ;;
      # sshconnect2.c: "%s@%s: Permission denied (%s)." names user@host as given to ssh.
      *"@${cl_login}: Permission denied ("*)
        cl_reason=LoginRefused
        [ "$cl_gss" = no ] || cl_reason=KerberosFailed
        ;;
      *"@${cl_bastion}: Permission denied ("*)
        cl_reason=LoginRefused cl_hop=bastion
        [ "$cl_gss" = no ] || cl_reason=KerberosFailed
        ;;
      *"Permission denied ("*) cl_reason=NodeHopRefused ;;
      # sshconnect.c, StrictHostKeyChecking=yes and no key for the host: "No %s host key is
      # known for %.200s and you have requested strict checking."; the host is [host]:port
      # off port 22.
      "No "*" host key is known for ${cl_login} "* | "No "*" host key is known for [${cl_login}]:"*) cl_reason=HostKeyUnknown ;;
      "No "*" host key is known for ${cl_bastion} "* | "No "*" host key is known for [${cl_bastion}]:"*) cl_reason=HostKeyUnknown cl_hop=bastion ;;
      "No "*" host key is known for "*) cl_reason=NodeHopRefused ;;
      # sshconnect.c, under "WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!": "Host key for
      # %.200s has changed and you have requested strict checking."
      "Host key for ${cl_login} has changed"* | "Host key for [${cl_login}]:"*" has changed"*) cl_reason=HostKeyMismatch ;;
      "Host key for ${cl_bastion} has changed"* | "Host key for [${cl_bastion}]:"*" has changed"*) cl_reason=HostKeyMismatch cl_hop=bastion ;;
      "Host key for "*" has changed"*) cl_reason=NodeHopRefused ;;
      # ssh.c and sshconnect.c: "ssh: connect to host %s port %s: %s" (refused, timed out, no
      # route), "ssh: Could not resolve hostname %s: %s"; before authentication:
      # "kex_exchange_identification: ..." (closed, reset), "Connection closed by %s port %d",
      # "Connection reset by ...", "Connection timed out during banner exchange", "banner
      # exchange: ..."; a session the login node stopped answering: "Timeout, server %s not
      # responding."; one it ended (sshd stopped): "Connection to %s closed by remote host.",
      # "client_loop: send disconnect: Broken pipe".
      "ssh: connect to host "* | "ssh: Could not resolve hostname "* | "kex_exchange_identification: "* | \
        "Connection closed by "*" port "* | "Connection reset by "*" port "* | *"during banner exchange"* | \
        "banner exchange: "* | "Timeout, server "*" not responding."* | \
        "Connection to "*" closed by remote host."* | "client_loop: send disconnect: "*)
        cl_reason=LoginUnreachable
        ;;
      # channels.c: "channel %d: open failed: %s: %s", the reason and sshd's message: the
      # login node refuses TCP forwarding (AllowTcpForwarding, PermitOpen), or its connect()
      # to the compute node failed: refused, or else (no route, timed out, no such name),
      # which OpenSSH 9 reports only as "connect failed: open failed".
      *"open failed: administratively prohibited"*) cl_reason=ForwardingProhibited ;;
      *"open failed: connect failed: Connection refused"*) cl_reason=NodeConnectionRefused ;;
      *"open failed: connect failed: "*) cl_reason=NodeUnreachable ;;
      # The connect command on the login node, run with -v: OpenBSD nc "nc: connect to %s port
      # %s (%s) failed: %s" and "nc: getaddrinfo for host ...", ncat "Ncat: Connection
      # refused." and others, netcat (traditional) "%s [%s] %d (%s) : Connection refused".
      *"nc: connect to "*"Connection refused"* | "Ncat: Connection refused."* | *") : Connection refused"*) cl_reason=NodeConnectionRefused ;;
      *"nc: connect to "*" failed: "* | *"nc: getaddrinfo for host "* | "Ncat: "* | *"forward host lookup failed"* | *") : "*) cl_reason=NodeUnreachable ;;
      # srun on the login node: "srun: error: Unable to create step for job ...", "srun:
      # error: ... Invalid job id ...".
      "srun: error: "*) cl_reason=NodeHopRefused ;;
      # reverse-hop's reason line when slurm_job finds no job for srun to step into: the
      # reason, and its message as what was said.
      "NoRunningJob: "* | "JobCompleted: "* | "DuplicateJobName: "*)
        cl_reason=${cl_line%%:*}
        cl_line=${cl_line#*: }
        ;;
      # GSSAPI under Auth kerberos: no ticket, or one the login node's KDC refuses.
      *"No Kerberos credentials available"* | *"Ticket expired"* | *"Cannot contact any KDC"*) cl_reason=KerberosFailed ;;
      *)
        # The login shell's "sh: 1: /no/nc: not found", bash's "No such file or directory"
        # or "command not found", tcsh's "Command not found.": the connect command's own
        # name in the line, so an unrelated missing file (an identity) is not taken for it.
        if [ -n "$cl_prog" ]; then
          case $cl_line in
            *"${cl_prog}"*": not found"* | *"${cl_prog}"*"command not found"* | *"${cl_prog}"*"No such file or directory"* | \
              *"command not found: ${cl_prog}"* | *"${cl_prog}: Command not found."*)
              cl_reason=ExecCommandMissing
              ;;
          esac
        fi
        ;;
    esac
    [ -z "$cl_reason" ] || printf '%s %s %s\n' "$cl_reason" "$cl_hop" "$(printf '%s' "$cl_line" | printable)"
    cl_line=''
  done
}

# failure_message [NODE [PORT]] prints the message of the reason line for cl_reason and
# cl_said (classify): what failed, with the login (or the bastion, when cl_hop says it refused),
# the node and port, the credential and the known-hosts ConfigMap the environment names, then
# what ssh said.
failure_message() {
  fm_login=$(login_name)
  fm_host=${SHADOW_LOGIN_HOST-} fm_port=$(ssh_option Port)
  if [ "${cl_hop-}" = bastion ]; then
    fm_login="the bastion ${SHADOW_BASTION-}"
    fm_host="the bastion ${cl_bastion}" fm_port=${SHADOW_BASTION##*:}
  fi
  fm_to=${1-}${2:+:$2}
  fm_hosts="the known hosts $(ssh_option UserKnownHostsFile)${SHADOW_KNOWN_HOSTS_CONFIGMAP:+ (ConfigMap ${SHADOW_KNOWN_HOSTS_CONFIGMAP})}"
  case $cl_reason in
    KeyUnreadable) fm="uid $(id -u) (groups $(id -G)) cannot use the key $(ssh_option IdentityFile)${SHADOW_KEY_SECRET:+ of Secret ${SHADOW_KEY_SECRET}}, so no login to ${fm_login} was tried with it" ;;
    LoginRefused) fm="${fm_login} refused the login with ${SHADOW_KEY_SECRET:+the key of Secret ${SHADOW_KEY_SECRET}, }$(ssh_option PreferredAuthentications)" ;;
    KerberosFailed) fm="${fm_login} refused the Kerberos login${SHADOW_KRB_PRINCIPAL:+ of ${SHADOW_KRB_PRINCIPAL}}" ;;
    HostKeyUnknown) fm="${fm_hosts} hold no key for ${fm_host} (port ${fm_port}), and StrictHostKeyChecking is yes" ;;
    HostKeyMismatch) fm="the host key of ${fm_host} (port ${fm_port}) is not the one in ${fm_hosts}" ;;
    LoginUnreachable) fm="no ssh session to ${fm_login}${SHADOW_BASTION:+ through the bastion ${SHADOW_BASTION}}" ;;
    ForwardingProhibited) fm="${SHADOW_LOGIN_HOST-} refused to open a channel to ${fm_to}" ;;
    NodeConnectionRefused) fm="${1-} refused the connection to port ${2-} from ${SHADOW_LOGIN_HOST-}" ;;
    NodeUnreachable) fm="${SHADOW_LOGIN_HOST-} cannot reach ${fm_to}" ;;
    ExecCommandMissing) fm="'${SHADOW_EXEC_CONNECT_COMMAND-}' is not found on ${SHADOW_LOGIN_HOST-}" ;;
    NodeHopRefused) fm="the hop from ${SHADOW_LOGIN_HOST-} to the compute node ${1-} was refused" ;;
    NoRunningJob) fm="no running job ${SHADOW_REVERSE_JOB_NAME-} on ${1-}" ;;
    JobCompleted) fm="job ${SHADOW_REVERSE_JOB_NAME-} runs on ${1-} no more" ;;
    DuplicateJobName) fm="srun from ${SHADOW_LOGIN_HOST-} steps into no job for ${1-}" ;;
    *) fm="ssh through ${fm_login}${SHADOW_BASTION:+ (by the bastion ${SHADOW_BASTION})}${fm_to:+ to ${fm_to}} failed" ;;
  esac
  printf '%s%s' "$fm" "${cl_said:+: ${cl_said}}"
}

# valid_host HOST accepts a compute node by the rule the webhook judges every host with
# (validate/syntax's Host, for a host the login node dials): an RFC 1123 name whose last
# label is not all digits and that the C library does not read as an address shorthand, not
# localhost; or an IP address that is not loopback (the login node's own), link-local,
# unspecified or a cloud metadata service. Checking again here keeps a value that got past
# the webhook, or came from Slurm, from becoming an ssh option, breaking out of a relay
# command or sending the login node to itself. validate/syntax/testdata/hosts.txt is the
# table both sides are tested with.
valid_host() { host_rule node "$1"; }

# valid_dial_host HOST is valid_host for a host the shadow itself dials (LoginHost, a reverse
# forward's destination), where loopback is the shadow's own pod and allowed.
valid_dial_host() { host_rule shadow "$1"; }

# host_rule USE HOST is valid_host (USE node) and valid_dial_host (USE shadow).
host_rule() {
  case $2 in
    '' | -*) return 1 ;;
  esac
  [ "${#2}" -le 253 ] || return 1
  case $2 in
    *:*)
      hr_hex=$(ipv6_hex "$2") || return 1
      ipv6_allowed "$1" "$hr_hex"
      return
      ;;
  esac
  case $2 in
    *[!A-Za-z0-9.-]* | .* | *. | *..* | -* | *- | *.-* | *-.*) return 1 ;;
  esac
  if hr_hex=$(ipv4_hex "$2"); then
    ipv4_allowed "$1" "$hr_hex"
    return
  fi
  hr_numeric=yes hr_label=''
  hr_rest=$2.
  while [ -n "$hr_rest" ]; do
    hr_label=${hr_rest%%.*}
    hr_rest=${hr_rest#*.}
    [ "${#hr_label}" -le 63 ] || return 1
    case $hr_label in
      0[xX]*) case ${hr_label#??} in *[!0-9a-fA-F]*) hr_numeric=no ;; esac ;;
      *[!0-9]*) hr_numeric=no ;;
    esac
  done
  # Numbers the C library reads as an address shorthand (0x7f.1, 2130706433), or a last label
  # of digits (1.2.3.4.5), are no names.
  [ "$hr_numeric" = no ] || return 1
  case $hr_label in *[!0-9]*) ;; *) return 1 ;; esac
  hr_lower=$(printf '%s' "$2" | tr '[:upper:]' '[:lower:]')
  # Metadata services' names (validate/syntax's metadataNames).
  case $hr_lower in
    metadata | metadata.google.internal | metadata.goog | metadata.azure.internal | instance-data | instance-data.ec2.internal | metadata.tencentyun.com) return 1 ;;
  esac
  if [ "$1" = node ]; then
    case $hr_lower in
      localhost | *.localhost) return 1 ;;
    esac
  fi
  return 0
}

# ipv4_hex ADDR prints the 8 hex digits of ADDR, an IPv4 address written a.b.c.d as Go's netip
# reads one (decimal, no leading zero, each at most 255), or fails.
ipv4_hex() {
  case $1 in
    *[!0-9.]* | *.*.*.*.* | .* | *. | *..*) return 1 ;;
    *.*.*.*) ;;
    *) return 1 ;;
  esac
  i4_rest=$1. i4_hex=''
  while [ -n "$i4_rest" ]; do
    i4_n=${i4_rest%%.*}
    i4_rest=${i4_rest#*.}
    case $i4_n in
      0?* | ????*) return 1 ;;
    esac
    [ "$i4_n" -le 255 ] || return 1
    i4_hex=$i4_hex$(printf '%02x' "$i4_n")
  done
  printf '%s' "$i4_hex"
}

# ipv6_hex ADDR prints the 32 lower-case hex digits of ADDR, an IPv6 address as Go's netip
# reads one without a zone (groups of 1-4 hex digits, at most one "::", an IPv4 address as the
# last 32 bits), or fails.
ipv6_hex() {
  i6=$1
  case $i6 in
    *[!0-9A-Fa-f:.]* | *:::* | *::*::* | :[!:]* | *[!:]:) return 1 ;;
  esac
  case $i6 in
    *.*)
      i6_v4=$(ipv4_hex "${i6##*:}") || return 1
      i6="${i6%:*}:$(printf '%s' "$i6_v4" | cut -c 1-4):$(printf '%s' "$i6_v4" | cut -c 5-8)"
      ;;
  esac
  case $i6 in
    *::*) i6_head=${i6%%::*} i6_tail=${i6#*::} i6_gap=yes ;;
    *) i6_head=$i6 i6_tail='' i6_gap=no ;;
  esac
  i6_head=$(ipv6_groups "$i6_head") || return 1
  i6_tail=$(ipv6_groups "$i6_tail") || return 1
  i6_len=$((${#i6_head} + ${#i6_tail}))
  if [ "$i6_gap" = yes ]; then
    [ "$i6_len" -le 28 ] || return 1
    while [ "$i6_len" -lt 32 ]; do
      i6_head=${i6_head}0000
      i6_len=$((i6_len + 4))
    done
  fi
  [ "$i6_len" -eq 32 ] || return 1
  printf '%s%s' "$i6_head" "$i6_tail"
}

# ipv6_groups GROUPS prints the colon-separated hex groups GROUPS, each padded to 4 digits.
ipv6_groups() {
  [ -n "$1" ] || return 0
  i6g_rest=$1: i6g_out=''
  while [ -n "$i6g_rest" ]; do
    i6g=${i6g_rest%%:*}
    i6g_rest=${i6g_rest#*:}
    case $i6g in
      '' | ?????* | *.*) return 1 ;;
    esac
    i6g_out=$i6g_out$(printf '%04x' "0x$i6g")
  done
  printf '%s' "$i6g_out"
}

# ipv4_allowed USE HEX says whether the IPv4 address of 8 hex digits HEX may be dialled as USE
# says: not unspecified, link-local, a metadata service, or loopback for a compute node.
ipv4_allowed() {
  case $2 in
    00000000 | a9fe???? | e00000?? | 646464c8 | a83f8110) return 1 ;;
    7f??????) [ "$1" != node ] ;;
    *) return 0 ;;
  esac
}

# ipv6_allowed USE HEX is ipv4_allowed for an IPv6 address of 32 hex digits; an IPv4 address
# written inside IPv6 (mapped, NAT64, IPv4-compatible, SIIT-translated, 6to4, Teredo's server
# and inverted client) is judged as itself; the local-use NAT64 prefix is refused whole.
ipv6_allowed() {
  case $2 in
    00000000000000000000000000000000) return 1 ;;
    00000000000000000000000000000001) [ "$1" != node ] || return 1 ;;
    fe[89ab]* | ff[0-9a-f]2*) return 1 ;;
    fd000ec2000000000000000000000254 | fd000ec2000000000000000000000023) return 1 ;;
    fd2000ce000000000000000000000254 | fd0000c10000000000000000a9fea9fe) return 1 ;;
  esac
  case $2 in
    0064ff9b0001*) return 1 ;;
    00000000000000000000ffff* | 0064ff9b0000000000000000* | 000000000000000000000000* | 0000000000000000ffff0000*)
      ipv4_allowed "$1" "$(printf '%s' "$2" | cut -c 25-32)"
      ;;
    2002*) ipv4_allowed "$1" "$(printf '%s' "$2" | cut -c 5-12)" ;;
    20010000*)
      ipv4_allowed "$1" "$(printf '%s' "$2" | cut -c 9-16)" \
        && ipv4_allowed "$1" "$(printf '%08x' $((0x$(printf '%s' "$2" | cut -c 25-32) ^ 0xffffffff)))"
      ;;
  esac
}

valid_port() {
  case $1 in
    '' | 0* | *[!0-9]* | ??????*) return 1 ;;
  esac
  [ "$1" -le 65535 ]
}

# valid_seconds accepts a number of seconds as sleep takes it, such as 5 or 0.2: the poll
# interval reaches the compute node's shell too.
valid_seconds() {
  case $1 in
    '' | .* | *. | *.*.* | *[!0-9.]*) return 1 ;;
  esac
}

# valid_connect_command COMMAND accepts ExecConnectCommand by the webhook's rule (validate/syntax's
# ConnectCommand): nc, ncat or netcat, by name or absolute path, then at most one each of -N,
# -q N and -w N, between single spaces. The login node's shell runs it as COMMAND 'node' 'port', so
# a wrapper (sh -c, env, timeout, socat) would make the compute node a command there.
# validate/syntax/testdata/connect-commands.txt is the table both sides are tested with.
valid_connect_command() {
  case $1 in
    '' | ' '* | *' ' | *'  '*) return 1 ;;
  esac
  vc_prog=${1%% *}
  case $vc_prog in
    nc | ncat | netcat) ;;
    /*/nc | /*/ncat | /*/netcat)
      case $vc_prog in
        *[!A-Za-z0-9_./+-]* | *..*) return 1 ;;
      esac
      ;;
    *) return 1 ;;
  esac
  vc_rest=${1#"$vc_prog"}
  vc_seen=''
  while [ -n "$vc_rest" ]; do
    vc_rest=${vc_rest# }
    vc_opt=${vc_rest%% *}
    vc_rest=${vc_rest#"$vc_opt"}
    case $vc_opt in
      -N | -q | -w) ;;
      *) return 1 ;;
    esac
    case $vc_seen in *"$vc_opt"*) return 1 ;; esac
    vc_seen="$vc_seen $vc_opt"
    [ "$vc_opt" != -N ] || continue
    vc_rest=${vc_rest# }
    vc_n=${vc_rest%% *}
    vc_rest=${vc_rest#"$vc_n"}
    case $vc_n in
      '' | *[!0-9]* | ?????*) return 1 ;;
    esac
  done
}

# valid_uid accepts a Kubernetes UID, the name interLink's Slurm plugin gives the pod's batch
# job: lower-case hex in the 8-4-4-4-12 shape, so it is one plain word and not an option.
valid_uid() {
  h='[0-9a-f]'
  # shellcheck disable=SC2254 # $h is a pattern
  case $1 in
    $h$h$h$h$h$h$h$h-$h$h$h$h-$h$h$h$h-$h$h$h$h-$h$h$h$h$h$h$h$h$h$h$h$h) return 0 ;;
  esac
  return 1
}

# printable [MAX] prints its input as one line of at most MAX (200) printable ASCII characters, for a log
# line that quotes what another machine sent: no control character, escape sequence or line
# of its own gets into the log.
printable() { tr '\t\r\n' '   ' | LC_ALL=C tr -cd ' -~' | cut -c 1-"${1:-200}"; }

# current_node prints the compute node the job runs on, or nothing while none is known.
# SHADOW_NODE_DISCOVERY says where it comes from: configmap (also when unset), the node file
# SHADOW_NODE_FILE, which a virtual kubelet that publishes the node writes; slurm, the batch
# system itself (slurm_node). Either way the caller checks what it prints with valid_host.
current_node() {
  case ${SHADOW_NODE_DISCOVERY:-configmap} in
    slurm) slurm_node ;;
    *) cat -- "${SHADOW_NODE_FILE:?}" 2>/dev/null || true ;;
  esac
}

# check_discovery fails (TunnelDown) unless the environment holds what current_node needs: for slurm, the
# pod UID the job is named after (SHADOW_REVERSE_JOB_NAME, by which reverse-hop's srun finds
# the job too, through slurm_job), the login node, the ssh options, a state directory and a poll interval.
check_discovery() {
  case ${SHADOW_NODE_DISCOVERY:-configmap} in
    configmap) : "${SHADOW_NODE_FILE:?}" ;;
    slurm)
      valid_uid "${SHADOW_REVERSE_JOB_NAME-}" \
        || fail TunnelDown "SHADOW_REVERSE_JOB_NAME holds '$(printf '%s' "${SHADOW_REVERSE_JOB_NAME-}" | printable)', not the pod UID the batch job is named after"
      valid_dial_host "${SHADOW_LOGIN_HOST-}" || fail TunnelDown "SHADOW_LOGIN_HOST is not a hostname or IP address the shadow may dial"
      : "${SHADOW_SSH_OPTIONS:?}" "${SHADOW_STATE_DIR:?}"
      valid_seconds "$(node_poll 0)" || fail TunnelDown "SHADOW_SLURM_POLL_INTERVAL is not a number of seconds"
      ;;
    *) fail TunnelDown "SHADOW_NODE_DISCOVERY is '$(printf '%s' "$SHADOW_NODE_DISCOVERY" | printable)', not configmap or slurm" ;;
  esac
}

# node_source names where current_node looks, for log lines.
node_source() {
  case ${SHADOW_NODE_DISCOVERY:-configmap} in
    slurm) printf 'Slurm (job %s, asked on %s)' "${SHADOW_REVERSE_JOB_NAME-}" "${SHADOW_LOGIN_HOST-}" ;;
    *) printf 'the node file %s' "${SHADOW_NODE_FILE-}" ;;
  esac
}

# node_poll POLL prints how often, in seconds, to look at the node: every POLL seconds for the
# mounted node file, which costs nothing; for Slurm every SHADOW_SLURM_POLL_INTERVAL seconds
# (default 30), each look being one ssh login and two queries to slurmctld.
node_poll() {
  case ${SHADOW_NODE_DISCOVERY:-configmap} in
    slurm) printf '%s' "${SHADOW_SLURM_POLL_INTERVAL:-30}" ;;
    *) printf '%s' "$1" ;;
  esac
}

# watch_node NODE INTERVAL looks at the node every INTERVAL seconds and returns once it is
# something other than NODE, having printed what it is now, so the caller need not look again.
watch_node() {
  while sleep "$2"; do
    wn_now=$(current_node)
    if [ "$wn_now" != "$1" ]; then
      printf '%s\n' "$wn_now"
      return 0
    fi
  done
}

# slurm_query is what slurm_job runs on the login node as `sh -s -- <pod UID>`, so the login
# shell, whichever it is, parses nothing but those plain words. It lists the login user's jobs
# of that name, in every state, with their id, batch host, start time (expected, for a waiting
# job: ISO 8601 in UTC, whatever the login node's time zone and SLURM_TIME_FORMAT) and, last,
# as it may hold spaces, the reason it waits; and for a running one the line scontrol prints
# for that host, each line tagged with the command it comes from. It checks the batch host
# only as far as passing it to scontrol as a name: slurm_job checks the rest.
# shellcheck disable=SC2016 # expanded on the login node
slurm_query='exec 2>&1
jobs=$(TZ=UTC0 SLURM_TIME_FORMAT=standard squeue --me --noheader --states=all --name="$1" --format="%i %T %B %S %r")
echo "squeue $?"
[ -z "$jobs" ] || printf "%s\n" "$jobs" | sed "s/^/job /"
host=$(printf "%s\n" "$jobs" | sed -n "s/^[0-9]* RUNNING \([^ ]*\).*/\1/p")
case $host in "" | -* | *[!A-Za-z0-9.-]*) exit 0 ;; esac
scontrol show node --oneliner "$host" | sed "s/^/node /"'

# slurm_say REASON MESSAGE logs MESSAGE unless it is what this script said last about the
# node, so a lookup every poll interval logs a line only when something changes; a waiting
# job's expected start that moved by less than 10 minutes from the one logged (same_but_start)
# is no change. The last reason line stays in the state directory, in
# node-discovery.<container>, as where discovery stands (discovery_said): NodeFound,
# WaitingForNode, Connecting (the job is ending), NoRunningJob, JobCompleted,
# DuplicateJobName, or why Slurm could not be asked (a login failure's reason, or TunnelDown).
# The line last logged is beside it, in node-discovery.<container>.logged.
slurm_say() {
  ss_file=${SHADOW_STATE_DIR:?}/node-discovery.${0##*/}
  ss_line=$(reason_line "$1" "$2")
  [ "$(cat -- "$ss_file" 2>/dev/null || true)" != "$ss_line" ] || return 0
  printf '%s\n' "$ss_line" >"$ss_file" || true
  ! same_but_start "$(cat -- "$ss_file.logged" 2>/dev/null || true)" "$ss_line" || return 0
  printf '%s\n' "$ss_line" >"$ss_file.logged" || true
  log "$2"
}

# same_but_start OLD NEW is true when the reason lines OLD and NEW differ only in a waiting
# job's expected start (slurm_pending: "expected start <YYYY-MM-DDTHH:MM:SS>Z)"), by less than
# 10 minutes: Slurm revises its estimate on every scheduling pass.
same_but_start() {
  sb_old=${1##*expected start } sb_new=${2##*expected start }
  [ "$sb_old" != "$1" ] && [ "$sb_new" != "$2" ] || return 1
  sb_at_old=${sb_old%%Z)*} sb_at_new=${sb_new%%Z)*}
  [ "${1%"$sb_old"}${sb_old#"$sb_at_old"}" = "${2%"$sb_new"}${sb_new#"$sb_at_new"}" ] || return 1
  sb_at_old=$(date -u -d "$sb_at_old" +%s 2>/dev/null) || return 1
  sb_at_new=$(date -u -d "$sb_at_new" +%s 2>/dev/null) || return 1
  [ "$((sb_at_new - sb_at_old))" -lt 600 ] && [ "$((sb_at_old - sb_at_new))" -lt 600 ]
}

# fail_without_node NODE fails for a compute node current_node did not give when a tunnel
# starts (the container restarted after wait-for-node found one): with what discovery said
# last (a login that failed, no running job), since that is why; else TunnelDown.
fail_without_node() {
  fn_said=$(discovery_said)
  case $fn_said in
    '' | NodeFound:*) fail TunnelDown "no valid compute node from $(node_source) ('$(printf '%s' "$1" | printable)')" ;;
  esac
  fail "${fn_said%%:*}" "${fn_said#*: }"
}

# discovery_said prints the reason line slurm_say left last, or nothing (no lookup yet, or the
# node file: it says nothing but the node).
discovery_said() {
  [ "${SHADOW_NODE_DISCOVERY:-configmap}" = slurm ] || return 0
  cat -- "${SHADOW_STATE_DIR:?}/node-discovery.${0##*/}" 2>/dev/null || true
}

# job_ended asks Slurm afresh (slurm_node: one lookup, which discovery_said then gives) whether
# the pod's job has ended, for a check of a tunnel that needs the job and has just failed: the
# job's server stops as the job ends, while discovery's last answer may be a poll interval old.
# True, with sn_reason and sn_said, when Slurm says the job has ended (JobCompleted,
# NoRunningJob) or is ending (Connecting: COMPLETING, its end not known yet), which the caller
# reports rather than the failure; false under NodeDiscovery configmap, which asks nothing.
job_ended() {
  [ "${SHADOW_NODE_DISCOVERY:-configmap}" = slurm ] || return 1
  slurm_node >/dev/null
  case $sn_reason in
    JobCompleted | NoRunningJob | Connecting) return 0 ;;
  esac
  return 1
}

# slurm_node prints the address of the compute node that runs the pod's batch job, or nothing
# while there is none, saying why (slurm_say): what slurm_job found.
slurm_node() {
  slurm_job
  slurm_say "$sn_reason" "$sn_said"
  [ "$sn_reason" != NodeFound ] || printf '%s\n' "$sn_addr"
}

# slurm_job finds the pod's batch job, the one choice of it that node discovery and
# reverse-hop's srun both make. It sets sn_reason and sn_said to the reason line's reason and
# message (NodeFound, WaitingForNode, Connecting, NoRunningJob, JobCompleted, DuplicateJobName,
# a login failure's reason, or TunnelDown) and, for NodeFound, sn_id, sn_host and sn_addr to the job's id, its batch host
# and that host's address. The job is the one interLink's Slurm plugin submits with
# #SBATCH --job-name=<pod UID>, among the login user's jobs; its node is the batch host squeue
# reports, and the address is the one Slurm itself reaches that node at: NodeAddr of scontrol
# show node. One ssh login asks both (slurm_query). Everything the login node prints is
# checked before any of it is used: the job id must be a number, the batch host and NodeAddr
# must pass valid_host; a second job of that name that has not ended, a job line that is not
# <job id> <state> <host>, more or fewer than one node line, or an answer over 16 KiB refuses
# the whole answer; and what is refused reaches the message only through printable.
slurm_job() {
  sn_job=${SHADOW_REVERSE_JOB_NAME:?}
  sn_login=${SHADOW_LOGIN_HOST:?}
  sn_reason='' sn_said='' sn_id='' sn_host='' sn_addr=''
  sn_out=$(mktemp -- "${SHADOW_STATE_DIR:?}/slurm-answer.XXXXXX") || {
    sn_reason=TunnelDown sn_said="could not ask Slurm for job ${sn_job}: no file for its answer in ${SHADOW_STATE_DIR}"
    return 0
  }
  sn_max=16384
  set --
  while IFS= read -r sn_word; do
    [ -z "$sn_word" ] || set -- "$@" "$sn_word"
  done <<EOF
$(ssh_option_words "${SHADOW_SSH_OPTIONS:?}")
EOF
  # A login node that hangs holds a lookup for a minute at most; one that talks without end is
  # cut off after sn_max bytes.
  {
    printf '%s\n' "$slurm_query" | timeout 60 ssh "$@" -T -- "$sn_login" sh -s -- "$sn_job" 2>&1
    echo "$?" >"$sn_out.rc"
  } | head -c "$((sn_max + 1))" >"$sn_out" || true
  sn_rc=$(cat -- "$sn_out.rc" 2>/dev/null || true)
  sn_size=$(($(wc -c <"$sn_out")))
  if [ "$sn_size" -gt "$sn_max" ]; then
    sn_reason=TunnelDown sn_said="refusing Slurm's answer on ${sn_login} for job ${sn_job}: longer than ${sn_max} bytes: $(printable <"$sn_out")"
  elif [ "$sn_rc" != 0 ]; then
    classify "$sn_out"
    sn_reason=$cl_reason sn_said="could not ask Slurm on $(login_name)${SHADOW_BASTION:+ through the bastion ${SHADOW_BASTION}} for job ${sn_job}: ssh exited with status ${sn_rc:-unknown}: ${cl_said}"
  else
    slurm_answer
  fi
  rm -f -- "$sn_out" "$sn_out.rc"
}

# slurm_answer reads the answer slurm_job got, in $sn_out; part of slurm_job. squeue's states
# (%T: a flag's name, such as COMPLETING, before the base state's) fall in four kinds:
#   running  RUNNING
#   waiting  to run, or to run again: PENDING, CONFIGURING (its nodes boot), REQUEUED,
#            REQUEUE_HOLD, REQUEUE_FED, RESV_DEL_HOLD, SPECIAL_EXIT; SUSPENDED, STOPPED and
#            RESIZING, which hold an allocation but do not run as they are; any state not named
#            here. WaitingForNode.
#   ending   the job ran and Slurm is ending or signalling it, its end state not known yet:
#            COMPLETING, STAGE_OUT, SIGNALING. Connecting, with no job running or waiting: the
#            next answer says how it ended.
#   ended    BOOT_FAIL, CANCELLED, COMPLETED, ... (below). With none running, waiting or
#            ending: every one COMPLETED is JobCompleted, the job ran to its end; any other end
#            (CANCELLED, FAILED, TIMEOUT, ...), alone or beside a COMPLETED one, is NoRunningJob.
# One running job beside another that has not ended (waiting or ending) is DuplicateJobName.
slurm_answer() {
  sn_status='' sn_running=0 sn_waiting='' sn_pending='' sn_ending='' sn_ended='' sn_failed='' sn_nodes=0 sn_node='' sn_bad='' sn_ids=''
  while IFS= read -r sn_line || [ -n "$sn_line" ]; do
    case $sn_line in
      'squeue '*) sn_status=${sn_line#squeue } ;;
      'node '*)
        sn_nodes=$((sn_nodes + 1))
        sn_node=${sn_line#node }
        ;;
      'job '*)
        sn_line_id=${sn_line#job }
        sn_line_id=${sn_line_id%% *}
        sn_state=${sn_line#job "$sn_line_id" }
        sn_state=${sn_state%% *}
        sn_rest=${sn_line#job "$sn_line_id" "$sn_state"}
        sn_rest=${sn_rest# }
        sn_batch=${sn_rest%% *}
        sn_rest=${sn_rest#"$sn_batch"}
        sn_rest=${sn_rest# }
        sn_start=${sn_rest%% *}
        sn_why=${sn_rest#"$sn_start"}
        sn_why=${sn_why# }
        case $sn_line_id in
          '' | *[!0-9]*) sn_state='' ;;
        esac
        case $sn_state in
          BOOT_FAIL | CANCELLED | COMPLETED | DEADLINE | FAILED | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED | REVOKED | TIMEOUT)
            sn_ended="${sn_ended:+${sn_ended}, }${sn_state}"
            [ "$sn_state" = COMPLETED ] || sn_failed=1
            ;;
          '' | *[!A-Z_]*)
            [ -n "$sn_bad" ] || sn_bad="a job line that is not <job id> <state> <batch host>: $(printf '%s' "$sn_line" | printable)"
            ;;
          *)
            sn_ids="${sn_ids:+${sn_ids}, }${sn_line_id}"
            case $sn_state in
              RUNNING)
                sn_running=$((sn_running + 1))
                # shellcheck disable=SC2034 # reverse-hop's srun steps into job sn_id
                sn_id=$sn_line_id sn_host=$sn_batch
                ;;
              COMPLETING | STAGE_OUT | SIGNALING) sn_ending="${sn_ending:+${sn_ending}, }${sn_state}" ;;
              *)
                [ -n "$sn_waiting" ] || sn_pending=$(slurm_pending "$sn_start" "$sn_why")
                sn_waiting="${sn_waiting:+${sn_waiting}, }${sn_state}"
                ;;
            esac
            ;;
        esac
        ;;
      *) ;; # the login shell's own chatter: a .bashrc that echoes, a host key warning
    esac
  done <<EOF
$(tr -d '\000' <"$sn_out")
EOF
  sn_none="no running job named ${sn_job} in Slurm"
  if [ "$sn_status" != 0 ]; then
    sn_reason=TunnelDown sn_said="could not ask Slurm on ${sn_login} for job ${sn_job}: squeue failed (status ${sn_status:-unknown}): $(printable <"$sn_out")"
  elif [ -n "$sn_bad" ]; then
    sn_reason=TunnelDown sn_said="refusing Slurm's answer on ${sn_login} for job ${sn_job}: ${sn_bad}"
  elif [ "$sn_running" -gt 1 ] || { [ "$sn_running" -eq 1 ] && [ -n "$sn_waiting$sn_ending" ]; }; then
    # Every pod of the virtual node runs its job as one site account: a co-tenant can name a
    # job of its own after this pod's UID to receive its traffic, and run it while the pod's
    # own job is still queued, or ending. Neither is picked.
    sn_reason=DuplicateJobName sn_said="refusing Slurm's answer on ${sn_login} for job ${sn_job}: ${sn_running} running job(s) and ${sn_waiting:-none} waiting${sn_ending:+ (and ${sn_ending} ending)} have that name (job ids ${sn_ids:-not given}), so which one is the pod's is not known; another job of the same site account may be named after this pod's UID"
  elif [ "$sn_running" -eq 1 ]; then
    slurm_address
  elif [ -n "$sn_waiting" ]; then
    sn_reason=WaitingForNode sn_said="job ${sn_job} is ${sn_waiting} in Slurm${sn_pending}: waiting for it to run"
  elif [ -n "$sn_ending" ]; then
    sn_reason=Connecting sn_said="job ${sn_job} is ${sn_ending} in Slurm: its end is not known yet"
  elif [ -n "$sn_ended" ] && [ -z "$sn_failed" ]; then
    sn_reason=JobCompleted sn_said="job ${sn_job} COMPLETED in Slurm: the pod's batch job has ended, and its tunnel with it"
  elif [ -n "$sn_ended" ]; then
    sn_reason=NoRunningJob sn_said="${sn_none}: it ended (${sn_ended}), unless the plugin submits it again"
  else
    sn_reason=NoRunningJob sn_said="${sn_none}: squeue on ${sn_login} lists no job of that name for this user (not submitted yet, submitted by another user, or ended and forgotten by Slurm)"
  fi
}

# slurm_pending START REASON prints what Slurm says of a waiting job, squeue's %S and %r, as
# " (reason <reason>, expected start <start>)", or nothing when squeue gave neither. The start
# is Slurm's N/A or Unknown (no estimate), or YYYY-MM-DDTHH:MM:SS, written with a Z as
# slurm_query asks for UTC; the reason is at most 128 letters, digits, spaces and _,:.()[]-
# (Priority, BeginTime, "ReqNodeNotAvail, UnavailableNodes:n[1-3]"). A value in another shape
# is said to be unreadable, never quoted.
slurm_pending() {
  [ -n "$1$2" ] || return 0
  sp_start=unreadable sp_why=unreadable
  case $1 in
    N/A | Unknown) sp_start=$1 ;;
    [0-9][0-9][0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9]) sp_start=$1Z ;;
  esac
  case $2 in
    '' | *[!]A-Za-z0-9_,:.\(\)\ [-]*) ;;
    *) [ "${#2}" -gt 128 ] || sp_why=$2 ;;
  esac
  printf ' (reason %s, expected start %s)' "$sp_why" "$sp_start"
}

# slurm_address sets sn_addr to the NodeAddr of the running job's batch host, $sn_host, from
# the one line scontrol printed for it, $sn_node; part of slurm_job.
slurm_address() {
  sn_reason=TunnelDown
  if ! valid_host "$sn_host"; then
    sn_said="refusing Slurm's answer on ${sn_login} for job ${sn_job}: batch host '$(printf '%s' "$sn_host" | printable)' is not a hostname"
    return 0
  fi
  if [ "$sn_nodes" -ne 1 ]; then
    sn_said="refusing Slurm's answer on ${sn_login} for job ${sn_job}: scontrol show node ${sn_host} printed ${sn_nodes} lines, want 1: $(printable <"$sn_out")"
    return 0
  fi
  case $sn_node in
    "NodeName=${sn_host} "*" NodeAddr="*) ;;
    *)
      sn_said="refusing Slurm's answer on ${sn_login} for job ${sn_job}: scontrol show node ${sn_host} printed no NodeAddr for that node: $(printf '%s' "$sn_node" | printable)"
      return 0
      ;;
  esac
  sn_addr=${sn_node#* NodeAddr=}
  sn_addr=${sn_addr%% *}
  if ! valid_host "$sn_addr"; then
    sn_said="refusing Slurm's answer on ${sn_login} for job ${sn_job}: NodeAddr '$(printf '%s' "$sn_addr" | printable)' of ${sn_host} is not a hostname or IP address, so it is not passed to ssh"
    sn_addr=''
    return 0
  fi
  sn_reason=NodeFound sn_said="job ${sn_job} runs on ${sn_host}, which Slurm reaches at ${sn_addr}"
}

# ssh_option_words OPTIONS prints, one word a line, "-o" and each option of OPTIONS (one ssh
# option a line, as in SHADOW_SSH_OPTIONS): the arguments every ssh of the shadow starts with.
ssh_option_words() {
  printf '%s\n' "$1" | while IFS= read -r opt; do
    [ -z "$opt" ] || printf -- '-o\n%s\n' "$opt"
  done
}

# stop_children PID... stops these children of the script and waits until they are gone.
stop_children() {
  for child in "$@"; do
    kill "$child" 2>/dev/null || true
  done
  for child in "$@"; do
    wait "$child" 2>/dev/null || true
  done
}

# shutdown STOP is the TERM and INT handler of a supervising script: it stops the node watcher
# ($watcher, when one runs), then runs STOP, which stops the tunnel, and exits 0.
shutdown() {
  if [ -n "${watcher:-}" ]; then
    kill "$watcher" 2>/dev/null || true
  fi
  "$1"
  exit 0
}
