//go:build !unix || aix

package store

import (
	"context"
	"os"
)

// lockFile does nothing where flock is missing (Windows, AIX, wasip1): the
// writers of one process still take turns through the program's mutex, but
// two processes writing one program's data at once may each pass the quota
// by what they write meanwhile. Windows' LockFileEx could do it, and would
// when berm is served there for more than one user.
func lockFile(context.Context, *os.File) error { return nil }

func unlockFile(*os.File) error { return nil }
