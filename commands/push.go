package commands

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/registry"
)

type pushOptions struct {
	reg     registryOptions
	created string
	json    bool
}

// pushOutput is what `berm push --json` prints.
type pushOutput struct {
	Reference      string `json:"reference"`
	Digest         string `json:"digest"`
	ManifestDigest string `json:"manifest_digest"`
}

func newPushCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "push",
		Usage:     "publish a program to an OCI registry, as one layer",
		ArgsUsage: "[REF FILE]",
		Description: `Pushes FILE to REF as one OCI image whose single layer is the file's bytes
(media type application/wasm; the CNCF TAG Runtime wasm layout), with berm's
manifest in an annotation so that inspect reads it without pulling the layer.
Prints, labeled, the program's digest (the layer's: the sha256 of the file, as
deploy and ls show it), the manifest's digest, and REF pinned to the manifest,
which deploys exactly this push. Pushing the same file to the same REF again
gives the same manifest.

   $ berm push ghcr.io/org/example:v1 ./example.wasm
   digest    sha256:2c26b46b...   # sha256sum example.wasm
   manifest  sha256:8f1e4f0b...
   pinned    ghcr.io/org/example:v1@sha256:8f1e4f0b...

   berm push                      # berm.toml: wasm to image
   berm deploy example ghcr.io/org/example:v1

Credentials are Docker's (berm login, docker login and oras login all work).`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "created", Usage: "creation time recorded in the image (RFC 3339); the Unix epoch by default, so that pushes are reproducible"},
			&cli.BoolFlag{Name: "json", Usage: `print {"reference", "digest", "manifest_digest"}`},
		}, registryFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			reg, err := readRegistryFlags(cmd)
			if err != nil {
				return err
			}
			opts := pushOptions{reg: reg, created: cmd.String("created"), json: cmd.Bool("json")}
			return runPush(ctx, e, opts, cmd.Args().Slice())
		},
	}
}

func runPush(ctx context.Context, e *env, opts pushOptions, args []string) error {
	var ref, file string
	switch len(args) {
	case 2:
		ref, file = args[0], args[1]
	case 0:
		dir, err := os.Getwd()
		if err != nil {
			return err
		}
		p, err := readProject(dir)
		if err != nil {
			return err
		}
		if err := p.need("image"); err != nil {
			return err
		}
		ref, file = p.Image, p.Wasm
		if !isFile(file) {
			_, err := p.module()
			return err
		}
	default:
		return usagef("push takes REF FILE, or nothing (berm.toml)")
	}
	var created time.Time
	if opts.created != "" {
		var err error
		if created, err = time.Parse(time.RFC3339, opts.created); err != nil {
			return usagef("--created %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", opts.created)
		}
	}
	image, err := readImageFile(file)
	if err != nil {
		return err
	}
	c, err := newRegistryClient(e, opts.reg)
	if err != nil {
		return err
	}
	pushed, err := c.Push(ctx, ref, image, &registry.PushOptions{Title: filepath.Base(file), Created: created})
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(e, pushOutput{Reference: pushed.Reference, Digest: pushed.Digest, ManifestDigest: pushed.ManifestDigest})
	}
	fmt.Fprintf(e.stdout, "digest    %s\nmanifest  %s\npinned    %s\n", pushed.Digest, pushed.ManifestDigest, pinned(pushed))
	return nil
}
