#!/bin/sh
# Rebuilds examples/jsonfmt/jsonfmt.wasm from src/lib.rs, the crate in
# sdk/rust and berm.abi.json: the same bytes for the same rustc (Debian
# bookworm's rustc 1.63 with libstd-rust-dev-wasm32).
#
#   examples/jsonfmt/build.sh          writes examples/jsonfmt/jsonfmt.wasm
#   examples/jsonfmt/build.sh OUT      writes OUT instead
#   examples/jsonfmt/build.sh check    builds into a temporary directory and
#                                      fails when the committed image
#                                      differs; without a rustc for wasm32,
#                                      or with another version than the
#                                      image's, it says so and compares
#                                      nothing
#
# rustc directly, without cargo: two crates, no dependencies, and nothing to
# fetch. The flags are Cargo.toml's release profile (opt-level s, LTO, one
# codegen unit, panic=abort), with the debug info of std stripped and the
# name section kept; --remap-path-prefix keeps the checkout's path out of
# panic messages. RUSTC names a rustc with the wasm32-unknown-unknown target;
# by default the first of rustc and /usr/bin/rustc that has it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
GO=${GO:-go}
image=$here/jsonfmt.wasm

has_wasm32() {
	command -v "$1" >/dev/null 2>&1 &&
		ls "$("$1" --print target-libdir --target wasm32-unknown-unknown 2>/dev/null)"/libstd-*.rlib >/dev/null 2>&1
}
if [ -z "${RUSTC:-}" ]; then
	for r in rustc /usr/bin/rustc; do
		if has_wasm32 "$r"; then RUSTC=$r; break; fi
	done
fi

build() {
	tmp=$(mktemp -d)
	(
		cd "$root"
		flags="--edition 2021 --target wasm32-unknown-unknown -C opt-level=s -C codegen-units=1 -C panic=abort
			-C strip=debuginfo --remap-path-prefix=$root=."
		# shellcheck disable=SC2086 # flags are words
		"$RUSTC" $flags --crate-type rlib --crate-name berm -o "$tmp/libberm.rlib" sdk/rust/src/lib.rs
		# shellcheck disable=SC2086
		"$RUSTC" $flags -C lto --crate-type cdylib --crate-name jsonfmt --extern "berm=$tmp/libberm.rlib" \
			-o "$tmp/jsonfmt.raw.wasm" examples/jsonfmt/src/lib.rs
		"$GO" run ./testdata/mkimage -o "$1" "$tmp/jsonfmt.raw.wasm" examples/jsonfmt/berm.abi.json
	) || { rm -rf "$tmp"; exit 1; }
	rm -rf "$tmp"
}

if [ "${1:-}" != check ]; then
	if [ -z "${RUSTC:-}" ] || ! has_wasm32 "$RUSTC"; then
		echo "build.sh: no rustc with the wasm32-unknown-unknown target: apt-get install rustc libstd-rust-dev-wasm32" >&2
		exit 1
	fi
	out=${1:-$image}
	case $out in /*) ;; *) out=$(pwd)/$out ;; esac
	build "$out"
	exit 0
fi

if [ -z "${RUSTC:-}" ] || ! has_wasm32 "$RUSTC"; then
	echo "check: examples/jsonfmt/jsonfmt.wasm: not compared: no rustc for wasm32-unknown-unknown (Debian: rustc libstd-rust-dev-wasm32)"
	exit 0
fi
version=$("$RUSTC" --version | cut -d' ' -f2)
if ! grep -a -q -F "$version" "$image"; then
	echo "check: examples/jsonfmt/jsonfmt.wasm was not built with rustc $version: not compared"
	exit 0
fi
cmpdir=$(mktemp -d)
trap 'rm -rf "$cmpdir"' EXIT
build "$cmpdir/jsonfmt.wasm"
if cmp -s "$image" "$cmpdir/jsonfmt.wasm"; then
	echo "check: examples/jsonfmt/jsonfmt.wasm matches its sources"
else
	echo "check: examples/jsonfmt/jsonfmt.wasm differs from what its sources build to (examples/jsonfmt/build.sh)"
	exit 1
fi
