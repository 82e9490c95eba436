package commands

import (
	"context"
	"errors"
)

// Stubs until the Rust and C builds land (build_rust.go, build_c.go), which
// replace this file. Each builds the project in dir into the raw module,
// without a manifest, at out.

func buildRustModule(ctx context.Context, dir, out string) error {
	return errors.New("build: lang rust is not yet supported by this berm")
}

func buildCModule(ctx context.Context, dir, out string) error {
	return errors.New("build: lang c is not yet supported by this berm")
}
