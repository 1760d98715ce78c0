# The two commands a newcomer needs: `make run` and `make test`.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO ?= go
# Every Go build and test links without cgo, as the shipped binaries do.
# With cgo, kustomize's plugin loader (its import of "plugin") makes the
# linker call gcc for every test binary that reaches it: twice the link time.
export CGO_ENABLED ?= 0
BIN_DIR := $(CURDIR)/bin
# Resolved lazily: hack/testbin.sh builds the control plane on first use.
TESTBIN = $(shell hack/testbin.sh $(1))
# Test binaries link without symbol tables and DWARF (as make build's do):
# about sixty link per make test, each a third faster so (stack traces and
# pprof keep working: they read the runtime's own tables).
GO_TEST_FLAGS ?= -count=1 -ldflags='-s -w'
# How much of the tests runs at once follows the machine's cores:
# TEST_PARALLELISM (default: the number of cores) is go test's -p (test
# processes at once) and sets -parallel: the envtest tests, each with its
# own API server and etcd, mostly wait on them, so twice as many as cores
# run at once. make test runs its two sides (Go tests; lint and the
# end-to-end suites) at once only with at least two cores.
NPROC := $(shell nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 2)
TEST_PARALLELISM ?= $(NPROC)
TEST_PARALLEL = $(shell echo $$(( 2 * $(TEST_PARALLELISM) )))
TEST_SIDES = $(shell [ $(TEST_PARALLELISM) -ge 2 ] && echo 2 || echo 1)
# go test's -timeout per test binary: it only bounds the tests' own run (no
# build is timed: make test-deps builds everything first), with margins for
# a loaded machine (./provisioner, the longest, takes 5 min idle and ~14
# min cold beside other work), yet ends before a 90-minute CI job does.
GO_TEST_TIMEOUT ?= 45m
E2E_TEST_TIMEOUT ?= 40m
CONTROLLER_GEN := $(GO) tool controller-gen
GOLANGCI_LINT := $(GO) tool -modfile=hack/tools/go.mod golangci-lint

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Main

# RUN_FLAGS: more flags of bin/rukpak-dev (-help lists them), e.g. other
# ports for a second checkout's make run.
RUN_FLAGS ?=

.PHONY: run
run: build testbin ## Start a local cluster with the CRDs, provisioners and webhook; Ctrl-C stops everything.
	$(BIN_DIR)/rukpak-dev --assets "$$(hack/testbin.sh)" --bin-dir $(BIN_DIR) --state-dir $(CURDIR)/.run $(RUN_FLAGS)

.PHONY: test
test: test-deps verify ## Run every test: unit, envtest integration, local end-to-end and (Linux, root) the real-node suite.
	@# Everything the tests run is built first (test-deps), so no test's
	@# timeout counts a build. The real-node suite mostly waits (on the
	@# kubelet, back-offs, probes), so it runs beside the Go tests, not after
	@# them: minutes less. Lint and the local e2e suite go on its side too,
	@# before and after it: the Go tests' side is the longer one. (verify
	@# stays first: it regenerates files the tests compile.) Each side's
	@# output shows when it ends.
	@$(MAKE) --no-print-directory -j$(TEST_SIDES) --output-sync=target TEST_DEPS_DONE=1 test-go lint-then-e2e

.PHONY: lint-then-e2e
lint-then-e2e: lint
	@rc=0; $(MAKE) --no-print-directory test-e2e-node || rc=$$?; \
	$(MAKE) --no-print-directory test-e2e || rc=$$?; exit $$rc

# FLEET_DIR: the registry+v1 bundles make fleet installs (one directory
# each, <package>-<version>/).
FLEET_DIR ?= ../shared/testdata/fleet

.PHONY: fleet
fleet: build ## Install every operator of FLEET_DIR (sixty real ones) on the cluster of a running make run, all at once.
	$(BIN_DIR)/rukpak-dev fleet --state-dir $(CURDIR)/.run $(FLEET_DIR)

##@ Tests

.PHONY: testbin
testbin: ## Build (once per machine, cached outside the checkout) the local control-plane binaries.
	@hack/testbin.sh >/dev/null

# The test targets build what they run first, unless make test did.
TEST_DEPS = $(if $(TEST_DEPS_DONE),,test-deps)

.PHONY: test-deps
test-deps: ## Build (once per machine) everything the tests run: control plane, kubelet, cert-manager, helm, test images' programs, golangci-lint.
	@hack/testbin.sh test-deps

.PHONY: test-unit
test-unit: ## Unit tests only (-short skips everything that needs an API server).
	$(GO) test $(GO_TEST_FLAGS) -short $$($(GO) list ./... | grep -v /test/e2e)

.PHONY: test-go
test-go: $(TEST_DEPS) ## Unit and envtest integration tests against a real kube-apiserver and etcd.
	@# ./provisioner first, as it takes longest: its envtest tests run
	@# twice as many at a time as there are cores (-parallel, from
	@# TEST_PARALLELISM), each with its own API server and etcd (~200 MiB),
	@# mostly waiting on them; not so many that the API servers starve.
	@# Its tests that measure the process's heap or metrics
	@# ("// Not parallel: why") run one after another in a process of their
	@# own beside the others (they ran alone first: ~90 s of one API server);
	@# its output follows the rest.
	@serial="$$(grep -h -A1 -E '^func Test[A-Za-z0-9_]+\(' provisioner/*_test.go | awk '/^func Test/ {n=$$2; sub(/\(.*/, "", n)} /^\t\/\/ Not parallel: / {print n}' | paste -sd'|')"; \
	out="$$(mktemp)"; trap 'rm -f "$$out"' EXIT; \
	export KUBEBUILDER_ASSETS="$$(hack/testbin.sh envtest)"; \
	echo "./provisioner, apart (not parallel): $$serial"; \
	$(GO) test $(GO_TEST_FLAGS) -run "^($$serial)$$" -timeout $(GO_TEST_TIMEOUT) ./provisioner >"$$out" 2>&1 & apart=$$!; \
	rc=0; $(GO) test $(GO_TEST_FLAGS) -p $(TEST_PARALLELISM) -parallel $(TEST_PARALLEL) -timeout $(GO_TEST_TIMEOUT) -skip "^($$serial)$$" ./provisioner $$($(GO) list ./... | grep -v -e /test/e2e -e '/provisioner$$') || rc=$$?; \
	wait $$apart || rc=$$?; \
	echo "./provisioner, the tests apart:"; cat "$$out"; exit $$rc

.PHONY: test-e2e
test-e2e: $(TEST_DEPS) build ## End-to-end suite against a local kwok cluster driven by the built binaries.
	@if [ -d test/e2e ]; then \
	  KUBEBUILDER_ASSETS="$$(hack/testbin.sh)" RUKPAK_BIN_DIR=$(BIN_DIR) $(GO) test $(GO_TEST_FLAGS) -timeout $(E2E_TEST_TIMEOUT) ./test/e2e/...; \
	fi

# make build image, from inside test-e2e-node's recipe. Named so that make
# does not see a recursive make in that recipe: it would run the whole
# recipe (the real-node suite) even under make -n.
BUILD_AND_IMAGE = MAKEFLAGS= $(MAKE) --no-print-directory build image

.PHONY: test-e2e-node
test-e2e-node: $(TEST_DEPS) ## Real-node suites: the node cluster's bring-up and teardown tests, then the end-to-end suite with rukpak's image as real pods; Linux and root, else a SKIP line.
	@# rukpak's binaries and image and the suite's test binary build while the
	@# node-cluster tests run (they mostly wait on their components); the suite
	@# runs bin/rukpakctl (RUKPAK_BIN_DIR) instead of linking one of its own;
	@# bin/e2e.test is relinked only when its build ID says an input changed.
	@# Like go test, the suite's output shows only when it fails (or with
	@# E2E_VERBOSE=1).
	@if [ "$$(uname -s)" != Linux ] || [ "$$(id -u)" != 0 ]; then \
	  echo "SKIP test-e2e-node: needs Linux and root (it runs containerd and a kubelet on this host); run make test-e2e-node as root, or make kind-e2e with Docker"; \
	else \
	  hack/node-deps.sh && hack/testbin.sh node >/dev/null || exit 1; \
	  mkdir -p $(BIN_DIR); log="$$(mktemp)"; trap 'rm -f "$$log"' EXIT; \
	  { $(BUILD_AND_IMAGE) && $(GO) test -c -o $(BIN_DIR)/e2e.test ./test/e2e; } >"$$log" 2>&1 & build=$$!; \
	  rc=0; RUKPAK_NODE_E2E=1 $(GO) test $(GO_TEST_FLAGS) -timeout 20m ./internal/nodecluster/... || rc=$$?; \
	  wait $$build || rc=$$?; cat "$$log"; [ "$$rc" = 0 ] || exit "$$rc"; \
	  start=$$(date +%s); \
	  (cd test/e2e && E2E_NODE=1 RUKPAK_IMAGE_TAR=$(BIN_DIR)/rukpak-image.tar RUKPAK_BIN_DIR=$(BIN_DIR) $(BIN_DIR)/e2e.test -test.count=1 -test.timeout=$(E2E_TEST_TIMEOUT)) >"$$log" 2>&1 || rc=$$?; \
	  [ "$$rc" = 0 ] && [ -z "$$E2E_VERBOSE" ] || cat "$$log"; \
	  echo "$$([ "$$rc" = 0 ] && echo ok || echo FAIL)	github.com/rukpak-dev/rukpak/test/e2e (real node)	$$(( $$(date +%s) - start ))s"; exit "$$rc"; \
	fi

.PHONY: test-node-cluster
test-node-cluster: ## Real-node cluster (containerd, then control plane + kubelet + kube-proxy running a Ready pod; root, installs runtime packages with apt-get when missing).
	hack/node-deps.sh
	@hack/testbin.sh >/dev/null
	@hack/testbin.sh node >/dev/null
	RUKPAK_NODE_E2E=1 $(GO) test $(GO_TEST_FLAGS) -v -timeout 20m ./internal/nodecluster/...

.PHONY: bench
bench: ## Benchmarks (Go benchmarks, then the end-to-end harness in test/bench); see docs/benchmarks.md.
	@hack/testbin.sh helm >/dev/null
	KUBEBUILDER_ASSETS="$$(hack/testbin.sh envtest)" $(GO) test -run '^$$' -bench . -benchmem $$(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u)
	KUBEBUILDER_ASSETS="$$(hack/testbin.sh envtest)" RUKPAK_BENCH=1 $(GO) test -count=1 -run '^TestBench$$' -v -timeout 60m ./test/bench/

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy code and CRDs.
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:dir=manifests/base/crd
	@# What controller-gen's markers cannot say: metadata.name's maxLength
	@# and the oneOf of source members (hack/crdpatch says why).
	$(GO) run ./hack/crdpatch manifests/base/crd/core.rukpak.io_*.yaml

.PHONY: verify
verify: generate vet ## Fail when generated files are stale or code is not gofmt'ed.
	@git diff --exit-code -- api manifests/base/crd || { echo "generated files are stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "run gofmt"; exit 1; }

.PHONY: vet
vet:
	$(GO) vet ./...

.PHONY: lint
lint: ## golangci-lint, pinned in hack/tools.
	@# Another checkout's lint on this machine waits its turn instead of failing.
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

.PHONY: build
build: ## Build the binaries into bin/.
	@mkdir -p $(BIN_DIR)
	@# Stripped: symbol tables are a third of each binary and were ~25 MiB of
	@# the provisioner's resident set (docs/benchmarks.md).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN_DIR)/ ./cmd/...

##@ Image and kind

IMG ?= rukpak:devel

.PHONY: image
image: ## Build the OCI image without Docker into bin/rukpak-image.tar (IMG names it; default rukpak:devel).
	@mkdir -p $(BIN_DIR)
	@# Its two binaries only, as make build builds them.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN_DIR)/ ./cmd/provisioner ./cmd/webhook
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)} $(GO) run ./hack/image --bin-dir $(BIN_DIR) --image $(IMG) --tarball $(BIN_DIR)/rukpak-image.tar

.PHONY: push
push: build ## Build the image and push it: make push IMG=registry.example.com/rukpak:dev (credentials from ~/.docker/config.json).
	@case "$(IMG)" in */*) ;; *) echo "push: set IMG to a registry reference, e.g. make push IMG=registry.example.com/rukpak:dev"; exit 1;; esac
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct)} $(GO) run ./hack/image --bin-dir $(BIN_DIR) --push $(IMG)

.PHONY: kind-e2e
kind-e2e: ## End-to-end suite against a kind cluster running the image (needs Docker and kind; see docs/kind.md).
	IMG=$(IMG) hack/kind-e2e.sh
