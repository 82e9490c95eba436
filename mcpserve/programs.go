package mcpserve

import (
	"context"
	"fmt"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

// ProgramInfo is a deployment as `berm ls --json` and the control API report
// it; the same shape whether the root is local or behind a server.
type ProgramInfo struct {
	Name   string   `json:"name"`
	Digest string   `json:"digest"`
	Tools  []string `json:"tools"`
	Source string   `json:"source,omitempty"`
	// Warnings are things a deploy let through but the user should know,
	// such as a declared syscall this host does not have.
	Warnings []string `json:"warnings,omitempty"`
	// Error is set by a listing when the deployment cannot be read back.
	Error string `json:"error,omitempty"`
}

// Details is what `berm inspect --json` and the control API say of one
// program: its identity and everything its manifest and module declare.
type Details struct {
	Name   string `json:"name,omitempty"`
	Digest string `json:"digest"`
	Size   int    `json:"size"`
	Source string `json:"source,omitempty"`
	*manifest.Manifest
}

// Describe reads an image's details without compiling it.
func Describe(name string, image []byte, source string) (Details, error) {
	m, err := manifest.Read(image)
	if err != nil {
		return Details{}, err
	}
	return Details{Name: name, Digest: manifest.Digest(image), Size: len(image), Source: source, Manifest: m}, nil
}

// Deploy is `berm deploy`, for the command line and the control API alike:
// it checks the image against the ABI, this host and MCP, compiles it (so
// that the first call finds it in the cache), stores it and records name ->
// digest, replacing what name had. A refused image changes nothing.
func Deploy(ctx context.Context, rt *runtime.Runtime, st *store.Store, name string, image []byte, source string, naming Naming) (ProgramInfo, error) {
	p, err := rt.Prepare(ctx, name, image)
	if err != nil {
		return ProgramInfo{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	defer p.Close()
	if err := Check(name, p.Manifest, naming); err != nil {
		return ProgramInfo{}, fmt.Errorf("deploy %s: %w", name, err)
	}
	digest, err := st.PutImage(image)
	if err != nil {
		return ProgramInfo{}, err
	}
	if err := st.Deploy(store.Deployment{Name: name, Digest: digest, Source: source}); err != nil {
		return ProgramInfo{}, err
	}
	info := ProgramInfo{Name: name, Digest: digest, Tools: p.Manifest.ToolNames(), Source: source}
	for _, s := range rt.UnknownSyscalls(p.Manifest) {
		info.Warnings = append(info.Warnings, fmt.Sprintf("%s declares syscall %s, which this host does not have: calls to it will trap", name, s))
	}
	return info, nil
}

// List reports every deployment in st. A deployment whose image cannot be
// read back is listed with its Error rather than hiding the others.
func List(st *store.Store) ([]ProgramInfo, error) {
	deployments, err := st.Deployments()
	if err != nil {
		return nil, err
	}
	out := make([]ProgramInfo, 0, len(deployments))
	for _, d := range deployments {
		info := ProgramInfo{Name: d.Name, Digest: d.Digest, Source: d.Source, Tools: []string{}}
		if image, err := st.Image(d.Digest); err != nil {
			info.Error = err.Error()
		} else if m, err := manifest.Read(image); err != nil {
			info.Error = err.Error()
		} else {
			info.Tools = m.ToolNames()
		}
		out = append(out, info)
	}
	return out, nil
}

// Inspect reads the details of the program deployed under name.
func Inspect(st *store.Store, name string) (Details, error) {
	d, err := st.Deployment(name)
	if err != nil {
		return Details{}, err
	}
	image, err := st.Image(d.Digest)
	if err != nil {
		return Details{}, err
	}
	return Describe(d.Name, image, d.Source)
}
