package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backoff of the listening connection's reconnects, and how long it may stay
// silent before a ping checks that it is still there (a dead peer behind a
// silent network sends no error).
const (
	minBackoff    = 100 * time.Millisecond
	maxBackoff    = 5 * time.Second
	listenCheckIn = 30 * time.Second
)

// connectListener opens the connection that listens for deployment changes,
// apart from the pool: it stays busy waiting.
func (s *State) connectListener(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.Tracer = nil // RoundTrips counts the calls' round trips, not this
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listen signals Changes on each notification until Close; when the
// connection is lost it connects again with backoff, and signals once it
// listens again.
func (s *State) listen(conn *pgx.Conn) {
	defer s.listening.Done()
	for {
		err := s.wait(conn)
		closeCtx, cancel := context.WithTimeout(context.Background(), s.timeout)
		conn.Close(closeCtx)
		cancel()
		if s.ctx.Err() != nil {
			return
		}
		s.log.Warn("postgres: lost the connection that listens for deployment changes; reconnecting", "addr", s.addr, "error", err)
		backoff := minBackoff
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			}
			conn, err = s.connectListener(s.ctx)
			if err == nil {
				break
			}
			if s.ctx.Err() != nil {
				return
			}
			s.log.Warn("postgres: reconnecting to listen for deployment changes", "addr", s.addr, "error", err, "retry_in", backoff.String())
			backoff = min(2*backoff, maxBackoff)
		}
		s.log.Info("postgres: listening for deployment changes again", "addr", s.addr)
		s.signal()
	}
}

// wait signals Changes on each notification, and returns the error that
// ended the connection (or Close's).
func (s *State) wait(conn *pgx.Conn) error {
	for {
		ctx, cancel := context.WithTimeout(s.ctx, listenCheckIn)
		_, err := conn.WaitForNotification(ctx)
		cancel()
		switch {
		case err == nil:
			s.signal()
		case s.ctx.Err() != nil:
			return s.ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Silent for a while: the connection must still answer.
			ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
			err := conn.Ping(ctx)
			cancel()
			if err != nil {
				return err
			}
		default:
			return err
		}
	}
}
