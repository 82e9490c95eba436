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
	// 5 seconds when zero. An image's round trip has longer (imageTimeout).
	Timeout time.Duration
	// MigrationTimeout bounds Open's wait for the schema lock (another
	// process migrating) and each step of a migration; a minute when zero.
	MigrationTimeout time.Duration
	// Listen keeps a connection listening for deployment changes, which
	// Changes signals; without it Changes is nil. Only a process that
	// serves needs it: a command that deploys or lists does not.
	Listen bool
}

// DefaultTimeout bounds a round trip when Options.Timeout is zero, and
// DefaultMigrationTimeout a migration's wait and steps.
const (
	DefaultTimeout          = 5 * time.Second
	DefaultMigrationTimeout = time.Minute
)

// minImageRate is the slowest link an image is given time for: on top of
// the timeout, a second per MiB (8 Mbit/s), so that the largest image (64
// MiB) has 69 s by default where a small one keeps about the timeout.
const minImageRate = 1 << 20 // bytes per second

// State is berm's state in a PostgreSQL database, shared by every process
// that opens it.
//
// Each round trip is bounded by Options.Timeout, and Close cancels those in
// flight. Get, Set and Delete, which a call makes, end sooner when their
// context is done (the call's deadline): pgx then stops reading, closes the
// connection and sends the server a cancel request, so that a statement
// waiting on a lock stops there rather than write after the call ended.
type State struct {
	pool             *pgxpool.Pool
	addr             string // host:port, for errors
	timeout          time.Duration
	migrationTimeout time.Duration
	log              *slog.Logger

	roundTrips atomic.Uint64
	changes    chan struct{} // nil without Options.Listen
	// lastReset is when the pool was last reset (UnixNano): a call that
	// began before it lost a connection that the reset closed already.
	lastReset atomic.Int64

	ctx       context.Context // canceled by Close
	cancel    context.CancelFunc
	listening sync.WaitGroup
	closeOnce sync.Once
}

var _ store.State = (*State)(nil)

// Open connects to the database at url (postgres://user:password@host:port/db
// or the key=value form), applies the schema's missing steps and starts
// listening for deployment changes when opts.Listen. An error names the
// database's host and port, never the password; it wraps store.ErrUnavailable
// when the database could not be reached or did not answer (which may heal,
// so a caller may try again), and not when it answered no: a malformed URL,
// credentials or a database it refuses, missing privileges, ErrNewerSchema.
func Open(ctx context.Context, url string, opts *Options) (*State, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MigrationTimeout <= 0 {
		o.MigrationTimeout = DefaultMigrationTimeout
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
	// berm_set's check and write are one under the program's lock because
	// each statement reads what committed before it: read committed, which
	// a role or database may have set otherwise (under repeatable read,
	// concurrent Sets would fail with serialization errors).
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	s := &State{
		timeout:          o.Timeout,
		migrationTimeout: o.MigrationTimeout,
		log:              o.Logger,
		addr:             net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))),
	}
	if o.Listen {
		s.changes = make(chan struct{}, 1)
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
	openError := func(err error) error {
		if unreachable(err) {
			return fmt.Errorf("postgres at %s: %w: %w", s.addr, store.ErrUnavailable, redact(err, password))
		}
		return fmt.Errorf("postgres at %s: %w", s.addr, redact(err, password))
	}
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, openError(err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		s.cancel()
		return nil, openError(err)
	}
	if o.Listen {
		conn, err := s.connectListener(ctx)
		if err != nil {
			s.pool.Close()
			s.cancel()
			return nil, openError(err)
		}
		s.listening.Add(1)
		go s.listen(conn)
	}
	return s, nil
}

// Changes receives, coalesced, when the deployments may have changed: on
// every notification from the database, and after the listening connection
// came back from a loss (notifications sent meanwhile are lost). It is nil
// unless Options.Listen: the caller then reads the deployments again to
// know.
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

// do runs one round trip bounded by the timeout; doWithin by another bound.
//
// When the round trip failed on a connection that turned out dead (the
// server restarted, a proxy dropped it), a read (idempotent) runs once more,
// on another connection, and so does PutImage, whose replay writes the same
// bytes under the same digest. Any other write (Set, Delete, Deploy, Remove:
// idempotent false) runs again only when pgconn.SafeToRetry says nothing
// reached the server: once sent, it may have committed before the answer was
// lost, and replayed later it could write an old value over a newer one that
// another replica wrote and acknowledged meanwhile. Its caller gets the
// error instead; a program that retries its own write knows its order.
//
// A round trip that ctx ended (the call's deadline or cancel) is not the
// database's failure: it is not run again, and its error wraps ctx.Err(), not
// store.ErrUnavailable.
func (s *State) do(ctx context.Context, idempotent bool, roundTrip func(ctx context.Context) error) error {
	return s.doWithin(ctx, s.timeout, idempotent, roundTrip)
}

func (s *State) doWithin(ctx context.Context, timeout time.Duration, idempotent bool, roundTrip func(ctx context.Context) error) error {
	began := time.Now().UnixNano()
	err := s.try(ctx, timeout, roundTrip)
	if err == nil || s.ctx.Err() != nil {
		return oneLine(err)
	}
	if ctx.Err() != nil && !answered(err) {
		return s.ended(ctx)
	}
	lost := connectionLost(err)
	if lost {
		s.resetPool(began)
	}
	if pgconn.SafeToRetry(err) || idempotent && lost {
		err = s.try(ctx, timeout, roundTrip)
		if ctx.Err() != nil && !answered(err) {
			return s.ended(ctx)
		}
	}
	if unreachable(err) {
		return fmt.Errorf("postgres at %s: %w: %w", s.addr, store.ErrUnavailable, oneLine(err))
	}
	return oneLine(err)
}

// resetPool closes the pool's connections after a call that began at began
// lost its own: what ended one (a restart, a network cut) ended the others
// idle in the pool too, and they are closed now rather than each costing a
// call its error. Once per failure: the calls in flight at a restart all
// lose their connections, and a reset made after one of them began closed
// its connection already; resetting again would close the new ones.
func (s *State) resetPool(began int64) {
	last := s.lastReset.Load()
	if began <= last {
		return
	}
	if s.lastReset.CompareAndSwap(last, time.Now().UnixNano()) {
		s.pool.Reset()
	}
}

// unreachable reports whether err says the database could not be reached or
// did not answer, rather than answering with an error: what may heal by
// itself, unlike a refusal (bad credentials, no such database, no
// privilege).
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// The server answered: only its going away (57P: shutting down,
		// starting up), running out of connections (53300) or a wait that
		// timed out (55P03 under lock_timeout, 57014 under
		// statement_timeout) may heal.
		switch pgErr.Code {
		case "53300", "55P03", "57014":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "57P")
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || connectionLost(err) || errors.Is(err, context.DeadlineExceeded)
}

// try runs one round trip under ctx, the timeout and Close.
func (s *State) try(ctx context.Context, timeout time.Duration, roundTrip func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()
	return roundTrip(ctx)
}

// answered reports whether err is the database's answer (no rows, or an
// error of its own but for the cancel of the statement) rather than the end
// of the wait for one: a round trip that finished as its context ended keeps
// its answer.
func answered(err error) bool {
	if err == nil || errors.Is(err, pgx.ErrNoRows) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code != "57014"
}

// ended is the error of a round trip that its caller's ctx ended.
func (s *State) ended(ctx context.Context) error {
	return fmt.Errorf("postgres at %s: stopped waiting for the database when the call ended: %w", s.addr, ctx.Err())
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
