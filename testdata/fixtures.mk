# Fixture rules: see testdata/README.md. Included by the top-level Makefile, so
# every path is from the repository's root.
#
# An image is a module compiled by wat2wasm (which cannot write custom sections)
# with a manifest attached by mkimage as its .berm.abi section. wat2wasm writes
# to a pipe, so nothing is left behind but the .wasm files; the few images that
# need a file in between remove it in the same recipe.

WAT2WASM ?= wat2wasm
GO ?= go
MKIMAGE = $(GO) run ./testdata/mkimage
# What an image depends on besides its own sources.
IMAGE_DEPS = testdata/mkimage/main.go manifest/attach.go testdata/fixtures.mk

# The programs tests deploy: testdata/NAME.wat and testdata/NAME.abi.json.
FIXTURES = echo core nest kv init init_syscall imports maxmem

# Broken images, one per refusal of ABI.md (see testdata/README.md):
# - over a module of their own, testdata/broken/NAME.wat and NAME.abi.json;
BROKEN_MODULE = no_memory memory_not_memory init_type missing_export export_type \
	tool_name_dot tool_name_long berm_import_other berm_syscall_type \
	import_memory import_global big_memory table_big_min table_big_max
# - over the sound module testdata/broken/base.wat, with NAME.abi.json;
BROKEN_MANIFEST = bad_json abi_missing abi_wrong abi_string no_tools dup_tool \
	schema_not_object schema_bool schema_invalid schema_external_ref bad_call_name
# - built by the explicit rules at the end.
BROKEN_ODD = not_wasm component truncated no_section two_sections not_utf8

# Other packages' own test modules, NAME.wat and NAME.abi.json beside each
# other, built the same way.
PACKAGE_FIXTURES = $(patsubst %.wat,%.wasm,$(wildcard runtime/testdata/*.wat runtime/host/testdata/*.wat \
	runtime/internal/transform/testdata/*.wat mcpserve/testdata/*.wat mcpserve/testdata/conformance/*.wat))

# The compute kernel in C that runtime/'s deadline tests and benchmark run,
# built by its own script with clang for wasm32, as examples/wc is.
KERNEL = runtime/testdata/kernel/kernel.wasm

FIXTURE_IMAGES = $(FIXTURES:%=testdata/%.wasm) \
	$(BROKEN_MODULE:%=testdata/broken/%.wasm) \
	$(BROKEN_MANIFEST:%=testdata/broken/%.wasm) \
	$(BROKEN_ODD:%=testdata/broken/%.wasm) \
	$(PACKAGE_FIXTURES) $(KERNEL)

# FIXTURE_OUT, when set, is a directory (ending in /) the images are written
# under instead of in place: check-fixtures builds them there to compare.
FIXTURE_OUT ?=
O := $(FIXTURE_OUT)

.PHONY: fixtures check-fixtures
fixtures: $(FIXTURE_IMAGES:%=$(O)%)

# check-fixtures builds every image from its sources into a temporary
# directory and fails naming each committed image that differs from what its
# sources build to, or that no rule here builds; then fixturecheck holds each
# image of testdata/ to the verdict manifest.Read must give it.
FIXTURE_DIRS = testdata runtime/testdata runtime/host/testdata runtime/internal/transform/testdata mcpserve/testdata mcpserve/testdata/conformance
check-fixtures:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) build -o "$$tmp/mkimage" ./testdata/mkimage; \
	mkdir -p $(addprefix "$$tmp"/,$(sort $(dir $(FIXTURE_IMAGES)))); \
	$(MAKE) --no-print-directory -s fixtures FIXTURE_OUT="$$tmp/" MKIMAGE="$$tmp/mkimage"; \
	bad=0; \
	for f in $(FIXTURE_IMAGES); do \
		if [ ! -f "$$f" ]; then echo "check-fixtures: $$f is not committed (make fixtures)"; bad=1; \
		elif ! cmp -s "$$f" "$$tmp/$$f"; then echo "check-fixtures: $$f differs from what its sources build to (make -B fixtures)"; bad=1; fi; \
	done; \
	for f in $$(git ls-files -- $(FIXTURE_DIRS:%='%/*.wasm')); do \
		[ -f "$$tmp/$$f" ] || { echo "check-fixtures: $$f: no rule in testdata/fixtures.mk builds it"; bad=1; }; \
	done; \
	if ! out=$$($(GO) run ./testdata/fixturecheck 2>&1); then echo "$$out" | grep -v -e '^ok ' -e '^exit status'; bad=1; fi; \
	[ "$$bad" = 0 ] && echo "check-fixtures: $(words $(FIXTURE_IMAGES)) images match their sources"

# $(call image,module.wat,payload...) compiles the module and attaches each
# payload as a .berm.abi section, in order, writing $@.
image = $(WAT2WASM) $(1) --output=- | $(MKIMAGE) -o $@ /dev/stdin $(2)

# The normal case, testdata/, testdata/broken/ and the packages' alike:
# NAME.wat + NAME.abi.json.
$(O)%.wasm: %.wat %.abi.json $(IMAGE_DEPS)
	$(call image,$<,$(word 2,$^))

$(BROKEN_MANIFEST:%=$(O)testdata/broken/%.wasm): $(O)testdata/broken/%.wasm: \
		testdata/broken/base.wat testdata/broken/%.abi.json $(IMAGE_DEPS)
	$(call image,$<,$(word 2,$^))

$(O)$(KERNEL): runtime/testdata/kernel/kernel.c runtime/testdata/kernel/kernel.abi.json \
		runtime/testdata/kernel/build.sh sdk/c/berm.h $(IMAGE_DEPS)
	GO='$(GO)' sh runtime/testdata/kernel/build.sh $@

# not_wasm: a text file, whatever its name says.
$(O)testdata/broken/not_wasm.wasm: testdata/fixtures.mk
	printf 'not a WebAssembly module, only a text file named .wasm\n' > $@

# component: the 8-byte header of a WebAssembly component (version 0x0d,
# layer 1), which is not a core module.
$(O)testdata/broken/component.wasm: testdata/fixtures.mk
	printf '\000asm\015\000\001\000' > $@

# truncated: a sound image cut in half, which falls in the middle of its
# .berm.abi section.
$(O)testdata/broken/truncated.wasm: testdata/broken/base.wat testdata/broken/truncated.abi.json $(IMAGE_DEPS)
	$(WAT2WASM) $< --output=- | $(MKIMAGE) -o $@.whole /dev/stdin $(word 2,$^) && \
	head -c $$(( $$(wc -c < $@.whole) / 2 )) $@.whole > $@; \
	s=$$?; rm -f $@.whole; exit $$s

# no_section: the sound module with no manifest at all.
$(O)testdata/broken/no_section.wasm: testdata/broken/base.wat $(IMAGE_DEPS)
	$(call image,$<)

# two_sections: a sound manifest, attached twice.
$(O)testdata/broken/two_sections.wasm: testdata/broken/base.wat testdata/broken/two_sections.abi.json $(IMAGE_DEPS)
	$(call image,$<,$(word 2,$^) $(word 2,$^))

# not_utf8: a manifest that is sound but for one byte, 0xff, which is never
# UTF-8 (JSON decoders tend to let it through as U+FFFD). Kept here rather than
# in a .abi.json, which editors would "fix".
$(O)testdata/broken/not_utf8.wasm: testdata/broken/base.wat $(IMAGE_DEPS)
	printf '{"abi_version": 0, "usage": "broken: \377 is not UTF-8", "tools": [{"name": "x"}]}\n' > $@.json && \
	$(call image,$<,$@.json); \
	s=$$?; rm -f $@.json; exit $$s

# The sandbox's test modules (WAT, Go for wasip1, C for wasm32-wasi) are built
# by their own script, runtime/sandbox/testdata/build.sh, which check-fixtures
# runs in its check mode. Not under FIXTURE_OUT: the script compares itself.
.PHONY: sandbox-fixtures check-sandbox-fixtures
fixtures: $(if $(FIXTURE_OUT),,sandbox-fixtures)
check-fixtures: check-sandbox-fixtures
sandbox-fixtures:
	GO='$(GO)' WAT2WASM='$(WAT2WASM)' sh runtime/sandbox/testdata/build.sh
check-sandbox-fixtures:
	@GO='$(GO)' WAT2WASM='$(WAT2WASM)' sh runtime/sandbox/testdata/build.sh check
