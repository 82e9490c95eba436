package mcpserve

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

// ErrPull: the server could not pull the reference it was asked to deploy.
var ErrPull = errors.New("pull failed")

// ErrNeedsToken: a server bound beyond loopback would take requests from
// anyone on the network.
var ErrNeedsToken = errors.New("binding beyond loopback needs a token")

// HTTPConfig configures the HTTP service.
type HTTPConfig struct {
	// Addr is where to listen; DefaultAddr when empty.
	Addr string
	// Token, when set, is required of every request but /healthz as
	// "Authorization: Bearer <token>". Any Addr beyond loopback needs one.
	Token string
	// TLSCert and TLSKey, both set, serve HTTPS.
	TLSCert, TLSKey string
	// MaxImage bounds a control API upload; runtime.DefaultMaxImage when 0.
	MaxImage int64
	// MaxBody bounds an MCP request body; 4 MiB when 0.
	MaxBody int64
	// Ready, when set, receives the address listened on once the listener
	// is open (for tests and for printing).
	Ready func(addr net.Addr)
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

// RunHTTP serves MCP at /mcp, the control API at /v1/programs and /healthz,
// until ctx is done; then it stops taking calls, lets those in flight finish
// (up to drain), and returns.
func (s *Server) RunHTTP(ctx context.Context, cfg HTTPConfig, drain time.Duration) error {
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	loopback := IsLoopback(cfg.Addr)
	if !loopback && cfg.Token == "" {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, ErrNeedsToken)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("TLS needs both a certificate and a key")
	}
	tls := cfg.TLSCert != ""
	if cfg.Token != "" && !tls && !loopback {
		s.log.Warn("the token travels in clear text: plain HTTP on a non-loopback address; serve HTTPS with --tls-cert and --tls-key")
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s.Handler(cfg),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
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

// RunStdio serves MCP over r and w (stdin and stdout) until the client hangs
// up or ctx is done; then it lets calls in flight finish (up to drain).
func (s *Server) RunStdio(ctx context.Context, r io.Reader, w io.Writer, drain time.Duration) error {
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
			s.shutdown(drain)
			stop()
		case <-runCtx.Done():
		}
	}()
	err := s.mcp.Run(runCtx, lineTransport{r: r, w: w, s: s})
	if runCtx.Err() != nil {
		return nil
	}
	return err
}

// Handler is the HTTP service: /mcp, /healthz and the control API.
func (s *Server) Handler(cfg HTTPConfig) http.Handler {
	maxBody := cfg.MaxBody
	if maxBody <= 0 {
		maxBody = 4 << 20
	}
	maxImage := cfg.MaxImage
	if maxImage <= 0 {
		maxImage = runtime.DefaultMaxImage
	}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: maxBody, SessionTimeout: 30 * time.Minute})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "programs": len(s.Programs()), "calls": s.InFlight()})
	})
	guard := func(h http.Handler) http.Handler { return s.guard(cfg.Token, h) }
	mux.Handle("/mcp", guard(s.owing(mcpHandler)))
	mux.Handle("GET /v1/programs", guard(http.HandlerFunc(s.listPrograms)))
	mux.Handle("GET /v1/programs/{name}", guard(http.HandlerFunc(s.getProgram)))
	mux.Handle("DELETE /v1/programs/{name}", guard(http.HandlerFunc(s.deleteProgram)))
	mux.Handle("PUT /v1/programs/{name}", guard(http.MaxBytesHandler(http.HandlerFunc(s.putProgram), maxImage)))
	return mux
}

// guard checks the token and refuses cross-origin requests from browsers:
// a page elsewhere (or one that rebinds its name to this address) must not
// reach the tools. The SDK checks Host against loopback itself.
func (s *Server) guard(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && !allowedOrigin(origin, r.Host) {
			writeError(w, http.StatusForbidden, "forbidden", fmt.Errorf("origin %s may not reach this server", origin))
			return
		}
		if token != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="berm"`)
				writeError(w, http.StatusUnauthorized, "unauthorized", errors.New("a valid bearer token is required"))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// allowedOrigin accepts the server's own origin and loopback origins.
func allowedOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	return u.Host == host || IsLoopback(u.Hostname())
}

func (s *Server) listPrograms(w http.ResponseWriter, r *http.Request) {
	list, err := List(s.st)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getProgram(w http.ResponseWriter, r *http.Request) {
	d, err := Inspect(s.st, r.PathValue("name"))
	if err != nil {
		writeStoreError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) deleteProgram(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := manifest.CheckProgramName(name); err != nil {
		writeStoreError(w, err)
		return
	}
	if err := s.st.Remove(name, r.URL.Query().Get("keep_data") == "true"); err != nil {
		writeStoreError(w, err)
		return
	}
	s.syncNow(r.Context())
	writeJSON(w, http.StatusOK, map[string]string{"removed": name})
}

// deployRequest is the JSON body of a PUT that deploys from a reference.
type deployRequest struct {
	Ref string `json:"ref"`
}

// putProgram deploys the image in the body (application/wasm), or the
// reference a JSON body names, which the server pulls with its own
// credentials.
func (s *Server) putProgram(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, err := io.ReadAll(r.Body)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large",
			fmt.Errorf("image over the limit of %d bytes: %w", tooLarge.Limit, runtime.ErrRefused))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err)
		return
	}
	image, source := body, r.URL.Query().Get("source")
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		var req deployRequest
		if err := json.Unmarshal(body, &req); err != nil || req.Ref == "" {
			writeError(w, http.StatusBadRequest, "invalid", errors.New(`want a JSON body {"ref": "host/repo:tag"}`))
			return
		}
		if s.opts.Puller == nil {
			writeError(w, http.StatusBadRequest, "pull", fmt.Errorf("%s: %w: this server has no registry client", req.Ref, ErrPull))
			return
		}
		if image, source, err = s.opts.Puller.Pull(r.Context(), req.Ref); err != nil {
			writeError(w, http.StatusBadGateway, "pull", fmt.Errorf("%w: %v", ErrPull, err))
			return
		}
	}
	info, err := Deploy(r.Context(), s.rt, s.st, name, image, source, s.opts.Naming)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	s.syncNow(r.Context())
	writeJSON(w, http.StatusOK, info)
}

// syncNow serves a change made through the control API at once, rather than
// at the next poll.
func (s *Server) syncNow(ctx context.Context) {
	if _, err := s.Sync(ctx); err != nil {
		s.log.Error("sync", "error", err)
	}
}

// errorBody is the control API's error: the message, and a kind the client
// maps back to the error it stands for.
type errorBody struct {
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

func writeStoreError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, store.ErrNotDeployed):
		writeError(w, http.StatusNotFound, "not_deployed", err)
	case errors.Is(err, manifest.ErrProgramName):
		writeError(w, http.StatusBadRequest, "name", err)
	case errors.Is(err, manifest.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid", err)
	case errors.Is(err, runtime.ErrRefused), errors.Is(err, manifest.ErrServedName), errors.Is(err, ErrUnservable):
		writeError(w, http.StatusBadRequest, "refused", err)
	default:
		writeError(w, http.StatusInternalServerError, "internal", err)
	}
}

func writeError(w http.ResponseWriter, status int, kind string, err error) {
	writeJSON(w, status, errorBody{Error: err.Error(), Kind: kind})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
