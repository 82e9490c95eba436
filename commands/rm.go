package commands

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
)

type rmOptions struct {
	root     string
	keepData bool
}

func newRmCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "rm",
		Usage:     "remove a deployed program and its data",
		ArgsUsage: "NAME...",
		Description: `Removes the deployment and, unless --keep-data, the data the program kept
with berm.set. The image stays in the store, addressed by its digest.

   berm rm hello
   berm rm --keep-data hello    # a later deploy under the same name finds its data`,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "keep-data", Usage: "keep the program's data for a later deploy under the same name"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() == 0 {
				return usagef("rm takes at least one NAME")
			}
			return runRm(ctx, e, rmOptions{root: cmd.String("root"), keepData: cmd.Bool("keep-data")}, cmd.Args().Slice())
		},
	}
}

func runRm(_ context.Context, e *env, opts rmOptions, names []string) error {
	st, err := store.Open(opts.root)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := manifest.CheckProgramName(name); err != nil {
			return err
		}
		if err := st.Remove(name, opts.keepData); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "removed %s\n", name)
	}
	return nil
}
