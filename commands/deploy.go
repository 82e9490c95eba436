package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

type deployOptions struct {
	root    string
	example string
	json    bool
	remote
}

func newDeployCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "deploy",
		Usage:     "deploy a program under a name",
		ArgsUsage: "NAME FILE",
		Description: `Checks the image against ABI.md, this host and MCP, compiles it (so the first
call is fast), stores it by digest and records NAME -> digest. Prints the
digest. Deploying a name again replaces it; an invalid image or name changes
nothing. A running berm serve picks the change up within a second.

   berm deploy echo ./echo.wasm
   berm deploy --example hello                     # the example this binary carries
   berm deploy --server http://ci:7777 echo ./echo.wasm   # through a server's control API`,
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "example", Usage: "deploy the embedded example `NAME` (under that name unless NAME is given)"},
			&cli.BoolFlag{Name: "json", Usage: `print {"name", "digest", "tools", "source"}`},
		}, serverFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			opts := deployOptions{root: cmd.String("root"), example: cmd.String("example"), json: cmd.Bool("json"), remote: readServerFlags(cmd)}
			return runDeploy(ctx, e, opts, cmd.Args().Slice())
		},
	}
}

func runDeploy(ctx context.Context, e *env, opts deployOptions, args []string) error {
	var name, source string
	var image []byte
	var err error
	switch {
	case opts.example != "" && len(args) <= 1:
		if image, err = exampleImage(opts.example); err != nil {
			return err
		}
		name, source = opts.example, "example:"+opts.example
		if len(args) == 1 {
			name = args[0]
		}
	case opts.example == "" && len(args) == 2:
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
	info, err := deploy(ctx, opts, name, image, source)
	if err != nil {
		return err
	}
	for _, w := range info.Warnings {
		fmt.Fprintf(e.stderr, "berm: warning: %s\n", w)
	}
	if opts.json {
		return writeJSON(e, info)
	}
	fmt.Fprintln(e.stdout, info.Digest)
	return nil
}

func deploy(ctx context.Context, opts deployOptions, name string, image []byte, source string) (mcpserve.ProgramInfo, error) {
	client, err := opts.client()
	if err != nil {
		return mcpserve.ProgramInfo{}, err
	}
	if client != nil {
		return client.Deploy(ctx, name, image, source)
	}
	st, err := store.Open(opts.root)
	if err != nil {
		return mcpserve.ProgramInfo{}, err
	}
	rt, err := newRuntime(ctx, st, runtimeConfig{depth: runtime.DefaultCallDepth})
	if err != nil {
		return mcpserve.ProgramInfo{}, err
	}
	defer rt.Close(ctx)
	return mcpserve.Deploy(ctx, rt, st, name, image, source, mcpserve.Underscore)
}

func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
