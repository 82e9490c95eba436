package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The probes, none of which needs the token:
//
//   - GET /livez is liveness: 200 whenever the process answers HTTP, so that
//     an orchestrator restarts a hung process, not one waiting for its
//     database.
//   - GET /readyz is readiness to take calls: 200 once the programs found
//     at start are loaded (compiled and callable), 503 before that and while
//     draining. It does not ask the state: with a database down, calls of
//     programs that touch no data still work, so a balancer (a Kubernetes
//     readiness probe) should keep sending them rather than take every
//     replica out at once.
//   - GET /healthz is /readyz and also 503 "database unreachable" while
//     Options.CheckState fails: whether the replica can serve everything.
//
// Each answers {"status": ..., "reason": ..., "programs": n, "calls": n}.

// CheckStateTimeout bounds one check of Options.CheckState.
const CheckStateTimeout = 2 * time.Second

// stateCheckedFor is how long an answer of Options.CheckState stands, so that
// a storm of probes (every balancer and kubelet, every second) asks the state
// once.
const stateCheckedFor = time.Second

// errCheckGaveUp is /healthz's answer to a probe that hung up before the
// first check of the state ended.
var errCheckGaveUp = errors.New("state not checked yet")

// isProbe reports whether path is a probe's, which needs no token: an
// orchestrator's probes carry none.
func isProbe(path string) bool {
	return path == "/livez" || path == "/readyz" || path == "/healthz"
}

// live answers GET /livez: the process serves HTTP, whatever its state.
func live(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "live"})
}

// notReady is why the server takes no calls now, or "" when it does.
func (s *Server) notReady() (status, reason string) {
	if s.Draining() {
		return "draining", "draining"
	}
	select {
	case <-s.svc.Loaded():
		return "", ""
	default:
		return "not ready", "loading"
	}
}

// probe answers /readyz, and /healthz when withState.
func (s *Server) probe(withState bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{"programs": s.programCount(), "calls": s.InFlight()}
		status, reason := s.notReady()
		if status == "" && withState {
			if err := s.health.check(r.Context()); err != nil {
				status, reason = "not ready", err.Error()
			}
		}
		code := http.StatusServiceUnavailable
		if status == "" {
			status, code = "ok", http.StatusOK
		} else {
			body["reason"] = reason
		}
		body["status"] = status
		writeJSON(w, code, body)
	}
}

// stateHealth caches the answer of Options.CheckState. No lock is held across
// a check: while one runs, probes get the answer before it, and only the
// probes that come before any answer wait for the first (at most
// CheckStateTimeout), so a slow database never holds a probe longer than
// that.
type stateHealth struct {
	ask func(context.Context) error // Options.CheckState; nil: always healthy
	log *slog.Logger
	now func() time.Time // time.Now unless a test sets it

	mu      sync.Mutex
	at      time.Time // of the last answer; zero before the first
	err     error
	running chan struct{} // closed when the check under way ends; nil when none runs
}

// check is Options.CheckState's answer, asked at most once per
// stateCheckedFor. A change between healthy and not is logged, with the
// reason.
func (h *stateHealth) check(ctx context.Context) error {
	if h.ask == nil {
		return nil
	}
	h.mu.Lock()
	answered := !h.at.IsZero()
	if answered && h.now().Sub(h.at) < stateCheckedFor {
		err := h.err
		h.mu.Unlock()
		return err
	}
	if h.running == nil {
		h.running = make(chan struct{})
		go h.run(h.running)
	}
	running, last := h.running, h.err
	h.mu.Unlock()
	if answered {
		return last // until the check under way answers
	}
	select {
	case <-running:
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.err
	case <-ctx.Done():
		return errCheckGaveUp
	}
}

func (h *stateHealth) run(done chan struct{}) {
	// Not the probe's context: one that hangs up must not leave its
	// cancellation as the answer.
	ctx, cancel := context.WithTimeout(context.Background(), CheckStateTimeout)
	err := h.ask(ctx)
	cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil && (h.err == nil || h.at.IsZero()):
		h.log.Warn("state unhealthy", "reason", err)
	case err == nil && h.err != nil:
		h.log.Info("state healthy again")
	}
	h.at, h.err, h.running = h.now(), err, nil
	close(done)
}

// Holding answers HTTP on an address before the Server that will serve it
// exists: berm serve, waiting for its database, must already tell a
// balancer "not ready" and an orchestrator "alive" rather than refuse
// connections and be restarted in a loop. See Hold.
type Holding struct {
	relay  *relay
	first  *phase
	srv    *http.Server
	reason atomic.Pointer[string]
}

// Hold listens on cfg.Addr (or takes cfg.Listener: Listen's) with cfg's
// TLS, and answers GET /livez 200,
// GET /readyz and /healthz 503 {"status": "not ready", "reason": reason},
// and every other request 503, until Listener hands the address over to
// RunHTTP or Close gives it up. cfg is checked as RunHTTP checks it.
func Hold(cfg HTTPConfig, reason string, logger *slog.Logger) (*Holding, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = Listen(cfg.Addr); err != nil {
			return nil, err
		}
	}
	h := &Holding{relay: newRelay(ln)}
	h.reason.Store(&reason)
	notReady := func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": h.Reason()})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /livez", live)
	mux.HandleFunc("GET /readyz", notReady)
	mux.HandleFunc("GET /healthz", notReady)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "not_ready", fmt.Errorf("not ready: %s", h.Reason()))
	})
	h.first = h.relay.phase(false)
	h.srv = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	logger.Info("listen, not ready", "addr", ln.Addr().String(), "reason", reason)
	if cfg.Listening != nil {
		cfg.Listening(ln.Addr())
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

// Reason is why the address is held, as the probes give it.
func (h *Holding) Reason() string { return *h.reason.Load() }

// SetReason changes the reason the probes give from now on (the database
// answered; the programs load).
func (h *Holding) SetReason(reason string) { h.reason.Store(&reason) }

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
