package control

import (
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// Info is a deployment as `berm ls --json` and the control API report it;
// the same shape whether the root is local or behind a server.
type Info struct {
	Name   string   `json:"name"`
	Digest string   `json:"digest"`
	Tools  []string `json:"tools"`
	Source string   `json:"source,omitempty"`
	// Grants are what the deployment lets the program reach; absent for none.
	Grants *sandbox.Grants `json:"grants,omitempty"`
	// Syscalls, Calls and Imports are what the program says it will reach
	// for: its declared host syscalls and berm.call targets, and its imports
	// from modules other than berm (module.name).
	Syscalls []string `json:"syscalls,omitempty"`
	Calls    []string `json:"calls,omitempty"`
	Imports  []string `json:"imports,omitempty"`
	// Warnings are things a deploy let through but the user should know,
	// such as a declared syscall this host does not have.
	Warnings []string `json:"warnings,omitempty"`
	// Error is set by a listing when the deployment cannot be read back: a
	// damaged record or image. The other deployments are listed as usual.
	Error string `json:"error,omitempty"`
}

// Describe fills in what the manifest says.
func (info *Info) Describe(m *manifest.Manifest) {
	info.Tools = m.ToolNames()
	info.Syscalls = m.Syscalls
	info.Calls = m.Calls
	for _, imp := range m.Imports {
		if imp.Module != "berm" {
			info.Imports = append(info.Imports, imp.Module+"."+imp.Name)
		}
	}
}

// Details is what `berm inspect --json` and the control API say of one
// program: its identity and everything its manifest and module declare.
type Details struct {
	Name   string `json:"name,omitempty"`
	Digest string `json:"digest"`
	Size   int    `json:"size"`
	Source string `json:"source,omitempty"`
	// Grants are what the deployment lets it reach (a deployed program's).
	Grants *sandbox.Grants `json:"grants,omitempty"`
	*manifest.Manifest
}
