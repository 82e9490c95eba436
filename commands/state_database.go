package commands

import (
	"context"
	"errors"
	"log/slog"

	"github.com/berm-dev/berm/runtime/store"
	_ "github.com/berm-dev/berm/runtime/store/postgres" // postgres:// and postgresql:// for --state
)

// openDatabase opens --state's database: it connects, creates or upgrades
// berm's tables and, when listen (berm serve), listens for deployment
// changes. Its errors name the database's host, never its password, and
// wrap store.ErrUnavailable when it could not be reached.
func openDatabase(ctx context.Context, state string, logger *slog.Logger, listen bool) (store.State, error) {
	st, err := store.Open(ctx, state, store.OpenOptions{Logger: logger, Listen: listen})
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, store.ErrUnavailable):
		return nil, withHint(err, "is PostgreSQL running there, and is --state (or BERM_STATE) right?")
	case errors.Is(err, store.ErrNewerSchema):
		return nil, withHint(err, "a newer berm has upgraded this database: run that berm (or a newer one) against it")
	default:
		return nil, withHint(err, "check --state (or BERM_STATE): its user, password and database name, and that the user may create tables there")
	}
}
