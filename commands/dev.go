package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/urfave/cli/v3"
)

type devOptions struct {
	root  string
	state string // --state: "" for the directory root
	remote
	// debounce is how long the project must be quiet after a change before
	// it is rebuilt: an editor's save is several events.
	debounce time.Duration
}

func newDevCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "dev",
		Usage:     "build and deploy a project, then again on every save",
		ArgsUsage: "[DIR]",
		Description: `Builds the project in DIR (the current directory by default) as berm build
does, deploys it under berm.toml's name with berm.toml's grants, then watches
DIR and rebuilds and redeploys on every change. A build that fails prints its
error and keeps the last good deployment. A running berm serve (Claude Code's,
say) serves each new deployment within a second and tells its clients
(notifications/tools/list_changed). Ctrl-C ends it; the deployment stays.

   berm dev
   berm dev --server http://127.0.0.1:7777 ./notes   # the image is uploaded`,
		Flags: serverFlags(),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 1 {
				return usagef("dev takes at most one DIR")
			}
			dir := cmd.Args().First()
			if dir == "" {
				dir = "."
			}
			opts := devOptions{root: cmd.String("root"), state: stateFlag(cmd), remote: readServerFlags(cmd), debounce: 200 * time.Millisecond}
			return runDev(ctx, e, opts, dir)
		},
	}
}

func runDev(ctx context.Context, e *env, opts devOptions, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	p, err := readProject(dir)
	if err != nil {
		return err
	}
	if err := p.need("name"); err != nil {
		return err
	}
	if _, err := opts.client(); err != nil {
		return err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := watchTree(w, dir); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "berm dev: watching %s (ctrl-C ends)\n", dir)
	var last, lastDigest string // what was deployed last (devCycle's key), and its digest
	cycle := func() {
		if deployed, err := devCycle(ctx, e, opts, dir, last); err != nil {
			if ctx.Err() == nil {
				printError(e.stderr, err)
				if lastDigest != "" {
					fmt.Fprintf(e.stderr, "berm dev: %s stays deployed at %s\n", p.Name, lastDigest)
				}
			}
		} else {
			last = deployed
			lastDigest = strings.Fields(deployed)[1]
		}
	}
	cycle()
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(e.stderr, "berm dev: stopped")
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if !relevant(dir, p.Wasm, ev.Name) {
				continue
			}
			if ev.Has(fsnotify.Create) {
				if info, err := os.Stat(ev.Name); err == nil && info.IsDir() {
					_ = watchTree(w, ev.Name)
				}
			}
			timer = time.After(opts.debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			fmt.Fprintf(e.stderr, "berm dev: watching: %v\n", err)
		case <-timer:
			timer = nil
			cycle()
		}
	}
}

// devCycle builds and deploys dir unless what it would deploy is last; it
// returns what it deployed: "NAME DIGEST GRANTS".
func devCycle(ctx context.Context, e *env, opts devOptions, dir, last string) (string, error) {
	start := time.Now()
	// berm.toml is read anew: its name, grants or lang may have changed.
	p, err := readProject(dir)
	if err != nil {
		return "", err
	}
	if err := p.need("name"); err != nil {
		return "", err
	}
	built, err := buildProject(ctx, buildOptions{root: opts.root}, dir)
	if err != nil {
		return "", err
	}
	grants, err := p.grants(opts.server != "")
	if err != nil {
		return "", err
	}
	// What was deployed last: its name, image and grants, any of which an
	// edit of berm.toml or of the program changes.
	g, _ := json.Marshal(grants)
	deployed := p.Name + " " + built.Digest + " " + string(g)
	if deployed == last {
		fmt.Fprintf(e.stderr, "berm dev: built %s, unchanged (%s)\n", p.Name, built.Digest)
		return last, nil
	}
	image, err := readImageFile(built.Path)
	if err != nil {
		return "", err
	}
	info, err := deployImage(ctx, deployOptions{root: opts.root, state: opts.state, remote: opts.remote}, p.Name, image, built.Path, grants)
	if err != nil {
		return "", err
	}
	for _, w := range info.Warnings {
		fmt.Fprintf(e.stderr, "berm: warning: %s\n", printable(w))
	}
	fmt.Fprintf(e.stderr, "berm dev: deployed %s %s (%s) in %s\n", p.Name, info.Digest, strings.Join(built.Tools, ", "), time.Since(start).Round(time.Millisecond))
	return deployed, nil
}

// watchTree watches dir and every directory under it, but hidden ones and
// build output (target/, node_modules/).
func watchTree(w *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != dir && skipDir(d.Name()) {
			return filepath.SkipDir
		}
		return w.Add(path)
	})
}

func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "target" || name == "node_modules" || name == "testdata"
}

// relevant reports whether a change to path is the project's source: not
// the image berm build writes (nor its temporary file), not a hidden file
// or an editor's backup.
func relevant(dir, wasm, path string) bool {
	base := filepath.Base(path)
	if path == wasm || strings.HasPrefix(base, ".") || strings.HasSuffix(base, "~") ||
		strings.HasSuffix(base, ".swp") || strings.HasSuffix(base, ".wasm") {
		return false
	}
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return false
	}
	for _, part := range strings.Split(filepath.ToSlash(rel), "/")[:strings.Count(filepath.ToSlash(rel), "/")] {
		if skipDir(part) {
			return false
		}
	}
	return true
}
