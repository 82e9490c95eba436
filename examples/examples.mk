# Example programs, included by the top-level Makefile. `make examples`
# rebuilds every committed examples/<name>/<name>.wasm from its Go source and
# its berm.abi.json; see examples/README.md.
#
# -trimpath and -buildvcs=false keep the image (and so its digest) the same
# wherever and whenever it is built with the same Go. The name section is kept
# (no -ldflags=-s): it costs ~70 KB and names functions in trap backtraces.
GO ?= go
EXAMPLES := hello
EXAMPLE_BUILD := GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -buildmode=c-shared

.PHONY: examples
examples:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for e in $(EXAMPLES); do \
		echo "build examples/$$e/$$e.wasm"; \
		$(EXAMPLE_BUILD) -o "$$tmp/$$e.wasm" ./examples/$$e; \
		$(GO) run ./testdata/mkimage -o examples/$$e/$$e.wasm "$$tmp/$$e.wasm" examples/$$e/berm.abi.json; \
	done
