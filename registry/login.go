package registry

import (
	"context"
	"fmt"

	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// Login checks user and password against registry (a host or host:port) and,
// when it accepts them, stores them as Docker does: in the credential helper
// config.json names for it, or in config.json itself. A refusal is
// ErrUnauthorized, and nothing is stored.
func (c *Client) Login(ctx context.Context, registry, user, password string) error {
	reg, err := c.registry(registry)
	if err != nil {
		return err
	}
	if user == "" || password == "" {
		return fmt.Errorf("%s: empty user name or password: %w", registry, ErrUnauthorized)
	}
	cred := auth.Credential{Username: user, Password: password}
	if err := credentials.Login(ctx, c.store, reg, cred); err != nil {
		return wrap(registry, err)
	}
	return nil
}

// Logout forgets the credentials stored for registry. Forgetting what was
// never stored is no error.
func (c *Client) Logout(ctx context.Context, registry string) error {
	if _, err := c.registry(registry); err != nil {
		return err
	}
	if err := credentials.Logout(ctx, c.store, registry); err != nil {
		return fmt.Errorf("%s: %w", registry, err)
	}
	return nil
}

// registry returns the remote registry named host or host:port.
func (c *Client) registry(name string) (*remote.Registry, error) {
	reg, err := remote.NewRegistry(name)
	if err != nil {
		return nil, fmt.Errorf("registry %q: %w: %v", name, ErrReference, stripInvalidReference(err))
	}
	reg.PlainHTTP = c.plainHTTP || isLoopback(name)
	// credentials.Login copies this client and replaces its credential with
	// the one to check; a cache shared with pulls would keep a refused token.
	a := *c.auth
	a.Cache = nil
	reg.Client = &a
	return reg, nil
}
