package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/urfave/cli/v3"
	"golang.org/x/term"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

type runOptions struct {
	root  string
	state string // --state: "" for the directory root
	reg   registryOptions
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
			reg, err := readRegistryFlags(cmd)
			if err != nil {
				return err
			}
			opts := runOptions{root: cmd.String("root"), state: stateFlag(cmd), reg: reg, limitOptions: readLimitFlags(cmd)}
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
	t, err := loadTarget(ctx, e, opts.root, st, args[0], opts.reg)
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
		if cfg.kv, err = store.OpenDir(scratch); err != nil {
			return err
		}
	}
	rt, err := newRuntime(ctx, opts.root, st, cfg)
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	svc := newService(rt, st)
	p, err := svc.Throwaway(ctx, t.name, t.image, grants)
	if err != nil {
		if p == nil { // the program's own, not a callee's
			err = fmt.Errorf("%s: %w", args[0], err)
		}
		return err
	}
	if len(args) == 3 && args[2] == "-" && len(callArgs) > limits.MaxArgs {
		// Read from stdin no further than the limit: its real size is not
		// known, only that it is over.
		return fmt.Errorf("%s: %w: %w: more than %d bytes on stdin, limit %d bytes",
			manifest.FullName(t.name, args[1]), runtime.ErrArguments, runtime.ErrLimit, limits.MaxArgs, limits.MaxArgs)
	}
	out, err := svc.Call(ctx, t.name, args[1], callArgs)
	if err != nil {
		return callError(err, args[0], t.name, p.Manifest, args[1], callArgs)
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

// callError gives a call's error the fix for the program at hand: its
// tools for a tool it does not have, what its arguments must be like, how to
// see its parameters (arg is the program as the command line named it).
func callError(err error, arg, name string, m *manifest.Manifest, tool string, args []byte) error {
	inspect := "berm inspect " + shellWord(arg)
	switch {
	case errors.Is(err, runtime.ErrNoTool):
		tools := fmt.Sprintf("%s has the tools %s", name, strings.Join(m.ToolNames(), ", "))
		if s := suggestName(tool, m.ToolNames()); s != "" {
			return withHint(err, "did you mean `berm run %s %s`? %s", shellWord(arg), s, tools)
		}
		return withHint(err, "%s", tools)
	case errors.Is(err, manifest.ErrCostly):
		return withHint(err, "the tool's parameters schema is too costly to check for arguments like these: send them smaller or less deeply nested; `%s` shows the schema, which the program's author can simplify", inspect)
	case errors.Is(err, runtime.ErrLimit):
		return err // errors.go's hint names the flag
	case errors.Is(err, runtime.ErrArguments) && !isJSONObject(args):
		return withHint(err, "ARGS must be a JSON object, its keys in double quotes, as in '%s'", exampleArgs(m.Tool(tool)))
	case errors.Is(err, runtime.ErrArguments):
		return withHint(err, "`%s` shows each tool's parameters", inspect)
	}
	return err
}

// isJSONObject reports whether b is one JSON object.
func isJSONObject(b []byte) bool {
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(b)
}

// exampleArgs is a JSON object of one of t's parameters (its first required
// one, or the first by name), with a value of its type: what a user who
// wrote {name:"x"} or name=x meant.
func exampleArgs(t *manifest.Tool) string {
	if t == nil {
		return "{}"
	}
	var schema struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(t.Parameters, &schema) != nil || len(schema.Properties) == 0 {
		return "{}"
	}
	// A name longer than a hint should quote (the image's, up to its
	// schema's bound) is passed over.
	usable := func(n string) bool { _, ok := schema.Properties[n]; return ok && n != "" && len(n) <= 64 }
	name := ""
	for _, r := range schema.Required {
		if usable(r) {
			name = r
			break
		}
	}
	if name == "" {
		for n := range schema.Properties {
			if usable(n) && (name == "" || n < name) {
				name = n
			}
		}
	}
	if name == "" {
		return "{}"
	}
	typ := schema.Properties[name].Type
	if types, ok := typ.([]any); ok && len(types) > 0 {
		typ = types[0]
	}
	value := `"x"`
	switch typ {
	case "integer", "number":
		value = "1"
	case "boolean":
		value = "true"
	case "array":
		value = "[]"
	case "object":
		value = "{}"
	}
	key, _ := json.Marshal(name)
	return "{" + string(key) + ":" + value + "}"
}

// shellWord is s as one word of a shell command, quoted when it needs to be.
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@%+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
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
	if t, lerr := loadTarget(ctx, e, opts.root, st, arg, opts.reg); lerr == nil {
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

// isTerminal reports whether w is a terminal, where output should end a
// line. Not every character device is one: output to /dev/null or a serial
// port stays byte for byte.
func isTerminal(w io.Writer) bool {
	if o, ok := w.(*outputWriter); ok {
		w = o.w
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
