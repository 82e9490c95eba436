package mcpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/runtime"
)

// ErrNeedsToken: a server bound beyond loopback would take requests from
// anyone on the network.
var ErrNeedsToken = errors.New("binding beyond loopback needs a token")

// ErrTLS: a certificate without its key, or the reverse, or a pair that
// does not load.
var ErrTLS = errors.New("TLS")

// ErrBodyMemory: a bound of the bodies held at once that a body of the
// largest size could never pass.
var ErrBodyMemory = errors.New("less than the largest body")

// HTTPConfig configures the HTTP service.
type HTTPConfig struct {
	// Addr is where to listen; DefaultAddr when empty.
	Addr string
	// Token, when set, is required of every request but the probes (/livez,
	// /readyz, /healthz) as
	// "Authorization: Bearer <token>". Any Addr beyond loopback needs one.
	Token string
	// TLSCert and TLSKey, both set, serve HTTPS.
	TLSCert, TLSKey string
	// MaxImage bounds a control API upload; runtime.DefaultMaxImage when 0.
	MaxImage int64
	// MaxBody bounds an MCP request body; 4 MiB when 0.
	MaxBody int64
	// MaxBodyMemory bounds the bytes of request bodies held at once, MCP's
	// and uploads together, from their first byte until they are served;
	// past it a request is refused (503 with Retry-After). Twice the
	// larger of MaxImage and MaxBody when 0.
	MaxBodyMemory int64
	// AllowedHosts are names the server answers to besides loopback ones,
	// for a reverse proxy that passes on the client's Host. A server bound
	// beyond loopback answers to any Host unless some are given.
	AllowedHosts []string
	// ReadTimeout bounds the time to send a request body;
	// DefaultReadTimeout when 0.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time each write of a response takes to reach
	// the client; DefaultWriteTimeout when 0.
	WriteTimeout time.Duration
	// MaxSessions bounds the MCP sessions held at once; DefaultMaxSessions
	// when 0. A new session past it ends an idle one (sessions.go), and is
	// refused only when every session has a request in flight.
	MaxSessions int
	// MaxSessionsPerClient bounds the sessions of one client (a remote
	// address, IPv6 by its /64; not loopback, on which clients cannot be
	// told apart): past it, a client's new session ends its own least
	// recently used idle one. 0 leaves a client bound only by its share of
	// MaxSessions: a full server ends an idle session of the client that
	// holds the most.
	MaxSessionsPerClient int
	// SessionIdle closes a session that has had no request for that long;
	// DefaultSessionIdle when 0.
	SessionIdle time.Duration
	// Control, when set, serves the control API (internal/control's
	// Handler) under /v1/programs, under the same rules as every route; a
	// PUT's body is read first, within MaxImage and MaxBodyMemory.
	Control http.Handler
	// Metrics serves Prometheus metrics at GET /metrics, under the same
	// rules as every route.
	Metrics bool
	// Listening, when set, receives the address listened on once the
	// listener is open (for tests and for printing).
	Listening func(addr net.Addr)
	// Stateless serves MCP in the SDK's stateless streamable HTTP mode: no
	// Mcp-Session-Id, a fresh session for each POST, so that any replica
	// behind a balancer answers any request without sticky sessions. A
	// client keeps every request it makes (initialize, tools/list,
	// tools/call, resources/list and read) and what a call sends while it
	// runs (its berm.log lines); it loses what a server sends unasked:
	// notifications/tools/list_changed and resources/list_changed (it sees a
	// new deployment at its next tools/list), and the GET stream (405).
	// MaxSessions and SessionIdle then bound nothing: no session outlives
	// its request. Nor does a log level: logging/setLevel is taken but
	// applies to its own request alone, and a call's log messages come at
	// info and above (a client of protocol 2026-07-28 names a level in each
	// request's _meta, which the SDK applies).
	Stateless bool
	// Listener, when set, is served instead of listening on Addr (Listen's,
	// or Hold's taken over). Addr still decides the loopback rules, so it
	// must name the same address.
	Listener net.Listener

	// sessionGrace is youngGrace, but in tests.
	sessionGrace time.Duration
}

// DefaultAddr is where berm serve listens by default: loopback only.
const DefaultAddr = "127.0.0.1:7777"

// IsLoopback reports whether a listen address is bound to loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// RunHTTP serves MCP at /mcp, the control API at /v1/programs and the
// probes /livez, /readyz and /healthz (ready.go), until ctx is done; then it
// stops taking calls, lets those in flight finish (up to drain), and
// returns.
func (s *Server) RunHTTP(ctx context.Context, cfg HTTPConfig, drain time.Duration) error {
	cfg = cfg.withDefaults()
	if err := cfg.Check(); err != nil {
		return err
	}
	loopback := IsLoopback(cfg.Addr)
	https := cfg.TLSCert != ""
	if cfg.Token != "" && !https && !loopback {
		s.log.Warn("the token travels in clear text: plain HTTP on a non-loopback address; serve HTTPS with --tls-cert and --tls-key")
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = Listen(cfg.Addr); err != nil {
			return err
		}
	}
	srv := &http.Server{
		Handler:           s.Handler(cfg),
		ReadHeaderTimeout: 10 * time.Second,
		// Else net/http keeps a connection idle between requests forever;
		// the body and the response are bounded per request (withDeadlines).
		IdleTimeout: 2 * time.Minute,
		// MCP and the control API send a few short headers; net/http's
		// 1 MiB default let 500 unfinished requests hold 965 MiB.
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:    func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	scheme := "http"
	if https {
		scheme = "https"
	}
	s.log.Info("listen", "url", fmt.Sprintf("%s://%s/mcp", scheme, ln.Addr()))
	if cfg.Listening != nil {
		cfg.Listening(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() {
		if https {
			errc <- srv.ServeTLS(ln, cfg.TLSCert, cfg.TLSKey)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.shutdown(drain)
	for ss := range s.mcp.Sessions() {
		ss.Close()
	}
	return srv.Close()
}

// Check refuses what RunHTTP and Hold would refuse of cfg, without
// listening: an address beyond loopback without a token (ErrNeedsToken),
// half a TLS pair or a pair that does not load (ErrTLS), a bound of the
// bodies held below the largest body (ErrBodyMemory), an allowed host that is
// not one (ErrAllowedHost). berm serve calls it before anything loads, so
// that a wrong flag fails at once; the messages name berm serve's flags.
func (cfg HTTPConfig) Check() error {
	cfg = cfg.withDefaults()
	if !IsLoopback(cfg.Addr) && cfg.Token == "" {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, ErrNeedsToken)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return fmt.Errorf("%w: --tls-cert and --tls-key go together", ErrTLS)
	}
	if cfg.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey); err != nil {
			return fmt.Errorf("%w: --tls-cert %s, --tls-key %s: %v", ErrTLS, cfg.TLSCert, cfg.TLSKey, err)
		}
	}
	if most := max(cfg.MaxImage, cfg.MaxBody); cfg.MaxBodyMemory < most {
		return fmt.Errorf("--max-body-memory %d: %w (%d bytes: an image, or the arguments limit and 64 KiB): raise it, or lower --max-args", cfg.MaxBodyMemory, ErrBodyMemory, most)
	}
	return checkAllowedHosts(cfg.AllowedHosts)
}

// withDefaults fills in what cfg leaves at zero.
func (cfg HTTPConfig) withDefaults() HTTPConfig {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 4 << 20
	}
	if cfg.MaxImage <= 0 {
		cfg.MaxImage = runtime.DefaultMaxImage
	}
	if cfg.MaxBodyMemory <= 0 {
		cfg.MaxBodyMemory = 2 * max(cfg.MaxImage, cfg.MaxBody)
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.sessionGrace <= 0 {
		cfg.sessionGrace = youngGrace
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	return cfg
}

// Handler is the HTTP service: /mcp, the probes, the control API and
// (with cfg.Metrics) /metrics, behind the checks every route gets (guard) and
// the bounds of withDeadlines.
func (s *Server) Handler(cfg HTTPConfig) http.Handler {
	cfg = cfg.withDefaults()
	if cfg.Stateless {
		s.stateless.Store(true)
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{
			Stateless: cfg.Stateless,
			// mcpHTTP reads and bounds the body; the SDK reads it as
			// mcpHTTP rewrote it, each id a token, which is longer than an
			// id may be, but never twice the message it is in.
			MaxRequestBodyBytes: 2 * cfg.MaxBody,
			SessionTimeout:      cfg.SessionIdle,
			// guard checks Host on every route and knows the allowed hosts;
			// the SDK's own check guards /mcp alone, answers in plain text
			// and refuses the Host a reverse proxy on loopback passes on.
			DisableLocalhostProtection: true,
		})
	// Stateless, each POST is a session of its own, gone with its
	// response: a bound would only cap requests in progress, which
	// --max-concurrent already queues.
	var table *sessionTable
	if !cfg.Stateless {
		table = newSessionTable(cfg.MaxSessions, cfg.MaxSessionsPerClient, cfg.sessionGrace, s.liveSessions)
		s.table.Store(table)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", s.probe(false))
	mux.HandleFunc("GET /healthz", s.probe(true))
	mux.HandleFunc("GET /livez", live)
	bodies := new(budget)
	bodies.init(cfg.MaxBodyMemory)
	mux.Handle("/mcp", s.owing(s.mcpHTTP(table, cfg.MaxBody, bodies, mcpHandler)))
	if cfg.Control != nil {
		control := uploads(cfg.Control, cfg.MaxImage, bodies)
		mux.Handle("/v1/programs", control)
		mux.Handle("/v1/programs/", control)
	}
	if cfg.Metrics {
		mux.Handle("GET /metrics", s.metricsHandler())
	}
	if s.opts.Search != nil {
		mux.Handle("GET /v1/search", SearchHandler(s.opts.Search))
	}
	return withDeadlines(cfg.ReadTimeout, cfg.WriteTimeout, s.guard(cfg, mux))
}

// writeError and writeJSON answer as every route of berm serve does.
var (
	writeError = control.WriteError
	writeJSON  = control.WriteJSON
)

// uploads serves h with its request body read first, up to maxImage bytes
// and within the bodies held at once, so that the handler it is given (the
// control API) reads a body already bounded and counted.
func uploads(h http.Handler, maxImage int64, bodies *budget) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			h.ServeHTTP(w, r)
			return
		}
		body, release, ok := readBody(w, r, maxImage, "image", runtime.ErrRefused, bodies)
		if !ok {
			return
		}
		defer release()                    // the image is held until it is deployed
		r.Body = control.NewHeldBody(body) // read by the handler without a copy
		h.ServeHTTP(w, r)
	})
}
