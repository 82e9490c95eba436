package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/pelletier/go-toml/v2"
	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/internal/control"
)

// contextsFile holds the contexts, their tokens and the current one, in the
// root. One file, always 0600: a token is a secret, and one rename changes
// a URL and its token together.
const contextsFile = "contexts.toml"

// maxContextsFile is far past any number of contexts a person keeps.
const maxContextsFile = 1 << 20

// localContext names the local root: `berm context use local` goes back to
// it, and `--context local` acts on it whatever BERM_SERVER says.
const localContext = "local"

// errNoContext: a context name that is not in contexts.toml.
var errNoContext = errors.New("no such context")

var contextName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// contexts is contexts.toml.
type contexts struct {
	Current  string                  `toml:"current,omitempty"`
	Contexts map[string]contextEntry `toml:"contexts,omitempty"`
}

type contextEntry struct {
	URL   string `toml:"url"`
	Token string `toml:"token,omitempty"`
}

const contextPrecedence = `Where deploy, ls, inspect, rm and search act, first given wins:

   --server URL         the flag
   --context NAME       the flag
   BERM_SERVER          the environment
   BERM_CONTEXT         the environment
   berm context use     the current context, kept in the root
   the local root       when none of them is given

Flags beat the environment, which beats what is kept. The token is --token or
BERM_TOKEN when given, else the context's own. The context "local" is the local
root: --context local acts on it whatever BERM_SERVER says.`

func newContextCommand(e *env) *cli.Command {
	usage := func(_ context.Context, _ *cli.Command, err error, _ bool) error { return usageError{err} }
	sub := []*cli.Command{
		{
			Name:      "add",
			Usage:     "add a context: a name for a berm server's URL and its token",
			ArgsUsage: "NAME URL",
			Description: `The token, if the server needs one, is read from stdin (one line), never from
the command line, where other users could see it.

   echo "$TOKEN" | berm context add prod https://berm.example.com --token-stdin
   berm context add ci http://ci.internal:7777`,
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "token-stdin", Usage: "read the server's bearer token from stdin"},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() != 2 {
					return usagef("context add takes NAME URL")
				}
				return runContextAdd(ctx, e, cmd.String("root"), cmd.Bool("token-stdin"), cmd.Args().Get(0), cmd.Args().Get(1))
			},
		},
		{
			Name:    "ls",
			Aliases: []string{"list"},
			Usage:   "list the contexts; * marks the current one (tokens are never printed)",
			Description: `   berm context ls
   berm context ls --json   # [{"name", "url", "has_token", "current"}]`,
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: `print [{"name", "url", "has_token", "current"}]`},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() > 0 {
					return usagef("context ls takes no arguments")
				}
				return runContextLs(ctx, e, cmd.String("root"), cmd.Bool("json"))
			},
		},
		{
			Name:      "use",
			Usage:     "make a context the current one (local: the local root)",
			ArgsUsage: "NAME",
			Description: `   berm context use prod
   berm context use local   # back to the local root`,
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() != 1 {
					return usagef("context use takes one NAME")
				}
				return runContextUse(ctx, e, cmd.String("root"), cmd.Args().First())
			},
		},
		{
			Name:      "rm",
			Usage:     "remove contexts and their tokens",
			ArgsUsage: "NAME...",
			Description: `Removing the current context makes the local root current.

   berm context rm prod`,
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() == 0 {
					return usagef("context rm takes one or more NAMEs")
				}
				return runContextRm(ctx, e, cmd.String("root"), cmd.Args().Slice())
			},
		},
		{
			Name:  "show",
			Usage: "say where deploy, ls, inspect, rm and search act, and what chose it",
			Description: `Takes the flags they take, so that it answers for the same command line.

   berm context show
   berm context show --context prod

` + contextPrecedence,
			Flags: append([]cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: `print {"context", "server", "from", "token"}`},
			}, serverFlags()...),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() > 0 {
					return usagef("context show takes no arguments")
				}
				return runContextShow(ctx, e, cmd.String("root"), cmd.Bool("json"), readServerFlags(cmd))
			},
		},
	}
	for _, c := range sub {
		c.OnUsageError = usage
		c.HideHelpCommand = true
	}
	return &cli.Command{
		Name:  "context",
		Usage: "name berm servers and choose the one deploy, ls, inspect, rm and search act on",
		Description: `A context is a name for a berm server (berm serve over HTTP): its URL and its
bearer token. They are kept in contexts.toml in the root, readable by its owner
only (0600). berm run and berm serve always act on the local root.

   echo "$TOKEN" | berm context add prod https://berm.example.com --token-stdin
   berm context use prod
   berm deploy echo ./echo.wasm        # deploys on prod
   berm ls --context local             # the local root, this once
   berm context ls

` + contextPrecedence,
		Commands: sub,
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usagef("context: no command %q (add, ls, use, rm, show)", cmd.Args().First())
			}
			return cli.ShowSubcommandHelp(cmd)
		},
	}
}

func runContextAdd(_ context.Context, e *env, root string, tokenStdin bool, name, rawURL string) error {
	if root == "" {
		return noRoot()
	}
	if err := checkContextName(name); err != nil {
		return err
	}
	u, err := checkContextURL(rawURL)
	if err != nil {
		return err
	}
	var token string
	if tokenStdin {
		if token, err = readPassword(e); err != nil {
			return err
		}
		if token == "" {
			return withHint(fmt.Errorf("context %s: no token on stdin", name), "pipe it in: echo \"$TOKEN\" | berm context add %s %s --token-stdin", name, u)
		}
	}
	cs, err := readContexts(root)
	if err != nil {
		return err
	}
	if _, ok := cs.Contexts[name]; ok {
		return withHint(fmt.Errorf("context %s: already exists", name), "remove it first: berm context rm %s", name)
	}
	if cs.Contexts == nil {
		cs.Contexts = map[string]contextEntry{}
	}
	cs.Contexts[name] = contextEntry{URL: u, Token: token}
	if err := writeContexts(root, cs); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "added context %s (%s)\n", name, u)
	return nil
}

// checkContextName refuses what could not be typed back, and local.
func checkContextName(name string) error {
	if name == localContext {
		return withHint(fmt.Errorf("context %s: the name of the local root", name), "choose another name")
	}
	if !contextName.MatchString(name) {
		return usagef("context name %q: want 1 to 63 of [A-Za-z0-9._-], starting with a letter or digit", name)
	}
	return nil
}

// checkContextURL accepts what the control API client accepts, without a
// trailing slash. It refuses a user or password in the URL: that is a
// secret that would be printed wherever the URL is.
func checkContextURL(raw string) (string, error) {
	s := strings.TrimSuffix(raw, "/")
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", withHint(fmt.Errorf("context URL %q: want http:// or https:// and a host", raw), "such as http://127.0.0.1:7777, where berm serve listens")
	}
	if u.User != nil {
		return "", withHint(fmt.Errorf("context URL %q: carries a user or password", raw), "give the token on stdin with --token-stdin instead")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", usagef("context URL %q: want no query or fragment", raw)
	}
	if _, err := control.NewClient(s, ""); err != nil {
		return "", usageError{err}
	}
	return s, nil
}

// contextLine is one context as ls --json prints it: never its token.
type contextLine struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	HasToken bool   `json:"has_token"`
	Current  bool   `json:"current"`
}

func runContextLs(_ context.Context, e *env, root string, asJSON bool) error {
	if root == "" {
		return noRoot()
	}
	cs, err := readContexts(root)
	if err != nil {
		return err
	}
	lines := []contextLine{{Name: localContext, Current: cs.Current == ""}}
	for _, name := range cs.names() {
		c := cs.Contexts[name]
		lines = append(lines, contextLine{Name: name, URL: c.URL, HasToken: c.Token != "", Current: cs.Current == name})
	}
	// The environment beats the current context; say so where it is shown.
	for _, v := range []string{"BERM_SERVER", "BERM_CONTEXT"} {
		if s := os.Getenv(v); s != "" {
			fmt.Fprintf(e.stderr, "berm: note: %s=%s overrides the current context\n", v, printable(s))
			break
		}
	}
	if asJSON {
		return writeJSON(e, lines)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tURL\tTOKEN")
	for _, l := range lines {
		mark, u, tok := " ", l.URL, "-"
		if l.Current {
			mark = "*"
		}
		if l.Name == localContext {
			u = root
		}
		if l.HasToken {
			tok = "yes"
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\n", mark, l.Name, printable(u), tok)
	}
	return tw.Flush()
}

func runContextUse(_ context.Context, e *env, root, name string) error {
	if root == "" {
		return noRoot()
	}
	cs, err := readContexts(root)
	if err != nil {
		return err
	}
	if name == localContext {
		if cs.Current == "" {
			fmt.Fprintln(e.stdout, "current context: local")
			return nil // no root created, no file written, for what is already so
		}
		cs.Current = ""
	} else {
		if _, ok := cs.Contexts[name]; !ok {
			return cs.unknown(name)
		}
		cs.Current = name
	}
	if err := writeContexts(root, cs); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "current context: %s\n", name)
	return nil
}

func runContextRm(_ context.Context, e *env, root string, names []string) error {
	if root == "" {
		return noRoot()
	}
	cs, err := readContexts(root)
	if err != nil {
		return err
	}
	for _, name := range names {
		if name == localContext {
			return usagef("context %s: the local root cannot be removed", name)
		}
		if _, ok := cs.Contexts[name]; !ok {
			return cs.unknown(name)
		}
	}
	wasCurrent := ""
	for _, name := range names {
		delete(cs.Contexts, name)
		if cs.Current == name {
			wasCurrent, cs.Current = name, ""
		}
	}
	if err := writeContexts(root, cs); err != nil {
		return err
	}
	for _, name := range names {
		fmt.Fprintf(e.stdout, "removed context %s\n", name)
	}
	if wasCurrent != "" {
		fmt.Fprintf(e.stderr, "berm: %s was the current context; the local root is current now\n", wasCurrent)
	}
	return nil
}

// contextShow is what context show prints.
type contextShow struct {
	Context string `json:"context,omitempty"`
	Server  string `json:"server,omitempty"`
	Root    string `json:"root,omitempty"`
	From    string `json:"from"`
	Token   string `json:"token"` // where it comes from, never the token
}

func runContextShow(_ context.Context, e *env, root string, asJSON bool, r remote) error {
	if r.err != nil {
		return r.err
	}
	s := contextShow{Context: r.context, Server: r.server, From: r.from, Token: "none"}
	if s.From == "" {
		s.From = "nothing given"
	}
	if r.server == "" {
		s.Root = root
		s.Context = localContext
	}
	switch {
	case r.token == "":
	case r.tokenGiven:
		s.Token = "--token or BERM_TOKEN"
	default:
		s.Token = "the context's"
	}
	if asJSON {
		return writeJSON(e, s)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	if s.Context != "" {
		fmt.Fprintf(tw, "context\t%s\n", s.Context)
	}
	if s.Server != "" {
		fmt.Fprintf(tw, "server\t%s\n", printable(s.Server))
		fmt.Fprintf(tw, "token\t%s\n", s.Token)
	} else {
		fmt.Fprintf(tw, "root\t%s\n", printable(s.Root))
	}
	fmt.Fprintf(tw, "from\t%s\n", s.From)
	return tw.Flush()
}

// serverChoice is every level that may name where a command acts, as given.
type serverChoice struct {
	flagServer, flagContext string // the flags
	envServer, envContext   string // BERM_SERVER, BERM_CONTEXT
	token                   string // --token or BERM_TOKEN
}

// resolveRemote applies the precedence of contextPrecedence. The root's
// contexts.toml is read only when a context decides, so --server and
// BERM_SERVER work whatever state it is in.
func resolveRemote(root string, c serverChoice) (remote, error) {
	given := remote{token: c.token, tokenGiven: c.token != ""}
	switch {
	case c.flagServer != "":
		given.server, given.from = c.flagServer, "--server"
		return given, nil
	case c.flagContext != "":
		return fromContext(root, c.flagContext, "--context", given)
	case c.envServer != "":
		given.server, given.from = c.envServer, "BERM_SERVER"
		return given, nil
	case c.envContext != "":
		return fromContext(root, c.envContext, "BERM_CONTEXT", given)
	case root == "":
		return given, nil // no root: no current context, and the command will say so
	}
	cs, err := readContexts(root)
	if err != nil {
		return remote{}, err
	}
	if cs.Current == "" {
		return given, nil
	}
	return cs.remote(cs.Current, "the current context (berm context use)", given)
}

func fromContext(root, name, from string, given remote) (remote, error) {
	if name == localContext {
		given.context, given.from = localContext, from
		return given, nil
	}
	if root == "" {
		return remote{}, noRoot()
	}
	cs, err := readContexts(root)
	if err != nil {
		return remote{}, err
	}
	return cs.remote(name, from, given)
}

// remote is where the context name sends a command; a token given beats the
// context's own.
func (cs contexts) remote(name, from string, given remote) (remote, error) {
	c, ok := cs.Contexts[name]
	if !ok {
		return remote{}, cs.unknown(name)
	}
	given.server, given.context, given.from = c.URL, name, from
	if given.token == "" {
		given.token = c.Token
	}
	return given, nil
}

// unknown is the error for a name not among the contexts, naming those that are.
func (cs contexts) unknown(name string) error {
	known := append([]string{localContext}, cs.names()...)
	return withHint(fmt.Errorf("context %q: %w (known: %s)", name, errNoContext, strings.Join(known, ", ")),
		"`berm context ls` lists them; `berm context add %s URL` adds it", name)
}

func (cs contexts) names() []string {
	var names []string
	for n := range cs.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// readContexts reads contexts.toml in root: empty when there is none.
// Reading creates nothing.
func readContexts(root string) (contexts, error) {
	var cs contexts
	path := filepath.Join(root, contextsFile)
	b, err := readSmallFile(path, maxContextsFile, "contexts file")
	if errors.Is(err, fs.ErrNotExist) {
		return cs, nil
	}
	if err != nil {
		return cs, err
	}
	if err := toml.Unmarshal(b, &cs); err != nil {
		return cs, withHint(fmt.Errorf("%s: %w", path, err), "fix it, or remove it and add the contexts again")
	}
	if cs.Current != "" {
		if _, ok := cs.Contexts[cs.Current]; !ok {
			return cs, withHint(fmt.Errorf("%s: the current context %q: %w", path, cs.Current, errNoContext), "berm context use local, or another context")
		}
	}
	return cs, nil
}

// writeContexts replaces contexts.toml in root, creating the root, through
// a temporary file (0600, as os.CreateTemp makes it) renamed into place: a
// reader sees the old file or the new, and the token is never readable by
// others, not even for a moment.
func writeContexts(root string, cs contexts) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(cs); err != nil {
		return err
	}
	return writeRootFile(root, contextsFile, b.Bytes())
}
