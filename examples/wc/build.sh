#!/bin/sh
# Rebuilds examples/wc/wc.wasm from src/wc.c, sdk/c/berm.h and berm.abi.json:
# the same bytes for the same clang (Debian bookworm's clang 14 and lld 14).
#
#   examples/wc/build.sh          writes examples/wc/wc.wasm
#   examples/wc/build.sh OUT      writes OUT instead
#   examples/wc/build.sh check    builds into a temporary directory and fails
#                                 when the committed image differs; without a
#                                 clang for wasm32, or with another version
#                                 than the image's, it says so and compares
#                                 nothing
#
# Freestanding wasm32 (no libc): -mbulk-memory turns the copies clang emits
# into memory.copy, wasm-ld exports the memory, BERM_TOOL each tool.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CLANG=${CLANG:-clang}
GO=${GO:-go}
image=$here/wc.wasm

have_clang() {
	printf 'void f(void){}\n' | "$CLANG" --target=wasm32 -nostdlib -Wl,--no-entry -x c -o /dev/null - >/dev/null 2>&1
}

build() {
	tmp=$(mktemp -d)
	(
		cd "$root"
		"$CLANG" --target=wasm32 -std=c11 -O2 -mbulk-memory -nostdlib -Wall -Wextra -Werror \
			-Wl,--no-entry -I sdk/c -o "$tmp/wc.raw.wasm" examples/wc/src/wc.c
		"$GO" run ./testdata/mkimage -o "$1" "$tmp/wc.raw.wasm" examples/wc/berm.abi.json
	) || { rm -rf "$tmp"; exit 1; }
	rm -rf "$tmp"
}

if [ "${1:-}" != check ]; then
	out=${1:-$image}
	case $out in /*) ;; *) out=$(pwd)/$out ;; esac
	build "$out"
	exit 0
fi

if ! have_clang; then
	echo "check: examples/wc/wc.wasm: not compared: $CLANG cannot build for wasm32 (Debian: clang lld)"
	exit 0
fi
version=$("$CLANG" --version | grep -o 'version [0-9][0-9.]*' | head -n 1 | cut -d' ' -f2)
if ! grep -a -q -F "$version" "$image"; then
	echo "check: examples/wc/wc.wasm was not built with clang $version: not compared"
	exit 0
fi
cmpdir=$(mktemp -d)
trap 'rm -rf "$cmpdir"' EXIT
build "$cmpdir/wc.wasm"
if cmp -s "$image" "$cmpdir/wc.wasm"; then
	echo "check: examples/wc/wc.wasm matches its sources"
else
	echo "check: examples/wc/wc.wasm differs from what its sources build to (examples/wc/build.sh)"
	exit 1
fi
