package commands

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/berm-dev/berm/runtime/store"
)

// stateFlagUsage is --state's help: what it takes and what a database costs.
const stateFlagUsage = "where berm's deployments, images and programs' data live: empty for the directory --root; " +
	"postgres://USER:PASSWORD@HOST:PORT/DB (or postgresql://) for a PostgreSQL database that many berm serve replicas share. " +
	"Opening a database creates or upgrades berm's tables (berm_*) in it, whichever command opens it; " +
	"compiled code and config stay under --root on local disk"

// stateFlag is --state (or BERM_STATE) without the spaces and line ends
// around it, which a secret mounted from a file often ends with.
func stateFlag(cmd *cli.Command) string { return strings.TrimSpace(cmd.String("state")) }

// stateIsDatabase tells --state's database from the directory under --root
// (empty), and refuses a scheme no backend takes. A refusal names the
// scheme only: the URL may carry a password.
func stateIsDatabase(state string) (bool, error) {
	if state == "" {
		return false, nil
	}
	if err := store.CheckURL(state); err != nil {
		return false, usageError{withHint(fmt.Errorf("--state: %w", err), stateHint)}
	}
	return true, nil
}

const stateHint = "--state takes postgres://USER:PASSWORD@HOST:PORT/DB (postgresql:// too) for a PostgreSQL database, or nothing for the directory --root"

// rootMode says what a command does with a directory root that does not
// exist yet.
type rootMode bool

const (
	// createRoot makes it: the command writes there.
	createRoot rootMode = true
	// existingRoot takes it for empty state (nil, no error): the command
	// only reads, and reading creates nothing.
	existingRoot rootMode = false
)

// openState opens the state a command works on: the directory under root,
// or --state's database, which is opened (and migrated) whatever the
// command. Commands other than serve take no notifications of changes.
func openState(ctx context.Context, root, state string, mode rootMode) (store.State, error) {
	db, err := stateIsDatabase(state)
	if err != nil {
		return nil, err
	}
	if db {
		return openDatabase(ctx, state, nil, false)
	}
	if root == "" {
		return nil, noRoot()
	}
	open := store.OpenDirExisting
	if mode == createRoot {
		open = store.OpenDir
	}
	st, err := open(root)
	if mode == existingRoot && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err // never a typed nil in the interface
	}
	return st, nil
}

// closeState closes st, which may be nil. The directory backend holds
// nothing open; a database holds its connections.
func closeState(st store.State) {
	if st != nil {
		st.Close()
	}
}

// cacheDir is where a runtime over st caches compiled code: always on local
// disk, under the root. The directory backend's is its own cache/. With a
// database, root's cache/ when there is a root and it can be made; without
// one (no home directory, a read-only one) compiled code is kept in memory,
// and each start compiles every program anew, which costs time, not
// correctness.
func cacheDir(root string, st store.State, logger *slog.Logger) string {
	if s, ok := st.(*store.Store); ok {
		return s.CacheDir()
	}
	if st == nil || root == "" {
		return ""
	}
	dir := filepath.Join(root, "cache")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if logger != nil {
			logger.Warn("compiled code is kept in memory: the cache under --root cannot be made", "error", err)
		}
		return ""
	}
	return dir
}

// Retry of a database unreachable when berm serve starts: from the first
// delay, doubling, up to the last, until it answers or serve is stopped. A
// crash loop would restart the whole process to do the same, and lose the
// HTTP listener that tells an orchestrator it is alive meanwhile.
const (
	openRetryFirst = 250 * time.Millisecond
	openRetryMax   = 10 * time.Second
)

// retryUnavailable runs try until it succeeds, fails otherwise than with
// store.ErrUnavailable (a wrong password, a missing database, a newer schema:
// waiting mends none of them), or ctx ends. While the state is unavailable it
// logs why and tries again with backoff. waiting, when set, is called after
// each failure that will be retried; its error ends the wait.
func retryUnavailable(ctx context.Context, logger *slog.Logger, what string, waiting func() error, try func() error) error {
	delay := openRetryFirst
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil {
			if attempt > 1 {
				logger.Info("state: database reachable", "attempts", attempt)
			}
			return nil
		}
		if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		if waiting != nil {
			if werr := waiting(); werr != nil {
				return werr
			}
		}
		logger.Error("state: database unreachable; retrying", "what", what, "error", err, "retry_in", delay.String(), "attempt", attempt)
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for the database: %w", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, openRetryMax)
	}
}
