package sandbox

import (
	"fmt"
	"strings"

	"github.com/berm-dev/berm/manifest"
)

// The host syscalls whose reach a deployment's grants decide, or that change
// what MCP's annotations say of a program (ABI.md); runtime/host implements
// them.
const (
	SysHTTP   = "berm.http"   // reaches the granted hosts
	SysSet    = "berm.set"    // writes the program's own data
	SysDelete = "berm.delete" // deletes from it
)

// kind is one kind of grant, described once: what it is called where a
// warning names it, whether a deployment grants it, and what in a program
// uses it.
type kind struct {
	what    string
	granted func(g *Grants) bool
	needs   string // what a program that cannot use it lacks
	uses    func(m *manifest.Manifest) bool
}

var kinds = []kind{
	{
		what:    "directories",
		granted: func(g *Grants) bool { return len(g.Dirs) > 0 },
		needs:   "imports no WASI file functions (path_open)",
		uses:    importsWASI("path_open"),
	},
	{
		what:    "environment variables or a working directory",
		granted: func(g *Grants) bool { return len(g.Env) > 0 || g.Cwd != "" },
		needs:   "does not read its environment (WASI environ_get)",
		uses:    importsWASI("environ_get"),
	},
	{
		what:    "arguments",
		granted: func(g *Grants) bool { return len(g.Args) > 0 },
		needs:   "does not read them (WASI args_get)",
		uses:    importsWASI("args_get"),
	},
	{
		what:    "network hosts",
		granted: (*Grants).Network,
		needs:   "does not declare " + SysHTTP,
		uses:    func(m *manifest.Manifest) bool { return m.Declares(SysHTTP) },
	},
}

func importsWASI(name string) func(m *manifest.Manifest) bool {
	return func(m *manifest.Manifest) bool {
		for _, imp := range m.Imports {
			if imp.Module == "wasi_snapshot_preview1" && imp.Name == name {
				return true
			}
		}
		return false
	}
}

// Warnings name the grants g gives a program (m, deployed under name) that
// it cannot use, and the reach it declares that no grant serves, so that the
// deployer sees a mismatch before a call meets it.
func Warnings(name string, m *manifest.Manifest, g *Grants) []string {
	var out []string
	for _, k := range kinds {
		if k.granted(g) && !k.uses(m) {
			out = append(out, fmt.Sprintf("%s is granted %s but %s: it cannot use them", name, k.what, k.needs))
		}
	}
	for _, h := range g.Hosts {
		hostname, _, _ := strings.Cut(h, ":")
		if hostname == "localhost" || strings.HasSuffix(hostname, ".localhost") {
			out = append(out, fmt.Sprintf("%s is granted %s, which resolves to a loopback address: %s refuses it unless the address itself is granted (--allow-host 127.0.0.1:PORT)", name, h, SysHTTP))
		}
	}
	if m.Declares(SysHTTP) && !g.Network() {
		out = append(out, fmt.Sprintf("%s declares %s but is granted no host: every request it makes will be refused (--allow-host)", name, SysHTTP))
	}
	return out
}

// Effects are what a program m may do to the world under grants g, for
// MCP's annotations: change something (a directory granted read-write, its
// own data), and reach the open world (a network host: berm.http sends any
// method, and a POST changes the world too).
func Effects(m *manifest.Manifest, g *Grants) (changes, openWorld bool) {
	openWorld = g.Network()
	changes = openWorld || g.Writable() || m.Declares(SysSet) || m.Declares(SysDelete)
	return changes, openWorld
}

// Unreached is true when m asks for the network and g grants no host: every
// request it makes is refused.
func Unreached(m *manifest.Manifest, g *Grants) bool { return m.Declares(SysHTTP) && !g.Network() }
