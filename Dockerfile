# Static, non-root image of shadowgate. `make image` builds it where a container engine exists.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/shadowgate ./cmd/shadowgate

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/shadowgate /shadowgate
USER 65532:65532
ENTRYPOINT ["/shadowgate"]
CMD ["serve"]
