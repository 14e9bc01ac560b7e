# shadowgate: `make test` is what CI runs (.ci/run); `make dev` runs the webhook on a local control plane.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
FUZZTIME  ?= 20s

.PHONY: all build test unit vet lint fmt fuzz deps clean image dev e2e-tools node-tools cert-manager helm traefik promtool shfmt chart-docs generate bench reliability release verify-release cosign

all: build

## build: bin/shadowgate, and bin/kubectl-shadowgate linked to it: on PATH, kubectl runs it as
## `kubectl shadowgate`
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/shadowgate ./cmd/shadowgate
	ln -sf shadowgate $(BIN)/kubectl-shadowgate

## deps: install the system tools the tests run for real (openssh-server, socat, ...)
deps:
	./hack/test-deps.sh

## unit: the pure tests alone, in well under a minute: go test -short skips, saying so, every
## test that runs sshd, Slurm, socat or python3 or builds the image's binary, and the e2e
## packages (a real control plane) are left out; make test runs all of them
unit:
	$(GO) test -short -count=1 $$($(GO) list ./... | grep -v '^$(MODULE)/e2e\(/\|$$\)')

## test: everything CI checks: `make lint`, and every test (fuzz seed corpora included, and
## the e2e suite against a real kube-apiserver, etcd and kubectl); the e2e packages run as
## `make reliability` runs them, with every reliability scenario bounded, printing their
## RELIABILITY lines; each package is tested once
test: SHELL := /bin/bash
test: deps lint e2e-tools node-tools cert-manager helm traefik promtool cosign
	$(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -v '^$(MODULE)/e2e\(/\|$$\)')
	cd e2e/site && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m ./...
	$(call run-e2e,bounded,45m)
	$(GO) test -count=1 -run '^$$' -bench . -benchtime=1x ./webhook ./inject

## e2e-tools: build kube-apiserver, kubectl and etcd from the Go module proxy into bin/, keyed by
## version (minutes on a fresh machine; later runs reuse them)
e2e-tools:
	@./hack/e2e-tools.sh >/dev/null

## node-tools: build the real node's kubelet, kube-proxy, containerd, CoreDNS, registry and
## pause into bin/, keyed by version (minutes on a fresh machine; later runs reuse them)
node-tools:
	@./hack/node-tools.sh >/dev/null

## cert-manager: build cert-manager's own controllers and cainjector (e2e/tools/certmanager),
## and the kubelet's secret volume writer (e2e/tools/secretvolume), into bin/ for the
## cert-manager e2e (minutes on a fresh machine; later runs reuse them)
cert-manager:
	@./hack/build-cert-manager.sh >/dev/null

## traefik: build Traefik, the local site's ingress controller for the front door's e2e, from its
## released module into bin/ (about 8 minutes on a fresh machine; later runs reuse it)
traefik:
	@./hack/build-traefik.sh >/dev/null

## cosign: build cosign, which signs a release and verifies it (make release, and its test in
## e2e/harness), from the module proxy into bin/ (about 8 minutes on a fresh machine; later runs
## reuse it)
cosign:
	@./hack/build-cosign.sh >/dev/null

## helm: build helm (e2e/tools/helm) into bin/; the e2e tests lint, render and install the chart
## with it (a few minutes on a fresh machine; later runs reuse it)
helm:
	@./hack/build-helm.sh >/dev/null

## promtool: build promtool, Prometheus's rule checker, from its released module into bin/; the
## internal/metrics tests check and test the monitoring bundle's alerts with it (a few minutes on
## a fresh machine; later runs reuse it)
promtool:
	@./hack/build-promtool.sh >/dev/null

## shfmt: build shfmt (the mvdan.cc/sh/v3 version go.mod requires) into bin/ for `make lint`
## (seconds on a fresh machine; later runs reuse it)
shfmt:
	@./hack/build-shfmt.sh >/dev/null

## generate: regenerate what controller-gen derives from the API types in api/: their DeepCopy
## methods and the Tunnel CRD in the kustomize base and the chart (hack/generate.sh)
generate:
	./hack/generate.sh

## chart-docs: regenerate the values table in manifests/chart/shadowgate/README.md
chart-docs:
	$(GO) run ./hack/valuesdoc -w

## bench: measure shadowgate in one run, printing BENCH <name> <value> <unit> lines and a
## summary against the targets: the Go benchmarks of the in-process path, the tunnels' data path
## against plain ssh (real OpenSSH and Slurm), the webhook over HTTPS, and pod creates through a
## real API server beside a no-webhook baseline and the VK's way, interleaved (about 5 minutes
## once e2e-tools are built). The in-process benchmarks also run beside BENCH_BASELINE's code,
## the last release's tag before HEAD, else the commit named here, and a regression beyond
## twice the run's own noise is MISSED by name (BENCH_BASELINE= compares with nothing)
BENCH_BASELINE ?= $(shell git describe --tags --abbrev=0 HEAD^ 2>/dev/null || echo 7aac897)
bench: deps e2e-tools
	$(GO) run ./e2e/cmd/bench -baseline "$(BENCH_BASELINE)"

## reliability: run the e2e packages with every reliability scenario at full scale (issue 9:
## the API server stopped during an apply, rolling restart and crash of replicas, policy lost,
## serving Secret rotated, 1,000 pods by 50 clients), printing their RELIABILITY lines and a
## summary; fails if any test fails or fewer than RELIABILITY_SCENARIOS lines were printed;
## the whole -v log is kept in bin/reliability-full.log (make test runs the same bounded)
reliability: SHELL := /bin/bash
reliability: e2e-tools cert-manager helm
	$(call run-e2e,full,60m)

MODULE := github.com/interlink-hq/shadowgate
# The scenarios that print a RELIABILITY line (harness.Scenario), all in the e2e packages.
RELIABILITY_SCENARIOS := 8

# run-e2e,SCALE,TIMEOUT: go test -v of the e2e packages one at a time (-p 1: each starts its
# own control plane, and two at once would compete for the cores the scenarios measure), with
# SHADOWGATE_RELIABILITY=SCALE; prints the RELIABILITY lines as they come, the failures, and a
# summary; fails if a test failed or a scenario did not report. The log is
# bin/reliability-SCALE.log.
define run-e2e
	@mkdir -p $(BIN)
	@set -o pipefail; log=$(BIN)/reliability-$(1).log; \
	SHADOWGATE_RELIABILITY=$(1) $(GO) test -count=1 -p 1 -v -timeout $(2) ./e2e/... 2>&1 | tee $$log \
	  | { grep --line-buffered '^RELIABILITY ' || true; }; status=$$?; \
	reported=$$(grep -c '^RELIABILITY ' $$log); \
	if [ $$status != 0 ]; then grep -E -- '--- FAIL|^(FAIL|ok|panic:) ' $$log; fi; \
	if [ $$reported -lt $(RELIABILITY_SCENARIOS) ]; then \
	  echo "reliability: only $$reported of $(RELIABILITY_SCENARIOS) scenarios reported a RELIABILITY line"; status=1; fi; \
	echo "reliability: $$reported of $(RELIABILITY_SCENARIOS) scenarios reported at $(1) scale;" \
	  "$$(grep -c -- '--- PASS' $$log) tests passed, $$(grep -c -- '--- FAIL' $$log) failed; $$([ $$status = 0 ] && echo PASS || echo FAIL); log: $$log"; \
	exit $$status
endef

## dev: run shadowgate serve against a local etcd and kube-apiserver until Ctrl-C
dev: build e2e-tools
	$(GO) build -o $(BIN)/shadowgate-dev ./e2e/cmd/dev
	$(BIN)/shadowgate-dev -shadowgate $(BIN)/shadowgate

vet: fmt
	$(GO) vet ./...

# The shell files make lint checks: the scripts the shadow and the job run (embedded by
# inject/scripts.go and inject/preexec.go), the build and test helpers, and CI's entry point.
SH_FILES   := inject/scripts/*.sh hack/*.sh .ci/run e2e/site/launcher/singularity doctor/testdata/slurm-20.02/srun
# shfmt's flags for every shell file: two spaces (the pre-exec snippet lands in a pod
# annotation, which YAML shows as a readable block only without tabs), case items indented,
# && and || starting the continued line: the Google Shell Style Guide as shfmt spells it.
SHFMT_FLAGS := -i 2 -ci -bn
RELAY_PY   := inject/relay/relay.py

## lint: every static check, and the part of make test that needs no test run: gofmt, go vet,
## shellcheck of every shell file, shfmt -d $(SHFMT_FLAGS) (`shfmt -w` with these flags fixes
## what it shows), pyflakes3 and pycodestyle on the reverse tunnel's relay, and shellcheck and
## sh -n/bash -n of the scripts as the containers and the job get them, spliced (inject tests)
lint: SHELL := /bin/bash
lint: deps vet
	shellcheck $(SH_FILES)
	@shfmt=$$(./hack/build-shfmt.sh) && echo "$${shfmt#shfmt=} $(SHFMT_FLAGS) -d $(SH_FILES)" \
	  && $${shfmt#shfmt=} $(SHFMT_FLAGS) -d $(SH_FILES)
	pyflakes3 $(RELAY_PY)
	pycodestyle --max-line-length=100 $(RELAY_PY)
	$(GO) test -count=1 -run '^(TestScriptMarkers|TestSplicedScriptsHoldEachInsertOnce|TestRenderedScriptsPassSyntaxChecksAndShellcheck|TestReverseScriptsPassSyntaxChecksAndShellcheck|TestPreExecPassesTheShells)$$' ./inject

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$t"; $(GO) test $$pkg -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME); \
	  done; done

clean:
	rm -rf $(BIN)

IMAGE  ?= ghcr.io/interlink-hq/shadowgate:$(VERSION)

## image: build the image from the Dockerfile with buildah, as an OCI archive in bin/images (BASE=scratch where distroless cannot be pulled)
image:
	VERSION=$(VERSION) IMAGE=$(IMAGE) BASE=$(BASE) ./hack/build-image.sh

# The release's version: VERSION when given (make release VERSION=v1.2.0), else hack/release.sh's
# own default (the tag at HEAD, or 0.0.0-dev.g<commit>), as git describe's is not semver.
RELEASE_VERSION = $(if $(filter command line environment,$(origin VERSION)),$(VERSION))

## release: build, push and sign a release into dist/ (hack/release.sh; docs/development.md
## "Cutting a release"): the CLI for linux and darwin on amd64 and arm64, the webhook image
## (linux/amd64, linux/arm64), the shadow image, the chart as an OCI artifact, SBOMs, checksums
## and cosign signatures. VERSION= (semver), REGISTRY= (host/path; default: a dry run into a
## registry on loopback), SIGNING_KEY= (a cosign key; default: a throwaway pair), DIST= (default
## dist/); as root
release:
	VERSION="$(RELEASE_VERSION)" REGISTRY="$(REGISTRY)" SIGNING_KEY="$(SIGNING_KEY)" DIST="$(DIST)" ./hack/release.sh

## verify-release: check dist/ (DIST=) against its checksums.txt, and every signature of the release
## (checksums, images, SBOM attestations, chart) with KEY= (default: dist/cosign.pub)
verify-release:
	KEY="$(KEY)" DIST="$(DIST)" ./hack/release.sh verify
