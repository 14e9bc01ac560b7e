# shadowgate's image: the static binary hack/build-image.sh builds (`make image`), on
# distroless static, as a numeric non-root user, with no shell. The build context is bin/image/,
# which holds that binary as shadowgate-linux-<arch>; BASE=scratch builds it where no registry
# is reachable (the local site), as the binary needs nothing of the base.
ARG BASE=gcr.io/distroless/static-debian12:nonroot
FROM ${BASE}
ARG TARGETARCH
COPY shadowgate-linux-${TARGETARCH} /shadowgate
USER 65532:65532
ENTRYPOINT ["/shadowgate"]
CMD ["serve"]
