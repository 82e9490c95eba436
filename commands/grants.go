package commands

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// grantFlags are what a deployment (or a berm run of a file) grants its
// program. Each may be given more than once.
func grantFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "allow-dir", Usage: "let the program reach the host directory `HOST[:GUEST][:ro|:rw]` at GUEST (default the same path), read-only unless :rw"},
		&cli.StringSliceFlag{Name: "allow-env", Usage: "give the program the environment variable `NAME[=VALUE]`, with VALUE or else berm's own at each call"},
		&cli.StringSliceFlag{Name: "allow-host", Usage: "let the program reach `HOST[:PORT]` through berm.http (*.example.com for subdomains; ports 80 and 443 by default)"},
		&cli.StringSliceFlag{Name: "arg", Usage: "an `ARGUMENT` a WASI program reads after its name (repeat for more)"},
		&cli.StringFlag{Name: "cwd", Usage: "the working `DIR` a WASI program starts in (its PWD)"},
	}
}

const grantsHelp = `Grants (deny by default: a program reaches nothing but its arguments, its own
data and the clock unless its deployment grants more; every grant is recorded
with the deployment and shown by berm ls and berm inspect):

   --allow-dir ./data:/data          the host's ./data at /data, read-only
   --allow-dir /srv/notes:/notes:rw  read-write
   --allow-env TZ --allow-env MODE=fast
   --allow-host api.example.com --allow-host '*.example.org:8443'
   --arg -v --cwd /data              for WASI programs that read them

Redeploying without grants drops the ones the name had.`

// readGrantFlags parses the grant flags; remote says the paths name
// another machine's directories, so they must be absolute as given.
func readGrantFlags(cmd *cli.Command, remote bool) (*sandbox.Grants, error) {
	g := &sandbox.Grants{Args: cmd.StringSlice("arg"), Cwd: cmd.String("cwd")}
	for _, s := range cmd.StringSlice("allow-dir") {
		if host, _, _ := strings.Cut(s, ":"); remote && !filepath.IsAbs(host) {
			return nil, usagef("--allow-dir %s: with --server, give the absolute path of the server's directory", s)
		}
		d, err := sandbox.ParseDir(s)
		if err != nil {
			return nil, usagef("--allow-dir: %v", err)
		}
		if !remote {
			d = resolveLinks(d)
		}
		g.Dirs = append(g.Dirs, d)
	}
	for _, s := range cmd.StringSlice("allow-env") {
		v, err := sandbox.ParseEnv(s)
		if err != nil {
			return nil, usagef("--allow-env: %v", err)
		}
		g.Env = append(g.Env, v)
	}
	for _, s := range cmd.StringSlice("allow-host") {
		h, err := sandbox.ParseHost(s)
		if err != nil {
			return nil, usagef("--allow-host: %v", err)
		}
		g.Hosts = append(g.Hosts, h)
	}
	if g.IsZero() {
		return nil, nil
	}
	return g, nil
}

// resolveLinks records a granted directory here by its real path, so that a
// link the user named (~/notes -> /data/notes, say) is granted as what it
// points to now: a program is never granted a link, which could be pointed
// elsewhere after deploy. The guest path stays the one the user wrote.
func resolveLinks(d sandbox.Dir) sandbox.Dir {
	if real, err := filepath.EvalSymlinks(d.Host); err == nil {
		d.Host = real
	}
	return d
}

// merge adds b's grants to a's (berm.toml's [sandbox] and the flags); a
// working directory in b wins.
func merge(a, b *sandbox.Grants) *sandbox.Grants {
	if a.IsZero() {
		return b
	}
	if b.IsZero() {
		return a
	}
	out := *a
	out.Dirs = append(slices.Clip(a.Dirs), b.Dirs...)
	out.Env = append(slices.Clip(a.Env), b.Env...)
	out.Hosts = append(slices.Clip(a.Hosts), b.Hosts...)
	out.Args = append(slices.Clip(a.Args), b.Args...)
	if b.Cwd != "" {
		out.Cwd = b.Cwd
	}
	out.InitEachCall = a.InitEachCall || b.InitEachCall
	return &out
}

// reachFor lists what a program says it will reach for itself: declared
// syscalls and calls, and the WASI functions it imports, by what they reach.
func reachFor(syscalls, calls, imports []string) []string {
	var out []string
	for _, s := range syscalls {
		out = append(out, "syscall "+s)
	}
	for _, c := range calls {
		out = append(out, "calls "+c)
	}
	wasi := map[string]bool{}
	others := map[string]bool{} // by name: Go's linker imports some twice
	seen := map[string]bool{}
	for _, imp := range imports {
		module, name, _ := strings.Cut(imp, ".")
		if module != "wasi_snapshot_preview1" {
			if !seen[imp] {
				out = append(out, "import "+imp)
			}
			seen[imp] = true
			continue
		}
		if what, ok := wasiReach[name]; ok {
			wasi[what] = true
		} else {
			others[name] = true
		}
	}
	// One line for WASI: what a grant controls, then a count of the rest
	// (clocks, random, file descriptors).
	var parts []string
	for _, what := range []string{"files", "environment", "arguments", "output (logged)"} {
		if wasi[what] {
			parts = append(parts, what)
		}
	}
	if len(others) > 0 {
		parts = append(parts, plural(len(others), "more function"))
	}
	if len(parts) > 0 {
		out = append(out, "WASI "+strings.Join(parts, ", "))
	}
	return out
}

// wasiReach names what a WASI import reaches for that a grant controls.
var wasiReach = map[string]string{
	"path_open":      "files",
	"environ_get":    "environment",
	"args_get":       "arguments",
	"fd_write":       "output (logged)",
	"fd_prestat_get": "files",
}

// printReach prints, side by side, what the program reaches for and what
// its deployment grants.
func printReach(w io.Writer, reach, granted []string) {
	if len(reach) == 0 && len(granted) == 0 {
		return
	}
	if len(granted) == 0 {
		granted = []string{"nothing"}
	}
	if len(reach) == 0 {
		reach = []string{"nothing beyond the core syscalls"}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "  IT REACHES FOR\tGRANTED")
	for i := range max(len(reach), len(granted)) {
		var l, r string
		if i < len(reach) {
			l = reach[i]
		}
		if i < len(granted) {
			r = granted[i]
		}
		fmt.Fprintf(tw, "  %s\t%s\n", printable(l), printable(r))
	}
	tw.Flush()
}

// initEachCall reports whether a deployment runs _initialize at every call
// (--init-each-call): a setting shown apart from its grants, which it is not.
func initEachCall(g *sandbox.Grants) bool { return g != nil && g.InitEachCall }

// startLine says when a deployment's _initialize runs, for berm deploy and
// berm inspect; shown only when it is not the usual once per process.
const startLine = "_initialize at every call (--init-each-call)"

// imports lists a manifest's imports as module.name.
func imports(m *manifest.Manifest) []string {
	out := make([]string, 0, len(m.Imports))
	for _, imp := range m.Imports {
		if imp.Module != "berm" {
			out = append(out, imp.Module+"."+imp.Name)
		}
	}
	return out
}
