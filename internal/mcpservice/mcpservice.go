package mcpservice

import (
	"context"

	"github.com/berm-dev/berm/internal/service"
	"github.com/berm-dev/berm/mcpserve"
)

// New returns svc as mcpserve serves it.
func New(svc *service.Service) mcpserve.Programs { return programs{svc} }

// programs is the service with its programs in mcpserve's terms; the rest
// of its methods (Loaded, Ready, Call, Limits, Close) are the service's own.
type programs struct{ *service.Service }

func (p programs) Start(ctx context.Context, onChange func(mcpserve.Change)) error {
	return p.Service.Start(ctx, func(c service.Change) {
		onChange(mcpserve.Change{Served: served(c.Served), Removed: c.Removed})
	})
}

func (p programs) Served() []*mcpserve.Program {
	list := p.Service.Served()
	out := make([]*mcpserve.Program, len(list))
	for i, sp := range list {
		out[i] = served(sp)
	}
	return out
}

func (p programs) Program(name string) *mcpserve.Program { return served(p.Service.Program(name)) }

// served is p as mcpserve serves it; nil for nil.
func served(p *service.Program) *mcpserve.Program {
	if p == nil {
		return nil
	}
	return &mcpserve.Program{Name: p.Name, Digest: p.Digest, Source: p.Source, Manifest: p.Manifest, Grants: p.Grants}
}
