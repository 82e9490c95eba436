package service

import (
	"context"
	"sort"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/store"
)

// Describe reads an image's details without compiling it.
func Describe(name string, image []byte, source string) (control.Details, error) {
	m, err := manifest.Read(image)
	if err != nil {
		return control.Details{}, err
	}
	return control.Details{Name: name, Digest: manifest.Digest(image), Size: len(image), Source: source, Manifest: m}, nil
}

// List reports every deployment, by name. A deployment that cannot be read
// back (a damaged record, a damaged or missing image) is listed with its
// Error rather than hiding the others.
func (s *Service) List(ctx context.Context) ([]control.Info, error) {
	deployments, damaged, err := s.st.Deployments()
	if err != nil {
		return nil, err
	}
	out := make([]control.Info, 0, len(deployments)+len(damaged))
	for _, d := range deployments {
		info := control.Info{Name: d.Name, Digest: d.Digest, Source: d.Source, Grants: d.Grants, Tools: []string{}}
		if image, err := s.st.Image(d.Digest); err != nil {
			info.Error = err.Error()
		} else if m, err := manifest.Read(image); err != nil {
			info.Error = err.Error()
		} else {
			info.Describe(m)
		}
		out = append(out, info)
	}
	for _, d := range damaged {
		out = append(out, control.Info{Name: d.Name, Tools: []string{}, Error: d.Err.Error()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Inspect reads the details of the program deployed under name.
func (s *Service) Inspect(ctx context.Context, name string) (control.Details, error) {
	d, image, err := s.Deployed(name)
	if err != nil {
		return control.Details{}, err
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
