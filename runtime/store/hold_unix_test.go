//go:build unix && !aix

package store_test

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Hold implements storetest.Holder as another process's writer holds a
// program's data: by its lock file, locked through a file of its own.
func (f filling) Hold(program string) (func(), error) {
	dir := filepath.Join(f.Root(), "data", program)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		return nil, err
	}
	return func() { lock.Close() }, nil
}
