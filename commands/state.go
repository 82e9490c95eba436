package commands

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berm-dev/berm/runtime/store"
)

// stateFlagUsage is --state's help: what it takes and what a database costs.
const stateFlagUsage = "where berm's deployments, images and programs' data live: empty for the directory --root; " +
	"postgres://USER:PASSWORD@HOST:PORT/DB (or postgresql://) for a PostgreSQL database that many berm serve replicas share. " +
	"Opening a database creates or upgrades berm's tables (berm_*) in it, whichever command opens it; " +
	"compiled code and config stay under --root on local disk"

// stateSchemes are the schemes --state takes besides empty.
var stateSchemes = []string{"postgres", "postgresql"}

// errStateScheme: --state names a kind of state berm does not keep.
var errStateScheme = errors.New("unknown scheme")

// stateIsDatabase tells --state's database from the directory under --root
// (empty), and refuses anything else. A refusal names the scheme only: the
// URL may carry a password.
func stateIsDatabase(state string) (bool, error) {
	if state == "" {
		return false, nil
	}
	scheme, _, ok := strings.Cut(state, "://")
	if !ok {
		return false, usageError{withHint(fmt.Errorf("--state: %w: not a URL (scheme://...)", errStateScheme), stateHint)}
	}
	for _, s := range stateSchemes {
		if scheme == s {
			return true, nil
		}
	}
	return false, usageError{withHint(fmt.Errorf("--state: %w %q", errStateScheme, scheme), stateHint)}
}

const stateHint = "--state takes postgres://USER:PASSWORD@HOST:PORT/DB (postgresql:// too) for a PostgreSQL database, or nothing for the directory --root"

// redactState is --state as logs may show it: without its password.
func redactState(state string) string {
	u, err := url.Parse(state)
	if err != nil {
		return "(a database URL)"
	}
	return u.Redacted()
}

// openStore opens the state for a command that writes to it: the directory
// under root (created), or --state's database.
func openStore(ctx context.Context, root, state string) (store.State, error) {
	db, err := stateIsDatabase(state)
	if err != nil {
		return nil, err
	}
	if db {
		return openDatabase(ctx, state, nil)
	}
	if root == "" {
		return nil, noRoot()
	}
	return store.Open(root)
}

// openExisting opens the state for a command that only reads it. A root
// directory that does not exist yet is nil, not an error: reading creates
// nothing there. A database is opened (and migrated) whatever the command.
func openExisting(ctx context.Context, root, state string) (store.State, error) {
	db, err := stateIsDatabase(state)
	if err != nil {
		return nil, err
	}
	if db {
		return openDatabase(ctx, state, nil)
	}
	if root == "" {
		return nil, noRoot()
	}
	st, err := store.OpenExisting(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return st, err
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

// openDatabaseRetrying opens --state's database, and while it is unreachable
// logs why and tries again with backoff until it answers or ctx ends.
// waiting, when set, is called once before the first retry; its error ends
// the wait.
func openDatabaseRetrying(ctx context.Context, state string, logger *slog.Logger, waiting func() error) (store.State, error) {
	delay := openRetryFirst
	for attempt := 1; ; attempt++ {
		st, err := openDatabase(ctx, state, logger)
		if err == nil {
			if attempt > 1 {
				logger.Info("state: database reachable", "attempts", attempt)
			}
			return st, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if attempt == 1 && waiting != nil {
			if werr := waiting(); werr != nil {
				return nil, werr
			}
		}
		logger.Error("state: database unreachable; retrying", "error", err, "retry_in", delay, "attempt", attempt)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("gave up waiting for the database: %w", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, openRetryMax)
	}
}
