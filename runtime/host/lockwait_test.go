package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berm-dev/berm/internal/pgtest"
	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/host"
	"github.com/berm-dev/berm/runtime/store"
	"github.com/berm-dev/berm/runtime/store/postgres"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// lockDeadline is the call's deadline in the lock-wait attack, and
// lockSlack what a call may run past it: far above the cancel's round trip
// on loopback, so that a loaded 2-core CI does not fail it by chance, and far
// below the store's own timeout (lockStoreTimeout), which is what a call
// waited before the store took the call's context.
const (
	lockDeadline     = 200 * time.Millisecond
	lockSlack        = 2 * time.Second
	lockStoreTimeout = 30 * time.Second
)

// kvWritten is a runtime over kv whose calls have lockDeadline (hostError
// sees their host errors, when not nil), with testdata/kv.wasm deployed as
// kv and written once: its usage row and its lock file exist.
func kvWritten(t *testing.T, kv host.KV, hostError func(ctx context.Context, program, tool string, err error)) *runtime.Runtime {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.Config{
		Syscalls:  host.Syscalls(kv),
		Limits:    runtime.Limits{Deadline: lockDeadline},
		HostError: hostError,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	image, err := os.ReadFile(filepath.Join("..", "..", "testdata", "kv.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Deploy(ctx, "kv", image, nil); err != nil {
		t.Fatal(err)
	}
	if out, err := rt.Call(ctx, "kv", "set", []byte(`{"before":1}`)); err != nil || string(out.Result) != "set" {
		t.Fatalf("set before the lock = %q, %v", out.Result, err)
	}
	return rt
}

// TestLockWaitDeadline: a program's berm.get, berm.set or berm.delete that
// waits on a lock in PostgreSQL (another transaction holds the program's
// usage row, or the whole data table) ends at the call's deadline with
// ErrDeadline, and the database stops waiting on the call's behalf: once the
// lock is let go, nothing the call asked for is written.
func TestLockWaitDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	st, err := postgres.Open(ctx, url, &postgres.Options{Timeout: lockStoreTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var mu sync.Mutex
	var logged []error
	rt := kvWritten(t, st, func(_ context.Context, _, _ string, err error) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, err)
	})
	for _, c := range []struct{ tool, args, lock string }{
		{"set", `{"during":1}`, `SELECT 1 FROM berm_data_usage WHERE program = 'kv' FOR UPDATE`},
		{"delete", `{}`, `SELECT 1 FROM berm_data_usage WHERE program = 'kv' FOR UPDATE`},
		{"get", `{}`, `LOCK TABLE berm_data IN ACCESS EXCLUSIVE MODE`},
	} {
		t.Run(c.tool, func(t *testing.T) {
			blocker, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer blocker.Close(ctx)
			tx, err := blocker.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, c.lock); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			logged = nil
			mu.Unlock()
			began := time.Now()
			_, err = rt.Call(ctx, "kv", c.tool, []byte(c.args))
			past := time.Since(began) - lockDeadline
			t.Logf("%s under %q: %v past the %v deadline: %v", c.tool, c.lock, past.Round(time.Millisecond), lockDeadline, err)
			if !errors.Is(err, runtime.ErrDeadline) {
				t.Errorf("%s = %v, want ErrDeadline", c.tool, err)
			}
			if past > lockSlack {
				t.Errorf("%s ran %v past its deadline of %v waiting on the lock", c.tool, past.Round(time.Millisecond), lockDeadline)
			}
			// The operator is told what the call waited on; the database
			// is not said to be down.
			mu.Lock()
			for _, err := range logged {
				t.Logf("logged: %v", err)
				if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnavailable) {
					t.Errorf("logged %v, want the store's wait ended by the deadline", err)
				}
			}
			if len(logged) != 1 {
				t.Errorf("logged %d host errors, want 1: %v", len(logged), logged)
			}
			mu.Unlock()
			// Nothing waits on the lock on the call's behalf any more: the
			// blocker's is then the only lock of interest.
			waiting := func() (n int) {
				err := blocker.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
				if err != nil {
					t.Fatal(err)
				}
				return n
			}
			for end := time.Now().Add(lockSlack); waiting() > 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatalf("%d statements still wait on the lock %v after the call ended", waiting(), lockSlack)
				}
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if out, err := rt.Call(ctx, "kv", "get", []byte(`{}`)); err != nil || string(out.Result) != `{"before":1}` {
				t.Errorf("get once the lock is let go = %q, %v; want what was set before", out.Result, err)
			}
		})
	}
}
