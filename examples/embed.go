package examples

import (
	"embed"
	"sort"
)

// Each example lives in <name>/ and its image is <name>/<name>.wasm, built
// by `make examples` (examples.mk).
//
//go:embed hello/hello.wasm fetch/fetch.wasm files/files.wasm notes/notes.wasm wc/wc.wasm jsonfmt/jsonfmt.wasm
var images embed.FS

// Names lists the example programs, sorted.
func Names() []string {
	dirs, _ := images.ReadDir(".")
	names := make([]string, 0, len(dirs))
	for _, d := range dirs {
		names = append(names, d.Name())
	}
	sort.Strings(names)
	return names
}

// Image returns the image of the example program called name, and whether
// there is one.
func Image(name string) ([]byte, bool) {
	b, err := images.ReadFile(name + "/" + name + ".wasm")
	return b, err == nil
}
