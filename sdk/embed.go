//go:build !wasip1

package berm

import "embed"

// Sources holds the guest SDKs' sources, which the berm binary carries so
// that `berm new` and `berm build` can write a copy of the SDK they match
// under berm's root: this package, bermhttp and describe (*.go), the Rust crate
// (rust/: its manifest and sources, never a target/ that a cargo test left)
// and the C header (c/). Programs never need it; it is not built for
// WebAssembly, so it costs an image nothing.
//
//go:embed *.go bermhttp/*.go describe/*.go rust/Cargo.toml rust/README.md rust/src c/*.h c/README.md
var Sources embed.FS
