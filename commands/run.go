package commands

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

type runOptions struct {
	root      string
	state     string // --state: "" for the directory root
	plainHTTP bool
	// grants are the flags', for a FILE or REF; a deployed NAME runs with
	// its deployment's.
	grants *sandbox.Grants
	limitOptions
}

func newRunCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "call one tool of a program and print its result",
		ArgsUsage: "NAME|FILE|REF TOOL [ARGS]",
		Description: `ARGS is a JSON object (default {}; - reads it from stdin). The program is
instantiated anew, runs the tool and is gone. A FILE runs without being
deployed, and so does a REF (pulled through the store), each with empty data of
its own that is thrown away after the call.

   berm run hello greet '{"name":"berm"}'
   echo '{"message":"hi"}' | berm run ./echo.wasm echo -
   berm run --timeout 500ms --memory 16MiB hello count

The result goes to stdout (exit 0); the program's failure to stderr (exit 1);
a host error (no such program or tool, arguments refused, trap, deadline) to
stderr (exit 2). berm.log lines, and what a WASI program writes to stdout and
stderr, go to stderr as they come.

A deployed NAME runs with the grants of its deployment, exactly as berm serve
runs it. A FILE or REF is granted nothing unless the grant flags say so:

   berm run --allow-dir ./notes:/notes ./files.wasm read '{"path":"/notes/a.md"}'

` + exitCodesHelp,
		Flags: append(append(limitFlags(), registryFlags()...), grantFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			opts := runOptions{root: cmd.String("root"), state: stateFlag(cmd), plainHTTP: cmd.Bool("plain-http"), limitOptions: readLimitFlags(cmd)}
			grants, err := readGrantFlags(cmd, false)
			if err != nil {
				return err
			}
			opts.grants = grants
			return runRun(ctx, e, opts, cmd.Args().Slice())
		},
	}
}

func runRun(ctx context.Context, e *env, opts runOptions, args []string) error {
	if len(args) == 1 {
		return missingTool(ctx, e, opts, args[0])
	}
	if len(args) < 2 || len(args) > 3 {
		return usagef("run takes NAME|FILE|REF TOOL [ARGS]")
	}
	limits, err := opts.limits()
	if err != nil {
		return err
	}
	callArgs := []byte("{}")
	if len(args) == 3 {
		callArgs = []byte(args[2])
		if args[2] == "-" {
			if callArgs, err = io.ReadAll(io.LimitReader(e.stdin, int64(limits.MaxArgs)+1)); err != nil {
				return fmt.Errorf("read arguments from stdin: %w", err)
			}
		}
	}
	st, err := openState(ctx, opts.root, opts.state, existingRoot)
	if err != nil {
		return err
	}
	if st == nil && !isDeployedName(args[0]) {
		// A file or reference runs without a deployment, but its compiled
		// code is cached under the root.
		if st, err = openState(ctx, opts.root, opts.state, createRoot); err != nil {
			return err
		}
	}
	defer closeState(st)
	t, err := loadTarget(ctx, e, opts.root, st, args[0], opts.plainHTTP)
	if err != nil {
		return err
	}
	grants := opts.grants
	if t.deployed != nil {
		if grants != nil {
			return withHint(usagef("%s is deployed: it runs with its deployment's grants", t.name),
				"deploy it again with the grants to change them, or run its file")
		}
		grants = t.deployed.Grants
	}
	onTerminal := isTerminal(e.stderr)
	cfg := runtimeConfig{depth: opts.maxCallDepth, limits: limits, log: func(_ context.Context, program, tool string, line []byte) {
		text := string(line)
		if onTerminal {
			text = printable(text)
		}
		fmt.Fprintf(e.stderr, "%s.%s: %s\n", program, tool, text)
	}, refused: func(_ context.Context, program, why string) {
		fmt.Fprintf(e.stderr, "berm: warning: %s: %s\n", program, printable(why))
	}, logger: stderrLogger(e)}
	if t.deployed == nil {
		// A file or reference has no deployment, so no data of its own:
		// give it a throwaway store.
		scratch, err := os.MkdirTemp("", "berm-run-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(scratch)
		if cfg.kv, err = store.Open(scratch); err != nil {
			return err
		}
	}
	rt, err := newRuntime(ctx, opts.root, st, cfg)
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	p, err := rt.Deploy(ctx, t.name, t.image, grants)
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if err := deployCallees(ctx, rt, st, p.Manifest); err != nil {
		return err
	}
	out, err := rt.Call(ctx, t.name, args[1], callArgs)
	if err != nil {
		return err
	}
	if out.Failed {
		return &programFailure{message: string(out.Failure)}
	}
	if _, err := e.stdout.Write(out.Result); err != nil {
		return outputError{err}
	}
	if isTerminal(e.stdout) && len(out.Result) > 0 && out.Result[len(out.Result)-1] != '\n' {
		fmt.Fprintln(e.stdout)
	}
	return nil
}

// missingTool explains `berm run NAME` without a tool: the program's tools,
// or, for a served name such as hello_greet, how to spell it here.
func missingTool(ctx context.Context, e *env, opts runOptions, arg string) error {
	err := usagef("run takes NAME|FILE|REF TOOL [ARGS]")
	st, serr := openState(ctx, opts.root, opts.state, existingRoot)
	if serr != nil {
		return err
	}
	defer closeState(st)
	if t, lerr := loadTarget(ctx, e, opts.root, st, arg, opts.plainHTTP); lerr == nil {
		if m, merr := manifest.Read(t.image); merr == nil {
			return withHint(err, "%s has the tools %s", t.name, strings.Join(m.ToolNames(), ", "))
		}
	}
	if st == nil {
		return err // nothing deployed to suggest
	}
	for _, sep := range []string{"_", "."} {
		if program, tool, ok := strings.Cut(arg, sep); ok {
			if _, derr := st.Deployment(program); derr == nil {
				return withHint(err, "did you mean `berm run %s %s`?", program, tool)
			}
		}
	}
	return err
}

// stderrLogger logs the host's errors that a program is not shown, for the
// user to read beside the program's own failure: one short line each.
func stderrLogger(e *env) *slog.Logger {
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// isTerminal reports whether w is a terminal, where output should end a line.
func isTerminal(w io.Writer) bool {
	if o, ok := w.(*outputWriter); ok {
		w = o.w
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
