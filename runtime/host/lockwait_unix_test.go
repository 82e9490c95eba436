//go:build unix && !aix

package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berm-dev/berm/runtime"
	"github.com/berm-dev/berm/runtime/store"
)

// TestLockWaitDeadlineDirectory: over a root directory, a berm.set or
// berm.delete that waits for another process's lock on the program's data
// ends at the call's deadline, and writes nothing.
func TestLockWaitDeadlineDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rt := kvWritten(t, st, nil)
	// Another process's writer holds the lock file.
	lock, err := os.OpenFile(filepath.Join(st.Root(), "data", "kv", ".lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"set", "delete"} {
		began := time.Now()
		_, err := rt.Call(ctx, "kv", tool, []byte(`{"during":1}`))
		past := time.Since(began) - lockDeadline
		t.Logf("%s under another process's lock: %v past the %v deadline: %v", tool, past.Round(time.Millisecond), lockDeadline, err)
		if !errors.Is(err, runtime.ErrDeadline) {
			t.Errorf("%s = %v, want ErrDeadline", tool, err)
		}
		if past > lockSlack {
			t.Errorf("%s ran %v past its deadline of %v waiting on the lock", tool, past.Round(time.Millisecond), lockDeadline)
		}
	}
	lock.Close()
	if out, err := rt.Call(ctx, "kv", "get", []byte(`{}`)); err != nil || string(out.Result) != `{"before":1}` {
		t.Errorf("get once the lock is let go = %q, %v; want what was set before", out.Result, err)
	}
}
