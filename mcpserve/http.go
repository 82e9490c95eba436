package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/internal/control"
	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// ErrNeedsToken: a server bound beyond loopback would take requests from
// anyone on the network.
var ErrNeedsToken = errors.New("binding beyond loopback needs a token")

// HTTPConfig configures the HTTP service.
type HTTPConfig struct {
	// Addr is where to listen; DefaultAddr when empty.
	Addr string
	// Token, when set, is required of every request but /healthz and /livez as
	// "Authorization: Bearer <token>". Any Addr beyond loopback needs one.
	Token string
	// TLSCert and TLSKey, both set, serve HTTPS.
	TLSCert, TLSKey string
	// MaxImage bounds a control API upload; runtime.DefaultMaxImage when 0.
	MaxImage int64
	// MaxBody bounds an MCP request body; 4 MiB when 0.
	MaxBody int64
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
	// when 0.
	MaxSessions int
	// SessionIdle closes a session that has had no request for that long;
	// DefaultSessionIdle when 0.
	SessionIdle time.Duration
	// Metrics serves Prometheus metrics at GET /metrics, under the same
	// rules as every route.
	Metrics bool
	// Ready, when set, receives the address listened on once the listener
	// is open (for tests and for printing).
	Ready func(addr net.Addr)
	// Stateless serves MCP in the SDK's stateless streamable HTTP mode: no
	// Mcp-Session-Id, a fresh session for each POST, so that any replica
	// behind a balancer answers any request without sticky sessions. A
	// client keeps every request it makes (initialize, tools/list,
	// tools/call, resources/list and read) and what a call sends while it
	// runs (its berm.log lines); it loses what a server sends unasked:
	// notifications/tools/list_changed and resources/list_changed (it sees a
	// new deployment at its next tools/list), and the GET stream (405).
	// MaxSessions and SessionIdle then bound nothing: no session outlives
	// its request.
	Stateless bool
	// Listener, when set, is served instead of listening on Addr (Hold's,
	// taken over). Addr still decides the loopback rules, so it must name
	// the same address.
	Listener net.Listener
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

// RunHTTP serves MCP at /mcp, the control API at /v1/programs, /healthz
// and /livez, until ctx is done; then it stops taking calls, lets those in
// flight finish (up to drain), and returns.
//
// GET /healthz is readiness: 200 while the server takes calls, 503 while it
// drains or while Options.Ready fails (its state unreachable). GET /livez is
// liveness: 200 whenever the process answers HTTP at all, so that an
// orchestrator restarts a hung process, not one waiting for its database.
// Neither needs the token.
func (s *Server) RunHTTP(ctx context.Context, cfg HTTPConfig, drain time.Duration) error {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return err
	}
	loopback := IsLoopback(cfg.Addr)
	tls := cfg.TLSCert != ""
	if cfg.Token != "" && !tls && !loopback {
		s.log.Warn("the token travels in clear text: plain HTTP on a non-loopback address; serve HTTPS with --tls-cert and --tls-key")
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
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
	if tls {
		scheme = "https"
	}
	s.log.Info("listen", "url", fmt.Sprintf("%s://%s/mcp", scheme, ln.Addr()))
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() {
		if tls {
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

// check refuses a configuration that must not serve.
func (cfg HTTPConfig) check() error {
	if !IsLoopback(cfg.Addr) && cfg.Token == "" {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, ErrNeedsToken)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("TLS needs both a certificate and a key")
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
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	return cfg
}

// Handler is the HTTP service: /mcp, /healthz, /livez, the control API and
// (with cfg.Metrics) /metrics, behind the checks every route gets (guard) and
// the bounds of withDeadlines.
func (s *Server) Handler(cfg HTTPConfig) http.Handler {
	cfg = cfg.withDefaults()
	if cfg.Stateless {
		s.stateless.Store(true)
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{
			Stateless:           cfg.Stateless,
			MaxRequestBodyBytes: cfg.MaxBody,
			SessionTimeout:      cfg.SessionIdle,
			// guard checks Host on every route and knows the allowed hosts;
			// the SDK's own check guards /mcp alone, answers in plain text
			// and refuses the Host a reverse proxy on loopback passes on.
			DisableLocalhostProtection: true,
		})
	maxSessions := cfg.MaxSessions
	if cfg.Stateless {
		// Each POST is a session of its own, gone with its response: the
		// bound would only cap requests in progress, which --max-concurrent
		// already queues.
		maxSessions = math.MaxInt
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// Draining, the server takes no call; without its state it can
		// serve none well: a load balancer should send them elsewhere.
		status, code := "ok", http.StatusOK
		body := map[string]any{"programs": s.programCount(), "calls": s.InFlight()}
		if s.Draining() {
			status, code = "draining", http.StatusServiceUnavailable
		} else if err := s.checkReady(r.Context()); err != nil {
			status, code = "not ready", http.StatusServiceUnavailable
			body["reason"] = err.Error()
		}
		body["status"] = status
		writeJSON(w, code, body)
	})
	mux.HandleFunc("GET /livez", live)
	mux.Handle("/mcp", s.owing(s.mcpBounds(maxSessions, cfg.MaxBody, mcpHandler)))
	mux.HandleFunc("GET /v1/programs", s.listPrograms)
	mux.HandleFunc("GET /v1/programs/{name}", s.getProgram)
	mux.HandleFunc("DELETE /v1/programs/{name}", s.deleteProgram)
	mux.HandleFunc("PUT /v1/programs/{name}", func(w http.ResponseWriter, r *http.Request) {
		s.putProgram(w, r, cfg.MaxImage, cfg.Token != "")
	})
	if cfg.Metrics {
		mux.Handle("GET /metrics", s.metricsHandler())
	}
	if s.opts.Search != nil {
		mux.Handle("GET /v1/search", SearchHandler(s.opts.Search))
	}
	return withDeadlines(cfg.ReadTimeout, cfg.WriteTimeout, s.guard(cfg, mux))
}

func (s *Server) listPrograms(w http.ResponseWriter, r *http.Request) {
	list, err := s.svc.List()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getProgram(w http.ResponseWriter, r *http.Request) {
	d, err := s.svc.Inspect(r.PathValue("name"))
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) deleteProgram(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.svc.Remove(r.Context(), name, r.URL.Query().Get("keep_data") == "true"); err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"removed": name})
}

// putProgram deploys the image in the body (application/wasm), or the
// reference a JSON body names, which the server pulls with its own
// credentials.
//
// Grants are refused unless the server has a token: on loopback without
// one, any local user could grant a program berm's own directories.
func (s *Server) putProgram(w http.ResponseWriter, r *http.Request, maxImage int64, tokened bool) {
	name := r.PathValue("name")
	body, ok := readBody(w, r, maxImage, "image", runtime.ErrRefused)
	if !ok {
		return
	}
	var grants *sandbox.Grants
	if g := r.URL.Query().Get(control.GrantsParam); g != "" {
		if !tokened {
			writeError(w, http.StatusForbidden, "grant", fmt.Errorf("%w: this server has no token, so it takes no grants through its control API: "+
				"any local user could grant a program berm's own files (start it with --token, or deploy with grants into its root)", sandbox.ErrGrant))
			return
		}
		grants = new(sandbox.Grants)
		dec := json.NewDecoder(strings.NewReader(g))
		dec.DisallowUnknownFields()
		if err := dec.Decode(grants); err != nil {
			writeError(w, http.StatusBadRequest, "grant", fmt.Errorf("%w: the %s parameter: %v", sandbox.ErrGrant, control.GrantsParam, err))
			return
		}
	}
	var err error
	image, source := body, r.URL.Query().Get("source")
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		var req control.DeployRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Ref == "" {
			writeError(w, http.StatusBadRequest, "invalid", errors.New(`want a JSON body {"ref": "host/repo:tag"}`))
			return
		}
		if s.opts.Puller == nil {
			writeError(w, http.StatusBadRequest, "pull", fmt.Errorf("%s: %w: this server has no registry client", req.Ref, control.ErrPull))
			return
		}
		if image, source, err = s.opts.Puller.Pull(r.Context(), req.Ref); err != nil {
			writeError(w, http.StatusBadGateway, "pull", fmt.Errorf("%w: %v", control.ErrPull, err))
			return
		}
	}
	info, err := s.svc.Deploy(r.Context(), name, image, source, grants)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func writeStoreError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrNotDeployed):
		writeError(w, http.StatusNotFound, "not_deployed", err)
	case errors.Is(err, manifest.ErrProgramName):
		writeError(w, http.StatusBadRequest, "name", err)
	case errors.Is(err, manifest.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid", err)
	case errors.Is(err, sandbox.ErrGrant):
		writeError(w, http.StatusBadRequest, "grant", err)
	case errors.Is(err, runtime.ErrRefused), errors.Is(err, manifest.ErrServedName), errors.Is(err, ErrUnservable):
		writeError(w, http.StatusBadRequest, "refused", err)
	default:
		writeError(w, http.StatusInternalServerError, "internal", err)
	}
}

func writeError(w http.ResponseWriter, status int, kind string, err error) {
	writeJSON(w, status, control.ErrorBody{Error: err.Error(), Kind: kind})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// live answers GET /livez: the process serves HTTP, whatever its state.
func live(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "live"})
}

// ReadyTimeout bounds one check of Options.Ready.
const ReadyTimeout = 2 * time.Second

// readyFor is how long an answer of Options.Ready stands, so that a storm of
// probes (every balancer and kubelet, every second) asks the state once.
const readyFor = time.Second

// readiness caches the answer of Options.Ready.
type readiness struct {
	mu  sync.Mutex // held across a check: concurrent probes wait for its answer
	at  time.Time  // of the last check; zero before the first
	err error
	now func() time.Time // time.Now unless a test sets it
}

// checkReady is Options.Ready's answer, asked at most once per readyFor. A
// change between ready and not is logged, with the reason.
func (s *Server) checkReady(ctx context.Context) error {
	if s.opts.Ready == nil {
		return nil
	}
	r := &s.ready
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now
	if r.now != nil {
		now = r.now
	}
	if !r.at.IsZero() && now().Sub(r.at) < readyFor {
		return r.err
	}
	// A probe that hangs up must not leave its cancellation as the answer.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReadyTimeout)
	defer cancel()
	err := s.opts.Ready(ctx)
	switch {
	case err != nil && (r.err == nil || r.at.IsZero()):
		s.log.Warn("not ready", "reason", err)
	case err == nil && r.err != nil:
		s.log.Info("ready again")
	}
	r.at, r.err = now(), err
	return err
}

// Holding answers HTTP on an address before the Server that will serve it
// exists: berm serve, waiting for its database, must already tell a
// balancer "not ready" and an orchestrator "alive" rather than refuse
// connections and be restarted in a loop. See Hold.
type Holding struct {
	relay *relay
	first *phase
	srv   *http.Server
}

// Hold listens on cfg.Addr (with cfg's TLS) and answers GET /livez 200,
// GET /healthz 503 {"status": "not ready", "reason": reason}, and every other
// request 503, until Listener hands the address over to RunHTTP or Close
// gives it up. cfg is checked as RunHTTP checks it.
func Hold(cfg HTTPConfig, reason string, logger *slog.Logger) (*Holding, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", live)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": reason})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "not_ready", fmt.Errorf("not ready: %s", reason))
	})
	h := &Holding{relay: newRelay(ln)}
	h.first = h.relay.phase(false)
	h.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("listen, not ready", "addr", ln.Addr(), "reason", reason)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	go func() {
		if cfg.TLSCert != "" {
			h.srv.ServeTLS(h.first, cfg.TLSCert, cfg.TLSKey)
		} else {
			h.srv.Serve(h.first)
		}
	}()
	return h, nil
}

// Addr is the address held.
func (h *Holding) Addr() net.Addr { return h.relay.ln.Addr() }

// Listener stops answering (letting the answers under way finish, within
// ctx) and returns the held address's listener, for HTTPConfig.Listener.
// Connections that arrive meanwhile wait for RunHTTP's server.
func (h *Holding) Listener(ctx context.Context) (net.Listener, error) {
	if err := h.srv.Shutdown(ctx); err != nil {
		h.srv.Close()
	}
	return h.relay.phase(true), nil
}

// Close stops answering and closes the listener.
func (h *Holding) Close() error {
	err := h.srv.Close()
	h.relay.close()
	return err
}

// relay hands the connections of one listener to one phase after another
// (Hold's answers, then RunHTTP's server), so that none is refused between
// them.
type relay struct {
	ln     net.Listener
	conns  chan accepted
	done   chan struct{} // closed once ln has failed for good
	closed chan struct{} // closed by close
	once   sync.Once
}

type accepted struct {
	c   net.Conn
	err error
}

func newRelay(ln net.Listener) *relay {
	r := &relay{ln: ln, conns: make(chan accepted), done: make(chan struct{}), closed: make(chan struct{})}
	go r.run()
	return r
}

func (r *relay) run() {
	defer close(r.done)
	for {
		c, err := r.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		select {
		case r.conns <- accepted{c, err}:
		case <-r.closed:
			if c != nil {
				c.Close()
			}
			return
		}
	}
}

func (r *relay) close() {
	r.once.Do(func() {
		close(r.closed)
		r.ln.Close()
	})
}

// phase returns a listener of the relay's connections; closing the last
// phase closes the relay's listener, closing another leaves it open.
func (r *relay) phase(last bool) *phase {
	return &phase{r: r, last: last, closed: make(chan struct{})}
}

type phase struct {
	r      *relay
	last   bool
	closed chan struct{}
	once   sync.Once
}

func (p *phase) Accept() (net.Conn, error) {
	select {
	case <-p.closed: // a closed phase takes no connection, even one ready
		return nil, net.ErrClosed
	default:
	}
	select {
	case a := <-p.r.conns:
		return a.c, a.err
	case <-p.closed:
		return nil, net.ErrClosed
	case <-p.r.done:
		return nil, net.ErrClosed
	}
}

func (p *phase) Close() error {
	p.once.Do(func() {
		close(p.closed)
		if p.last {
			p.r.close()
		}
	})
	return nil
}

func (p *phase) Addr() net.Addr { return p.r.ln.Addr() }
