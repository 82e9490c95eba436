package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/berm-dev/berm/registry"
)

// Push a program, then pull it by the digest the push pinned. (Not run: it
// needs a registry on localhost:5000.)
func Example() {
	ctx := context.Background()
	c, err := registry.New(nil) // Docker's credentials, DefaultMaxImageSize
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	image, err := os.ReadFile("echo.wasm")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	pushed, err := c.Push(ctx, "localhost:5000/berm/echo:v1", image, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	fmt.Println(pushed.Digest)         // sha256 of echo.wasm
	fmt.Println(pushed.ManifestDigest) // the same for the same file, pushed again

	img, err := c.Pull(ctx, pushed.Resolved, nil)
	switch {
	case errors.Is(err, registry.ErrNotFound):
		fmt.Println("no such image")
	case errors.Is(err, registry.ErrDigest):
		fmt.Println("the registry served wrong bytes")
	case err == nil:
		fmt.Println(len(img.Bytes) == len(image))
	}
}
