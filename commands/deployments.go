package commands

import (
	"context"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// deployments is where deploy, ls, rm, inspect and dev act: the
// service over the local state (localDeployments), or a server's control
// API (*control.Client). A command chooses once, with remote.open.
type deployments interface {
	Deploy(ctx context.Context, name string, image []byte, source string, grants *sandbox.Grants) (control.Info, error)
	// DeployRef deploys an OCI reference: pulled here through the store,
	// or by the server with its own credentials.
	DeployRef(ctx context.Context, name, ref string, grants *sandbox.Grants) (control.Info, error)
	Remove(ctx context.Context, name string, keepData bool) error
	List(ctx context.Context) ([]control.Info, error)
	Inspect(ctx context.Context, name string) (control.Details, error)
	Close()
}

var (
	_ deployments = (*control.Client)(nil)
	_ deployments = (*localDeployments)(nil)
)

// open returns where the command acts: the server's control API, or the
// state (--root, --state), which a command that writes creates (mode) and
// one that reads finds empty when it does not exist. Close it after.
func (r remote) open(ctx context.Context, e *env, root, state string, mode rootMode, reg registryOptions) (deployments, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.server != "" {
		return control.NewClient(r.server, r.token)
	}
	st, err := openState(ctx, root, state, mode)
	if err != nil {
		return nil, err
	}
	return &localDeployments{e: e, root: root, st: st, reg: reg}, nil
}

// localDeployments are the deployments of the local state, through the
// service. st is nil when the root does not exist: nothing is deployed.
type localDeployments struct {
	e    *env
	root string
	st   store.State
	reg  registryOptions
}

func (l *localDeployments) Deploy(ctx context.Context, name string, image []byte, source string, grants *sandbox.Grants) (control.Info, error) {
	return deployLocal(ctx, l.root, l.st, name, image, source, grants)
}

func (l *localDeployments) DeployRef(ctx context.Context, name, ref string, grants *sandbox.Grants) (control.Info, error) {
	rc, err := newRegistryClient(l.e, l.reg)
	if err != nil {
		return control.Info{}, err
	}
	image, source, err := pullThroughStore(ctx, rc, l.root, l.st, ref)
	if err != nil {
		return control.Info{}, err
	}
	return l.Deploy(ctx, name, image, source, grants)
}

func (l *localDeployments) Remove(ctx context.Context, name string, keepData bool) error {
	if l.st == nil {
		return notDeployed(name) // removing creates no root
	}
	return newService(nil, l.st).Remove(ctx, name, keepData)
}

func (l *localDeployments) List(ctx context.Context) ([]control.Info, error) {
	if l.st == nil {
		return []control.Info{}, nil // nothing deployed yet; reading creates nothing
	}
	return newService(nil, l.st).List(ctx)
}

func (l *localDeployments) Inspect(ctx context.Context, name string) (control.Details, error) {
	if l.st == nil {
		return control.Details{}, notDeployed(name)
	}
	return newService(nil, l.st).Inspect(ctx, name)
}

func (l *localDeployments) Close() { closeState(l.st) }
