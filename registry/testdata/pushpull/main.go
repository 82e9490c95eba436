// Command pushpull is BenchmarkVsOras's stand-in for the berm CLI: one push or
// one pull per process, through package registry, the pulled program written
// to a file as `oras pull` writes it. The benchmark builds it; it is not
// shipped.
//
//	pushpull push REF FILE
//	pushpull pull REF FILE
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/berm-dev/berm/registry"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pushpull:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: pushpull push|pull REF FILE")
	}
	c, err := registry.New(nil)
	if err != nil {
		return err
	}
	op, ref, file := args[0], args[1], args[2]
	switch op {
	case "push":
		image, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		_, err = c.Push(ctx, ref, image, nil)
		return err
	case "pull":
		img, err := c.Pull(ctx, ref, nil)
		if err != nil {
			return err
		}
		return os.WriteFile(file, img.Bytes, 0o644)
	}
	return fmt.Errorf("unknown operation %q", op)
}
