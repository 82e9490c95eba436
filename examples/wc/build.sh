#!/bin/sh
# Rebuilds examples/wc/wc.wasm from src/wc.c, sdk/c/berm.h and berm.abi.json:
# the same bytes for the same clang (Debian bookworm's clang 14 and lld 14).
#
#   examples/wc/build.sh          writes examples/wc/wc.wasm
#   examples/wc/build.sh OUT      writes OUT instead
#
# Freestanding wasm32 (no libc): -mbulk-memory turns the copies clang emits
# into memory.copy, wasm-ld exports the memory, BERM_TOOL each tool.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
CLANG=${CLANG:-clang}
GO=${GO:-go}
out=${1:-$here/wc.wasm}
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
"$CLANG" --target=wasm32 -std=c11 -O2 -mbulk-memory -nostdlib -Wall -Wextra -Werror \
	-Wl,--no-entry -I sdk/c -o "$tmp/wc.raw.wasm" examples/wc/src/wc.c
"$GO" run ./testdata/mkimage -o "$out" "$tmp/wc.raw.wasm" examples/wc/berm.abi.json
