# Example programs, included by the top-level Makefile. `make examples`
# rebuilds every committed examples/<name>/<name>.wasm from its Go source and
# its berm.abi.json, or, for those written with the SDK's registrations
# (EXAMPLES_BERM), with `berm build` as a program's author does; see
# examples/README.md. `make check-examples` (run by
# `make test`) builds them into a temporary directory and fails naming each
# committed image that differs.
#
# -trimpath and -buildvcs=false keep the image (and so its digest) the same
# wherever and whenever it is built with the same Go. The name section is kept
# (no -ldflags=-s): it costs ~70 KB and names functions in trap backtraces.
GO ?= go
EXAMPLES := hello fetch files
# Examples in Go that register their tools (berm.Tool, berm.Usage,
# berm.Syscalls) and have no berm.abi.json: `berm build examples/NAME`, with
# the berm of this checkout and a root of its own, derives the manifest and
# writes the exports. It builds the package where it is (in this module, as
# the others are), with the same go build flags as EXAMPLE_BUILD, and writes
# berm.toml's wasm; so check-examples keeps the committed image aside, builds
# over it, compares, and puts the committed image back.
EXAMPLES_BERM := notes
# Examples in C and Rust, each rebuilt by its own build.sh (clang and lld;
# rustc with libstd-rust-dev-wasm32), which says "not compared" when its
# compiler is missing or another version than the image's.
EXAMPLES_SH := wc jsonfmt
EXAMPLE_BUILD := GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -buildmode=c-shared

# $(call example,NAME,OUT,TMPDIR) builds examples/NAME into OUT.
example = $(EXAMPLE_BUILD) -o "$(3)/$(1).raw.wasm" ./examples/$(1) && \
	$(GO) run ./testdata/mkimage -o "$(2)" "$(3)/$(1).raw.wasm" examples/$(1)/berm.abi.json

.PHONY: examples check-examples
examples:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for e in $(EXAMPLES); do \
		echo "build examples/$$e/$$e.wasm"; \
		$(call example,$$e,examples/$$e/$$e.wasm,$$tmp); \
	done; \
	$(GO) build -o "$$tmp/berm" .; \
	for e in $(EXAMPLES_BERM); do \
		echo "build examples/$$e/$$e.wasm"; \
		"$$tmp/berm" --root "$$tmp/root" build examples/$$e >/dev/null; \
	done; \
	for e in $(EXAMPLES_SH); do echo "build examples/$$e/$$e.wasm"; examples/$$e/build.sh; done

# The same sources build the same bytes only with the same Go: an image built
# by another Go than this one is not compared (it says so), since CI may run a
# newer patch release than the one the image was built with. (`go version`
# cannot read a wasm binary's build info; the runtime's version string is in
# its data.)
check-examples:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	have=$$($(GO) env GOVERSION); bad=0; \
	for e in $(EXAMPLES); do \
		f=examples/$$e/$$e.wasm; \
		built=$$(grep -a -o 'go1\.[0-9][0-9.]*[0-9]' "$$f" | head -n 1); \
		if [ "$$built" != "$$have" ]; then \
			echo "check-examples: $$f was built with $$built, this is $$have: not compared"; continue; \
		fi; \
		$(call example,$$e,$$tmp/$$e.wasm,$$tmp); \
		if cmp -s "$$f" "$$tmp/$$e.wasm"; then echo "check-examples: $$f matches its sources"; \
		else echo "check-examples: $$f differs from what ./examples/$$e builds to (make examples)"; bad=1; fi; \
	done; \
	for e in $(EXAMPLES_BERM); do \
		f=examples/$$e/$$e.wasm; \
		built=$$(grep -a -o 'go1\.[0-9][0-9.]*[0-9]' "$$f" | head -n 1); \
		if [ "$$built" != "$$have" ]; then \
			echo "check-examples: $$f was built with $$built, this is $$have: not compared"; continue; \
		fi; \
		[ -x "$$tmp/berm" ] || $(GO) build -o "$$tmp/berm" .; \
		cp "$$f" "$$tmp/$$e.committed.wasm"; \
		if ! "$$tmp/berm" --root "$$tmp/root" build examples/$$e >/dev/null; then \
			cp "$$tmp/$$e.committed.wasm" "$$f"; echo "check-examples: berm build examples/$$e failed"; bad=1; continue; \
		fi; \
		if cmp -s "$$f" "$$tmp/$$e.committed.wasm"; then echo "check-examples: $$f matches its sources"; \
		else cp "$$tmp/$$e.committed.wasm" "$$f"; echo "check-examples: $$f differs from what berm build examples/$$e builds (make examples)"; bad=1; fi; \
	done; \
	for e in $(EXAMPLES_SH); do examples/$$e/build.sh check || bad=1; done; \
	exit $$bad
