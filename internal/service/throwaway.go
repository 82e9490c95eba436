package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// Throwaway installs image in the runtime under name, with grants, as a
// deployment that is never recorded (berm run's of a file or a reference,
// or of a deployed program in a process of its own), and beside it every
// deployed program it calls, directly or through others, so that Call runs
// it as a served program would run. Callees not deployed are left out: a
// call of one fails as it would served. An error of the program itself
// comes with a nil Program; one of its callees, with the program installed.
func (s *Service) Throwaway(ctx context.Context, name string, image []byte, grants *sandbox.Grants) (*runtime.Program, error) {
	p, err := s.rt.Deploy(ctx, name, image, grants)
	if err != nil {
		return nil, err
	}
	queue := append([]string(nil), p.Manifest.Calls...)
	for len(queue) > 0 {
		callee, _, err := manifest.SplitFullName(queue[0])
		queue = queue[1:]
		if err != nil || s.rt.Program(callee) != nil {
			continue
		}
		d, image, err := s.Deployed(callee)
		if errors.Is(err, store.ErrNotDeployed) {
			continue
		}
		if err != nil {
			return p, err
		}
		installed, err := s.rt.Deploy(ctx, callee, image, d.Grants)
		if err != nil {
			return p, fmt.Errorf("callee %s: %w", callee, err)
		}
		queue = append(queue, installed.Manifest.Calls...)
	}
	return p, nil
}
