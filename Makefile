# manila-setup: the two commands are `make demo` and `make test`; see README.md.
SHELL := bash
GO ?= go
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Where make image tags the images, and so the operator image the CLI of this build renders.
IMAGE_REPO ?= localhost/manila-setup
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.imageRepo=$(IMAGE_REPO)

.PHONY: all build test test-stress test-unit lint kube csi machineapi env-up env-down demo demo-down image image-push release clean

all: build

## build: the manila-setup binary in bin/
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/manila-setup ./cmd/manila-setup
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/manila-setup-operator ./cmd/manila-setup-operator

## test: everything (unit, integration, e2e); brings up the real servers it needs and stops them
test:
	bash test/env/run-tests.sh

## test-stress: the integration packages that use the loopback OpenStack most, two at once, RUNS
## times (default 5), beside a concurrent write load on the cloud; a cloud of its own, as make test
test-stress:
	bash test/env/stress.sh

## test-unit: fast tests only, no servers
test-unit:
	$(GO) test ./...

## lint: gofmt, go vet, goimports' grouping, the groups' order (test/env/lint/importorder: the
## standard library, then others, then ours, which goimports -local does not check) and
## staticcheck (vet and staticcheck with the integration tag, which adds files and excludes none:
## no file is built only without it, so one pass covers every file); the two linters are pinned
## in test/env/lint/tools.sh and cached
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [[ -n $$unformatted ]]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@if grep -rlE '^//go:build .*!integration' --include='*.go' . >/dev/null; then \
	  echo "a file is built only without the integration tag: vet it with a second pass"; exit 1; fi
	$(GO) vet -tags integration ./...
	@$(GO) run ./test/env/lint/importorder $$(git ls-files '*.go')
	@tools=$$(bash test/env/lint/tools.sh) && \
	  misgrouped=$$($$tools/goimports -local github.com/manila-setup -l $$(git ls-files '*.go')) && \
	  if [[ -n $$misgrouped ]]; then echo "imports not grouped (standard, others, github.com/manila-setup; goimports -local github.com/manila-setup -w):"; echo "$$misgrouped"; exit 1; fi && \
	  echo "staticcheck -tags integration ./... (staticcheck.conf)" && $$tools/staticcheck -tags integration ./...

## kube: build (or reuse) the cached Kubernetes control-plane binaries
kube:
	bash test/env/kube/build.sh

## env-up: the kube binaries and the loopback OpenStack (Keystone, Neutron, Manila, Nova, Placement, Glance)
env-up: kube
	bash test/env/openstack/up.sh

## env-down: stop the loopback OpenStack
env-down:
	bash test/env/openstack/down.sh

## csi: build (or reuse) the cached binaries of the real Manila CSI driver (controller side)
csi:
	bash test/env/csi/build.sh

## machineapi: build (or reuse) the cached Machine API controllers with the OpenStack actuator
## (test/machineapi), which the tests run against real Nova servers
machineapi:
	bash test/env/machineapi/build.sh

## demo: a local sandbox (loopback OpenStack, an installer-shaped cluster, the operator and the
## real CSI driver), then the attach wizard; reuses what is already running
demo: build
	@bash test/env/sandbox/up.sh

## demo-down: stop the sandbox, and the loopback OpenStack if make demo started it
demo-down:
	@bash test/env/sandbox/down.sh

## image: the operator and CLI images (FROM scratch, non-root), built offline with podman, each
## saved as an OCI archive in bin/images/; tagged IMAGE_REPO/<binary>:VERSION
image:
	VERSION=$(VERSION) COMMIT=$(COMMIT) IMAGE_REPO=$(IMAGE_REPO) bash build/image.sh build

## image-push: push what make image built to REGISTRY (make image-push REGISTRY=quay.io/team)
image-push:
	VERSION=$(VERSION) COMMIT=$(COMMIT) IMAGE_REPO=$(IMAGE_REPO) REGISTRY=$(REGISTRY) bash build/image.sh push

## release: the CLI for linux and darwin, amd64 and arm64, with SHA256SUMS, in bin/release/
release:
	VERSION=$(VERSION) COMMIT=$(COMMIT) bash build/release.sh

clean:
	rm -rf bin
