# berm's build. `make test` is what CI runs; `make fixtures` rebuilds the
# committed test modules (needs wat2wasm from Debian's wabt).
export CGO_ENABLED := 0
GO ?= go

.PHONY: build deps test test-short check bench bench-mcp fixtures examples fuzz clean

# Tools the tests drive, installed only when missing.
ORAS_VERSION := v1.3.6
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
GOBIN := $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)

build:
	$(GO) build -o berm .

deps:
	@command -v docker-registry >/dev/null || { \
		echo "install docker-registry (Debian)"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry; }; }
	@command -v oras >/dev/null || { echo "install oras $(ORAS_VERSION)"; $(GO) install oras.land/oras/cmd/oras@$(ORAS_VERSION); }
	@test -x mcpserve/testdata/npm/node_modules/.bin/mcp-inspector || { \
		echo "install the MCP Inspector and server-everything (npm)"; \
		npm ci --prefix mcpserve/testdata/npm --no-audit --no-fund; }

test: deps
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1)
	$(GO) test -count=1 ./...

test-short:
	$(GO) test -short ./...

# check cross-builds the static binary for every platform berm ships on.
check: test
	@for os in linux darwin windows; do for arch in amd64 arm64; do \
		echo "build $$os/$$arch"; GOOS=$$os GOARCH=$$arch $(GO) build -o /dev/null . || exit 1; \
	done; done

# bench runs the Go benchmarks: the runtime's calls and compiles, and pushes
# and pulls next to the oras CLI; bench-mcp compares berm serve with the
# reference MCP server from npm in one run.
bench: deps
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./runtime/...
	$(GO) test -run '^$$' -bench VsOras -benchtime 20x ./registry

bench-mcp: deps
	bash mcpserve/testdata/bench.sh

# fuzz runs each parser of untrusted input for a minute; a crash found
# becomes a file in the package's testdata/fuzz, a regression case from then on.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzRead -fuzztime 60s ./manifest
	$(GO) test -run '^$$' -fuzz FuzzCoalesceData -fuzztime 60s ./runtime
	$(GO) test -run '^$$' -fuzz FuzzCheckManifest -fuzztime 60s ./registry

include testdata/fixtures.mk
include examples/examples.mk

clean:
	rm -f berm
