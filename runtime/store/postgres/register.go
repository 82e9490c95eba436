package postgres

import (
	"context"
	"net"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/berm-dev/berm/runtime/store"
)

// Importing the package makes store.Open take postgres:// and
// postgresql:// URLs.
func init() {
	store.Register(store.Backend{
		Open: func(ctx context.Context, url string, opts store.OpenOptions) (store.State, error) {
			st, err := Open(ctx, url, &Options{Logger: opts.Logger, Listen: opts.Listen})
			if err != nil {
				return nil, err // never a typed nil in the interface
			}
			return st, nil
		},
		Describe: describe,
	}, "postgres", "postgresql")
}

// describe is user@host:port/dbname, as PostgreSQL's client reads the URL
// (the environment's PGHOST and the like included); never the URL itself,
// which may carry a password in its user info or its query (password=,
// sslpassword=).
func describe(url string) string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return "(a malformed database URL)"
	}
	return cfg.User + "@" + net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))) + "/" + cfg.Database
}
