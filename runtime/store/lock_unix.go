//go:build unix && !aix

package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// maxLockPoll is the longest lockFile sleeps between tries of a lock that
// another process holds.
const maxLockPoll = 20 * time.Millisecond

// lockFile takes an exclusive advisory lock on f, waiting for it until ctx is
// done. flock locks belong to the open file, so two Stores of one process
// exclude each other as two processes do, and the kernel drops a killed
// process's lock. A wait that a context can end polls (a blocking flock
// cannot be interrupted), from 1 ms up to maxLockPoll apart; without a
// context to end it, it blocks.
func lockFile(ctx context.Context, f *os.File) error {
	how := unix.LOCK_EX | unix.LOCK_NB
	if ctx.Done() == nil {
		how = unix.LOCK_EX
	}
	wait := time.Millisecond
	for {
		err := unix.Flock(int(f.Fd()), how)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for another process's lock: %w", ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, maxLockPoll)
	}
}

func unlockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_UN) }
