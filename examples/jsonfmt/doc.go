// Package jsonfmt holds the tests of berm's example in Rust, jsonfmt
// (src/lib.rs), which formats and queries JSON passed in its arguments:
// build.sh builds it for wasm32 into jsonfmt.wasm, and the tests run that
// image through berm's runtime.
package jsonfmt
