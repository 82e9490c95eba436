package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

type deployOptions struct {
	root    string
	example string
	json    bool
}

func newDeployCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "deploy",
		Usage:     "deploy a program under a name",
		ArgsUsage: "NAME FILE",
		Description: `Checks the image against ABI.md and this host, compiles it (so the first call
is fast), stores it by digest and records NAME -> digest. Prints the digest.
Deploying a name again replaces it; an invalid image or name changes nothing.

   berm deploy echo ./echo.wasm
   berm deploy --example hello      # the example program this binary carries`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "example", Usage: "deploy the embedded example `NAME` (under that name unless NAME is given)"},
			&cli.BoolFlag{Name: "json", Usage: "print the deployment as JSON"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			opts := deployOptions{root: cmd.String("root"), example: cmd.String("example"), json: cmd.Bool("json")}
			return runDeploy(ctx, e, opts, cmd.Args().Slice())
		},
	}
}

func runDeploy(ctx context.Context, e *env, opts deployOptions, args []string) error {
	var name, source string
	var image []byte
	switch {
	case opts.example != "" && len(args) <= 1:
		var err error
		if image, err = exampleImage(opts.example); err != nil {
			return err
		}
		name, source = opts.example, "example:"+opts.example
		if len(args) == 1 {
			name = args[0]
		}
	case opts.example == "" && len(args) == 2:
		var err error
		name = args[0]
		if image, err = readImageFile(args[1]); err != nil {
			return err
		}
		if source, err = filepath.Abs(args[1]); err != nil {
			return err
		}
	default:
		return usagef("deploy takes NAME FILE, or --example NAME [NAME]")
	}
	if err := manifest.CheckProgramName(name); err != nil {
		return err
	}
	st, err := store.Open(opts.root)
	if err != nil {
		return err
	}
	rt, err := newRuntime(ctx, st, runtimeConfig{depth: runtime.DefaultCallDepth})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	p, err := rt.Prepare(ctx, name, image)
	if err != nil {
		return fmt.Errorf("deploy %s: %w", name, err)
	}
	defer p.Close()
	for _, s := range rt.UnknownSyscalls(p.Manifest) {
		fmt.Fprintf(e.stderr, "berm: warning: %s declares syscall %s, which this host does not have: calls to it will trap\n", name, s)
	}
	digest, err := st.PutImage(image)
	if err != nil {
		return err
	}
	d := store.Deployment{Name: name, Digest: digest, Source: source}
	if err := st.Deploy(d); err != nil {
		return err
	}
	if opts.json {
		return writeJSON(e, lsEntry{Name: name, Digest: digest, Tools: p.Manifest.ToolNames(), Source: source})
	}
	fmt.Fprintln(e.stdout, digest)
	return nil
}

func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
