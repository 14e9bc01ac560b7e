# The shadow image: what the shadow's scripts (inject/scripts, run from the scripts ConfigMap)
# call, on Debian bookworm, and nothing else. hack/build-shadow-image.sh builds it without a
# registry, from a base made with debootstrap; a release builds the same file on the published
# debian:bookworm-slim. The tag is validate/policy's ShadowImageVersion.
#
#   openssh-client  ssh (forwards, control master, -W checks, Slurm queries), ssh-keygen (the
#                   reverse tunnel's per-start client key)
#   socat           exec mode's listeners
#   krb5-user       kinit, for Auth: kerberos
#   ca-certificates a krb5.conf whose KDC is an HTTPS proxy (MS-KKDCP)
#   libnss-wrapper  a passwd entry for a uid the image does not name (common.sh: any_uid)
#   tini            PID 1 for a command run through the entrypoint: forwards signals, reaps
#
# bash, dash, coreutils, grep, sed and getent are Debian's essential packages, in every base.
ARG BASE=debian:bookworm-slim
FROM ${BASE}
RUN export DEBIAN_FRONTEND=noninteractive \
  && apt-get update \
  && apt-get -y upgrade \
  && apt-get install -y --no-install-recommends openssh-client socat krb5-user ca-certificates libnss-wrapper tini \
  && apt-get clean \
  && rm -rf /var/lib/apt/lists/* /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old
COPY inject/scripts/common.sh /usr/lib/shadowgate/common.sh
COPY hack/shadow-entrypoint.sh /usr/lib/shadowgate/entrypoint
# A Kubernetes container's command replaces this entrypoint (the shadow's scripts make their
# own uid known, and handle TERM themselves); it serves a command run in the image otherwise.
ENTRYPOINT ["/usr/bin/tini", "--", "/bin/sh", "/usr/lib/shadowgate/entrypoint"]
CMD ["ssh", "-V"]
USER 65534:65534
