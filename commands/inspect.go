package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
)

type inspectOptions struct {
	root string
	json bool
}

// inspectOutput is what `berm inspect --json` prints.
type inspectOutput struct {
	Name   string `json:"name,omitempty"`
	Digest string `json:"digest"`
	Size   int    `json:"size"`
	Source string `json:"source,omitempty"`
	*manifest.Manifest
}

func newInspectCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "show what a program says of itself, without compiling or running it",
		ArgsUsage: "FILE|NAME",
		Description: `Prints the program's usage, its tools with their parameter schemas, the syscalls
and calls it declares, what the module imports, its size and digest. An argument
naming an existing file is read from that file, anything else is a deployed name.

   berm inspect ./echo.wasm
   berm inspect --json hello | jq '.tools[].name'`,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the manifest and module facts as JSON"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usagef("inspect takes one FILE|NAME")
			}
			return runInspect(ctx, e, inspectOptions{root: cmd.String("root"), json: cmd.Bool("json")}, cmd.Args().First())
		},
	}
}

func runInspect(_ context.Context, e *env, opts inspectOptions, arg string) error {
	st, err := store.Open(opts.root)
	if err != nil {
		return err
	}
	t, err := loadTarget(st, arg)
	if err != nil {
		return err
	}
	m, err := manifest.Read(t.image)
	if err != nil {
		return fmt.Errorf("%s: %w", arg, err)
	}
	out := inspectOutput{Digest: manifest.Digest(t.image), Size: len(t.image), Source: t.source, Manifest: m}
	if t.deployed != nil {
		out.Name = t.name
	}
	if opts.json {
		return writeJSON(e, out)
	}
	return printInspect(e, out)
}

func printInspect(e *env, out inspectOutput) error {
	w := e.stdout
	if out.Name != "" {
		fmt.Fprintf(w, "name:      %s\n", out.Name)
	}
	fmt.Fprintf(w, "digest:    %s\n", out.Digest)
	fmt.Fprintf(w, "size:      %s\n", formatSize(int64(out.Size)))
	if out.Source != "" {
		fmt.Fprintf(w, "source:    %s\n", out.Source)
	}
	fmt.Fprintf(w, "syscalls:  %s\n", listOrNone(out.Syscalls))
	fmt.Fprintf(w, "calls:     %s\n", listOrNone(out.Calls))
	fmt.Fprintf(w, "memory:    at least %d pages of 64 KiB\n", out.MemoryPages)
	if out.Usage != "" {
		fmt.Fprintf(w, "\nusage:\n%s\n", indent(out.Usage, "  "))
	}
	fmt.Fprintf(w, "\ntools:\n")
	for _, t := range out.Tools {
		fmt.Fprintf(w, "  %s\n", t.Name)
		if t.Description != "" {
			fmt.Fprintf(w, "%s\n", indent(t.Description, "    "))
		}
		fmt.Fprintf(w, "    parameters: %s\n", t.Parameters)
	}
	fmt.Fprintf(w, "\nimports:\n")
	if len(out.Imports) == 0 {
		fmt.Fprintf(w, "  (none)\n")
	}
	for _, imp := range out.Imports {
		if imp.Type != nil {
			fmt.Fprintf(w, "  %s.%s %s\n", imp.Module, imp.Name, imp.Type)
		} else {
			fmt.Fprintf(w, "  %s.%s (%s)\n", imp.Module, imp.Name, imp.Kind)
		}
	}
	return nil
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "(none)"
	}
	return strings.Join(items, ", ")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
