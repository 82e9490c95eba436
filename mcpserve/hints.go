package mcpserve

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
)

// hints are what a client may assume of a program's tools, from what its
// deployment grants and what its callees' grant them:
//
//   - readOnly: no read-write directory, no network host granted (berm.http
//     sends any method), no berm.set or berm.delete declared, and the same of
//     every served program it may reach through berm.call, transitively (a
//     callee not served is refused, so it writes nothing);
//   - openWorld: a network host is granted to it or to such a callee.
//
// They are recomputed whenever a program it may reach is served or removed.
type hints struct {
	readOnly, openWorld bool
}

func (h hints) annotations() *mcp.ToolAnnotations {
	open := h.openWorld
	return &mcp.ToolAnnotations{ReadOnlyHint: h.readOnly, OpenWorldHint: &open}
}

func (s *Server) hintsOf(p *Program) hints {
	h := hints{readOnly: true}
	seen := map[string]bool{}
	var walk func(p *Program)
	walk = func(p *Program) {
		if seen[p.Name] {
			return
		}
		seen[p.Name] = true
		changes, openWorld := sandbox.Effects(p.Manifest, &p.Grants)
		h.readOnly = h.readOnly && !changes
		h.openWorld = h.openWorld || openWorld
		for _, c := range p.Manifest.Calls {
			name, _, err := manifest.SplitFullName(c)
			if err != nil {
				continue
			}
			if callee := s.svc.Program(name); callee != nil {
				walk(callee)
			}
		}
	}
	walk(p)
	return h
}

// refreshCallers serves again, with new hints, every served program whose
// hints changed because the program changed was served or removed.
func (s *Server) refreshCallers(changed string) {
	for _, p := range s.svc.Served() {
		if p.Name == changed || !reaches(p.Manifest) {
			continue
		}
		s.mu.Lock()
		old, ok := s.hints[p.Name]
		s.mu.Unlock()
		if ok && old != s.hintsOf(p) {
			s.serveTools(p)
		}
	}
}

// reaches reports whether m may call any program.
func reaches(m *manifest.Manifest) bool { return len(m.Calls) > 0 }

// usageText is a program's usage resource: its own words, then what its
// deployment grants it, so that a model knows what the tools can reach.
func usageText(p *Program) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(p.Manifest.Usage, "\n"))
	if b.Len() > 0 {
		b.WriteString("\n\n")
	}
	b.WriteString("## What this deployment grants\n\n")
	lines := p.Grants.GuestLines() // a model is never shown the host's paths
	if len(lines) == 0 {
		b.WriteString("Nothing beyond its arguments and its own key-value data: no files, no environment variables, no network.\n")
	}
	for _, l := range lines {
		b.WriteString("- " + l + "\n")
	}
	if sandbox.Unreached(p.Manifest, &p.Grants) {
		b.WriteString("\nIt may ask for the network, but no host is granted: every request is refused.\n")
	}
	return b.String()
}
