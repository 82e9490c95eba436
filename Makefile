# berm's build. `make test` is what CI runs; `make fixtures` rebuilds the
# committed test modules (needs wat2wasm from Debian's wabt).
export CGO_ENABLED := 0
GO ?= go

.PHONY: build deps test test-short test-race check check-fixtures check-examples \
	bench bench-mcp bench-warm bench-replicas soak fixtures examples fuzz clean \
	release-tools release-snapshot release-test

# Tools the tests drive, installed only when missing.
ORAS_VERSION := v1.3.6
GORELEASER_VERSION := v2.15.1
CYCLONEDX_GOMOD_VERSION := v1.10.0
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
GOBIN := $(shell $(GO) env GOPATH)/bin
export PATH := $(GOBIN):$(PATH)

build:
	$(GO) build -o berm .

# $(call apt,COMMAND,PACKAGE) installs the Debian PACKAGE when COMMAND is
# missing, updating the package lists only when the install fails without.
apt = command -v $(1) >/dev/null || { \
	echo "install $(2) (Debian)"; \
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null 2>&1 || \
	{ $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2); }; }

# docker-registry serves the registry tests, gcc is the race detector's (cgo),
# wat2wasm (wabt) rebuilds the fixtures for check-fixtures; clang and lld
# build the C guests, Debian's rustc with its wasm32 std (and cargo) the Rust
# ones: a rustup toolchain on PATH has no wasm32 target here, so the package
# is what is checked for.
deps:
	@$(call apt,docker-registry,docker-registry)
	@$(call apt,gcc,gcc libc6-dev)
	@$(call apt,wat2wasm,wabt)
	@$(call apt,wasm-ld,clang lld)
	@dpkg -s libstd-rust-dev-wasm32 >/dev/null 2>&1 || { echo "install rustc, cargo and the wasm32 std (Debian)"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc libstd-rust-dev-wasm32 cargo >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc libstd-rust-dev-wasm32 cargo; }; }
	@dpkg -s postgresql >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "install postgresql (Debian)"; \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null 2>&1 || \
		{ $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }; }
	@$(call apt,nginx,nginx-light)
	@command -v oras >/dev/null || { echo "install oras $(ORAS_VERSION)"; $(GO) install oras.land/oras/cmd/oras@$(ORAS_VERSION); }
	@cmp -s mcpserve/testdata/npm/package-lock.json mcpserve/testdata/npm/node_modules/.berm-installed || { \
		echo "install the MCP Inspector, server-everything and the conformance suite (npm)"; \
		npm ci --prefix mcpserve/testdata/npm --no-audit --no-fund && \
		cp mcpserve/testdata/npm/package-lock.json mcpserve/testdata/npm/node_modules/.berm-installed; }

# test is what CI runs: the committed images against their sources, vet,
# gofmt, every test, the runtime's again on the plain path (BERM_PLAIN=1:
# modules as they came, the reference of the fast paths), then the
# concurrent packages again under the race detector, then the release of
# HEAD built twice and checked (release-test).
test: deps check-fixtures check-examples
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1)
	$(GO) test -count=1 ./...
	BERM_PLAIN=1 $(GO) test -count=1 ./runtime/
	@$(MAKE) --no-print-directory test-race
	@$(MAKE) --no-print-directory release-test

# test-race runs the packages with goroutines of their own (the server, the
# runtime's workers and store, the service, the commands in-process) under the
# race detector, which needs cgo and so gcc. Skipped there: tests that are one
# goroutine compiling, merging or rewriting the 3.4 MB Go example (wazero's compiler runs
# ~10x slower instrumented: TestCoalesceHello alone took 145 s, TestSnapshotGo
# 196 s of the runtime's 385, TestBoundTablesHello, TestTableLimits,
# TestPoolGo and TestDeadlineWeighs 121 s more), and those
# whose concurrency is between processes, which -race cannot see; and the
# builds of berm build's scaffolds, a toolchain's process and then one
# goroutine compiling (120 s of the commands package's 550 instrumented, its
# longest); and the scripts (TestScripts), each command of which is a
# process of its own, mostly one goroutine compiling (200 s instrumented,
# half the package's), whose concurrent paths (serve, dev) the in-process
# tests race-check. Not run there: runtime/internal/transform, a rewriter of bytes with no
# goroutine (192 s instrumented, a fifth of the race run).
RACE_PACKAGES = ./mcpserve/ ./runtime/ ./runtime/host/... ./runtime/sandbox/... ./runtime/store/... ./internal/... ./commands/
RACE_SKIP = ^(TestCoalesceHello|FuzzCoalesceData|TestSnapshotGo|TestBoundTablesHello|TestTableLimits|TestPoolGo|TestDeadlineWeighs|TestCrashConsistency|TestFullDisk|TestBuildRust|TestBuildC|TestBuildWarnsInitialize|TestNewBuildDeployRun|TestScripts)$$
test-race:
	CGO_ENABLED=1 $(GO) test -race -count=1 -skip '$(RACE_SKIP)' $(RACE_PACKAGES)

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

# bench-warm measures issue 11's targets, the default path beside BERM_PLAIN=1
# and the references (bare wazero, native, the Node MCP server), in one run.
bench-warm: deps
	bash testdata/bench/warm.sh

# bench-replicas measures berm serve replicas on PostgreSQL behind nginx next
# to one replica on the embedded root: calls per second, statements per call,
# deploy to tools/list_changed on another replica (deploy/bench/main.go).
bench-replicas: deps
	bash deploy/bench/bench.sh

# soak drives berm serve (stdio and HTTP) with 64 concurrent MCP clients,
# misbehaving programs among the well-behaved, and prints throughput, latency,
# errors by kind and the server's peak memory; SOAK_FLAGS shrinks it
# (SOAK_FLAGS='-calls 500'). See testdata/soak/README.md.
SOAK_FLAGS ?=
soak:
	$(GO) run ./testdata/soak $(SOAK_FLAGS)

# fuzz runs every fuzz target of the module (each func FuzzXxx in a _test.go),
# one after another, each for FUZZTIME (a duration, or Nx for N executions:
# FUZZTIME=1000000x), then prints a line per target: its executions and
# whether it crashed. A crash found becomes a file in the package's
# testdata/fuzz/FuzzXxx, a regression case from then on, and fails the target.
# FUZZ, a regular expression, picks targets by name (FUZZ=FuzzLEB).
FUZZTIME ?= 60s
FUZZ ?= .
fuzz:
	@set -u; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	grep -r -H -o --include='*_test.go' --exclude-dir=node_modules --exclude-dir=testdata --exclude-dir=.git \
		'^func Fuzz[A-Za-z0-9_]*' . | sed -E 's|^\./||; s|^(.*)/[^/]*:func |\1 |; s|^[^/ ]*:func |. |' | sort -u | \
		awk -v re='$(FUZZ)' '$$2 ~ re' >"$$tmp/targets"; \
	[ -s "$$tmp/targets" ] || { echo "fuzz: no fuzz target matches FUZZ=$(FUZZ)"; exit 1; }; \
	echo "fuzz: $$(wc -l <"$$tmp/targets") targets, $(FUZZTIME) each"; \
	while read -r dir name; do \
		echo "== fuzz $$name (./$$dir)"; \
		{ $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "./$$dir" 2>&1; echo $$? >"$$tmp/rc"; } | tee "$$tmp/out"; \
		execs=$$(grep -o 'execs: [0-9]*' "$$tmp/out" | tail -n 1 | cut -d' ' -f2); \
		if [ "$$(cat "$$tmp/rc")" = 0 ]; then \
			outcome="no crash"; \
		else \
			crash=$$(grep -o 'testdata/fuzz/Fuzz[^ ]*' "$$tmp/out" | tail -n 1); \
			outcome="CRASH: $${crash:+./$$dir/$$crash}$${crash:-the target failed, see its output above}"; \
		fi; \
		printf '%-20s %-20s %12s execs  %s\n' "$$name" "./$$dir" "$${execs:-?}" "$$outcome" >>"$$tmp/summary"; \
	done <"$$tmp/targets"; \
	echo; echo "fuzz: $(FUZZTIME) per target:"; cat "$$tmp/summary"; \
	! grep -q 'CRASH' "$$tmp/summary" || { echo "fuzz: $$(grep -c CRASH "$$tmp/summary") targets failed"; exit 1; }

include testdata/fixtures.mk
include examples/examples.mk

# release-snapshot runs the whole release of the committed HEAD without
# publishing (.goreleaser.yaml, docs/release.md): the six archives, their
# SBOMs and checksums.txt in release/dist, then the container image as an OCI
# layout in release/dist/image. It builds a clone of HEAD, not the work tree:
# a release is a commit's, goreleaser needs a remote to read the commit, and
# uncommitted edits stay out of it. RELEASE_COMMIT picks another commit.
RELEASE_SRC := release/.src
RELEASE_COMMIT ?= HEAD
release-tools:
	@command -v goreleaser >/dev/null || { echo "install goreleaser $(GORELEASER_VERSION)"; $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION); }
	@command -v cyclonedx-gomod >/dev/null || { echo "install cyclonedx-gomod $(CYCLONEDX_GOMOD_VERSION)"; $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION); }

release-snapshot: release-tools
	rm -rf $(RELEASE_SRC) release/dist
	git clone -q . $(RELEASE_SRC) && git -C $(RELEASE_SRC) reset -q --hard $(RELEASE_COMMIT)
	cd $(RELEASE_SRC) && goreleaser release --snapshot --clean && \
		SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) $(GO) run ./release/image -dist release/dist -out release/dist/image
	mv $(RELEASE_SRC)/release/dist release/dist
	rm -rf $(RELEASE_SRC)

# release-test builds the release of one commit twice (the second time from
# Go's build cache) and checks it: six archives, checksums, the stamped
# version, the SBOMs, byte-identical builds, and the image pushed to a
# loopback registry, pulled back and run.
release-test: deps
	@commit=$$(git rev-parse $(RELEASE_COMMIT)) && \
	$(MAKE) --no-print-directory release-snapshot RELEASE_COMMIT=$$commit && \
	rm -rf release/dist.1 && mv release/dist release/dist.1 && \
	$(MAKE) --no-print-directory release-snapshot RELEASE_COMMIT=$$commit
	BERM_RELEASE_DIST=$(CURDIR)/release/dist BERM_RELEASE_DIST2=$(CURDIR)/release/dist.1 \
		$(GO) test -count=1 ./release/...

clean:
	rm -f berm
	rm -rf release/dist release/dist.1 $(RELEASE_SRC)
