package mcpserve

import (
	"context"
	"net/http"
	"time"
)

// A call's handler returns before the SDK writes its response, and closing a
// session drops responses not yet written. So the server counts, at the
// transport, the requests it owes a response (lineConn over stdio, by id;
// owing over HTTP), and shutdown waits for them, as the end of stdin does
// (lineConn.settle).

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
	if n := s.InFlight(); n > 0 {
		s.log.Info("shutting down: finishing the calls in flight (a second signal ends them now)", "calls", n, "within", drain)
	}
	if err := s.Drain(dctx); err != nil {
		s.log.Warn("drain", "error", err)
	}
	for s.owed.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}
