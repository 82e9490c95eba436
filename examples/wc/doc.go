// Package wc holds the tests of berm's example in C, wc (src/wc.c), which
// counts and searches text passed in its arguments: build.sh builds it with
// clang for wasm32 into wc.wasm, and the tests run that image through
// berm's runtime.
package wc
