package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/internal/control"
)

type lsOptions struct {
	root  string
	state string // --state: "" for the directory root
	json  bool
	remote
}

func newLsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "ls",
		Usage: "list deployed programs",
		Description: `Prints NAME, DIGEST (the first 12 hex digits of the image's sha256), TOOLS,
GRANTS (what the deployment lets it reach: ro:/dir, rw:/dir, env:NAME,
net:host, args:N, cwd:/dir; - for nothing) and SOURCE (the file, reference
or example it was deployed from); and INIT before SOURCE when a program is
deployed with --init-each-call (each-call: its _initialize runs at every
call; - for the others, whose _initialize runs once per process, unless its
snapshot is refused, as berm deploy warns). --json has every grant in full.

   berm ls
   berm ls --json | jq -r '.[].name'
   berm ls --server http://ci:7777`,
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: `print [{"name", "digest", "tools", "grants", "source", ...}]`},
		}, serverFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usagef("ls takes no arguments")
			}
			return runLs(ctx, e, lsOptions{root: cmd.String("root"), state: stateFlag(cmd), json: cmd.Bool("json"), remote: readServerFlags(cmd)})
		},
	}
}

func runLs(ctx context.Context, e *env, opts lsOptions) error {
	list, err := listPrograms(ctx, e, opts)
	if err != nil {
		return err
	}
	for _, p := range list {
		if p.Error != "" {
			// One damaged image must not hide every other deployment.
			fmt.Fprintf(e.stderr, "berm: warning: %s: %s\n", printable(p.Name), printable(p.Error))
		}
	}
	if opts.json {
		return writeJSON(e, list)
	}
	// INIT is shown only when it says something: nearly every program
	// runs _initialize the usual way, or has none.
	showInit := slices.ContainsFunc(list, func(p control.Info) bool { return initEachCall(p.Grants) })
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if showInit {
		fmt.Fprintln(tw, "NAME\tDIGEST\tTOOLS\tGRANTS\tINIT\tSOURCE")
	} else {
		fmt.Fprintln(tw, "NAME\tDIGEST\tTOOLS\tGRANTS\tSOURCE")
	}
	for _, p := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", printable(p.Name), shortDigest(p.Digest), strings.Join(p.Tools, ","), printable(p.Grants.Short()))
		if showInit {
			initRuns := "-"
			if initEachCall(p.Grants) {
				initRuns = "each-call"
			}
			fmt.Fprintf(tw, "%s\t", initRuns)
		}
		fmt.Fprintf(tw, "%s\n", printable(p.Source))
	}
	return tw.Flush()
}

func listPrograms(ctx context.Context, e *env, opts lsOptions) ([]control.Info, error) {
	d, err := opts.open(ctx, e, opts.root, opts.state, existingRoot, registryOptions{})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.List(ctx)
}

// shortDigest is the first 12 hex digits of a digest, as ls prints it.
func shortDigest(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}
