#!/bin/sh
# Rebuilds the sandbox's test modules from their sources, the same bytes
# for the same tools:
#
#   fsops_wat.wasm  from fsops.wat    wat2wasm (Debian's wabt)
#   fsops.wasm      from fsops/       Go, GOOS=wasip1, -trimpath
#   fsops_c.wasm    from fsops.c      clang --target=wasm32-wasi (Debian's
#                                     clang, lld, wasi-libc and
#                                     libclang-rt-14-dev-wasm32)
#
# build.sh [DIR] writes them to DIR (default: beside this script).
# build.sh check builds them into a temporary directory and fails naming
# each committed module that differs. A Go module built by another Go than
# this one is not compared (the runtime's version is in its data, and CI may
# run a newer patch release), nor is the C module without clang for wasm32:
# each says so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
GO=${GO:-go}
WAT2WASM=${WAT2WASM:-wat2wasm}
CLANG=${CLANG:-clang}

have_clang() {
	printf 'int main(void){return 0;}\n' | "$CLANG" --target=wasm32-wasi -x c -o /dev/null - >/dev/null 2>&1
}

build() {
	out=$1
	"$WAT2WASM" "$here/fsops.wat" --output="$out/fsops_wat.wasm"
	(cd "$here" && GOOS=wasip1 GOARCH=wasm CGO_ENABLED=0 "$GO" build -trimpath -buildvcs=false \
		-ldflags='-s -w' -o "$out/fsops.wasm" ./fsops)
	if have_clang; then
		"$CLANG" --target=wasm32-wasi -Os -Wall -Wextra -Werror -Wl,--strip-all \
			-o "$out/fsops_c.wasm" "$here/fsops.c"
	else
		echo "build.sh: $CLANG cannot build for wasm32-wasi: fsops_c.wasm not built" >&2
	fi
}

if [ "${1:-}" != check ]; then
	out=$(cd "${1:-$here}" && pwd)
	build "$out"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build "$tmp"
bad=0
have=$("$GO" env GOVERSION)
for f in fsops_wat.wasm fsops.wasm fsops_c.wasm; do
	if [ ! -f "$here/$f" ]; then
		echo "check: runtime/sandbox/testdata/$f is not committed (runtime/sandbox/testdata/build.sh)"; bad=1; continue
	fi
	if [ "$f" = fsops.wasm ]; then
		built=$(grep -a -o 'go1\.[0-9][0-9.]*[0-9]' "$here/$f" | head -n 1)
		if [ "$built" != "$have" ]; then
			echo "check: runtime/sandbox/testdata/$f was built with $built, this is $have: not compared"; continue
		fi
	fi
	if [ ! -f "$tmp/$f" ]; then
		echo "check: runtime/sandbox/testdata/$f: not compared (see above)"; continue
	fi
	if ! cmp -s "$here/$f" "$tmp/$f"; then
		echo "check: runtime/sandbox/testdata/$f differs from what its source builds to (runtime/sandbox/testdata/build.sh)"; bad=1
	fi
done
[ "$bad" = 0 ] && echo "check: the sandbox's test modules match their sources"
exit "$bad"
