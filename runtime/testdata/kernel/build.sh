#!/bin/sh
# Rebuilds runtime/testdata/kernel/kernel.wasm from kernel.c, sdk/c/berm.h
# and kernel.abi.json: the same bytes for the same clang (Debian bookworm's
# clang 14 and lld 14). Freestanding wasm32, -O2 -mbulk-memory, as examples/wc is.
#
#   build.sh          writes kernel.wasm beside this script
#   build.sh OUT      writes OUT instead
#
# testdata/fixtures.mk runs it, and check-fixtures compares what it builds.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
CLANG=${CLANG:-clang}
GO=${GO:-go}

build() {
	tmp=$(mktemp -d)
	(
		cd "$root"
		"$CLANG" --target=wasm32 -std=c11 -O2 -mbulk-memory -nostdlib -Wall -Wextra -Werror -Wno-parentheses \
			-Wl,--no-entry -I sdk/c -o "$tmp/kernel.raw.wasm" runtime/testdata/kernel/kernel.c
		"$GO" run ./testdata/mkimage -o "$1" "$tmp/kernel.raw.wasm" runtime/testdata/kernel/kernel.abi.json
	) || { rm -rf "$tmp"; exit 1; }
	rm -rf "$tmp"
}

out=${1:-$here/kernel.wasm}
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
build "$out"
