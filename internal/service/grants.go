package service

import (
	"fmt"
	"strings"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// grantWarnings names the grants a program cannot use, and the declared
// reach no grant serves, so that the deployer sees a mismatch before a call
// meets it.
func grantWarnings(name string, m *manifest.Manifest, g *sandbox.Grants) []string {
	wasi := map[string]bool{}
	for _, imp := range m.Imports {
		if imp.Module == "wasi_snapshot_preview1" {
			wasi[imp.Name] = true
		}
	}
	var out []string
	unused := func(what, needs string) {
		out = append(out, fmt.Sprintf("%s is granted %s but %s: it cannot use them", name, what, needs))
	}
	if len(g.Dirs) > 0 && !wasi["path_open"] {
		unused("directories", "imports no WASI file functions (path_open)")
	}
	if (len(g.Env) > 0 || g.Cwd != "") && !wasi["environ_get"] {
		unused("environment variables or a working directory", "does not read its environment (WASI environ_get)")
	}
	if len(g.Args) > 0 && !wasi["args_get"] {
		unused("arguments", "does not read them (WASI args_get)")
	}
	if len(g.Hosts) > 0 && !m.Declares(host.SysHTTP) {
		unused("network hosts", "does not declare "+host.SysHTTP)
	}
	for _, h := range g.Hosts {
		hostname, _, _ := strings.Cut(h, ":")
		if hostname == "localhost" || strings.HasSuffix(hostname, ".localhost") {
			out = append(out, fmt.Sprintf("%s is granted %s, which resolves to a loopback address: berm.http refuses it unless the address itself is granted (--allow-host 127.0.0.1:PORT)", name, h))
		}
	}
	if m.Declares(host.SysHTTP) && len(g.Hosts) == 0 {
		out = append(out, fmt.Sprintf("%s declares %s but is granted no host: every request it makes will be refused (--allow-host)", name, host.SysHTTP))
	}
	return out
}
