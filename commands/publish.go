package commands

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/registry/index"
	"github.com/berm-dev/berm/runtime"
)

type publishOptions struct {
	root      string
	dir       string
	publisher string
	reg       registryOptions
	// now stamps the line; nil means time.Now.
	now func() time.Time
}

func newPublishCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "publish",
		Usage:     "list a pushed program in your clone of an index, committed, ready for a pull request",
		ArgsUsage: "[REF]",
		Description: `Reads the program REF names from its registry, checks it as berm deploy would
(its manifest, the ABI, this host's limits, MCP's tool names), resolves the tag
to its manifest digest, appends one line to the program's file in DIR (your own
git clone of the index, never the copy berm search keeps) and commits that file
alone. Push the commit and open a pull request to the index.

   berm push ghcr.io/me/example:v1 example.wasm
   git clone https://github.com/ORG/berm-index ~/src/berm-index   # your fork
   berm publish ghcr.io/me/example:v1 --index ~/src/berm-index
   git -C ~/src/berm-index push                                  # then the pull request
   berm publish --index ~/src/berm-index      # berm.toml's image (tag latest)

The line records the reference with its tag, the manifest digest, the layer
digest (the wasm file's sha256), the program's usage, tools, syscalls and calls,
the time, and the publisher: --publisher "Name <email>", else git's user.name
and user.email. That is a claim, which search shows as such. Publishing a digest
the reference's newest line has already changes nothing. See docs/index.md.`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "index", Usage: "your git clone of the index: `DIR` (its root)", Required: true},
			&cli.StringFlag{Name: "publisher", Usage: "who publishes, as `\"Name <email>\"` (default: git's user.name and user.email)"},
		}, registryFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 1 {
				return usagef("publish takes one REF, or none (berm.toml's image)")
			}
			reg, err := readRegistryFlags(cmd)
			if err != nil {
				return err
			}
			opts := publishOptions{
				root:      cmd.String("root"),
				dir:       cmd.String("index"),
				publisher: cmd.String("publisher"),
				reg:       reg,
			}
			return runPublish(ctx, e, opts, cmd.Args().First())
		},
	}
}

func runPublish(ctx context.Context, e *env, opts publishOptions, ref string) error {
	dir, err := filepath.Abs(opts.dir)
	if err != nil {
		return err
	}
	if opts.root != "" {
		if cache, err := filepath.Abs(filepath.Join(opts.root, index.Dir)); err == nil && within(dir, cache) {
			return withHint(fmt.Errorf("%s: the copy of an index berm search keeps, not yours", dir),
				"clone the index (or your fork of it) elsewhere and give that: berm publish --index DIR")
		}
	}
	if ref == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		p, err := readProject(wd)
		if err != nil {
			return err
		}
		if err := p.need("image"); err != nil {
			return err
		}
		ref = p.Image
	}
	if !isReference(ref) || strings.Contains(ref, "@") {
		return usagef("publish takes a reference with a tag (host/repo:tag), not %q", ref)
	}
	author, err := publishAuthor(dir, opts.publisher)
	if err != nil {
		return err
	}
	entry, err := describeForIndex(ctx, e, ref, opts.reg)
	if err != nil {
		return err
	}
	now := time.Now
	if opts.now != nil {
		now = opts.now
	}
	entry.Publisher = author.String()
	entry.Published = now().UTC().Truncate(time.Second)
	done, err := index.Publish(dir, *entry, author)
	if err != nil {
		return err
	}
	if done.Already {
		fmt.Fprintf(e.stderr, "berm: %s is listed already in %s; nothing to commit\n", entry.Pinned(), done.Path)
		fmt.Fprintln(e.stdout, entry.Pinned())
		return nil
	}
	fmt.Fprintln(e.stdout, entry.Pinned())
	fmt.Fprintf(e.stderr, "berm: committed %s in %s (%s): push it and open a pull request to the index\n",
		done.Path, dir, done.Commit[:12])
	return nil
}

// within reports whether path is dir or under it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// publishAuthor is --publisher, or git's user in dir.
func publishAuthor(dir, publisher string) (index.Author, error) {
	if publisher != "" {
		a, err := index.ParseAuthor(publisher)
		if err != nil {
			return index.Author{}, usageError{err}
		}
		return a, nil
	}
	a, err := index.GitAuthor(dir)
	if err != nil {
		return index.Author{}, withHint(err, `give --publisher "Name <email>", or git config --global user.name "Name"`)
	}
	return a, nil
}

// describeForIndex pulls ref and checks it as a deploy would (what the
// module declares and imports, this host's limits, MCP's naming under the
// name a deploy derives from the reference), and describes it as an index
// line. It reads the layer, not berm's annotation: the annotation is the
// pusher's claim and deploy reads the layer, so the line says what deploy
// will run. Compiling is left to deploy.
func describeForIndex(ctx context.Context, e *env, ref string, reg registryOptions) (*index.Entry, error) {
	rc, err := newRegistryClient(e, reg)
	if err != nil {
		return nil, err
	}
	img, err := rc.Pull(ctx, ref, nil)
	if err != nil {
		return nil, err
	}
	m, err := manifest.Read(img.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	rt, err := newRuntime(ctx, "", nil, runtimeConfig{depth: runtime.DefaultCallDepth})
	if err != nil {
		return nil, err
	}
	defer rt.Close(ctx)
	name := nameFromReference(ref)
	if err := rt.Check(name, m); err != nil {
		return nil, fmt.Errorf("%s: berm would not deploy it: %w", ref, err)
	}
	if err := mcpserve.Check(name, m, mcpserve.Underscore); err != nil {
		return nil, fmt.Errorf("%s: berm would not deploy it: %w", ref, err)
	}
	entry := &index.Entry{
		Reference: img.Reference,
		Digest:    img.ManifestDigest,
		Layer:     img.Digest,
		Usage:     m.Usage,
		Syscalls:  m.Syscalls,
		Calls:     m.Calls,
	}
	for _, t := range m.Tools {
		entry.Tools = append(entry.Tools, index.Tool{Name: t.Name, Description: t.Description})
	}
	return entry, nil
}
