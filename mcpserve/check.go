package mcpserve

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
)

// ErrUnservable: the MCP SDK cannot serve one of the program's tools (it
// would panic adding it). Such a deployment is refused: the error is also
// runtime.ErrRefused, as the control API tells its clients.
var ErrUnservable error = unservable{}

type unservable struct{}

func (unservable) Error() string        { return "cannot be served over MCP" }
func (unservable) Is(target error) bool { return target == runtime.ErrRefused }

// Check refuses a program that berm serve could not serve under name: a
// served tool name over 64 characters, or a tool the MCP SDK refuses (such
// as a schema with a malformed x-mcp-header annotation, on which the SDK's
// AddTool panics). Deploys call it, so that a live reload never meets one.
func Check(name string, m *manifest.Manifest, naming Naming) error {
	if err := m.CheckServedNames(name); err != nil {
		return err
	}
	scratch := mcp.NewServer(&mcp.Implementation{Name: "check"}, nil)
	for _, t := range m.Tools {
		served := naming.Name(name, t.Name)
		if err := addTool(scratch, mcpTool(served, m, t), refuseAll); err != nil {
			return fmt.Errorf("tool %q: %v: %w", t.Name, err, ErrUnservable)
		}
	}
	return nil
}

// Checker is Check for a service's Options.Check: what the server under
// naming could not serve is refused at deploy.
func Checker(naming Naming) func(name string, m *manifest.Manifest) error {
	return func(name string, m *manifest.Manifest) error { return Check(name, m, naming) }
}

func refuseAll(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("unreachable")
}

// addTool adds a tool, turning the SDK's panic on a tool it cannot serve
// into an error.
func addTool(s *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	s.AddTool(t, h)
	return nil
}
