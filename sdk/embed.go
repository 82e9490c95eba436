//go:build !wasip1

package berm

import "embed"

// Sources holds the guest SDKs' sources, which the berm binary carries so
// that `berm new` and `berm build` can write a copy of the SDK they match
// under berm's root: this package and bermhttp (*.go), the Rust crate
// (rust/) and the C header (c/). Programs never need it; it is not built for
// WebAssembly, so it costs an image nothing.
//
//go:embed *.go bermhttp/*.go rust c
var Sources embed.FS
