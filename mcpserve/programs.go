package mcpserve

import (
	"context"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// Programs is what a Server serves: the deployed programs, kept current
// through Start's onChange, and the calls into them. berm's deployment
// service is one (internal/mcpservice adapts it); an embedder may bring its
// own.
type Programs interface {
	// Start begins serving: onChange is called, in order and never two at
	// once, with every program served and every name no longer served,
	// those deployed at Start first.
	Start(ctx context.Context, onChange func(Change)) error
	// Loaded is closed once the programs Start found are callable.
	Loaded() <-chan struct{}
	// Served lists the programs served now, by name.
	Served() []*Program
	// Program is the program served under name, or nil.
	Program(name string) *Program
	// Ready waits until the program under name can be called, or ctx ends.
	Ready(ctx context.Context, name string) error
	// Call runs one tool; its outcome and errors are the runtime's.
	Call(ctx context.Context, program, tool string, args []byte) (runtime.Outcome, error)
	// Limits are the limits every call runs under.
	Limits() runtime.Limits
	// Close stops what Start started, waiting until ctx is done.
	Close(ctx context.Context) error
}

// Program is a deployment as it is served.
type Program struct {
	Name     string
	Digest   string
	Source   string
	Manifest *manifest.Manifest
	// Grants are what its deployment lets it reach.
	Grants sandbox.Grants
}

// Change is one change to what is served: a program served (new, or
// replacing the one of its name), or a name no longer served.
type Change struct {
	Served  *Program
	Removed string
}
