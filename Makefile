# The whole test suite is `make test` (scripts/test.sh): it makes sure
# MariaDB, PostgreSQL, ZooKeeper and etcd run on 127.0.0.1
# (scripts/services.sh), then runs the lint (make lint), every test of both
# modules (this one and e2e/, the heavy tests) against them with
# LEAF_TEST_STRICT=1 so a missing service fails instead of skipping, the chaos
# test, the fuzz targets, then the race detector over the short variant of the
# suite. Every stage runs even when an earlier one fails; it fails at the end.
GO ?= go
# staticcheck is run from the module proxy when it is not installed.
STATICCHECK ?= $(shell command -v staticcheck || { test -x $(HOME)/go/bin/staticcheck && echo $(HOME)/go/bin/staticcheck; } || echo "$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2")

.PHONY: all build test chaos fuzz bench bench-all lint serve

all: build

# The version 'leaf version' reports, stamped in as scripts/build-static.sh
# does: the go command's own VCS stamp is absent with -buildvcs=false.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN ?= bin/leaf

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/leaf

serve:
	$(GO) run ./cmd/leaf serve

# How long each fuzz target runs in the fuzz stage.
FUZZTIME ?= 5s

test:
	FUZZTIME=$(FUZZTIME) scripts/test.sh

# The chaos test alone, with its summary tables (also in
# $$LEAF_TEST_ARTIFACTS/chaos-*.txt).
chaos:
	eval "$$(scripts/services.sh)" && \
	LEAF_TEST_STRICT=1 LEAF_CHAOS=1 $(GO) test -count=1 -v -tags chaos -run Chaos ./cmd/leaf ./internal/chaos

fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Everything against a bare fasthttp yardstick: HTTP single and batch (wrk),
# gRPC (leaf bench), the Go client's buffered mode. DURATION=5s to shorten.
bench-all:
	scripts/bench.sh

# The chaos build's files (-tags chaos) are linted too: CI builds them. So
# is the e2e module (the heavy tests, a module of their own for their
# requirements; gofmt covers it from here).
lint:
	test -z "$$(gofmt -l .)" || { gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags chaos ./...
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags chaos ./...
	cd e2e && $(GO) vet ./... && $(STATICCHECK) ./...
