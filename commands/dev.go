package commands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

	"github.com/berm-dev/berm/runtime/sandbox"
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
(notifications/tools/list_changed). A save that changes nothing a build
reads (an editor's second write of the same bytes, a touch) is not built
again. Ctrl-C ends it; the deployment stays.

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
	if opts.err != nil {
		return opts.err // a context that could not be resolved
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
	var built string            // the sources the last cycle built, or ""
	cycle := func() {
		// One save can reach here as two bursts of events (an editor
		// that writes a file twice, or touches it after): a build of the
		// same sources would only say again what the last one said.
		src, ok := sources(dir, p.Wasm)
		if ok && src == built {
			return
		}
		built = src
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
	built, err := buildProject(ctx, buildOptions{root: opts.root, stderr: e.stderr}, dir)
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
	var before *sandbox.Grants // what berm.toml does not grant, and the deployment did
	if grants == nil {
		before = deployedGrants(ctx, e, opts, p.Name)
	}
	info, err := deployImage(ctx, e, deployOptions{root: opts.root, state: opts.state, remote: opts.remote}, p.Name, image, built.Path, grants)
	if err != nil {
		return "", err
	}
	for _, w := range info.Warnings {
		fmt.Fprintf(e.stderr, "berm: warning: %s\n", printable(w))
	}
	if before != nil && len(before.Lines()) > 0 {
		// The warning above said they are dropped: berm dev deploys what
		// berm.toml grants, and a deploy's flags live nowhere else.
		fmt.Fprintf(e.stderr, "berm: hint: berm dev grants what %s grants, no more: to keep them, add these lines to it:\n%s\n",
			p.path, indent(sandboxTOML(before, filepath.Dir(p.path), opts.server != ""), "    "))
	}
	fmt.Fprintf(e.stderr, "berm dev: deployed %s %s (%s) in %s\n", p.Name, info.Digest, strings.Join(built.Tools, ", "), time.Since(start).Round(time.Millisecond))
	return deployed, nil
}

// deployedGrants are the grants of the deployment of name, or nil when
// there is none or it cannot be read: only a hint depends on them.
func deployedGrants(ctx context.Context, e *env, opts devOptions, name string) *sandbox.Grants {
	d, err := opts.open(ctx, e, opts.root, opts.state, existingRoot, registryOptions{})
	if err != nil {
		return nil
	}
	defer d.Close()
	details, err := d.Inspect(ctx, name)
	if err != nil {
		return nil
	}
	return details.Grants
}

// sandboxTOML is berm.toml's [sandbox] granting what g grants, each host
// directory under dir (the project's) relative to it; a server's are its
// own, absolute.
func sandboxTOML(g *sandbox.Grants, dir string, remote bool) string {
	var b strings.Builder
	b.WriteString("[sandbox]\n")
	list := func(key string, values []string) {
		if len(values) == 0 {
			return
		}
		quoted := make([]string, len(values))
		for i, v := range values {
			quoted[i] = tomlString(v)
		}
		fmt.Fprintf(&b, "%-11s = [%s]\n", key, strings.Join(quoted, ", "))
	}
	list("allow_hosts", g.Hosts)
	var env []string
	for _, e := range g.Env {
		if e.Value != nil {
			env = append(env, e.Name+"="+*e.Value)
		} else {
			env = append(env, e.Name)
		}
	}
	list("env", env)
	list("args", g.Args)
	if g.Cwd != "" {
		fmt.Fprintf(&b, "%-11s = %s\n", "initial_cwd", tomlString(g.Cwd))
	}
	for _, d := range g.Dirs {
		host := d.Host
		if rel, err := filepath.Rel(dir, host); !remote && err == nil && filepath.IsLocal(rel) {
			host = "./" + filepath.ToSlash(rel)
		}
		perms := "read_only"
		if d.Write {
			perms = "read_write"
		}
		fmt.Fprintf(&b, "[[sandbox.preopens]]\nhost_path  = %s\nguest_path = %s\nperms      = %s\n",
			tomlString(host), tomlString(d.Guest), tomlString(perms))
	}
	return b.String()
}

// tomlString is s as a TOML basic string, whose escapes are JSON's.
func tomlString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// maxSources bounds the bytes sources reads: past it a tree is built at
// every change, as it would be without the check.
const maxSources = 64 << 20

// sources returns a digest of the files under dir that a change to is
// relevant, their names and bytes, as watchTree and relevant see the tree;
// ok is false when they could not be read or are over maxSources.
func sources(dir, wasm string) (digest string, ok bool) {
	h := sha256.New()
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone while walked
			}
			return err
		}
		if d.IsDir() {
			if path != dir && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !relevant(dir, wasm, path) || !d.Type().IsRegular() && !isRegularLink(d, path) {
			return nil // never a FIFO, which would block the read
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if total += int64(len(b)); total > maxSources {
			return errSourcesTooLarge
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "%q %d\n", filepath.ToSlash(rel), len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", false
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

var errSourcesTooLarge = errors.New("sources over maxSources")

// isRegularLink reports whether d, at path, is a symbolic link to a regular
// file, which a build reads through.
func isRegularLink(d fs.DirEntry, path string) bool {
	if d.Type()&fs.ModeSymlink == 0 {
		return false
	}
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular()
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
