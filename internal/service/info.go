package service

import (
	"context"
	"sort"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
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

// describe fills in what the manifest says.
func (info *Info) describe(m *manifest.Manifest) {
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

// Describe reads an image's details without compiling it.
func Describe(name string, image []byte, source string) (Details, error) {
	m, err := manifest.Read(image)
	if err != nil {
		return Details{}, err
	}
	return Details{Name: name, Digest: manifest.Digest(image), Size: len(image), Source: source, Manifest: m}, nil
}

// List reports every deployment, by name. A deployment that cannot be read
// back (a damaged record, a damaged or missing image) is listed with its
// Error rather than hiding the others.
func (s *Service) List(ctx context.Context) ([]Info, error) {
	deployments, damaged, err := s.st.Deployments()
	if err != nil {
		return nil, err
	}
	out := make([]Info, 0, len(deployments)+len(damaged))
	for _, d := range deployments {
		info := Info{Name: d.Name, Digest: d.Digest, Source: d.Source, Grants: d.Grants, Tools: []string{}}
		if image, err := s.st.Image(d.Digest); err != nil {
			info.Error = err.Error()
		} else if m, err := manifest.Read(image); err != nil {
			info.Error = err.Error()
		} else {
			info.describe(m)
		}
		out = append(out, info)
	}
	for _, d := range damaged {
		out = append(out, Info{Name: d.Name, Tools: []string{}, Error: d.Err.Error()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Inspect reads the details of the program deployed under name.
func (s *Service) Inspect(ctx context.Context, name string) (Details, error) {
	d, image, err := s.Deployed(name)
	if err != nil {
		return Details{}, err
	}
	details, err := Describe(d.Name, image, d.Source)
	details.Grants = d.Grants
	return details, err
}

// Deployed returns the deployment under name and its image, checked.
func (s *Service) Deployed(name string) (store.Deployment, []byte, error) {
	d, err := s.st.Deployment(name)
	if err != nil {
		return store.Deployment{}, nil, err
	}
	image, err := s.st.Image(d.Digest)
	if err != nil {
		return store.Deployment{}, nil, err
	}
	return d, image, nil
}

func sortPrograms(ps []*Program) {
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
}
