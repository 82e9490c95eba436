// Command mkimage builds a berm image from a module and manifest payloads:
//
//	go run ./testdata/mkimage -o out.wasm module.wasm [payload.json ...]
//
// Each payload becomes one .berm.abi custom section, in order, so that broken
// images (none, or two) can be built on purpose. The sections the module
// already has are dropped unless -keep is given.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/berm-dev/berm/manifest"
)

func main() {
	out := flag.String("o", "", "output file")
	keep := flag.Bool("keep", false, "keep the module's own .berm.abi sections")
	flag.Parse()
	if *out == "" || flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: mkimage -o out.wasm module.wasm [payload.json ...]")
		os.Exit(2)
	}
	if err := run(*out, *keep, flag.Arg(0), flag.Args()[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(out string, keep bool, module string, payloads []string) error {
	image, err := os.ReadFile(module)
	if err != nil {
		return err
	}
	if !keep {
		if image, err = manifest.Strip(image); err != nil {
			return err
		}
	}
	for _, p := range payloads {
		payload, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		image = manifest.AppendSection(image, payload)
	}
	return os.WriteFile(out, image, 0o644)
}
