package mcpserve

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call's handler returns before the SDK writes its response, and closing a
// session drops responses not yet written. So the server counts, at the
// transport, the requests it owes a response, and shutdown waits for them.

// owingTransport counts the requests read from its connection that have no
// response written yet.
type owingTransport struct {
	mcp.Transport
	s *Server
}

func (t owingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &owingConn{Connection: c, s: t.s}, nil
}

type owingConn struct {
	mcp.Connection
	s *Server
}

func (c *owingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && err == nil && r.IsCall() {
		c.s.owed.Add(1)
	}
	return m, err
}

func (c *owingConn) Write(ctx context.Context, m jsonrpc.Message) error {
	err := c.Connection.Write(ctx, m)
	if _, ok := m.(*jsonrpc.Response); ok {
		c.s.owed.Add(-1)
	}
	return err
}

// owing counts HTTP requests to /mcp until their handler has written the
// response; GET is left out, being the long-lived stream of notifications.
func (s *Server) owing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			s.owed.Add(1)
			defer s.owed.Add(-1)
		}
		next.ServeHTTP(w, r)
	})
}

// shutdown drains the calls in flight and waits (both within drain) for
// their responses to be written.
func (s *Server) shutdown(drain time.Duration) {
	deadline := time.Now().Add(drain)
	dctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := s.Drain(dctx); err != nil {
		s.log.Warn("drain", "error", err)
	}
	for s.owed.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}
