# manila-setup: the two commands are `make demo` and `make test`; see README.md.
SHELL := bash
GO ?= go
export GOTOOLCHAIN := local
export GOFLAGS := -buildvcs=false

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build test test-unit lint kube env-up env-down demo clean

all: build

## build: the manila-setup binary in bin/
build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/manila-setup ./cmd/manila-setup

## test: everything (unit, integration, e2e); brings up the real servers it needs and stops them
test:
	bash test/env/run-tests.sh

## test-unit: fast tests only, no servers
test-unit:
	$(GO) test ./...

## lint: gofmt and go vet, with and without the integration tag
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [[ -n $$unformatted ]]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

## kube: build (or reuse) the cached Kubernetes control-plane binaries
kube:
	bash test/env/kube/build.sh

## env-up: the kube binaries and the loopback OpenStack (Keystone, Neutron, Manila)
env-up: kube
	bash test/env/openstack/up.sh

## env-down: stop the loopback OpenStack
env-down:
	bash test/env/openstack/down.sh

## demo: a local sandbox (for now the environment and how to use it)
demo: build env-up
	@bash test/env/demo-info.sh

clean:
	rm -rf bin
