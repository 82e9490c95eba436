package commands

import (
	"context"
	"log/slog"

	"github.com/berm-dev/berm/runtime/store"
	"github.com/berm-dev/berm/runtime/store/postgres"
)

// openDatabase opens --state's PostgreSQL database: it connects, creates or
// upgrades berm's tables, and listens for deployment changes. An unreachable
// one is an error naming its host, never its password.
func openDatabase(ctx context.Context, state string, logger *slog.Logger) (store.State, error) {
	st, err := postgres.Open(ctx, state, &postgres.Options{Logger: logger})
	if err != nil {
		return nil, withHint(err, "is PostgreSQL running there, and is --state (or BERM_STATE) right?")
	}
	return st, nil
}
