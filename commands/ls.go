package commands

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
)

type lsOptions struct {
	root string
	json bool
}

// lsEntry is one deployment as `berm ls --json` prints it.
type lsEntry struct {
	Name   string   `json:"name"`
	Digest string   `json:"digest"`
	Tools  []string `json:"tools"`
	Source string   `json:"source,omitempty"`
	Error  string   `json:"error,omitempty"`
}

func newLsCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "ls",
		Usage: "list deployed programs",
		Description: `Prints NAME, DIGEST (the first 12 hex digits of the image's sha256) and TOOLS.

   berm ls
   berm ls --json | jq -r '.[].name'`,
		Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: `print [{"name", "digest", "tools", "source"}]`}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usagef("ls takes no arguments")
			}
			return runLs(ctx, e, lsOptions{root: cmd.String("root"), json: cmd.Bool("json")})
		},
	}
}

func runLs(_ context.Context, e *env, opts lsOptions) error {
	st, err := store.Open(opts.root)
	if err != nil {
		return err
	}
	deployments, err := st.Deployments()
	if err != nil {
		return err
	}
	entries := make([]lsEntry, 0, len(deployments))
	for _, d := range deployments {
		entry := lsEntry{Name: d.Name, Digest: d.Digest, Source: d.Source, Tools: []string{}}
		// One damaged image must not hide every other deployment.
		if m, err := readDeployed(st, d); err != nil {
			entry.Error = err.Error()
			fmt.Fprintf(e.stderr, "berm: warning: %s: %v\n", d.Name, err)
		} else {
			entry.Tools = m.ToolNames()
		}
		entries = append(entries, entry)
	}
	if opts.json {
		return writeJSON(e, entries)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDIGEST\tTOOLS")
	for _, entry := range entries {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", entry.Name, shortDigest(entry.Digest), strings.Join(entry.Tools, ","))
	}
	return tw.Flush()
}

// shortDigest is the first 12 hex digits of a digest, as ls prints it.
func shortDigest(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}

func readDeployed(st *store.Store, d store.Deployment) (*manifest.Manifest, error) {
	image, err := st.Image(d.Digest)
	if err != nil {
		return nil, err
	}
	return manifest.Read(image)
}
