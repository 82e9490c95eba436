package commands

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berm-dev/berm/runtime/store"
	"github.com/berm-dev/berm/runtime/store/postgres"
)

// openDatabase opens --state's PostgreSQL database: it connects, creates or
// upgrades berm's tables and, when listen (berm serve), listens for
// deployment changes. Its errors name the database's host, never its
// password, and wrap store.ErrUnavailable when it could not be reached.
func openDatabase(ctx context.Context, state string, logger *slog.Logger, listen bool) (store.State, error) {
	st, err := postgres.Open(ctx, state, &postgres.Options{Logger: logger, Listen: listen})
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, store.ErrUnavailable):
		return nil, withHint(err, "is PostgreSQL running there, and is --state (or BERM_STATE) right?")
	case errors.Is(err, postgres.ErrNewerSchema):
		return nil, withHint(err, "a newer berm has upgraded this database: run that berm (or a newer one) against it")
	default:
		return nil, withHint(err, "check --state (or BERM_STATE): its user, password and database name, and that the user may create tables there")
	}
}

// describeDatabase is what identifies --state's database in a log line:
// user@host:port/dbname, as PostgreSQL's client reads the URL (the
// environment's PGHOST and the like included). Never the URL itself, which
// may carry a password in its user info or its query (password=,
// sslpassword=).
func describeDatabase(state string) string {
	cfg, err := pgconn.ParseConfig(state)
	if err != nil {
		return "(a malformed database URL)"
	}
	return cfg.User + "@" + net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/" + cfg.Database
}
