package commands

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/runtime"
)

type syscallsOptions struct {
	json bool
}

// syscallEntry is one row of `berm syscalls --json`. The number is a hex
// string: JSON numbers lose 64-bit integers in most readers.
type syscallEntry struct {
	Name   string `json:"name"`
	Number string `json:"number"`
	Core   bool   `json:"core"`
}

func newSyscallsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "syscalls",
		Usage: "list the syscall table programs are linked against",
		Description: `Each syscall with its number (the FNV-1a 64 hash of its name, which a program
passes to berm.syscall). Core syscalls link into every program; the others only
into programs whose manifest declares them.

   berm syscalls
   berm syscalls --json`,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: `print [{"name", "number", "core"}]`}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usagef("syscalls takes no arguments")
			}
			return runSyscalls(ctx, e, syscallsOptions{json: cmd.Bool("json")})
		},
	}
}

func runSyscalls(ctx context.Context, e *env, opts syscallsOptions) error {
	// The table needs no root: reading it creates none.
	rt, err := newRuntime(ctx, "", nil, runtimeConfig{depth: runtime.DefaultCallDepth})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	var entries []syscallEntry
	for _, s := range rt.Syscalls() {
		entries = append(entries, syscallEntry{Name: s.Name, Number: fmt.Sprintf("0x%016x", s.Number), Core: s.Core})
	}
	if opts.json {
		return writeJSON(e, entries)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNUMBER\tLINKED")
	for _, s := range entries {
		linked := "when declared"
		if s.Core {
			linked = "always (core)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, s.Number, linked)
	}
	return tw.Flush()
}
