package commands

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
)

type rmOptions struct {
	root     string
	state    string // --state: "" for the directory root
	keepData bool
	remote
}

func newRmCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "remove deployed programs and their data",
		ArgsUsage: "NAME...",
		Description: `Removes the deployment and, unless --keep-data, the data the program kept
with berm.set. The image stays in the store, addressed by its digest.

   berm rm hello
   berm rm --keep-data hello    # a later deploy under the same name finds its data
   berm rm --server http://ci:7777 hello`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "keep-data", Usage: "keep the program's data for a later deploy under the same name"},
		}, serverFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() == 0 {
				return usagef("rm takes at least one NAME")
			}
			opts := rmOptions{root: cmd.String("root"), state: stateFlag(cmd), keepData: cmd.Bool("keep-data"), remote: readServerFlags(cmd)}
			return runRm(ctx, e, opts, cmd.Args().Slice())
		},
	}
}

func runRm(ctx context.Context, e *env, opts rmOptions, names []string) error {
	for _, name := range names {
		if err := manifest.CheckProgramName(name); err != nil {
			return err
		}
	}
	d, err := opts.open(ctx, e, opts.root, opts.state, existingRoot, registryOptions{})
	if err != nil {
		return err
	}
	defer d.Close()
	for _, name := range names {
		if err := d.Remove(ctx, name, opts.keepData); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "removed %s\n", name)
	}
	return nil
}
