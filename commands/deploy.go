package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/registry"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

type deployOptions struct {
	root    string
	state   string // --state: "" for the directory root
	example string
	json    bool
	reg     registryOptions
	// grants are the flags'; berm.toml's [sandbox] adds to them.
	grants *sandbox.Grants
	remote
}

func newDeployCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "deploy",
		Usage:     "deploy a program under a name, from a file or a registry",
		ArgsUsage: "[NAME FILE|REF]",
		Description: `Checks the image against ABI.md, this host and MCP, compiles it (so the first
call is fast), stores it by digest and records NAME -> digest and where it came
from. Prints the digest. Deploying a name again replaces it; an invalid image or
name changes nothing. A running berm serve picks the change up within a second.

   berm deploy echo ./echo.wasm
   berm deploy example ghcr.io/org/example:v1      # pulled, pinned by digest
   berm deploy --example hello                     # the example this binary carries
   berm deploy                                     # berm.toml: wasm under name
   berm deploy --server http://ci:7777 echo ./echo.wasm

A REF (an argument with '/' that is no file) is pulled through the store: a
digest already held is not fetched again. With --server, a FILE is uploaded and
a REF is pulled by the server with its own credentials; without arguments,
berm.toml's wasm is pushed to its image and the server deploys that.

berm.toml, in the current directory:

   name  = "example"               # the name it deploys under
   image = "ghcr.io/org/example"   # where berm push puts it (tag latest)
   wasm  = "example.wasm"          # the built module (default NAME.wasm)

   [sandbox]                       # its grants, as the flags below give them
   allow_hosts = ["api.example.com"]
   env         = ["TZ", "MODE=fast"]
   args        = ["-v"]
   initial_cwd = "/data"
   [[sandbox.preopens]]
   host_path  = "./data"           # relative to berm.toml
   guest_path = "/data"
   perms      = "read_only"        # or "read_write"

Before the digest, deploy prints what the program says it will reach for (its
declared syscalls and calls, its WASI imports) beside what this deployment
grants, then a start: line when _initialize runs at every call (below), and
warns about a grant it cannot use.

Initialization: a program that exports _initialize (a Go program, say) is
initialized once in each process that serves it (berm serve, berm run), at
its first call, and every call starts from a copy of the state it left, which
saves the initialization's time on each call (milliseconds for Go). Deploy
runs it too, with the deployment's grants (what it writes to a granted
directory, it writes then too), to check that it can be snapshotted, and
warns when it cannot.
What _initialize read from the host is then frozen from its first call on:
the clock, random seeds (the top-level functions of Go's math/rand and
math/rand/v2 return the same numbers at every call), the environment.
Randomness a call asks for itself (crypto/rand, or a generator the tool seeds
from it) stays fresh. --init-each-call runs _initialize at the start of every call instead,
at that cost, so that it reads them afresh. Reading an environment variable
from berm's own environment (--allow-env NAME) does the same.

` + grantsHelp,
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "example", Usage: "deploy the embedded example `NAME` (under that name unless NAME is given)"},
			&cli.BoolFlag{Name: "json", Usage: `print {"name", "digest", "tools", "source", "grants", "syscalls", "calls", "imports", "warnings"}`},
			&cli.BoolFlag{Name: "init-each-call", Usage: "run the program's _initialize at the start of every call instead of once at the first (see Initialization, above)"},
		}, registryFlags()...), append(serverFlags(), grantFlags()...)...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.IsSet("example") && cmd.String("example") == "" {
				// Not the same as no --example, which deploys berm.toml.
				return withHint(usagef("--example needs a NAME"), "%s", examplesHint())
			}
			reg, err := readRegistryFlags(cmd)
			if err != nil {
				return err
			}
			opts := deployOptions{
				root:    cmd.String("root"),
				state:   stateFlag(cmd),
				example: cmd.String("example"),
				json:    cmd.Bool("json"),
				reg:     reg,
				remote:  readServerFlags(cmd),
			}
			grants, err := readGrantFlags(cmd, opts.server != "")
			if err != nil {
				return err
			}
			if cmd.Bool("init-each-call") {
				if grants == nil {
					grants = &sandbox.Grants{}
				}
				grants.InitEachCall = true
			}
			opts.grants = grants
			return runDeploy(ctx, e, opts, cmd.Args().Slice())
		},
	}
}

func runDeploy(ctx context.Context, e *env, opts deployOptions, args []string) error {
	var info control.Info
	var err error
	switch {
	case opts.example != "" && len(args) <= 1:
		info, err = deployExample(ctx, e, opts, args)
	case opts.example == "" && len(args) == 2:
		info, err = deployArg(ctx, e, opts, args[0], args[1])
	case opts.example == "" && len(args) == 0:
		info, err = deployProject(ctx, e, opts)
	default:
		err := usagef("deploy takes NAME FILE|REF, --example NAME [NAME], or nothing (berm.toml)")
		switch {
		case opts.example != "" || len(args) != 1:
		case isFile(args[0]):
			return withHint(err, "give the program its name first: berm deploy %s %s", nameFromFile(args[0]), args[0])
		case isExample(args[0]):
			return withHint(err, "%s is an example this binary carries: berm deploy --example %s", args[0], args[0])
		}
		return err
	}
	if err != nil {
		return err
	}
	if opts.json {
		for _, w := range info.Warnings {
			fmt.Fprintf(e.stderr, "berm: warning: %s\n", printable(w))
		}
		return writeJSON(e, info)
	}
	printReach(e.stderr, reachFor(info.Syscalls, info.Calls, info.Imports), info.Grants.Lines())
	if initEachCall(info.Grants) {
		fmt.Fprintf(e.stderr, "  start: %s\n", startLine)
	}
	for _, w := range info.Warnings {
		fmt.Fprintf(e.stderr, "berm: warning: %s\n", printable(w))
	}
	fmt.Fprintln(e.stdout, info.Digest)
	return nil
}

// deployExample deploys the embedded example under its name, or [NAME].
func deployExample(ctx context.Context, e *env, opts deployOptions, args []string) (control.Info, error) {
	name := opts.example
	if len(args) == 1 {
		name = args[0]
	}
	image, err := exampleImage(opts.example)
	if err != nil {
		return control.Info{}, err
	}
	return deployImage(ctx, e, opts, name, image, "example:"+opts.example, opts.grants)
}

// deployArg deploys NAME FILE|REF.
func deployArg(ctx context.Context, e *env, opts deployOptions, name, arg string) (control.Info, error) {
	if err := manifest.CheckProgramName(name); err != nil {
		if isFile(name) {
			return control.Info{}, withHint(err, "the name comes first: berm deploy %s %s", nameFromFile(name), name)
		}
		return control.Info{}, err
	}
	if !isReference(arg) {
		image, err := readImageFile(arg)
		if err != nil {
			return control.Info{}, err
		}
		source, err := filepath.Abs(arg)
		if err != nil {
			return control.Info{}, err
		}
		return deployImage(ctx, e, opts, name, image, source, opts.grants)
	}
	d, err := opts.open(ctx, e, opts.root, opts.state, createRoot, opts.reg)
	if err != nil {
		return control.Info{}, err
	}
	defer d.Close()
	return d.DeployRef(ctx, name, arg, opts.grants)
}

// deployProject deploys what berm.toml describes: its wasm under its name,
// or, with --server, pushed to its image and deployed by the server from there.
func deployProject(ctx context.Context, e *env, opts deployOptions) (control.Info, error) {
	dir, err := os.Getwd()
	if err != nil {
		return control.Info{}, err
	}
	p, err := readProject(dir)
	if err != nil {
		return control.Info{}, err
	}
	if err := p.need("name"); err != nil {
		return control.Info{}, err
	}
	image, err := p.module()
	if err != nil {
		return control.Info{}, err
	}
	grants, err := p.grants(opts.server != "")
	if err != nil {
		return control.Info{}, err
	}
	grants = merge(grants, opts.grants)
	if opts.server == "" {
		return deployImage(ctx, e, opts, p.Name, image, p.Wasm, grants)
	}
	// Through a server, the module goes to berm.toml's image first. What
	// the server refuses whatever the image (no server there, a token it
	// does not take) is found before the push, not after it: readProject
	// checked the name.
	if err := p.need("image"); err != nil {
		return control.Info{}, err
	}
	server, err := opts.open(ctx, e, opts.root, opts.state, createRoot, opts.reg)
	if err != nil {
		return control.Info{}, err
	}
	defer server.Close()
	if _, err := server.List(ctx); err != nil {
		return control.Info{}, fmt.Errorf("%w (nothing pushed to %s)", err, p.Image)
	}
	rc, err := newRegistryClient(e, opts.reg)
	if err != nil {
		return control.Info{}, err
	}
	pushed, err := rc.Push(ctx, p.Image, image, &registry.PushOptions{Title: filepath.Base(p.Wasm)})
	if err != nil {
		return control.Info{}, err
	}
	fmt.Fprintf(e.stderr, "berm: pushed %s; %s deploys it as %s\n", pinned(pushed), opts.server, p.Name)
	return server.DeployRef(ctx, p.Name, pinned(pushed), grants)
}

// deployImage deploys image bytes here, or uploads them to --server.
func deployImage(ctx context.Context, e *env, opts deployOptions, name string, image []byte, source string, grants *sandbox.Grants) (control.Info, error) {
	if err := manifest.CheckProgramName(name); err != nil {
		return control.Info{}, err
	}
	d, err := opts.open(ctx, e, opts.root, opts.state, createRoot, opts.reg)
	if err != nil {
		return control.Info{}, err
	}
	defer d.Close()
	return d.Deploy(ctx, name, image, source, grants)
}

// deployLocal deploys into st, compiling into root's cache.
func deployLocal(ctx context.Context, root string, st store.State, name string, image []byte, source string, grants *sandbox.Grants) (control.Info, error) {
	rt, err := newRuntime(ctx, root, st, runtimeConfig{depth: runtime.DefaultCallDepth})
	if err != nil {
		return control.Info{}, err
	}
	defer rt.Close(ctx)
	return newService(rt, st).Deploy(ctx, name, image, source, grants)
}

func writeJSON(e *env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
