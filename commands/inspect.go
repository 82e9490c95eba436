package commands

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/manifest"
)

type inspectOptions struct {
	root  string
	state string // --state: "" for the directory root
	json  bool
	reg   registryOptions
	remote
}

func newInspectCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "show what a program says of itself, without compiling or running it",
		ArgsUsage: "FILE|NAME|REF",
		Description: `Prints the program's usage, its tools with their parameter schemas, the syscalls
and calls it declares, what the module imports, its size and digest. An argument
naming an existing file is read from that file, one with '/' is an OCI
reference (read from the registry's manifest, without pulling the program when
it carries berm's annotation), anything else is a deployed name.

   berm inspect ./echo.wasm
   berm inspect ghcr.io/org/example:v1
   berm inspect --json hello | jq '.tools[].name'
   berm inspect --server http://ci:7777 hello`,
		Flags: append(append([]cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print the manifest and module facts as JSON"},
		}, registryFlags()...), serverFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usagef("inspect takes one FILE|NAME")
			}
			reg, err := readRegistryFlags(cmd)
			if err != nil {
				return err
			}
			opts := inspectOptions{root: cmd.String("root"), state: stateFlag(cmd), json: cmd.Bool("json"), reg: reg, remote: readServerFlags(cmd)}
			return runInspect(ctx, e, opts, cmd.Args().First())
		},
	}
}

func runInspect(ctx context.Context, e *env, opts inspectOptions, arg string) error {
	d, err := inspect(ctx, e, opts, arg)
	if err != nil {
		return err
	}
	if opts.json {
		return writeJSON(e, d)
	}
	return printInspect(e, d)
}

func inspect(ctx context.Context, e *env, opts inspectOptions, arg string) (control.Details, error) {
	if isReference(arg) {
		return inspectReference(ctx, e, opts, arg)
	}
	if opts.err != nil {
		return control.Details{}, opts.err // a context that could not be resolved
	}
	if isPath(arg) { // read here, never asked of a server
		image, err := readImageFile(arg)
		if err != nil {
			return control.Details{}, err
		}
		d, err := service.Describe("", image, arg)
		if err != nil {
			return control.Details{}, fmt.Errorf("%s: %w", arg, err)
		}
		return d, nil
	}
	if err := checkTargetName(arg); err != nil {
		return control.Details{}, err
	}
	d, err := opts.open(ctx, e, opts.root, opts.state, existingRoot, opts.reg)
	if err != nil {
		return control.Details{}, err
	}
	defer d.Close()
	return d.Inspect(ctx, arg)
}

// inspectReference reads a registry image's manifest: from berm's
// annotation without pulling the layer, or from the layer when there is none.
func inspectReference(ctx context.Context, e *env, opts inspectOptions, ref string) (control.Details, error) {
	c, err := newRegistryClient(e, opts.reg)
	if err != nil {
		return control.Details{}, err
	}
	img, err := c.Inspect(ctx, ref)
	if err != nil {
		return control.Details{}, err
	}
	m, err := manifest.Decode(img.ABI)
	if err != nil {
		return control.Details{}, fmt.Errorf("%s: %w", ref, err)
	}
	return control.Details{Digest: img.Digest, Size: int(img.Size), Source: pinned(img), Manifest: m}, nil
}

func printInspect(e *env, out control.Details) error {
	// Everything below but the digest and size comes from the image.
	w := printableWriter{e.stdout}
	if out.Name != "" {
		fmt.Fprintf(w, "name:      %s\n", out.Name)
	}
	fmt.Fprintf(w, "digest:    %s\n", out.Digest)
	fmt.Fprintf(w, "size:      %s\n", formatSize(int64(out.Size)))
	if out.Source != "" {
		fmt.Fprintf(w, "source:    %s\n", printable(out.Source))
	}
	fmt.Fprintf(w, "syscalls:  %s\n", listOrNone(out.Syscalls))
	fmt.Fprintf(w, "calls:     %s\n", listOrNone(out.Calls))
	if out.Name != "" {
		// Only a deployment has grants; an image alone is granted nothing.
		if lines := out.Grants.Lines(); len(lines) == 0 {
			fmt.Fprintf(w, "grants:    (none: no files, environment or network)\n")
		} else {
			fmt.Fprintf(w, "grants:\n%s\n", indent(strings.Join(lines, "\n"), "  "))
		}
		if initEachCall(out.Grants) {
			fmt.Fprintf(w, "start:     %s\n", startLine)
		}
	}
	if out.Imports != nil {
		fmt.Fprintf(w, "memory:    at least %s of 64 KiB\n", plural(int(out.MemoryPages), "page"))
	}
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
	switch {
	case out.Imports == nil:
		fmt.Fprintf(w, "  (not read: the registry's manifest says what the program declares, not what its module imports)\n")
	case len(out.Imports) == 0:
		fmt.Fprintf(w, "  (none)\n")
	}
	// Go's linker may import one function twice (its runtime and package
	// syscall each declare theirs): each is listed once, with the count.
	var lines []string
	count := map[string]int{}
	for _, imp := range out.Imports {
		var line string
		if imp.Type != nil {
			line = fmt.Sprintf("  %s.%s %s", imp.Module, imp.Name, imp.Type)
		} else {
			line = fmt.Sprintf("  %s.%s (%s)", imp.Module, imp.Name, imp.Kind)
		}
		if count[line] == 0 {
			lines = append(lines, line)
		}
		count[line]++
	}
	for _, line := range lines {
		if n := count[line]; n > 1 {
			line += fmt.Sprintf(" (imported %d times)", n)
		}
		fmt.Fprintln(w, line)
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
