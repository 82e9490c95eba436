package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/mcpserve"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

type buildOptions struct {
	root string
	json bool
	// stderr hears what a build says as it goes (the Rust toolchain it
	// took, when not the first found); nil discards it.
	stderr io.Writer
	// times, when set, receives where the time went (benchmarks).
	times *buildTimes
}

// buildTimes is where a build's time went.
type buildTimes struct {
	goBuildTimes
	// attach and validate are berm's own work after the module is built.
	attach, validate time.Duration
}

// buildOutput is what `berm build --json` prints.
type buildOutput struct {
	Path     string   `json:"path"`
	Digest   string   `json:"digest"`
	Size     int      `json:"size"`
	Tools    []string `json:"tools"`
	Warnings []string `json:"warnings,omitempty"` // also printed to stderr
}

const buildHelp = `Builds the program of the project in DIR (the current directory by default),
attaches its manifest, checks the image as berm deploy would (running its
_initialize, without grants, to warn if it traps or cannot be snapshotted),
writes it to berm.toml's wasm, and prints its path and digest. The same
sources build the same bytes with the same Go.

   berm build
   berm build --json ./notes       # {"path", "digest", "size", "tools", "warnings"}

Go (lang = "go", the default): the package in DIR is built with the go
command on your PATH (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared -trimpath
-buildvcs=false). Its manifest comes from what the program registers with the
SDK, in an init function:

   berm.Usage("**notes** keeps notes. Reach for it to remember things.")
   berm.Syscalls("berm.get", "berm.set")   // the host syscalls it calls
   berm.Calls("search.query")              // the tools of others it calls
   berm.Tool("add", "Adds a note. Reach for it when ...", add)

Each tool's parameters are the JSON Schema of its argument type (a struct:
json names, omitempty for optional fields, descriptions in jsonschema:"..."
tags, a type with an Enum method for enums); berm writes the
berm_tool_<name> exports itself. A program that calls berm.Get, Set, Delete,
Now or HTTP without declaring the syscall, or berm.Call with no target
declared, is refused.

Rust (lang = "rust") and C (lang = "c"): the module is built with cargo or
clang (see the scaffold of berm new --lang), and the manifest is berm.toml's:

   lang     = "rust"
   usage    = "**notes** keeps notes. Reach for it to remember things."
   syscalls = ["berm.get", "berm.set"]
   calls    = []
   [[tools]]
   name        = "add"
   description = "Adds a note. Reach for it when ..."
   parameters  = '{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}'
   # or a table: [tools.parameters] type = "object" ...`

func newBuildCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:        "build",
		Usage:       "build the program of a project (berm.toml) into an image",
		ArgsUsage:   "[DIR]",
		Description: buildHelp,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: `print {"path", "digest", "size", "tools", "warnings"}`},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 1 {
				return usagef("build takes at most one DIR")
			}
			dir := cmd.Args().First()
			if dir == "" {
				dir = "."
			}
			return runBuild(ctx, e, buildOptions{root: cmd.String("root"), json: cmd.Bool("json"), stderr: e.stderr}, dir)
		},
	}
}

func runBuild(ctx context.Context, e *env, opts buildOptions, dir string) error {
	res, err := buildProject(ctx, opts, dir)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(e.stderr, "berm: warning: %s\n", printable(w))
	}
	if opts.json {
		return writeJSON(e, res)
	}
	path := res.Path
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, path); err == nil && filepath.IsLocal(rel) {
			path = rel
		}
	}
	fmt.Fprintf(e.stdout, "%s %s\n", path, res.Digest)
	return nil
}

// buildProject builds the project in dir, checks the image and writes it.
func buildProject(ctx context.Context, opts buildOptions, dir string) (buildOutput, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return buildOutput{}, err
	}
	p, err := readProject(abs)
	if err != nil {
		return buildOutput{}, err
	}
	times := opts.times
	if times == nil {
		times = &buildTimes{}
	}
	var module, payload []byte
	switch p.Lang {
	case "", "go":
		if p.Usage != "" || p.Syscalls != nil || p.Calls != nil || p.Tools != nil {
			return buildOutput{}, withHint(fmt.Errorf("%s: usage, syscalls, calls and tools are for lang rust and c", p.path),
				"a Go program registers them itself: berm.Usage, berm.Syscalls, berm.Calls, berm.Tool")
		}
		if opts.root != "" {
			// The project's go.mod may point at the SDK under the root
			// (berm new): put it back if the root lost it.
			if _, err := writeSDK(opts.root, "go"); err != nil {
				return buildOutput{}, err
			}
		}
		module, payload, err = buildGoModule(ctx, abs, &times.goBuildTimes)
	case "rust", "c":
		stderr := opts.stderr
		if stderr == nil {
			stderr = io.Discard
		}
		module, payload, err = buildOtherModule(ctx, stderr, p, abs)
	default:
		return buildOutput{}, fmt.Errorf("%s: lang %q: want \"go\", \"rust\" or \"c\"", p.path, p.Lang)
	}
	if err != nil {
		return buildOutput{}, err
	}
	start := time.Now()
	image, err := manifest.Attach(module, payload)
	if err != nil {
		return buildOutput{}, fmt.Errorf("build: %w", err)
	}
	times.attach = time.Since(start)
	start = time.Now()
	name := p.Name
	if name == "" {
		name = nameFromFile(p.Wasm)
	}
	m, warnings, err := checkImage(ctx, opts.root, name, image)
	if err != nil {
		return buildOutput{}, err
	}
	times.validate = time.Since(start)
	if err := writeFileAtomic(p.Wasm, image); err != nil {
		return buildOutput{}, err
	}
	return buildOutput{Path: p.Wasm, Digest: manifest.Digest(image), Size: len(image), Tools: m.ToolNames(), Warnings: warnings}, nil
}

// checkImage checks an image as berm deploy would (the ABI, this host's
// limits and syscalls, MCP's names and schemas), compiling it into the
// root's cache so that the deploy after is quick, and runs its _initialize
// as deploy does, to warn of a trap or a refused snapshot. It deploys
// nothing.
func checkImage(ctx context.Context, root, name string, image []byte) (*manifest.Manifest, []string, error) {
	// Only the root's cache is wanted, never --state's database: a build
	// deploys nothing.
	var st store.State
	if root != "" {
		var err error
		if st, err = openState(ctx, root, "", createRoot); err != nil {
			return nil, nil, err
		}
	}
	rt, err := newRuntime(ctx, root, st, runtimeConfig{depth: runtime.DefaultCallDepth})
	if err != nil {
		return nil, nil, err
	}
	defer rt.Close(ctx)
	prepared, err := rt.Prepare(ctx, name, image, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("build: the image: %w", err)
	}
	defer prepared.Close()
	if err := mcpserve.Checker(mcpserve.Underscore)(name, prepared.Manifest); err != nil {
		return nil, nil, fmt.Errorf("build: the image: %w", err)
	}
	// Without grants: a deploy's may let _initialize do what this one
	// cannot.
	var warnings []string
	if why := prepared.Warm(ctx); why != "" {
		warnings = append(warnings, name+": "+why,
			"berm build runs _initialize without grants; berm deploy runs it again with the deployment's")
	}
	return prepared.Manifest, warnings, nil
}

// buildOtherModule builds a Rust or C program with the functions of
// build_rust.go and build_c.go, and takes its manifest from berm.toml.
func buildOtherModule(ctx context.Context, stderr io.Writer, p *project, dir string) (module, payload []byte, err error) {
	payload, err = p.manifestPayload()
	if err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp("", "berm-build-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "raw.wasm")
	if p.Lang == "c" {
		err = buildCModule(ctx, dir, out)
	} else {
		err = buildRustModule(ctx, stderr, dir, out)
	}
	if err != nil {
		return nil, nil, err
	}
	module, err = os.ReadFile(out)
	return module, payload, err
}

// manifestPayload is the manifest berm.toml gives a Rust or C program.
func (p *project) manifestPayload() ([]byte, error) {
	if len(p.Tools) == 0 {
		return nil, withHint(fmt.Errorf("%s: no [[tools]]", p.path),
			"describe each tool: [[tools]] name = \"...\" description = \"...\" parameters = '{\"type\":\"object\"}'")
	}
	m := manifestPayload{Usage: p.Usage, Syscalls: p.Syscalls, Calls: p.Calls}
	for i, t := range p.Tools {
		mt := manifestTool{Name: t.Name, Description: t.Description}
		switch v := t.Parameters.(type) {
		case nil:
		case string:
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(v)); err != nil {
				return nil, fmt.Errorf("%s: tools[%d] (%q): parameters: %w", p.path, i, t.Name, err)
			}
			mt.Parameters = compact.Bytes()
		case map[string]any:
			// encoding/json sorts the keys: the same table, the same bytes.
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("%s: tools[%d] (%q): parameters: %w", p.path, i, t.Name, err)
			}
			mt.Parameters = b
		default:
			return nil, fmt.Errorf("%s: tools[%d] (%q): parameters: want a JSON string or a table, got %T", p.path, i, t.Name, v)
		}
		m.Tools = append(m.Tools, mt)
	}
	return m.encode()
}

// writeFileAtomic writes b to path through a temporary file renamed into
// place, so that a reader (berm dev's deploy, a watcher) never sees half.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
