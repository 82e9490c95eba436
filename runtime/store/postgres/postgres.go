package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berm-dev/berm/runtime/store"
)

// Options configure a State; the zero value (or nil) is usable.
type Options struct {
	// Logger receives what happens out of any call: the listening
	// connection lost and found again, a migration. Nil logs nothing.
	Logger *slog.Logger
	// Timeout bounds each round trip to the database, connecting included;
	// 5 seconds when zero.
	Timeout time.Duration
}

// DefaultTimeout bounds a round trip when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// State is berm's state in a PostgreSQL database, shared by every process
// that opens it.
//
// The methods of store.State take no context, as the directory backend's do
// not: each round trip is bounded by Options.Timeout instead, and Close
// cancels those in flight.
type State struct {
	pool    *pgxpool.Pool
	addr    string // host:port, for errors
	timeout time.Duration
	log     *slog.Logger

	roundTrips atomic.Uint64
	changes    chan struct{}

	ctx       context.Context // canceled by Close
	cancel    context.CancelFunc
	listening sync.WaitGroup
	closeOnce sync.Once
}

var _ store.State = (*State)(nil)

// Open connects to the database at url (postgres://user:password@host:port/db
// or the key=value form), applies the schema's missing steps and starts
// listening for deployment changes. An unreachable database is an error that
// names its host and port, never the password.
func Open(ctx context.Context, url string, opts *Options) (*State, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", redact(parseError(err), passwordOf(url)))
	}
	password := cfg.ConnConfig.Password
	cfg.ConnConfig.ConnectTimeout = o.Timeout
	s := &State{
		timeout: o.Timeout,
		log:     o.Logger,
		changes: make(chan struct{}, 1),
		addr:    net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))),
	}
	cfg.ConnConfig.Tracer = (*tracer)(s)
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		// pgxpool's default: a connection idle for a while may have died.
		if p.IdleDuration > time.Second {
			s.roundTrips.Add(1)
			return true
		}
		return false
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres at %s: %w", s.addr, redact(err, password))
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		s.cancel()
		return nil, fmt.Errorf("postgres at %s: %w", s.addr, redact(err, password))
	}
	conn, err := s.connectListener(ctx)
	if err != nil {
		s.pool.Close()
		s.cancel()
		return nil, fmt.Errorf("postgres at %s: %w", s.addr, redact(err, password))
	}
	s.listening.Add(1)
	go s.listen(conn)
	return s, nil
}

// RoundTrips is how many round trips this State's calls made to the database
// so far: statements, their preparation on a connection's first use, and
// pings. Connecting is not counted, nor the listening connection's traffic.
func (s *State) RoundTrips() uint64 { return s.roundTrips.Load() }

// Changes receives, coalesced, when the deployments may have changed: on
// every notification from the database, and after the listening connection
// came back from a loss (notifications sent meanwhile are lost).
func (s *State) Changes() <-chan struct{} { return s.changes }

func (s *State) signal() {
	select {
	case s.changes <- struct{}{}:
	default: // one pending is enough: the receiver reads everything again
	}
}

// Ping reports whether the database answers now, in one round trip.
func (s *State) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.roundTrips.Add(1)
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres at %s: %w", s.addr, oneLine(err))
	}
	return nil
}

// Close stops listening, cancels the round trips in flight and closes the
// connections.
func (s *State) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.listening.Wait()
		s.pool.Close()
	})
	return nil
}

// do runs one round trip bounded by the timeout. When it failed on a
// connection that turned out dead (the server restarted, a proxy dropped it)
// and the operation is idempotent, it runs once more, on another connection;
// an operation that is not is run again only when nothing reached the server.
func (s *State) do(idempotent bool, roundTrip func(ctx context.Context) error) error {
	err := s.try(roundTrip)
	if err == nil || s.ctx.Err() != nil {
		return oneLine(err)
	}
	lost := connectionLost(err)
	if lost {
		// What ended one connection (a restart, a network cut) ended the
		// others idle in the pool too: they are closed now rather than
		// each costing a call its error.
		s.pool.Reset()
	}
	if pgconn.SafeToRetry(err) || idempotent && lost {
		err = s.try(roundTrip)
	}
	if unreachable(err) {
		return fmt.Errorf("postgres at %s: %w: %w", s.addr, store.ErrUnavailable, oneLine(err))
	}
	return oneLine(err)
}

// unreachable reports whether err says the database could not be reached or
// did not answer, rather than answering with an error.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	return err != nil && (errors.As(err, &ce) || connectionLost(err) || errors.Is(err, context.DeadlineExceeded))
}

func (s *State) try(roundTrip func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	return roundTrip(ctx)
}

// connectionLost reports whether err is the loss of the connection rather
// than an answer of the server or a deadline.
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 57P: the server shut down or restarted under the
		// connection.
		return strings.HasPrefix(pgErr.Code, "57P")
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, pgx.ErrNoRows) {
		return false
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed)
}

// tracer counts the round trips of every connection of a State.
type tracer State

func (t *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.roundTrips.Add(1)
	return ctx
}

func (t *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t *tracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}

func (t *tracer) TracePrepareEnd(_ context.Context, _ *pgx.Conn, data pgx.TracePrepareEndData) {
	if !data.AlreadyPrepared {
		t.roundTrips.Add(1)
	}
}

// parseError keeps what pgx says is wrong with a URL; pgx's own message
// quotes the URL with the password masked, best effort.
func parseError(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return fmt.Errorf("malformed database URL: %w", err)
	}
	return err
}

// passwordOf finds the password of a URL that pgx could not parse, so that
// redact can mask it all the same.
func passwordOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		p, _ := u.User.Password()
		return p
	}
	// url.Parse refuses some URLs that still carry user:password@.
	rest, ok := strings.CutPrefix(raw, "postgres://")
	if !ok {
		rest, ok = strings.CutPrefix(raw, "postgresql://")
	}
	if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
		if _, p, ok := strings.Cut(rest[:at], ":"); ok {
			return p
		}
	}
	return ""
}

// redacted is an error whose message had the password masked; errors.Is and
// errors.As still reach what it wraps.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// oneLine rewords pgx's connect error, which lists each attempt on a line
// of its own (sslmode=prefer tries TLS, then not, and both fail alike), as
// one line with each cause once.
func oneLine(err error) error {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return err
	}
	var causes []string
	for _, line := range strings.Split(errors.Unwrap(ce).Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" && !slices.Contains(causes, line) {
			causes = append(causes, line)
		}
	}
	return &redacted{
		msg: fmt.Sprintf("cannot connect as user %q to database %q: %s", ce.Config.User, ce.Config.Database, strings.Join(causes, "; ")),
		err: err,
	}
}

func redact(err error, password string) error {
	err = oneLine(err)
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &redacted{msg: strings.ReplaceAll(err.Error(), password, "xxxxx"), err: err}
}
