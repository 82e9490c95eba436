package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v3"
)

// Exit codes, the same in --help and the README.
const (
	exitOK      = 0
	exitFailure = 1 // the program's own failure (berm.fail)
	exitHost    = 2 // a host or usage error
)

const exitCodesHelp = `EXIT CODES:
   0  success
   1  the program failed (it called berm.fail); its message is on stderr
   2  a host or usage error: no such program or tool, arguments refused,
      a trap, the deadline, an invalid image, bad flags`

// env is what a command reads and writes besides its flags and arguments.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// Main runs the berm command line and returns its exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	out := &outputWriter{w: stdout}
	e := &env{stdin: stdin, stdout: out, stderr: stderr}
	err := newRootCommand(e).Run(ctx, args)
	// Output that did not reach stdout (a full disk, a closed pipe) is a
	// failure, whatever the command: whoever reads it would take a truncated
	// result for the whole one.
	if lost := out.failed(); lost != nil && (err == nil || errors.Is(err, lost)) {
		err = outputError{lost}
	}
	if err == nil {
		return exitOK
	}
	var failure *programFailure
	if errors.As(err, &failure) {
		msg := failure.message
		if isTerminal(stderr) {
			msg = printable(msg)
		}
		fmt.Fprintf(stderr, "%s\n", msg)
		return exitFailure
	}
	printError(stderr, err)
	return exitHost
}

func newRootCommand(e *env) *cli.Command {
	root := &cli.Command{
		Name:  "berm",
		Usage: "the OS for agent harnesses: deploy WebAssembly programs, run their tools, serve them over MCP",
		Description: `A program is one WebAssembly module (see ABI.md). berm pins it by sha256, compiles
it once and instantiates it anew for every call.

   berm deploy --example hello          # deploy the example the binary carries
   berm run hello greet '{"name":"you"}'
   berm ls

The state (deployments, images, programs' data) is the directory --root
unless --state names a PostgreSQL database that several berm serve replicas
share; berm deploy, ls, rm, inspect, run and search take it too:

   berm --state postgres://berm@db/berm deploy hello ./hello.wasm

` + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "root",
				Usage:   "directory of berm's state: images, deployments, compiled code, programs' data",
				Sources: cli.EnvVars("BERM_ROOT"),
				Value:   defaultRoot(),
			},
			&cli.StringFlag{
				Name:    "state",
				Usage:   stateFlagUsage,
				Sources: cli.EnvVars("BERM_STATE"),
			},
		},
		Reader:    e.stdin,
		Writer:    e.stdout,
		ErrWriter: e.stderr,
		// Errors are printed and mapped to exit codes by Main, never here.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		OnUsageError: func(_ context.Context, cmd *cli.Command, err error, _ bool) error {
			return flagError(cmd, err)
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				name := cmd.Args().First()
				err := usagef("unknown command %q", name)
				if s := suggestCommand(cmd, name); s != "" {
					return withHint(err, "did you mean `berm %s`? `berm --help` lists the commands", s)
				}
				return withHint(err, "`berm --help` lists the commands")
			}
			return cli.ShowAppHelp(cmd)
		},
		Commands: []*cli.Command{
			newDeployCommand(e),
			newLsCommand(e),
			newInspectCommand(e),
			newRunCommand(e),
			newRmCommand(e),
			newServeCommand(e),
			newContextCommand(e),
			newPushCommand(e),
			newLoginCommand(e),
			newLogoutCommand(e),
			newSyscallsCommand(e),
			newVersionCommand(e),
			newSearchCommand(e),
			newPublishCommand(e),
			newConfigCommand(e),
			newBuildCommand(e),
			newNewCommand(e),
			newDevCommand(e),
		},
	}
	for _, cmd := range root.Commands {
		// A program may be named help or h: below the root, cli's help
		// command would take those names from `berm rm h`. --help stays.
		cmd.HideHelpCommand = true
	}
	_ = root.Walk(func(cmd *cli.Command) error {
		if cmd == root {
			return nil
		}
		cmd.OnUsageError = root.OnUsageError
		if action := cmd.Action; action != nil {
			cmd.Action = func(ctx context.Context, cmd *cli.Command) error {
				return commandHint(cmd, action(ctx, cmd))
			}
		}
		return nil
	})
	return root
}

// commandHint gives a usage error of cmd's that has no hint of its own the
// command's help for one.
func commandHint(cmd *cli.Command, err error) error {
	var u usageError
	var h errorWithHint
	if err == nil || !errors.As(err, &u) || errors.As(err, &h) {
		return err
	}
	return withHint(err, "see `%s --help`", cmd.FullName())
}

// flagError is a mistake in cmd's flags, with its fix: the flag meant when
// one is near the one given, what a flag takes when it was given nothing,
// else the command's help.
func flagError(cmd *cli.Command, err error) error {
	u := usageError{err}
	help := "`" + cmd.FullName() + " --help` shows its flags"
	msg := err.Error()
	// cli's errors are the flag package's, which say only this much.
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		if s := suggestFlag(cmd, strings.TrimLeft(name, "-")); s != "" {
			return withHint(u, "did you mean %s? %s", s, help)
		}
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		if h := flagValueHint(cmd, strings.TrimLeft(name, "-")); h != "" {
			return withHint(u, "%s", h)
		}
	}
	return withHint(u, "%s", help)
}

// flagValueHint says what flag of cmd takes, for one given no value, where
// that is more than its help says; else "".
func flagValueHint(cmd *cli.Command, flag string) string {
	if cmd.Name == "deploy" && flag == "example" {
		return examplesHint()
	}
	return ""
}

// outputWriter keeps the first error writing stdout, so that Main fails a
// command whose output was lost even where the command did not check. It is
// locked: serve's goroutines write to it.
type outputWriter struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err != nil {
		o.err = err
	}
	return n, err
}

// failed is the first error writing, or nil.
func (o *outputWriter) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// printable replaces, in text a program wrote (its manifest, its failure,
// its log lines, its module's import names), the control characters a
// terminal acts on with their Go escapes: an image from a registry must not
// clear the screen, retitle the window or set the clipboard of whoever
// inspects it. Newlines and tabs stay; bytes that are not UTF-8 become
// U+FFFD, so no 8-bit C1 control gets through either.
func printable(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool { return r != '\n' && r != '\t' && unicode.IsControl(r) }

// printableWriter passes what is written through printable. A whole
// fmt.Fprintf arrives in one Write, so no character is split.
type printableWriter struct{ w io.Writer }

func (p printableWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, printable(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}

// defaultRoot is ~/.berm, or "" without a home directory: a root in
// whatever directory berm happens to run in would be a surprise, so the
// commands that need one ask for --root instead.
func defaultRoot() string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return ""
	}
	return filepath.Join(home, ".berm")
}
